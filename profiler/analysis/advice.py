"""What would help: short advice computed from one report, each line with the figures it rests on.

No advice without a measured reason: every rule reads figures the report already holds
(checkpoints[], run, throttling) and says them; a rule whose figures are missing or too small to
matter stays silent. Each item is an Advice (id, text, figures); the test suite checks the figures.
"""

from __future__ import annotations

import statistics

from .model import ABSENT, Advice, Checkpoint, Report

MIB = 2**20
DEVICE_BOUND_SHARE = 0.3  # async advice only when the devices were busy for this share of the blocked time
HOT_SLOWDOWN = 0.9  # throttle advice when the hottest checkpoint ran below this share of the coolest's bandwidth
SLOW_PART_FACTOR = 1.5  # a part this many times the median part held the checkpoint up
ASYNC_STEP_INFLATION_PCT = 10.0  # async advice when the steps beside the background write were this much slower
ASYNC_STILL_BLOCKS_SHARE = 0.5  # ... or when the blocked phase is this share of blocked + persist


def _saves(rep: Report) -> list[Checkpoint]:
    return [c for c in rep.checkpoints if c.kind == "save" and c.ok is not False and c.app_end_s]


def own_fsync(rep: Report) -> Advice | None:
    saves = _saves(rep)
    fin = [c for c in saves if c.own_finish_s]
    if not fin:
        return None
    f_s = sum(c.own_finish_s for c in fin)
    b_s = sum(c.blocking_s or 0 for c in saves)
    return Advice(
        "own_fsync_on_training_path",
        f"the program's own fsync/rename after {len(fin)} save(s) held training for {f_s:.2f} s of the "
        f"{b_s:.2f} s saves blocked it: an asynchronous save, or the fsync in a background thread, would hide that",
        {"own_finish_s": f_s, "blocked_s": b_s, "saves": len(fin)},
    )


def async_save(rep: Report) -> Advice | None:
    sync = [c for c in _saves(rep) if c.device_busy_s is not None and c.blocking_s == c.duration_s]
    if not sync:
        return None
    b_s = sum(c.blocking_s for c in sync)
    d_s = sum(min(c.device_busy_s, c.blocking_s) for c in sync)
    if b_s <= 0 or d_s / b_s < DEVICE_BOUND_SHARE:
        return None
    return Advice(
        "async_save",
        f"{len(sync)} synchronous save(s) blocked training for {b_s:.2f} s; the devices were busy writing for "
        f"{d_s:.2f} s of it ({d_s / b_s:.0%}): an asynchronous save (torch.distributed.checkpoint.async_save, "
        "`ckprof workload --async`) would take the device time off the training's path",
        {"blocked_s": b_s, "device_busy_s": d_s, "share": d_s / b_s, "saves": len(sync)},
    )


def throttled(rep: Report) -> Advice | None:
    thr = rep.throttling
    hc = thr.hot_vs_cool if thr else None
    if not hc or hc.bandwidth_ratio_hot_to_cool is None or hc.bandwidth_ratio_hot_to_cool >= HOT_SLOWDOWN:
        return None
    drop = 1 - hc.bandwidth_ratio_hot_to_cool
    events, secs = thr.events_in_checkpoints, thr.seconds_in_checkpoints
    also = f"; {events} throttle event(s), {secs:.1f} s throttled during checkpoints" if events else ""
    return Advice(
        "thermal",
        f"checkpoint {hc.hottest_id} at {hc.hottest_peak_temp_c:.0f} °C wrote at "
        f"{hc.hottest_gib_per_s:.2f} GiB/s, checkpoint {hc.coolest_id} at {hc.coolest_peak_temp_c:.0f} °C "
        f"at {hc.coolest_gib_per_s:.2f} GiB/s: {drop:.0%} slower when hot{also}; cooling or spacing checkpoints would help",
        {
            "hot_temp_c": hc.hottest_peak_temp_c,
            "cool_temp_c": hc.coolest_peak_temp_c,
            "bandwidth_drop": drop,
            "throttle_events": events,
            "throttle_s": secs,
        },
    )


def cached_restores(rep: Report) -> Advice | None:
    loads = [c for c in rep.checkpoints if c.kind == "load" and c.cache_served_share not in (None, ABSENT)]
    app = sum(c.restore_bytes_app or 0 for c in loads)
    if not loads or not app:
        return None
    cached = sum((c.cache_served_share or 0) * (c.restore_bytes_app or 0) for c in loads)
    share = cached / app
    if share < 0.5:
        return None
    return Advice(
        "cache_served_restores",
        f"restores were {share:.0%} served from the page cache ({cached / MIB:.1f} of {app / MIB:.1f} MiB, "
        "cachestat as they started): their speed is memory's, not storage's; measure a cold restore with "
        "`ckprof evict PATH` first (no root) or --drop-caches",
        {"cache_served_share": share, "cached_bytes": cached, "bytes": app, "loads": len(loads)},
    )


def not_durable(rep: Report) -> Advice | None:
    # pages in the page cache an fsync would write: not tmpfs's (no storage behind it: no_storage)
    nd = [c for c in _saves(rep) if c.durable_at_return is False and c.pending_bytes_at_return is not None]
    if not nd:
        return None
    pending = sum(c.pending_bytes_at_return or 0 for c in nd)
    return Advice(
        "not_durable_at_return",
        f"{len(nd)} save(s) returned with {pending / MIB:.1f} MiB still only in the page cache: a crash or power "
        "loss right after would lose them; fsync the files (or os.sync) before counting the checkpoint as taken",
        {"saves": len(nd), "pending_bytes": pending},
    )


