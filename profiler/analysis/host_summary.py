"""A host's summary, written when its recording closes: what a job report needs from that host
(analysis.job_hosts.host_part, a job_model.HostPart: its report, its wall-clock span, its figures per checkpoint), a few
kilobytes in `summary.json`, so `ckprof report JOBDIR` reads kilobytes per host instead of every
sample. The raw samples stay for drill-down.

A summary is used only while it still describes the recording as the report would see it: the
same analysis options, the same ckprof (version and analysis code), and the recording's files
unchanged since (an `import-power` trace added later, a marker appended, or a recording still being
written makes it stale; a copy of the directory does not). Otherwise the host is analysed from its
samples, exactly as without a summary.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

from ckprof.recording.stamp import SUMMARY_FILE, code_digest, fingerprint, stale
from ckprof.version import VERSION

from .job_hosts import host_part
from .job_model import HostPart, HostSeries, NodeFigures
from .meta import parsed
from .model_base import Note, jsonable

SUMMARY_SCHEMA = "ckprof-host-summary"
# the options a record-end summary is made with: `ckprof report`'s defaults
DEFAULT_OPTIONS = {"mtbf_s": None, "gpus": None, "windows_from": "auto"}


def _options(kw: dict) -> dict:
    return {**DEFAULT_OPTIONS, **{k: kw[k] for k in DEFAULT_OPTIONS if k in kw}}


def _to_json(part: HostPart) -> dict:
    """The part as JSON values, in one walk (model_base.jsonable: NaN → null); its figures as a
    list, since their (kind, step) keys are no JSON keys."""
    body = {f.name: getattr(part, f.name) for f in dataclasses.fields(part) if f.name not in ("analysis", "figures")}
    figures = [{"kind": k[0], "step": k[1], "figures": v} for k, v in part.figures.items()]
    return jsonable({**body, "figures": figures})


def from_json(doc: dict) -> HostPart:
    """A part back from its JSON (figures are a list there: their (kind, step) keys are no JSON keys)."""
    figures = {(f["kind"], f["step"]): NodeFigures.from_plain(f["figures"]) for f in doc["figures"]}
    series = doc["throughput"]
    return HostPart(**{**doc, "figures": figures, "throughput": series and HostSeries(**series)})


def write(path: str) -> str:
    """Analyse the closed recording at `path` with the default options and write its summary
    (atomically: a temporary file renamed). Returns the summary's path."""
    stamp = fingerprint(path)  # before: the analysis only reads
    part = host_part(os.path.basename(path), path, dict(DEFAULT_OPTIONS))
    if isinstance(part, Note):
        raise RuntimeError(part.text)
    doc = {
        "schema": SUMMARY_SCHEMA,
        "ckprof_version": VERSION,
        "code": code_digest(),
        "options": DEFAULT_OPTIONS,
        "recording_fingerprint": stamp,
        "part": _to_json(part),
    }
    out = os.path.join(path, SUMMARY_FILE)
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, separators=(",", ":"), default=str)  # default: as jsonsafe.to_json writes the rest
    os.replace(out + ".tmp", out)
    return out


@dataclass(frozen=True)
class SummaryHead:
    """What read() checks of a summary.json before it trusts the part (write() above), by
    analysis/meta.py's rule: a key missing or of another JSON type is None."""

    schema: str | None = None
    options: dict | None = None  # the analysis options it was made with
    part: dict | None = None  # the host's part (_to_json)


def read(path: str, kw: dict) -> tuple[HostPart | None, str | None]:
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
    head = parsed(SummaryHead, doc)
    if head.schema != SUMMARY_SCHEMA:
        return None, "not a ckprof host summary"
    if set(kw) - set(DEFAULT_OPTIONS) or head.options != _options(kw):
        return None, "made with other options"
    why = stale(path, doc)
    if why:
        return None, why
    if head.part is None:
        return None, "damaged (no part)"
    try:
        part = from_json(head.part)
        part.report["recording"]["path"] = os.path.abspath(path)  # where it is now (a copy: not where it was made)
        return part, None
    except (KeyError, TypeError) as e:
        return None, f"damaged ({type(e).__name__})"
