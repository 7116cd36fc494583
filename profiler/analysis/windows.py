"""Checkpoint windows: from markers and the files the recorded tree wrote (filesaves.py), or
inferred from device write bursts where neither is recorded; a hint at durability.

A window has a start, an application end (the save call returned) and a durable end, which comes
from the checkpoint's own files (ckprof.analysis.durability). What the devices' write totals and
the host's Dirty + Writeback pages (Documentation/filesystems/proc.rst, /proc/meminfo) say is kept
here only as a hint (`durable_end_hint`): both are machine-wide, so they call a checkpoint durable
when some other data reached the disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ckprof.jsonsafe import json_value

from . import filesaves
from .grouping import group_saves
from .records import Window, checkpoint_ends, checkpoint_extends
from .timeline import Total

MIB = 1024 * 1024


@dataclass
class BurstParams:
    """Inference of windows from the devices' total write rate."""

    baseline_quantile: float = 0.2  # the rate most of the run sits at, robust to long bursts
    min_threshold_bps: float = 4 * MIB  # never call less than this above baseline a burst
    peak_fraction: float = 0.1  # ...nor less than this share of the way from baseline to peak
    merge_gap_s: float = 1.0  # a quiet gap this long or longer separates two checkpoints
    min_bytes: float = 1 * MIB  # smaller bursts are background noise


def baseline_and_threshold(total: Total | None, p: BurstParams) -> tuple[float, float]:
    """(baseline, threshold) of the devices' total write rate in bytes/s."""
    if total is None or total.empty:
        return 0.0, float("inf")
    r = total.write_bytes_per_s
    base = float(np.quantile(r, p.baseline_quantile))
    peak = float(np.quantile(r, 0.99))
    return base, base + max(p.min_threshold_bps, p.peak_fraction * (peak - base))


def infer_windows(total: Total | None, res_s: float, p: BurstParams | None = None) -> list[Window]:
    """Windows where the total write rate rises above threshold; a quiet gap of merge_gap_s or
    more separates two windows, a shorter one is a pause inside one checkpoint.

    Intervals above the threshold are a burst's core; its edges extend over the neighbouring
    intervals still above baseline + min_threshold_bps / 4 (hysteresis), so the partly-filled
    first and last intervals of a burst are in its window. The quiet time between two extended
    bursts is known to the grid's resolution only: with n intervals between them it lies in
    [n, n + 2) × res_s, and (n + 1) × res_s is taken, so gaps of merge_gap_s or more always
    separate and gaps under merge_gap_s − res_s always merge.
    """
    p = p or BurstParams()
    if total is None or total.empty:
        return []
    base, thr = baseline_and_threshold(total, p)
    t1 = total.t_ns
    res_ns = res_s * 1e9
    rate = total.write_bytes_per_s
    low = base + p.min_threshold_bps / 4
    bursts: list[list[int]] = []  # [first row, last row], extended
    for i in np.flatnonzero(rate > thr):
        if bursts and i <= bursts[-1][1]:
            continue  # already inside the previous burst's extension
        j = i
        while i > 0 and rate[i - 1] > low and (not bursts or i - 1 > bursts[-1][1]):
            i -= 1
        while j < len(rate) - 1 and rate[j + 1] > low:
            j += 1
        bursts.append([i, j])
    merged: list[list[int]] = []
    for bu in bursts:
        # quiet intervals between the two, on the grid (rows are consecutive grid bins)
        n_quiet = (t1[bu[0]] - t1[merged[-1][1]]) / res_ns - 1 if merged else None
        if merged and (n_quiet + 1) * res_s < p.merge_gap_s - 1e-6 * res_s:
            merged[-1][1] = bu[1]
        else:
            merged.append(bu)
    bursts = merged
    out = []
    wb = total.write_bytes
    for n, (i, j) in enumerate(bursts, 1):
        dev_bytes = float(wb[i : j + 1].sum())
        if dev_bytes < p.min_bytes:
            continue
        start, end = float(t1[i] - res_ns), float(t1[j])
        out.append(Window(id=f"inferred:{n}", source="inferred", kind="save", start_ns=start, app_end_ns=end))
    for k, w in enumerate(out, 1):
        w.id = f"inferred:{k}"
    return out


def file_windows(rec) -> list[Window]:
    """Saves seen at the file level (the `file_activity` events of any writer of the recorded
    tree): analysis/filesaves.py's rule. Empty where the recording has none."""
    return filesaves.file_saves(rec)


def join_file_windows(marked: list[Window], saves: list[Window]) -> list[Window]:
    """Marker checkpoints and file saves of one save become one checkpoint (filesaves.join)."""
    return filesaves.join(marked, saves)


