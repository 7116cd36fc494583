"""Whether a file derived from a recording at its end still describes it.

A job host's recording gains two kinds of derived files when it closes: its summary
(`summary.json`, ckprof.analysis.host_summary) and its 1 s roll-ups (`rollup.*.parquet`,
ckprof.recording.rollup). Each carries the stamp of what it was made from: the ckprof code that
made it (`code_digest`) and the recording's files as they were (`fingerprint`). A reader uses a
derived file only while both still match; otherwise it works from the samples, as without one.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ckprof.version import VERSION

SUMMARY_FILE = "summary.json"
ROLLUP_PREFIX = "rollup."
# the code a derived file comes from: its digest is in every stamp (a changed rule → stale files)
_CODE_PACKAGES = ("analysis", "power", "recording")
# base modules below every layer whose rules are in the derived files too (the NaN rule and the
# JSON text, units)
_CODE_MODULES = ("jsonsafe.py", "units.py")
_code_digest: str | None = None


def is_derived(rel: str) -> bool:
    """A file made from the recording, not part of what it describes (or one being written)."""
    return rel == SUMMARY_FILE or rel.startswith(ROLLUP_PREFIX) or rel.endswith(".tmp")


def code_digest() -> str:
    global _code_digest
    if _code_digest is None:
        h = hashlib.sha256(VERSION.encode())
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # profiler/, the import root ckprof
        for pkg in _CODE_PACKAGES:
            d = os.path.join(root, pkg)
            for name in sorted(os.listdir(d)):
                if name.endswith(".py"):
                    with open(os.path.join(d, name), "rb") as f:
                        h.update(name.encode() + b"\0" + f.read())
        for name in _CODE_MODULES:
            with open(os.path.join(root, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
        _code_digest = h.hexdigest()[:16]
    return _code_digest


def fingerprint(path: str) -> str:
    """The recording's files as they are, each but the derived ones: its relative path and size, and
    for every file but a Parquet part its content. A part is never changed once written (a flush
    or a merge writes a new name, docs/recording-format.md), so its name and size say it; meta.json,
    events.jsonl and the rest can change in place. No modification times: a copy (`cp -r`, rsync
    without -t) keeps its derived files."""
    h = hashlib.sha256()
    for top, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(top, name)
            rel = os.path.relpath(p, path)
            if is_derived(rel):
                continue
            h.update(f"{rel}\0{os.stat(p).st_size}\n".encode())
            if not name.endswith(".parquet"):
                with open(p, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:32]


def stamp(path: str) -> dict[str, str]:
    return {"code": code_digest(), "recording_fingerprint": fingerprint(path)}


def stale(path: str, doc: dict[str, Any]) -> str | None:
    """Why a derived file with stamp fields `doc` no longer describes the recording at `path`."""
    if doc.get("code") != code_digest():
        return "written by another ckprof"
    if doc.get("recording_fingerprint") != fingerprint(path):
        return "the recording changed since"
    return None
