"""Benchmark: ckprof.power.ssd.ssd_power on a day-long recording, against the row-by-row version
it replaced (kept here, and only here, as `reference_ssd_power`, for this comparison and for
tests/test_nvme_power_pinned.py, which checks both give the same frame).

    python benchmarks/ssd_power.py                        # 24 h, 32 controllers, 1 Hz SMART and block
    python benchmarks/ssd_power.py --hours 1 --controllers 8

The recording has the NVMe collector's real schema (ckprof.collectors.nvme.SCHEMA) and the block
collector's, written as Parquet parts the way RecordingWriter lays them out: controllers 0-7 with
the drive's Interval Power Measurement, 8-15 with the Power Measurement log (a new Start every
6 h), the rest power-state table × utilisation; a power-state change every few minutes, 0.1 % of
polls failed, and an imported 10 Hz trace for nvme0 over the first hour. Prints both wall times,
their ratio, and whether the two frames are equal. Nothing is asserted: a person reads it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pandas as pd
import pyarrow as pa

import ckprof
from ckprof.collectors.blockdev import SCHEMA as BLOCK_SCHEMA
from ckprof.collectors.nvme import SCHEMA as NVME_SCHEMA
from ckprof.power.ssd import COLUMNS, EXTERNAL_MIN_COVERAGE, power_state_changes, ssd_power
from ckprof.recording.counters import counter_delta
from ckprof.recording.import_power import POWER_SCHEMA
from ckprof.testing import RecordingBuilder

S = 1_000_000_000
START_NS = 10**12
# An NVMe Base 2.0 style table (Fig. 276): PS0 with Idle and Active Power, PS1-2 Max Power only,
# PS3-4 non-operational.
POWER_STATES = [
    {"max_power_w": 8.25, "idle_power_w": 3.0, "active_power_w": 7.0},
    {"max_power_w": 6.0, "idle_power_w": None, "active_power_w": None},
    {"max_power_w": 4.5, "idle_power_w": None, "active_power_w": None},
    {"max_power_w": 0.05, "idle_power_w": 0.05, "active_power_w": None},
    {"max_power_w": 0.005, "idle_power_w": None, "active_power_w": None},
]


# --- the row-by-row implementation that ckprof.power.ssd replaced (commit e066529) ------------


def _ref_util_at(block: pd.DataFrame, devices: list[str], t_ns: np.ndarray) -> np.ndarray:
    out = np.full(len(t_ns), np.nan)
    if block.empty or len(t_ns) < 2:
        return out
    for dev in devices:
        g = block[block["device"] == dev].sort_values("t_ns")
        if len(g) < 2:
            continue
        ticks = np.interp(t_ns, g["t_ns"].to_numpy(dtype=float), g["io_ticks_ms"].to_numpy(dtype=float))
        d_ms = counter_delta(ticks[:-1], ticks[1:])
        util = np.clip(d_ms / (np.diff(t_ns) / 1e6) * 100, 0, 100)
        cur = out[1:]
        out[1:] = np.where(np.isnan(cur), util, np.fmax(cur, util))
    return out


def _ref_pm_interval(g: pd.DataFrame, i: int):
    if "pm_count" not in g or "pm_avg_power_w" not in g:
        return None
    n0, n1 = g.at[i - 1, "pm_count"], g.at[i, "pm_count"]
    a0, a1 = g.at[i - 1, "pm_avg_power_w"], g.at[i, "pm_avg_power_w"]
    if pd.isna(n0) or pd.isna(n1) or pd.isna(a0) or pd.isna(a1) or not n1 > n0:
        return None
    if g.at[i - 1, "pm_generation"] != g.at[i, "pm_generation"]:
        return None
    w = (float(a1) * float(n1) - float(a0) * float(n0)) / (float(n1) - float(n0))
    est = g.at[i, "pm_estimated"] if "pm_estimated" in g else None
    return w, "estimated" if (pd.notna(est) and bool(est)) else "derived"


def integrate_power(t_ns, watts, start_ns: int, end_ns: int) -> tuple[float, float]:
    """The trapezoid rule written out for one window, as ckprof.power.integrate did before it was
    vectorised (power_j_windows): the reference the package is compared with, to the last bit."""
    t = np.asarray(t_ns, dtype=np.int64)
    w = np.asarray(watts, dtype=float)
    ok = ~np.isnan(w)
    t, w = t[ok], w[ok]
    if len(t) < 2 or end_ns <= start_ns:
        return float("nan"), 0.0
    order = np.argsort(t, kind="stable")
    t, w = t[order], w[order]
    lo, hi = max(start_ns, int(t[0])), min(end_ns, int(t[-1]))
    if hi <= lo:
        return float("nan"), 0.0
    inner = (t > lo) & (t < hi)
    tt = np.concatenate(([lo], t[inner], [hi])).astype(float)
    ww = np.concatenate(([np.interp(lo, t, w)], w[inner], [np.interp(hi, t, w)]))
    return float(np.sum((ww[1:] + ww[:-1]) / 2 * np.diff(tt)) / 1e9), (hi - lo) / (end_ns - start_ns)


def reference_ssd_power(rec) -> pd.DataFrame:
    nv = rec.samples("nvme")
    empty = pd.DataFrame(
        columns=[
            "t_ns",
            "ctrl",
            "dt_s",
            "power_state",
            "util_pct",
            "power_w",
            "power_upper_w",
            "energy_j",
            "provenance",
            "power_source",
        ]
    )
    empty.attrs["columns"] = COLUMNS
    if nv.empty:
        return empty
    desc = rec.meta.get("collectors", {}).get("nvme", {}).get("describe", {}).get("controllers", {})
    block = rec.samples("block")
    frames = []
    answered = nv["temp_c"].notna() | nv["data_units_written"].notna()
    for ctrl, g in nv[answered].groupby("ctrl"):
        g = g.sort_values("t_ns").reset_index(drop=True)
        if len(g) < 2:
            continue
        info = desc.get(ctrl, {})
        table = info.get("power_states") or []
        t = g["t_ns"].to_numpy(dtype=np.int64)
        util = _ref_util_at(block, info.get("devices", []), t)
        ext = rec.samples(f"power_{ctrl}")
        rows = []
        for i in range(1, len(g)):
            ps = g.at[i, "power_state"]
            psd = table[int(ps)] if pd.notna(ps) and 0 <= int(ps) < len(table) else None
            upper = psd["max_power_w"] if psd else np.nan
            ipm = g.at[i, "ipm_w"] if "ipm_w" in g else np.nan
            pm = _ref_pm_interval(g, i)
            ext_j, cover = (
                integrate_power(ext["t_ns"], ext["power_w"], int(t[i - 1]), int(t[i]))
                if not ext.empty
                else (np.nan, 0.0)
            )
            if cover >= EXTERNAL_MIN_COVERAGE:
                p, prov, src = ext_j / ((t[i] - t[i - 1]) / 1e9), "measured", f"external:power_{ctrl}"
            elif pd.notna(ipm):
                p, prov, src = float(ipm), "measured", "nvme:interval_power_measurement"
            elif pm is not None:
                p, prov, src = pm[0], pm[1], "nvme:power_measurement_log"
            elif (
                psd
                and psd.get("idle_power_w") is not None
                and psd.get("active_power_w") is not None
                and not np.isnan(util[i])
            ):
                idle, active = psd["idle_power_w"], psd["active_power_w"]
                p = idle + (active - idle) * util[i] / 100
                prov, src = "estimated", "power_state_table:idle_active_util"
            elif psd:
                p, prov, src = psd["max_power_w"], "estimated", "power_state_table:max_power"
            else:
                p, prov, src = np.nan, "none", "no power-state table and no measurement"
            dt = (t[i] - t[i - 1]) / 1e9
            rows.append(
                {
                    "t_ns": int(t[i]),
                    "ctrl": ctrl,
                    "dt_s": dt,
                    "power_state": None if pd.isna(ps) else int(ps),
                    "util_pct": util[i],
                    "power_w": p,
                    "power_upper_w": upper,
                    "energy_j": p * dt,
                    "provenance": prov,
                    "power_source": src,
                }
            )
        frames.append(pd.DataFrame(rows))
    if not frames:
        return empty
    out = pd.concat(frames, ignore_index=True)
    out["t_s"] = (out["t_ns"] - rec.start_ns) / 1e9
    out.attrs["columns"] = COLUMNS
    return out


def reference_power_state_changes(rec) -> pd.DataFrame:
    nv = rec.samples("nvme")
    if nv.empty or "power_state" not in nv:
        return pd.DataFrame(columns=["t_ns", "ctrl", "from_state", "to_state"])
    rows = []
    for ctrl, g in nv[nv["power_state"].notna()].sort_values("t_ns").groupby("ctrl"):
        prev = None
        for t, ps in zip(g["t_ns"], g["power_state"].astype(int)):
            if prev is not None and ps != prev:
                rows.append({"t_ns": int(t), "ctrl": ctrl, "from_state": prev, "to_state": ps})
            prev = ps
    return pd.DataFrame(rows, columns=["t_ns", "ctrl", "from_state", "to_state"])


# --- a synthetic recording --------------------------------------------------------------------


def _masked(values: np.ndarray, null: np.ndarray) -> pa.Array:
    return pa.array(values, mask=null)


def synthetic_recording(
    path: str,
    n_ctrl: int = 32,
    seconds: int = 86_400,
    seed: int = 0,
    messy: bool = False,
    trace_s: int = 3600,
    chunk_s: int = 3600,
) -> str:
    """Write a recording under `path` and return it. `messy` (for tests): more of every odd case —
    null and out-of-range power states, failed polls, IPM gaps, PM log resets and EPF, counter
    wraps and resets, a controller that is not described, one with a single poll."""
    rng = np.random.default_rng(seed)
    rb = RecordingBuilder(path, start_ns=START_NS, wall_ns=0, duration_s=seconds, interval_s=1.0, command=["bench"])
    ctrls = [f"nvme{c}" for c in range(n_ctrl)]
    described = ctrls[:-1] if messy else ctrls  # messy: the last one has no describe
    states = POWER_STATES + ([{"max_power_w": 9.0, "idle_power_w": 2.0, "active_power_w": 8.0}] if messy else [])
    controllers = {
        c: {"devices": [f"{c}n1", f"{c}n2"] if messy else [f"{c}n1"], "power_states": states} for c in described
    }
    rb.collector("nvme", NVME_SCHEMA, describe={"controllers": controllers}).collector("block", BLOCK_SCHEMA)
    n_steps = seconds + 1
    base = np.arange(n_steps, dtype=np.int64) * S
    # per controller: its own poll jitter (the collector polls controllers in turn)
    jitter = rng.integers(0, 20_000_000, size=(n_ctrl, n_steps))
    t_ctrl = START_NS + base[None, :] + jitter + np.arange(n_ctrl)[:, None] * 100_000
    # power state: a random walk among operational states, a change every few minutes
    change = rng.random((n_ctrl, n_steps)) < (0.05 if messy else 1 / 240)
    ps = np.cumsum(change, axis=1) % (len(states) + (2 if messy else 0))  # messy: 2 states past the table
    busy = np.sin(base[None, :] / S / 600 + np.arange(n_ctrl)[:, None]) > 0.3  # checkpoint-like bursts
    ticks_per_s = np.where(busy, rng.integers(300, 1000, size=busy.shape), rng.integers(0, 20, size=busy.shape))
    ipm_ctrl = np.arange(n_ctrl) < n_ctrl // 4
    pm_ctrl = (np.arange(n_ctrl) >= n_ctrl // 4) & (np.arange(n_ctrl) < n_ctrl // 2)
    watts = 3.0 + 4.0 * ticks_per_s / 1000
    pm_gen_len = 100 if messy else 6 * 3600
    pm_gen = (np.arange(n_steps) // pm_gen_len) % 256  # PMGN, +1 at each Start
    pm_new = rng.integers(0, 3 if messy else 2, size=(n_ctrl, n_steps))  # measurements per poll
    pm_count = np.zeros_like(pm_new)
    pm_sum = np.zeros(pm_new.shape)
    for g0 in range(0, n_steps, pm_gen_len):  # running count and sum, restarted by each new Start
        idx = slice(g0, g0 + pm_gen_len)
        pm_new[:, g0] = 0
        pm_count[:, idx] = 1 + np.cumsum(pm_new[:, idx], axis=1)
        pm_sum[:, idx] = watts[:, g0][:, None] + np.cumsum(pm_new[:, idx] * watts[:, idx], axis=1)
    pm_avg = np.round(pm_sum / pm_count, 2)  # AIPWR at 0.01 W
    failed = rng.random((n_ctrl, n_steps)) < (0.05 if messy else 0.001)
    ps_null = rng.random((n_ctrl, n_steps)) < (0.05 if messy else 0.0)
    ipm_null = ~ipm_ctrl[:, None] | (rng.random((n_ctrl, n_steps)) < (0.2 if messy else 0.0))
    pm_null = ~pm_ctrl[:, None] | (rng.random((n_ctrl, n_steps)) < (0.1 if messy else 0.0))
    est = rng.random((n_ctrl, n_steps)) < (0.3 if messy else 0.0)
    est_null = pm_null | (rng.random((n_ctrl, n_steps)) < (0.1 if messy else 0.0))
    if messy:  # one controller polled once
        failed[-2, 1:] = True
    busy_ms = np.cumsum(ticks_per_s, axis=1).astype(np.int64)
    for s0 in range(0, n_steps, chunk_s):
        sl = slice(s0, min(n_steps, s0 + chunk_s))
        m = sl.stop - sl.start
        order = np.argsort(t_ctrl[:, sl].T.ravel(), kind="stable")  # time-major, as written

        def flat(a, sl=sl, order=order):  # time-major, as written
            return a[:, sl].T.ravel()[order]

        fl = flat(failed)
        cols = {
            "t_ns": flat(t_ctrl),
            "ctrl": np.tile(np.array(ctrls), m)[order],
            "temp_c": _masked(45.0 + flat(busy.astype(float)) * 20, fl),
            "data_units_written": _masked(flat(busy_ms) // 7, fl),
            "power_state": _masked(flat(ps).astype(np.int64), flat(ps_null)),
            "ipm_w": _masked(flat(watts + 0.25), flat(ipm_null) | fl),
            "pm_count": _masked(flat(pm_count).astype(np.int64), flat(pm_null) | fl),
            "pm_avg_power_w": _masked(flat(pm_avg), flat(pm_null) | fl),
            "pm_generation": _masked(
                np.broadcast_to(pm_gen, (n_ctrl, n_steps))[:, sl].T.ravel()[order].astype(np.int64), flat(pm_null) | fl
            ),
            "pm_enabled": _masked(np.ones(m * n_ctrl, dtype=bool), flat(pm_null) | fl),
            "pm_estimated": _masked(flat(est), flat(est_null) | fl),
            "error": pa.array(np.where(fl, "nvme smart-log: timed out after 5 s", None)),
        }
        rb.table("nvme", cols)
        # block: one row a second per device (the block collector's own clock), io_ticks cumulative
        devs = [d for c in described for d in controllers[c]["devices"]]
        nd = len(devs)
        bt = START_NS + base[sl] + 500_000_000
        ticks = np.repeat(busy_ms[: len(described), sl], nd // len(described), axis=0).astype(np.int64)
        if messy:  # the second device of each controller: a 32-bit wrap; every 7th device reset
            ticks[1::2] = (ticks[1::2] + 2**32 - 50_000) % 2**32
            ticks[::7] = np.where(np.arange(sl.start, sl.stop) > n_steps // 2, ticks[::7] // 3, ticks[::7])
        bcols = {
            "t_ns": np.repeat(bt, nd),
            "device": np.tile(np.array(devs), m),
            "io_ticks_ms": ticks.T.ravel(),
            "read_sectors": np.zeros(m * nd, dtype=np.int64),
            "write_sectors": (ticks.T.ravel() * 800),
        }
        rb.table("block", bcols)
        rb.write_parts()  # this chunk on disk: memory holds one
    # an imported 10 Hz analyzer trace for nvme0 (clock-aligned), irregular in messy mode, with gaps
    n_tr = trace_s * 10
    tt = START_NS + np.arange(n_tr, dtype=np.int64) * (S // 10)
    if messy:
        tt = np.sort(tt + rng.integers(0, S // 20, size=n_tr))
        keep = rng.random(n_tr) > 0.1
        keep[n_tr // 3 : n_tr // 3 + 40] = False  # a 4 s gap: intervals the trace does not cover
        tt = tt[keep]
    tw = 4.0 + rng.random(len(tt)) * 3
    if messy:
        tw[rng.random(len(tt)) < 0.05] = np.nan
    trace = {"t_ns": tt, "power_w": tw, "wall_ns": np.zeros(len(tt), dtype=np.int64)}
    rb.collector("power_nvme0", POWER_SCHEMA, period_s=0.1).table("power_nvme0", trace)
    rb.finish()
    return path


def _timed(fn, *a):
    t0 = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--controllers", type=int, default=32)
    ap.add_argument("--no-old", action="store_true", help="time the vectorised version only")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ckprof-bench-ssd-")
    try:
        t0 = time.perf_counter()
        path = synthetic_recording(os.path.join(tmp, "rec"), args.controllers, int(args.hours * 3600))
        print(f"generated {args.hours:g} h × {args.controllers} controllers in {time.perf_counter() - t0:.1f} s")
        rec = ckprof.load(path)
        _, t_read = _timed(rec.samples, "nvme")
        print(f"reading every nvme column (what the row-by-row version starts with): {t_read:.2f} s")
        new, t_new = _timed(ssd_power, rec)
        print(
            f"ssd_power (vectorised): {t_new:.2f} s for {len(new):,} intervals "
            f"({', '.join(f'{k} {v:,}' for k, v in new['power_source'].value_counts().items())})"
        )
        ch, t_ch = _timed(power_state_changes, rec)
        print(f"power_state_changes (vectorised): {t_ch:.2f} s, {len(ch):,} changes")
        if args.no_old:
            return
        old, t_old = _timed(reference_ssd_power, rec)
        print(f"ssd_power (row by row, before): {t_old:.2f} s   → {t_old / t_new:.0f}× faster")
        och, t_och = _timed(reference_power_state_changes, rec)
        print(f"power_state_changes (row by row, before): {t_och:.2f} s   → {t_och / max(t_ch, 1e-9):.0f}× faster")
        same = new.equals(old) and ch.equals(och)
        print(f"same frames: {same}")
        if not same:
            sys.exit("the two implementations disagree")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
