"""A host's summary, written when its recording closes: what a job report needs from that host
(analysis.jobs.host_part: its report, its wall-clock span, its figures per checkpoint), a few
kilobytes in `summary.json`, so `ckprof report JOBDIR` reads kilobytes per host instead of every
sample. The raw samples stay for drill-down.

A summary is used only while it still describes the recording as the report would see it: the
same analysis options, the same ckprof (version and analysis code), and the recording's files
unchanged since (an `import-power` trace added later, a marker appended, or a recording still being
written makes it stale; a copy of the directory does not). Otherwise the host is analysed from its
samples, exactly as without a summary.
"""

from __future__ import annotations

import hashlib
import json
import os

import ckprof

SUMMARY_FILE = "summary.json"
SUMMARY_SCHEMA = "ckprof-host-summary"
# the options a record-end summary is made with: `ckprof report`'s defaults
DEFAULT_OPTIONS = {"mtbf_s": None, "gpus": None, "windows_from": "auto"}
# the code a part comes from: its digest is in every summary (a changed rule → stale summaries)
_CODE_PACKAGES = ("analysis", "power", "recording")
_code_digest: str | None = None


def code_digest() -> str:
    global _code_digest
    if _code_digest is None:
        h = hashlib.sha256(ckprof.__version__.encode())
        root = os.path.dirname(ckprof.__file__)
        for pkg in _CODE_PACKAGES:
            d = os.path.join(root, pkg)
            for name in sorted(os.listdir(d)):
                if name.endswith(".py"):
                    with open(os.path.join(d, name), "rb") as f:
                        h.update(name.encode() + b"\0" + f.read())
        _code_digest = h.hexdigest()[:16]
    return _code_digest


def fingerprint(path: str) -> str:
    """The recording's files as they are, each but the summary: its relative path and size, and
    for every file but a Parquet part its content. A part is never changed once written (a flush
    or a merge writes a new name, docs/recording-format.md), so its name and size say it; meta.json,
    events.jsonl and the rest can change in place. No modification times: a copy (`cp -r`, rsync
    without -t) keeps its summaries."""
    h = hashlib.sha256()
    for top, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(top, name)
            rel = os.path.relpath(p, path)
            if rel == SUMMARY_FILE or rel.endswith(".tmp"):
                continue
            h.update(f"{rel}\0{os.stat(p).st_size}\n".encode())
            if not name.endswith(".parquet"):
                with open(p, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:32]


def _options(kw: dict) -> dict:
    return {**DEFAULT_OPTIONS, **{k: kw[k] for k in DEFAULT_OPTIONS if k in kw}}


def _to_json(part: dict) -> dict:
    from ckprof.report.render import to_json

    figures = [{"kind": k[0], "step": k[1], "figures": v} for k, v in part["figures"].items()]
    body = {k: v for k, v in part.items() if k not in ("analysis", "figures")}
    return json.loads(to_json({**body, "figures": figures}))


def from_json(doc: dict) -> dict:
    part = {k: v for k, v in doc.items() if k != "figures"}
    part["figures"] = {(f["kind"], f["step"]): f["figures"] for f in doc["figures"]}
    part["analysis"] = None
    return part


def write(path: str) -> str:
    """Analyse the closed recording at `path` with the default options and write its summary
    (atomically: a temporary file renamed). Returns the summary's path."""
    from .jobs import host_part

    stamp = fingerprint(path)  # before: the analysis only reads
    part = host_part(os.path.basename(path), path, dict(DEFAULT_OPTIONS))
    if "problem" in part:
        raise RuntimeError(part["problem"])
    doc = {
        "schema": SUMMARY_SCHEMA,
        "ckprof_version": ckprof.__version__,
        "code": code_digest(),
        "options": DEFAULT_OPTIONS,
        "recording_fingerprint": stamp,
        "part": _to_json(part),
    }
    out = os.path.join(path, SUMMARY_FILE)
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    os.replace(out + ".tmp", out)
    return out


def read(path: str, kw: dict) -> tuple[dict | None, str | None]:
    """(the host's part from its summary, None) when the summary is there and current; else
    (None, why not) — a missing summary says nothing (None, None)."""
    p = os.path.join(path, SUMMARY_FILE)
    try:
        with open(p) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        return None, f"unreadable ({e})"
    if not isinstance(doc, dict) or doc.get("schema") != SUMMARY_SCHEMA:
        return None, "not a ckprof host summary"
    if doc.get("code") != code_digest():
        return None, "written by another ckprof"
    if set(kw) - set(DEFAULT_OPTIONS) or doc.get("options") != _options(kw):
        return None, "made with other options"
    if doc.get("recording_fingerprint") != fingerprint(path):
        return None, "the recording changed since"
    try:
        part = from_json(doc["part"])
        part["report"]["recording"]["path"] = os.path.abspath(path)  # where it is now (a copy: not where it was made)
        return part, None
    except (KeyError, TypeError) as e:
        return None, f"damaged ({type(e).__name__})"
