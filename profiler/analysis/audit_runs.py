"""The audit (audit.py) of recordings on disk: one recording's, and the write-to-read gap of a write
and a read run recorded apart (two invocations, MLPerf Storage v3.0's 30 s rule). Kept apart from
audit.py because both analyse recordings, and analyze.py imports audit.py for its own step.

    from ckprof.analysis.audit_runs import audit_recording, audit_two_invocations
    audit_recording("ckprof-20261126-120000").checks
    audit_two_invocations("write-run", "read-run")     # a RuleCheck: the gap and clock skew
"""

from __future__ import annotations

import os

from ckprof.errors import UsageError
from ckprof.recording.load import load
from ckprof.recording.reader import Recording

from .analyze import analyze
from .audit import GAP_RULE, UNKNOWN, end_s, gap_check
from .meta import Meta
from .model import Audit, RuleCheck


def recording(path_or_rec) -> Recording:
    """A recording from its path (or itself); a job's directory is refused, naming what to give."""
    rec = load(os.fspath(path_or_rec)) if isinstance(path_or_rec, (str, os.PathLike)) else path_or_rec
    if not isinstance(rec, Recording):
        raise UsageError(f"{path_or_rec}: a job's directory: audit one of its host=<name>/ recordings")
    return rec


def audit_recording(path_or_rec) -> Audit:
    """Any recording's audit (the report's `audit`)."""
    out = analyze(recording(path_or_rec)).model.audit
    assert out is not None  # analyze() always audits
    return out


def audit_two_invocations(write_rec, read_rec) -> RuleCheck:
    """The gap when the write and the read were two invocations, each recorded: the write's last
    save's end to the read's first load's start, on the two recordings' wall clocks
    (recording/timebase.py); a negative gap is clock skew."""
    recs = [recording(r) for r in (write_rec, read_rec)]
    w_rec, r_rec = recs
    metas = [Meta.from_meta(rec.meta) for rec in recs]
    w_an, r_an = (analyze(rec).model for rec in recs)
    saves = [r for r in w_an.checkpoints if r.kind == "save" and r.ok is not False and end_s(r) is not None]
    loads = [r for r in r_an.checkpoints if r.kind == "load"]
    if not saves or not loads:
        why = "no finished save in the write's recording" if not saves else "no load in the read's recording"
        return RuleCheck("write_read_gap", GAP_RULE, UNKNOWN, why)
    write = max(saves, key=lambda r: end_s(r) or 0.0)
    read = min(loads, key=lambda r: r.start_s)
    w_wall = int(w_rec.timebase.to_wall_ns(w_rec.start_ns + int((end_s(write) or 0.0) * 1e9)))
    r_wall = int(r_rec.timebase.to_wall_ns(r_rec.start_ns + int(read.start_s * 1e9)))
    hosts = [m.host.hostname for m in metas]
    figures = {
        "write_id": write.id,
        "write_end_wall_ns": w_wall,
        "read_id": read.id,
        "read_start_wall_ns": r_wall,
        "hosts": hosts,
        "wall_anchor_uncertainty_ns": [m.start.uncertainty_ns for m in metas],
    }
    gap_s = (r_wall - w_wall) / 1e9
    same = hosts[0] is not None and hosts[0] == hosts[1]
    how = "two recordings on one host's wall clock" if same else "two recordings, two hosts' wall clocks"
    skew = None if gap_s >= 0 else gap_s  # a negative gap can only be the clocks'
    return gap_check(gap_s, skew, figures, how)