def file_activity_note(rec) -> list[str]:
    """Why windows fell back to device bursts though file activity might have told: [] or one note."""
    src = filesaves.source_of(rec)
    if src is None or src.source == "fanotify":
        return []
    return [f"file activity not recorded ({src.source.removeprefix('none: ')})"]


def _num(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _whole(v) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


@dataclass(slots=True)
class _Finish:
    """The app's own fsync/rename/sync of a save's files after its call (the patch's
    checkpoint_extend events of one id): the last one's time, the calls, a rename (from, to)."""

    t_ns: float = 0.0
    ops: list[str] = field(default_factory=list)
    renamed: tuple[str, str] | None = None  # written under a temporary name, then renamed


def _finishes(ev: pd.DataFrame) -> dict[str, _Finish]:
    out: dict[str, _Finish] = {}
    for e in checkpoint_extends(ev):
        cur = out.setdefault(e.id, _Finish())
        cur.t_ns = max(cur.t_ns, e.t_ns)
        cur.ops.append(str(e.op))
        if e.renamed_to is not None:
            cur.renamed = (str(e.path), e.renamed_to)
    return out


def _marker_window(r: dict) -> Window:
    """One row of Recording.checkpoints() (a checkpoint_start and its end) as a window."""
    get = r.get
    ok = get("ok")
    return Window(
        id=str(get("id")),
        source=json_value(get("source")) or "api",
        kind=json_value(get("kind")) or "save",
        start_ns=float(r["start_ns"]),
        app_end_ns=_num(get("end_ns")),
        bytes_app=_num(get("bytes")),
        path=json_value(get("path")),
        step=_whole(get("step")),
        rank=_whole(get("rank")),
        ok=None if ok is None or pd.isna(ok) else bool(ok),
        error=json_value(get("error")),
        pid=_whole(get("pid")),
        host=json_value(get("host")),
        cached_bytes_at_start=_num(get("cached_bytes_at_start")),
        file_bytes_at_start=_num(get("file_bytes_at_start")),
    )


def marker_windows(rec) -> list[Window]:
    """Windows from checkpoint_start/checkpoint_end events (ckprof.checkpoint, the patch, workload)."""
    cp = rec.checkpoints()
    if cp.empty:
        return []
    out = []
    ev = rec.events
    blocking = {e.id: e.blocking_s for e in checkpoint_ends(ev) if e.blocking_s is not None}
    names: dict[str, object] = {}
    for i, n in zip(ev["id"], ev["name"]) if "name" in ev else ():  # the first event of an id names its call
        names.setdefault(str(i), n)
    finishes = _finishes(ev)  # the app's own fsync/rename/sync of a save's files (checkpoint_extend)
    for r in cp.to_dict("records"):
        w = _marker_window(r)
        w.blocking_s, w.name = blocking.get(w.id), json_value(names.get(w.id))
        out.append(w)
        ext = finishes.get(w.id)
        if ext and w.app_end_ns is not None:
            # the save is finished when the app's own fsync/rename of its files returns
            w.own_finish_s = max(0.0, (ext.t_ns - w.app_end_ns) / 1e9)
            w.app_end_ns = max(w.app_end_ns, ext.t_ns)
            w.finished_by = sorted(set(ext.ops))
            if ext.renamed and w.path and os.path.realpath(w.path) == ext.renamed[0]:
                w.path = ext.renamed[1]  # the checkpoint is the file under its final name
    return group_saves(drop_nested_patch(out))


def drop_nested_patch(wins: list[Window]) -> list[Window]:
    """A torch.save inside `with ckprof.checkpoint():` is one checkpoint, not two: an automatic
    (patch) window inside a marked window of the same process is left out."""
    marked = [w for w in wins if w.source != "patch" and w.app_end_ns is not None]

    def outer(w: Window) -> Window | None:
        return next(
            (
                m
                for m in marked
                if m.pid == w.pid
                and m.start_ns <= w.start_ns
                and w.app_end_ns is not None
                and m.app_end_ns is not None
                and w.app_end_ns <= m.app_end_ns
            ),
            None,
        )

    out = []
    for w in wins:
        m = outer(w) if w.source == "patch" else None
        if m is None:
            out.append(w)
        else:  # its files are the marked window's files (durability)
            m.nested_ids.append(w.id)
    return out


DEVICE_SHARE = 0.9  # the devices got the checkpoint once they wrote this share of its bytes


def _device_cum(tl, start_ns: float):
    """(bin end times, bytes written by the recorded devices since the bin holding start)."""
    t1 = np.asarray(tl.total.t_ns, dtype=float)
    wb = tl.total.write_bytes
    first = int(np.searchsorted(t1, start_ns, side="right"))  # the bin whose end is after start
    return t1[first:], np.cumsum(wb[first:])


@dataclass(slots=True)
class DurableHint:
    """What the machine-wide figures suggest of a window's durability (durable_end_hint): the
    durable end (monotonic ns; None: not before the recording ended), durable at return, the host's
    dirty bytes above the level at the start as it returned, and how each was judged; the
    recording's start (monotonic ns), to say the end in seconds."""

    start_ns: float
    durable_end_ns: float | None = None
    durable_at_return: bool | None = None
    pending_bytes_at_return: float | None = None
    durable_basis: list[str] = field(default_factory=list)


def durable_end_hint(w: Window, tl, thr_bps: float, end_ns: float) -> DurableHint:
    """A hint at the durable end from machine-wide figures — never the verdict (durability.py).

    With the checkpoint's size known and block samples, the recorded devices are the witness
    (Dirty in /proc/meminfo is machine-wide, so other programs move it): the save was durable at
    return if the devices had written 90 % of its bytes by then, and becomes durable when they
    have and their write rate is back to baseline. Otherwise the host's Dirty + Writeback are
    used: back to the level at the start, then device writes back to baseline.
    `durable_end_ns` is None when that did not happen before the recording ended.
    """
    app_end = w.app_end_ns if w.app_end_ns is not None else end_ns
    size = w.bytes_app or 0.0
    out = DurableHint(start_ns=tl.start_ns)
    pending = None
    drained_at = None
    if tl.dirty is not None and len(tl.dirty) >= 2:
        t, v = tl.dirty.t_ns, tl.dirty.dirty_wb_bytes
        before = t <= w.start_ns
        base = float(v[before][-1]) if before.any() else float(v[0])
        # the first reading at or after the return: pages dirtied by the save are all counted there
        at_ret = float(v[min(int(np.searchsorted(t, app_end)), len(t) - 1)])
        pending = max(0.0, at_ret - base)
        out.pending_bytes_at_return = pending
        # a checkpoint counts as still in the page cache when at least half its bytes (8 MiB when
        # its size is unknown) are dirty above the level at its start; drained once within
        # max(4 MiB, a quarter of its size) of that level
        flag_at = max(1 * MIB, 0.5 * size) if size else 8 * MIB
        tol = max(4 * MIB, 0.25 * size)
        after = np.flatnonzero((t >= app_end) & (v <= base + tol))
        drained_at = float(t[after[0]]) if len(after) else None
    have_dev = tl.total is not None and len(tl.total) > 0
    t_ready = None
    if size and have_dev:
        t1, cum = _device_cum(tl, w.start_ns)
        got = np.flatnonzero(cum >= DEVICE_SHARE * size)
        # bytes completed before the return are read at the next reading of the counters: allow
        # one interval after the bin that holds the return
        ret_bin = int(np.searchsorted(t1, app_end)) + 1
        at_ret = float(cum[min(ret_bin, len(cum) - 1)]) if len(cum) else 0.0
        if at_ret >= DEVICE_SHARE * size:
            out.durable_at_return = True
        elif pending is not None and pending < flag_at:
            out.durable_at_return = None  # neither the devices nor the page cache hold it
            out.durable_basis.append(
                "the recorded devices had not written the bytes and the page cache "
                "did not hold them either: are these the devices behind the path?"
            )
        else:
            out.durable_at_return = False
        if len(got):
            t_ready = max(app_end, float(t1[got[0]]))
            out.durable_basis.append(f"recorded devices wrote {DEVICE_SHARE:.0%} of the checkpoint's bytes")
        else:
            out.durable_basis.append("recorded devices never wrote the checkpoint's bytes before the recording ended")
            return out
    elif pending is not None:
        out.durable_at_return = bool(pending < flag_at)
        if drained_at is None:
            out.durable_basis.append("host Dirty+Writeback (never drained before the recording ended)")
            return out
        t_ready = max(app_end, drained_at)
        out.durable_basis.append("host Dirty+Writeback back to its level at the start")
    if have_dev:
        t_ready = app_end if t_ready is None else t_ready
        t1, r = tl.total.t_ns, tl.total.write_bytes_per_s
        quiet = np.flatnonzero((t1 > t_ready) & (r <= thr_bps))
        if len(quiet) == 0:
            out.durable_basis.append("device writes (still above baseline at the end)")
            return out
        # the bin that is quiet began one resolution step before its end time
        t_ready = max(t_ready, float(t1[quiet[0]] - tl.res_s * 1e9))
        out.durable_basis.append("device write rate back to baseline")
    out.durable_end_ns = t_ready
    return out