def _deleted(c: Checkpoint) -> bool:
    """Not durable because a file was deleted first (durability.py's basis says so), not for want of storage."""
    return (c.durable_basis or [""])[0].startswith("deleted")


def deleted_early(rep: Report) -> Advice | None:
    gone = [c for c in _saves(rep) if c.durable is False and _deleted(c)]
    if not gone:
        return None
    return Advice(
        "deleted_before_durable",
        f"{len(gone)} checkpoint(s) were deleted before their data reached the device (retention faster than "
        "writeback): they were never recoverable after a crash; keep more checkpoints or fsync each save",
        {"checkpoints": len(gone), "ids": [c.id for c in gone]},
    )


def no_storage(rep: Report) -> Advice | None:
    """Saves to a file system with no storage behind it (tmpfs, ramfs): never durable."""
    mem = [c for c in _saves(rep) if c.durable is False and not _deleted(c)]
    if not mem:
        return None
    fs = sorted({c.file_system or "?" for c in mem})
    return Advice(
        "no_storage_behind",
        f"{len(mem)} checkpoint(s) were saved to {', '.join(fs)}: no storage behind it, so a crash or reboot "
        "loses them whatever the program syncs; save to a file system on a device (or copy them there) "
        "before counting a checkpoint as taken",
        {"checkpoints": len(mem), "file_systems": fs, "ids": [c.id for c in mem]},
    )


def slow_part(rep: Report) -> Advice | None:
    worst = None
    for c in _saves(rep):
        parts = [p for p in c.parts or [] if p.duration_s is not None]
        if len(parts) < 2:
            continue
        med = statistics.median(p.duration_s for p in parts)
        s = max(parts, key=lambda p: p.duration_s)
        if med > 0 and s.duration_s >= SLOW_PART_FACTOR * med and (worst is None or s.duration_s > worst[1].duration_s):
            worst = (c, s, med)
    if worst is None:
        return None
    c, s, med = worst
    who = f"rank {s.rank}" if s.rank is not None else f"pid {s.pid}"
    return Advice(
        "slowest_part",
        f"{who}{' on ' + s.host if s.host else ''} held checkpoint {c.id} up: its part took "
        f"{s.duration_s:.2f} s, the median part {med:.2f} s ({s.duration_s / med:.1f}×); balance its shard "
        "or look at its device",
        {"rank": s.rank, "part_s": s.duration_s, "median_part_s": med, "checkpoint": c.id},
    )


def _phase_s(c: Checkpoint, name: str) -> float | None:
    if c.phases is ABSENT:
        return None
    return next((p.duration_s for p in c.phases if p.name == name), None)


def async_cost(rep: Report) -> Advice | None:
    """An async save whose background write slowed the steps beside it, or whose staging still
    blocked for much of it: the phases (checkpoints[].phases) and step effect say how much."""
    pairs = [(_phase_s(c, "blocked"), _phase_s(c, "persist"), c.step_effect) for c in _saves(rep)]
    timed = [(b, p, e) for b, p, e in pairs if b is not None and p is not None]
    if not timed:
        return None
    blocked = statistics.fmean(b for b, _, _ in timed)
    persist = statistics.fmean(p for _, p, _ in timed)
    effects = [
        (e.inflation_pct, e.slower_steps_s or 0.0)
        for _, _, e in timed
        if e is not ABSENT and e.inflation_pct is not None
    ]
    inflation = statistics.fmean(i for i, _ in effects) if effects else None
    lost = statistics.fmean(s for _, s in effects) if effects else 0.0
    slow = inflation is not None and inflation >= ASYNC_STEP_INFLATION_PCT
    still_blocks = blocked >= ASYNC_STILL_BLOCKS_SHARE * (blocked + persist)
    if not (slow or still_blocks):
        return None
    text = f"staging blocked {blocked:.2f} s per save while persist took {persist:.2f} s in the background"
    figures: dict[str, float | int] = {
        "blocked_s_per_save": blocked,
        "persist_s_per_save": persist,
        "saves": len(timed),
    }
    if inflation is not None:
        text += f"; steps overlapping it were {inflation:.0f} % slower ({lost:.2f} s a save)"
        figures |= {"inflation_pct": inflation, "slower_steps_s_per_save": lost, "saves_with_steps": len(effects)}
    if slow:
        text += (
            ": the background write competes with training (CPU, memory bandwidth, PCIe); fewer writer "
            "threads, a lower I/O priority or a longer interval between saves would cut that"
        )
    else:
        text += ": staging is most of the save; a pinned-memory stager (DCP's DefaultStager) moves it off the call"
    return Advice("async_cost", text, figures)


RULES = (
    own_fsync,
    async_save,
    async_cost,
    throttled,
    cached_restores,
    not_durable,
    deleted_early,
    no_storage,
    slow_part,
)


def advise(rep: Report) -> list[Advice]:
    """Every rule that has a measured reason, in the order above."""
    return [a for a in (rule(rep) for rule in RULES) if a is not None]
