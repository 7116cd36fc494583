"""Per-checkpoint figures: times, bytes, bandwidth, queue depth, energy, temperature, throttling."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np

from ckprof.jsonsafe import json_float as _f
from ckprof.power.energy import total_basis, total_j, window_energy
from ckprof.units import GIB

from . import thermal as T
from .durability import Verdict, storage_of
from .filesaves import sizes_unknown
from .gpu_idle import window_idle
from .model import DeviceFigures, DeviceUnknown, Part
from .records import Window, events_of
from .timeline import rows_in

# A block-sample interval this many times the analysis resolution inside a window is a gap in
# sampling (a stalled or starved recorder): its device rate is not measured.
GAP_FACTOR = 3


def _s(tl, t_ns):
    return None if t_ns is None else (t_ns - tl.start_ns) / 1e9


# -- whether a checkpoint's figure on a device is known: the one rule ----------------------------------
#
# A device figure ckprof cannot stand behind is unknown (null) with the reason, never 0. Each
# (checkpoint, device) gets None (known) or {"code", "reason", "since_s"} from
# `device_figure_unknown`; `unknown_entry` makes the same for a reason found elsewhere (issue 21: a
# checkpoint with no block device behind it at all). A row carries them in `device_unknown`, and
# everything downstream (the device total and bandwidth, the run's sums and means, the tables)
# keys on that list alone.

# the uevents that say a device went away: the kernel removed it (ACTION=remove), or its medium
# went away or changed (block/disk-events.c: disk_force_media_change() sends DISK_MEDIA_CHANGE=1;
# drivers/block/loop.c calls it when a loop device is detached, which leaves the empty device in
# /proc/diskstats counting nothing)
GONE_REMOVED = "kernel uevent: the device was removed"
GONE_MEDIA = "kernel uevent DISK_MEDIA_CHANGE=1: its medium went away or changed, as when a loop device is detached"
# the code of a figure no device has: the checkpoint went to an object store (the tables say n/a)
NO_BLOCK_DEVICE = "no_block_device"


def unknown_entry(code: str, reason: str, since_s: float | None = None, device: str | None = None) -> dict:
    """One unknown device figure: `code` (device_gone, no_sample, sampling_gap, no_block_device),
    the reason in words, since when (s since the recording's start, or None), the device
    (None: the checkpoint as a whole)."""
    return {"device": device, "code": code, "reason": reason, "since_s": since_s}


def devices_gone(events, devices) -> dict[str, tuple[int, str]]:
    """device → (t_ns, why) of the first uevent saying a recorded device went away."""
    out: dict[str, tuple[int, str]] = {}
    if events is None or events.empty or "event" not in events or "device" not in events:
        return out
    ev = events_of(events, "device_remove", "device_change")
    ev = ev[ev["device"].isin(list(devices))]
    uevents = ev["uevent"] if "uevent" in ev else [None] * len(ev)
    for t_ns, event, dev, props in zip(ev["t_ns"], ev["event"], ev["device"], uevents):
        props = props if isinstance(props, dict) else {}
        if event == "device_remove":
            why = GONE_REMOVED
        elif str(props.get("DISK_MEDIA_CHANGE")) == "1":
            why = GONE_MEDIA
        else:
            continue
        if dev not in out or int(t_ns) < out[dev][0]:
            out[dev] = (int(t_ns), why)
    return out


@dataclass(frozen=True)
class DeviceSampling:
    """What a recording says of one device's samples: its sampling intervals (t0, t1], the span
    they cover, and when and why it went away."""

    t0_ns: np.ndarray
    t1_ns: np.ndarray
    first_ns: float  # the first interval's start
    last_ns: float  # the last interval's end (a finished recording's end when its final sample was)
    gone: tuple[int, str] | None
    end_why: str = "the recorder stopped or was killed"  # why its samples end where they do


def device_sampling(tl, events, finished: bool, stopped_why: str | None = None) -> dict[str, DeviceSampling]:
    """Each recorded device's sampling, for `device_figure_unknown`. `finished`: the recording is
    complete (not killed, not truncated by a full disk): the recorder took a final sample as it
    stopped (record/recorder.py `stop`), so a device sampled then is covered to the recording's
    end, which is written just after. `stopped_why`: why the samples end, when the recording says
    (a truncated recording's reason); a device whose samples end before the others' left
    /proc/diskstats."""
    gone = devices_gone(events, tl.devices)
    slack_ns = GAP_FACTOR * tl.res_s * 1e9
    ends = [float(d.t_ns[-1]) for d in tl.devices.values() if not d.empty]
    final = max(ends, default=None)
    out = {}
    for dev, d in tl.devices.items():
        if d.empty:
            continue
        t1 = d.t_ns.astype(float)
        t0 = t1 - d.dt_s * 1e9
        last = float(t1[-1])
        if last < final - slack_ns:  # the others were sampled on
            why = "it was no longer in /proc/diskstats after that: gone without a uevent ckprof saw"
        else:
            why = stopped_why or "the recorder stopped or was killed"
            if finished:
                last = max(last, float(tl.end_ns))
        out[dev] = DeviceSampling(t0, t1, float(t0[0]), last, gone.get(dev), why)
    return out


def no_block_device(path) -> dict | None:
    """The checkpoint's path names an object (s3://, gs://, ...) or another remote URL: no block
    device is behind it, so no device figure is its own (durability.storage_of tells the kind)."""
    storage = storage_of(path, [])
    if storage.kind not in ("object", "unrecognised") or not str(storage.file_system or "").endswith("://"):
        return None
    what = "an object store" if storage.kind == "object" else f"a {storage.file_system} URL"
    return unknown_entry(
        NO_BLOCK_DEVICE,
        f"no block device behind {path}: {what} (its bytes went over the network: the "
        "checkpoint's remote figures give them where the recording has them: remote.object_store for "
        "S3 requests, remote.interfaces for the network interfaces)",
    )


def device_figure_unknown(
    s: DeviceSampling, dev: str, a_ns: float, b_ns: float, tl, path: str | None = None
) -> dict | None:
    """Whether a checkpoint's figures on `dev` over [a, b] are unknown, and why; None: known.

    Not applicable when no block device is behind the checkpoint's path (an object store:
    `no_block_device`): whatever the device wrote then was not this checkpoint's. Unknown when the
    device went away before the window's end (from then on nothing it reports is about what the
    program wrote); when no block sample covers part of the window longer than a
    sampling gap (GAP_FACTOR × the analysis resolution: the recorder stopped or was killed, or had
    not sampled the device yet); and when the whole window lies inside one interval that is a gap
    (no sample taken in it: its bytes cannot be told from the rest of the gap's). A gap inside a
    longer window keeps its bytes (cumulative counters) and loses only its bandwidth
    (`sampling_gap_s`)."""

    def at(t_ns):
        return (t_ns - tl.start_ns) / 1e9

    remote = no_block_device(path)
    if remote is not None:
        return remote
    if s.gone is not None and s.gone[0] < b_ns:
        t, why = s.gone
        return unknown_entry("device_gone", f"{dev} went away at {at(t):.2f} s ({why})", at(t), dev)
    slack = GAP_FACTOR * tl.res_s * 1e9
    if a_ns >= s.last_ns or b_ns <= s.first_ns:
        after = a_ns >= s.last_ns
        edge = at(s.last_ns if after else s.first_ns)
        when = f"its samples end at {edge:.2f} s ({s.end_why})" if after else (f"its samples begin at {edge:.2f} s")
        return unknown_entry("no_sample", f"no block sample of {dev} covers this checkpoint: {when}", edge, dev)
    if b_ns - s.last_ns > slack:
        edge = at(s.last_ns)
        return unknown_entry(
            "no_sample",
            f"the block samples of {dev} end at {edge:.2f} s, {(b_ns - s.last_ns) / 1e9:.2f} s before this "
            f"checkpoint's end ({s.end_why}): its bytes after that were not counted",
            edge,
            dev,
        )
    if s.first_ns - a_ns > slack:
        edge = at(s.first_ns)
        return unknown_entry(
            "no_sample",
            f"the block samples of {dev} begin at {edge:.2f} s, {(s.first_ns - a_ns) / 1e9:.2f} s after this "
            "checkpoint's start: its bytes before that were not counted",
            edge,
            dev,
        )
    i, j = rows_in(s.t1_ns, s.t0_ns, a_ns, b_ns)
    if j - i == 1 and s.t1_ns[i] - s.t0_ns[i] > slack:  # one interval holds the whole window: no sample in it
        t0, t1 = at(s.t0_ns[i]), at(s.t1_ns[i])
        return unknown_entry(
            "sampling_gap",
            f"no block sample of {dev} from {t0:.2f} s to {t1:.2f} s (a sampling gap of {t1 - t0:.2f} s) "
            "and this checkpoint lies inside it: its bytes cannot be told from the rest of the gap's",
            t0,
            dev,
        )
    return None


def window_device_unknown(
    sampling: dict[str, DeviceSampling], a_ns: float, b_ns: float, tl, path: str | None = None
) -> dict[str | None, dict]:
    """device → its unknown entry, for the devices whose figures over [a, b] are unknown; the key
    None: the checkpoint as a whole (no block device behind `path`, with or without devices recorded)."""
    out: dict[str | None, dict] = {}
    for dev, s in sampling.items():
        u = device_figure_unknown(s, dev, a_ns, b_ns, tl, path)
        if u is not None:
            out[dev] = u
    remote = no_block_device(path)
    if remote is not None:
        out[None] = remote
    return out


class _Returning(Protocol):
    @property
    def app_end_s(self) -> float | None: ...


_P = TypeVar("_P", bound=_Returning)  # a Part, or a Checkpoint that is its own one part


def device_stats(
    tl, a: float, b: float, direction: str = "write", unknown: dict | None = None
) -> tuple[dict[str, DeviceFigures], float | None, float | None]:
    """Per-device figures over the sampling intervals that [a, b] touches.

    The counters are read once per interval, so bytes cannot be placed inside one: a window's
    device bytes are those of every interval it touches, and its bandwidth is over their span.
    `unknown`: device → its unknown entry (window_device_unknown): its figures are null, with
    the entry as `unknown`, and it is left out of the total. Returns (per device, total bytes in
    `direction` — write for a save, read for a load — and the longest span in s).
    """
    out: dict[str, DeviceFigures] = {}
    total, longest = None, None
    unknown = unknown or {}
    for dev, rates in tl.devices.items():
        if dev in unknown:
            out[dev] = DeviceFigures(unknown=DeviceUnknown.from_jsonable(unknown[dev]))
            continue
        w = rates.window(a, b)
        if w.empty:
            continue
        span_s = max((w.t_ns.max() - w.t0_ns.min()) / 1e9, 1e-9)
        in_flight = w.in_flight_max if w.in_flight_max is not None else w.in_flight
        d: dict = {"span_s": span_s, "longest_interval_s": float(w.dt_s.max())}
        for io in ("write", "read"):
            n = float(np.nansum(getattr(w, f"{io}_bytes")))
            d[f"{io}_bytes"] = n
            d[f"mean_{io}_gib_per_s"] = n / span_s / GIB
            d[f"peak_{io}_gib_per_s"] = _f(_skipnan_max(getattr(w, f"{io}_bytes_per_s")) / GIB)
        d.update(
            {
                "mean_aqu_sz": _f(
                    np.average(w.aqu_sz, weights=w.dt_s) if np.nansum(w.dt_s) > 0 else _skipnan_mean(w.aqu_sz)
                ),
                "peak_aqu_sz": _f(_skipnan_max(w.aqu_sz)),
                "peak_in_flight": _f(None if in_flight is None else _skipnan_max(in_flight)),
            }
        )
        out[dev] = DeviceFigures(**d)
        total = (total or 0.0) + d[f"{direction}_bytes"]
        longest = max(longest or 0.0, span_s)
    return out, total, longest


def _skipnan_max(a: np.ndarray) -> float:
    """The largest value that is not NaN (pandas' max); NaN when there is none."""
    known = np.asarray(a, dtype=float)
    known = known[~np.isnan(known)]
    return float(known.max()) if len(known) else math.nan


def _skipnan_mean(a: np.ndarray) -> float:
    """The mean of the values that are not NaN (pandas' mean); NaN when there is none."""
    known = np.asarray(a, dtype=float)
    known = known[~np.isnan(known)]
    return float(known.mean()) if len(known) else math.nan


def attribute_device_bytes(
    tl, spans: list[tuple[float, float, str, float | None]], unknown: list[dict] | None = None
) -> list[dict]:
    """Each device's bytes split among the windows, so that every byte counts once.

    `spans`: (start ns, end ns, kind, application bytes or None) per window. The counters are
    read once per interval, so an interval's bytes cannot be placed inside it; they are shared
    among the windows that touch it, in proportion to the time each covers of the interval
    times its application bytes (a window of unknown size counts as the mean known size; none
    known: equally). Written bytes go to the saves touching the interval (to loads only when no
    save does), read bytes to the loads (to saves only when no load does). A window alone in an
    interval gets all of it. `unknown`: per window, the devices whose figures are unknown for it
    (window_device_unknown): such a window takes no share of them, so it cannot take another's
    bytes. Returns per window {device: {"write_bytes", "read_bytes"}}.
    """
    known = [s[3] for s in spans if s[3]]
    default = float(np.mean(known)) if known else 1.0
    out: list[dict] = [{} for _ in spans]
    for dev, rates in tl.devices.items():
        if rates.empty:
            continue
        t1 = rates.t_ns.astype(float)
        t0 = t1 - rates.dt_s * 1e9
        den = {"save": np.zeros(len(t1)), "load": np.zeros(len(t1))}
        parts = []
        for n, (a, b, kind, size) in enumerate(spans):
            if unknown and dev in unknown[n]:
                parts.append(None)
                continue
            i, j = rows_in(t1, t0, a, b)
            cover = np.clip(np.minimum(t1[i:j], b) - np.maximum(t0[i:j], a), 1.0, None)  # ≥ 1 ns: touched
            wgt = cover * (size or default)
            k = "load" if kind == "load" else "save"
            den[k][i:j] += wgt
            parts.append((i, j, k, wgt))
        for n, part in enumerate(parts):
            if part is None:
                continue
            i, j, k, wgt = part
            other = "save" if k == "load" else "load"
            d = {}
            for io, first in (("write", "save"), ("read", "load")):
                got = getattr(rates, f"{io}_bytes")[i:j]
                mine, theirs = den[k][i:j], den[other][i:j]
                # this kind's windows have the interval when they are first in line for this
                # direction, or when none of the first in line touch it
                own = (theirs == 0) if k != first else np.ones(j - i, dtype=bool)
                d[f"{io}_bytes"] = float(np.sum(np.where(own, got * wgt / mine, 0.0)))
            out[n][dev] = d
    return out


def _busy_s(tl, a: float, b: float, unknown: dict) -> float | None:
    """Seconds the busiest recorded device was busy (iostat %util × time) over [a, b]'s intervals;
    a device whose figures are unknown there (`unknown`) is left out."""
    best = None
    for dev, rates in tl.devices.items():
        if dev in unknown:
            continue
        w = rates.window(a, b)
        if w.empty:
            continue
        busy = float(np.nansum(w.util_pct / 100.0 * w.dt_s))
        best = busy if best is None else max(best, busy)
    return best


def ssd_efficiency(devs: dict, sources: list, ssd_devices: dict, a: float, b: float, io: str) -> dict:
    """Per SSD (NVMe controller) over a checkpoint: its bytes (this checkpoint's share, on the block
    devices behind it), its energy (ckprof.power.ssd: measured, derived or estimated), bytes per
    joule as GB/s per W (the same number: (B/s)/W = B/J), and J/GiB — labelled with the energy's
    provenance, since bandwidth is measured but SSD power often is not."""
    out = {}
    for s in sources:
        if s.component != "ssd":
            continue
        behind = ssd_devices.get(s.device) or []
        got = [getattr(devs[d], f"{io}_bytes") for d in behind if d in devs]
        nbytes = None if any(x is None for x in got) else sum(got)  # a device's figure unknown: unknown
        j = s.energy_j(a, b)
        if j is None or np.isnan(j) or j <= 0:
            continue
        cov = s.coverage(a, b)
        secs = (b - a) / 1e9 * cov
        out[s.device] = {
            "bytes": _f(nbytes) if behind else None,
            "energy_j": _f(j),
            "mean_w": _f(j / secs) if secs > 0 else None,
            "gb_per_s_per_w": _f(nbytes / j / 1e9) if (behind and nbytes) else None,
            "j_per_gib": _f(j / (nbytes / GIB)) if (behind and nbytes) else None,
            "provenance": s.provenance_in(a, b),
            "coverage": _f(cov),
            "devices": behind,
        }
    return out


# a load whose bytes the devices delivered less than this share of is not a storage read
DEVICE_READ_WARN_SHARE = 0.5

# Where a window came from without any call being timed: the file activity of a writer no patch
# or marker saw (filesaves.py), or the devices' write bursts (windows.py). Whether the training loop
# waited on such a save is not known: a background thread, a forked or native writer, and a
# synchronous save all write the same files. Its blocking time is unknown, never its duration.
UNTIMED_SOURCES = ("files", "inferred")


def blocking_s_of(w: Window, duration: float | None) -> float | None:
    """The seconds the caller was held: an async save's timed call; a synchronous call's or a
    marker's window; unknown for a window no call timed (UNTIMED_SOURCES)."""
    if w.blocking_s is not None:
        return w.blocking_s
    return None if w.source in UNTIMED_SOURCES else duration


def returned_s(start_s: float, blocking_s: float | None) -> float | None:
    """When the timed call returned: the window's start + its blocking_s (the patch times an async
    save's call from the window's start to its return, _ckprof_autopatch); None when no call timed it."""
    return None if blocking_s is None else start_s + blocking_s


def untimed(r) -> bool:
    """A save or load whose blocking time is unknown because no call timed it (a Checkpoint row; not
    one that never returned, whose own note says so)."""
    return r.blocking_s is None and r.source in UNTIMED_SOURCES


def restore_truth(w: Window, dev_read_bytes: float | None) -> dict:
    """A load's bytes: read by the application (its files), read from the devices (this load's
    share), and served from the page cache — measured with cachestat(2) as the load started
    (the files' pages already cached), and derived from the devices' reads."""
    app = w.file_bytes_at_start or w.bytes_app
    if no_block_device(w.path) is not None:  # an object store's GETs: no page cache, no local device
        return {
            "restore_bytes_app": _f(app),
            "restore_bytes_device": None,
            "cache_served_share": None,
            "device_read_share": None,
            "restore_basis": [
                f"no page cache and no block device behind {w.path}: an object store's read, its bytes "
                "came over the network (the checkpoint's remote figures)"
            ],
        }
    cached = w.cached_bytes_at_start
    cache_share = _f(min(1.0, cached / app)) if (cached is not None and app) else None
    device_share = _f(dev_read_bytes / app) if (dev_read_bytes is not None and app) else None
    basis = []
    if cache_share is not None and cached is not None and app:
        basis.append(
            f"cachestat(2) as the load started: {cached / 2**20:.1f} MiB of its {app / 2**20:.1f} MiB "
            "already in the page cache (measured)"
        )
    else:
        basis.append(
            "page cache at start unknown: no cachestat(2) look (a marker without path=, or a kernel before 6.5)"
        )
    if device_share is not None and dev_read_bytes is not None:
        basis.append(f"the recorded devices read {dev_read_bytes / 2**20:.1f} MiB during it (derived)")
        if device_share > 1.0:
            basis.append(
                "the devices read more than the load's files in its sampling intervals: other reads "
                "shared them, so the device share is an upper bound"
            )
    return {
        "restore_bytes_app": _f(app),
        "restore_bytes_device": _f(dev_read_bytes),
        "cache_served_share": cache_share,
        "device_read_share": device_share,
        "restore_basis": basis,
    }


def returned_last(parts: Sequence[_P]) -> _P:
    """The part (a rank's or a file's window, with `app_end_s`) that returned last; one that never
    returned (app_end_s None) before any that did: it holds the checkpoint up."""
    return max(parts, key=lambda p: float("inf") if p.app_end_s is None else p.app_end_s)


def parts_of(w: Window, tl) -> tuple[list[Part] | None, Part | None]:
    """A grouped checkpoint's parts (one per rank's or file's window) and the slowest of them: the
    one that returned last (one that never returned, if any)."""
    if not w.parts:
        return None, None
    parts = [
        Part(
            id=p.id,
            rank=p.rank,
            host=p.host,
            pid=p.pid,
            path=p.path,
            api=p.name,
            start_s=_s(tl, p.start_ns),
            app_end_s=_s(tl, p.app_end_ns),
            duration_s=None if p.app_end_ns is None else (p.app_end_ns - p.start_ns) / 1e9,
            bytes_app=_f(p.bytes_app),
            ok=p.ok,
            error=p.error,
        )
        for p in w.parts
    ]
    return parts, returned_last(parts)


def checkpoint_row(w: Window, dur: Verdict, tl, ctx, share: dict | None = None, unknown: dict | None = None) -> dict:
    """One checkpoint's figures; `ctx` carries the energy sources, idle baselines and signals.
    `share`: the window's device bytes from attribute_device_bytes (else every touched interval's).
    `unknown`: device → unknown entry (window_device_unknown; the key None: the checkpoint as a
    whole, unknown_entry): those devices' figures are null, and with any of them so are the
    checkpoint's device bytes and bandwidth, the reasons in `device_unknown`."""
    a = w.start_ns
    app_end = w.app_end_ns
    end_used = dur.durable_end_ns or app_end or tl.end_ns
    duration = None if app_end is None else (app_end - a) / 1e9
    io = "read" if w.kind == "load" else "write"
    unknown = unknown or {}
    devs, dev_bytes, dev_span = device_stats(tl, a, end_used, io, unknown)
    if share is not None:
        dev_bytes = None if not devs else 0.0
        for dev, d in devs.items():
            if d.unknown is not None:
                continue
            got = share.get(dev, {"write_bytes": 0.0, "read_bytes": 0.0})
            mine = {}
            for x in ("write", "read"):
                mine[f"{x}_bytes"] = got[f"{x}_bytes"]
                mine[f"mean_{x}_gib_per_s"] = got[f"{x}_bytes"] / d.span_s / GIB
            devs[dev] = replace(d, **mine)  # this window's share of the bytes (attribute_device_bytes)
            dev_bytes += got[f"{io}_bytes"]
    if unknown:  # a device's share unknown: the sum over the devices is not known either
        dev_bytes = None
    span_s = dev_span if dev_span else (end_used - a) / 1e9
    gap_s = max((d.longest_interval_s or 0 for d in devs.values()), default=0.0)
    sampling_gap = gap_s > GAP_FACTOR * tl.res_s
    bytes_app = w.bytes_app
    gib_basis = (bytes_app or dev_bytes or 0) / GIB
    energy = window_energy(ctx.sources, a, end_used, ctx.idle_w, gib_basis or None)
    temps = {t.name: _f(T.peak_in_window(t, a, end_used)) for t in ctx.temps}
    temps = {k: v for k, v in temps.items() if v is not None}
    thr_events, thr_s, by_src = 0, 0.0, {}
    for sig in ctx.signals:
        ev, sec = T.signal_in_window(sig, a, end_used)
        if ev or sec:
            by_src[sig.name] = {"events": ev, "seconds": sec, "what": sig.what}
        thr_events += ev
        thr_s = max(thr_s, sec)  # sources overlap (an SSD's two counters, GPUs): the longest one
    gpu_idle_s, gpu_idle, gpu_idle_basis = window_idle(ctx.gpu_idle, a, end_used)
    parts, slowest = parts_of(w, tl)
    ssd_eff = ssd_efficiency(devs, ctx.sources, getattr(ctx, "ssd_devices", {}) or {}, a, end_used, io)
    restore = restore_truth(w, dev_bytes) if w.kind == "load" else {}
    return {
        **restore,
        "id": w.id,
        "source": w.source,
        "kind": w.kind,
        "step": w.step,
        "rank": w.rank,
        "path": w.path,
        "api": w.name,
        "ok": w.ok,
        "error": w.error,
        "start_s": _s(tl, a),
        "app_end_s": _s(tl, app_end),
        "durable_end_s": _s(tl, dur.durable_end_ns),
        "duration_s": duration,
        "blocking_s": blocking_s_of(w, duration),
        "durable_duration_s": None if dur.durable_end_ns is None else (dur.durable_end_ns - a) / 1e9,
        "durable": dur.durable,
        "durable_at_return": dur.durable_at_return,
        "pending_bytes_at_return": _f(dur.pending_bytes_at_return),
        "durable_basis": dur.durable_basis,
        "bytes_app": _f(bytes_app),
        **({"bytes_app_unknown": why} if bytes_app is None and (why := sizes_unknown(w.files)) else {}),
        "bytes_device": _f(dev_bytes),
        "device_to_app_ratio": _f(dev_bytes / bytes_app) if (bytes_app and dev_bytes is not None) else None,
        "app_gib_per_s": _f(bytes_app / GIB / duration) if (bytes_app and duration) else None,
        # bytes are exact across a gap (cumulative counters); a rate over a gap is not
        "device_gib_per_s": _f(dev_bytes / GIB / span_s)
        if (dev_bytes is not None and span_s > 0 and not sampling_gap)
        else None,
        "sampling_gap_s": _f(gap_s) if sampling_gap else None,
        # each reason once (an object store's is every device's)
        "device_unknown": list({(u["code"], u["reason"]): u for u in unknown.values()}.values()),
        "device_span_s": span_s,
        "devices": devs,
        "energy": energy,
        "energy_total_j": _f(total_j(energy)),
        "energy_total_basis": total_basis(energy),
        "peak_temp_c": max(temps.values()) if temps else None,
        "peak_temp_by_sensor_c": temps,
        "throttle_events": thr_events if ctx.signals else None,
        "throttle_s": thr_s if ctx.signals else None,
        "throttle_by_source": by_src,
        "gpu_idle_s": _f(gpu_idle_s),
        "gpu_idle_s_by_gpu": {name: _f(v) for name, v in gpu_idle.items()},
        "gpu_idle_basis": gpu_idle_basis,
        "own_finish_s": _f(w.own_finish_s),
        "finished_by": w.finished_by,
        "device_busy_s": _f(_busy_s(tl, a, app_end or end_used, unknown)),
        "parts": parts,
        "slowest_part": slowest,
        "ssd_efficiency": ssd_eff,
        # which process wrote which bytes of its files, seen by the kernel (analysis/filesaves.py);
        # None where the files were not seen
        "writers": w.writers,
    }
