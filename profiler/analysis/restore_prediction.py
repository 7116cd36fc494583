"""How long a cold restore of each saved checkpoint would take on these devices, and how that
compares with a restore measured in the same recording.

The read rate comes, in this order, from:
1. the user (`ckprof report --read-bw 2.5GiB/s`, or `--read-bw OTHER_RECORDING`: the cold loads
   measured there, e.g. by `ckprof workload load` on the same devices);
2. the cold loads of this recording (cachestat saw ≤ 10 % of their files cached as they started):
   the median of their device bytes read / load seconds — for a load, only the *other* cold
   loads, never itself.
A predicted cold restore = the checkpoint's bytes / that rate (derived). With no rate, the
prediction is unknown and the reason is said. Predictions are for reading the bytes; a framework's
deserialisation on top is in the measured figure only.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from .model import ABSENT, Checkpoint, Report

COLD_SHARE = 0.10  # a load with at most this share of its bytes cached as it started is cold


def _known(v):
    return None if v is ABSENT else v


def cold_loads(rep: Report | dict) -> list[Checkpoint]:
    """The cold loads of a report (the model, or its JSON form)."""
    return [
        c
        for c in Report.from_jsonable(rep).checkpoints
        if c.kind == "load"
        and c.ok is not False
        and _known(c.cache_served_share) is not None
        and c.cache_served_share <= COLD_SHARE
        and _known(c.restore_bytes_device)
        and c.duration_s
    ]


def measured_read_bps(rep: Report | dict, exclude_id: str | None = None) -> tuple[float | None, str]:
    """(bytes/s, where from) of the cold loads in a report, `exclude_id` left out."""
    rep = Report.from_jsonable(rep)
    loads = [c for c in cold_loads(rep) if c.id != exclude_id]
    if not loads:
        return None, "no cold load measured"
    # the median of the loads' rates: one read slowed by something else on the machine is not the rule
    rate = statistics.median(c.restore_bytes_device / c.duration_s for c in loads)
    nbytes = sum(c.restore_bytes_device for c in loads)
    return (
        rate,
        f"median of {len(loads)} cold load(s) in {rep.recording.path} ({nbytes / 2**20:.1f} MiB read in all)",
    )


def predict(rep: Report, given_bps: float | None = None, given_basis: str | None = None) -> Report:
    """The report with `predicted_cold_restore_s` and its basis on each save, and `prediction_error`
    on each load whose checkpoint was saved in this recording (or given a rate)."""
    out = []
    for c in rep.checkpoints:
        if c.ok is False:
            out.append(c)
            continue
        if given_bps:
            bps, basis = given_bps, given_basis or "the read rate given"
        else:
            bps, basis = measured_read_bps(rep, exclude_id=c.id if c.kind == "load" else None)
        size = c.bytes_app if c.kind == "save" else (_known(c.restore_bytes_app) or c.bytes_app)
        if not bps or not size:
            why = basis if not bps else "its size is not known"
            out.append(replace(c, predicted_cold_restore_s=None, restore_prediction_basis=f"unknown: {why}"))
            continue
        pred = size / bps
        c = replace(
            c,
            predicted_cold_restore_s=pred,
            restore_prediction_basis=f"{size / 2**20:.1f} MiB at {bps / 2**30:.3f} GiB/s ({basis})",
        )
        if c.kind == "load" and c.duration_s and (_known(c.cache_served_share) or 0) <= COLD_SHARE:
            c = replace(c, prediction_error=(pred - c.duration_s) / c.duration_s)
        out.append(c)
    return replace(rep, checkpoints=out)
