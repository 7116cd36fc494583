"""SSD power and energy per NVMe controller, from a recording: measured where the drive measured
it, otherwise estimated from its power-state table. Nothing here touches hardware.

Per interval between two NVMe SMART samples, in order of preference:
  0. measured  `external:power_<ctrl>`: a lab power analyzer's trace imported with
     `ckprof import-power REC trace.csv --device nvme0` (samples/power_nvme0), integrated over
     the interval (ckprof.power.integrate.power_j_windows) where it covers it;
  1. measured  `nvme:interval_power_measurement`: the drive's own Interval Power Measurement
     (TP4199, "NVMe 2.1" in the issue; SMART log bytes 243:240, its last 1 s), stored as `ipm_w`;
  1b. derived  `nvme:power_measurement_log`: the drive's Power Measurement log (LID 25h) gives the
     mean (AIPWR, `pm_avg_power_w`) and number (PMC, `pm_count`) of its interval measurements since
     measurement started, so the mean over the measurements that fell in this interval is
     (A₂·N₂ − A₁·N₁) / (N₂ − N₁), within one generation (`pm_generation`) only. AIPWR is rounded
     to its scale (0.01 W or 0.0001 W), so one interval's figure can be off by up to
     scale × N₂ / (N₂ − N₁); summed over a window the roundings telescope away, so energies over
     many polls are good where single intervals are not. 'estimated' where the drive sets its
     Estimated Power Flag (`pm_estimated`);
  2. estimated `power_state_table:idle_active_util`: when the current power state's descriptor
     gives Idle Power and Active Power (NVMe Base 2.0, Fig. 276 IDLP/ACTP), idle + (active − idle)
     × the device utilisation in the interval (Δio_ticks / Δt of the block devices behind the
     controller, the busiest one; iostat's %util);
  3. estimated `power_state_table:max_power`: otherwise the current power state's Max Power
     (MP × MXPS scale): an upper bound, not a typical figure.
`power_upper_w` is always the state's Max Power where the table has it. Energy is power × the
interval; its provenance is that of the power it comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ckprof.recording.counters import counter_delta

from .integrate import power_j_windows

if TYPE_CHECKING:
    from ckprof.recording.reader import Recording

EXTERNAL_MIN_COVERAGE = 0.9  # an imported trace stands for an interval it spans at least this much of

COLUMNS = {
    "power_w": {"unit": "W", "provenance": "see column provenance", "doc": "SSD power in the interval"},
    "power_upper_w": {"unit": "W", "provenance": "estimated", "doc": "Max Power of the current power state"},
    "energy_j": {"unit": "J", "provenance": "see column provenance", "doc": "power_w × dt_s"},
    "util_pct": {"unit": "%", "provenance": "derived", "doc": "busiest block device behind the controller"},
    "dt_s": {"unit": "s", "provenance": "derived", "doc": "interval length"},
    "provenance": {"unit": "", "provenance": "", "doc": "measured | derived | estimated"},
    "power_source": {"unit": "", "provenance": "", "doc": "where power_w comes from"},
}


_EMPTY_COLUMNS = [
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
_NVME_COLUMNS = [
    "ctrl",
    "temp_c",
    "data_units_written",
    "power_state",
    "ipm_w",
    "pm_count",
    "pm_avg_power_w",
    "pm_generation",
    "pm_estimated",
]


def _float(df: pd.DataFrame, name: str, n: int) -> np.ndarray:
    """A column as float64 with NaN for nulls (all NaN when the recording has no such column)."""
    if name not in df:
        return np.full(n, np.nan)
    return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _util_at(by_device: dict[str, tuple[np.ndarray, np.ndarray]], devices: list[str], t_ns: np.ndarray) -> np.ndarray:
    """%util of the busiest of `devices` over each interval t_ns[i-1]..t_ns[i] (NaN for the first).
    The busy-time counter is interpolated linearly at the SMART poll times (the block collector
    polls on its own clock), its deltas are wrap-safe (ckprof.recording.counters)."""
    out = np.full(len(t_ns), np.nan)
    if len(t_ns) < 2:
        return out
    for dev in devices:
        g = by_device.get(dev)
        if g is None or len(g[0]) < 2:
            continue
        ticks = np.interp(t_ns, g[0], g[1])
        d_ms = counter_delta(ticks[:-1], ticks[1:])
        util = np.clip(d_ms / (np.diff(t_ns) / 1e6) * 100, 0, 100)
        cur = out[1:]
        out[1:] = np.where(np.isnan(cur), util, np.fmax(cur, util))
    return out


def _block_by_device(block: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """device → (t_ns, io_ticks_ms) as float arrays in time order, split once for all controllers."""
    if block.empty:
        return {}
    block = block[["t_ns", "device", "io_ticks_ms"]]
    return {
        str(dev): (g["t_ns"].to_numpy(dtype=float), g["io_ticks_ms"].to_numpy(dtype=float))
        for dev, g in ((d, g.sort_values("t_ns")) for d, g in block.groupby("device", observed=True))
    }


def _pm_intervals(g: pd.DataFrame, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, W, estimated) per interval i-1..i (length n-1) from the Power Measurement log's running
    mean: (A₂·N₂ − A₁·N₁) / (N₂ − N₁) where the count rose within one generation."""
    if "pm_count" not in g or "pm_avg_power_w" not in g:
        return np.zeros(n - 1, bool), np.full(n - 1, np.nan), np.zeros(n - 1, bool)
    cnt, avg, gen = _float(g, "pm_count", n), _float(g, "pm_avg_power_w", n), _float(g, "pm_generation", n)
    n0, n1, a0, a1 = cnt[:-1], cnt[1:], avg[:-1], avg[1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        # NaN compares False: a missing value or a missing generation is no figure
        ok = (n1 > n0) & ~np.isnan(a0) & ~np.isnan(a1) & (gen[:-1] == gen[1:])
        w = (a1 * n1 - a0 * n0) / (n1 - n0)
    if "pm_estimated" in g:
        e = g["pm_estimated"]
        est = (e.notna() & e.where(e.notna(), False).astype(bool)).to_numpy(dtype=bool)[1:]
    else:
        est = np.zeros(n - 1, bool)
    return ok, w, est


def _table_arrays(table: list[dict[str, Any] | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max, Idle and Active Power (W, NaN where the descriptor has none) by power state."""

    def col(key: str) -> np.ndarray:
        return np.array(
            [np.nan if not psd or psd.get(key) is None else float(psd[key]) for psd in table] + [np.nan]
        )  # one past the end: the slot for states the table does not have

    return col("max_power_w"), col("idle_power_w"), col("active_power_w")


def _controller(
    ctrl: str,
    g: pd.DataFrame,
    info: dict[str, Any],
    by_device: dict[str, tuple[np.ndarray, np.ndarray]],
    ext: pd.DataFrame,
) -> pd.DataFrame:
    """The intervals of one controller's answered polls (time order, at least 2)."""
    n = len(g)
    t = g["t_ns"].to_numpy(dtype=np.int64)
    table = info.get("power_states") or []
    util = _util_at(by_device, info.get("devices", []), t)[1:]
    dt = (t[1:] - t[:-1]) / 1e9
    # The state read at the end of the interval stands for it (1 Hz: a state held < 1 s between
    # polls is not seen; the OCP power-state change counter, when present, says so).
    ps = _float(g, "power_state", n)[1:]
    in_table = ~np.isnan(ps) & (ps >= 0) & (ps < len(table))
    slot = np.where(in_table, np.nan_to_num(ps), len(table)).astype(np.int64)
    # `if psd` in the descriptor's sense: an empty descriptor is no descriptor
    has_psd = in_table & np.array([bool(psd) for psd in table] + [False])[slot]
    max_w, idle_w, active_w = (x[slot] for x in _table_arrays(table))
    upper = np.where(has_psd, max_w, np.nan)
    ipm = _float(g, "ipm_w", n)[1:]
    pm_ok, pm_w, pm_est = _pm_intervals(g, n)
    ext_j, cover = (
        power_j_windows(
            ext["t_ns"].to_numpy(dtype=np.int64), ext["power_w"].to_numpy(dtype=float, na_value=np.nan), t[:-1], t[1:]
        )
        if not ext.empty
        else (np.full(n - 1, np.nan), np.zeros(n - 1))
    )

    use_ext = cover >= EXTERNAL_MIN_COVERAGE
    use_ipm = ~use_ext & ~np.isnan(ipm)
    use_pm = ~use_ext & ~use_ipm & pm_ok
    rest = ~use_ext & ~use_ipm & ~use_pm & has_psd
    use_ia = rest & ~np.isnan(idle_w) & ~np.isnan(active_w) & ~np.isnan(util)
    use_max = rest & ~use_ia
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.select(
            [use_ext, use_ipm, use_pm, use_ia, use_max],
            [ext_j / dt, ipm, pm_w, idle_w + (active_w - idle_w) * util / 100, max_w],
            np.nan,
        )
    prov = np.select(
        [use_ext | use_ipm, use_pm & pm_est, use_pm, use_ia | use_max],
        ["measured", "estimated", "derived", "estimated"],
        "none",
    )
    src = np.select(
        [use_ext, use_ipm, use_pm, use_ia, use_max],
        [
            f"external:power_{ctrl}",
            "nvme:interval_power_measurement",
            "nvme:power_measurement_log",
            "power_state_table:idle_active_util",
            "power_state_table:max_power",
        ],
        "no power-state table and no measurement",
    )
    state = pd.Series(ps)
    if not np.isnan(ps).any():
        state = state.astype(np.int64)
    return pd.DataFrame(
        {
            "t_ns": t[1:],
            "ctrl": ctrl,
            "dt_s": dt,
            "power_state": state,
            "util_pct": util,
            "power_w": p,
            "power_upper_w": upper,
            "energy_j": p * dt,
            "provenance": pd.array(prov, dtype="str"),
            "power_source": pd.array(src, dtype="str"),
        }
    )


def ssd_power(rec: Recording, block: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per interval between NVMe samples per controller: power_w with its provenance and
    source, power_upper_w, util_pct, energy_j. Column units in `.attrs["columns"]`. `block`: the
    block devices' busy time (t_ns, device, io_ticks_ms) when the caller has read it already
    (the analysis' binned counters), else read from the recording. Energy over a window is the
    engine's (ckprof.power.energy.energy_j(rec, "nvme0", start_ns, end_ns)).

    Vectorised per controller (a day at 1 Hz × 32 controllers is 2.8 M intervals): each column is
    one numpy expression over the controller's polls; benchmarks/ssd_power.py times it."""
    nv = rec.samples("nvme", columns=_NVME_COLUMNS)  # the columns used, labels as categoricals
    empty = pd.DataFrame(columns=_EMPTY_COLUMNS)
    empty.attrs["columns"] = COLUMNS
    if nv.empty:
        return empty
    desc = rec.meta.get("collectors", {}).get("nvme", {}).get("describe", {}).get("controllers", {})
    if block is None:
        block = rec.samples("block", columns=["device", "io_ticks_ms"])
    by_device = _block_by_device(block)
    frames = []
    answered = nv["temp_c"].notna() | nv["data_units_written"].notna()  # not the rows of failed polls
    nv = nv[answered]
    rows = nv.groupby("ctrl", observed=True, sort=False).indices
    for ctrl in sorted(rows, key=str):  # controllers in name order
        if len(rows[ctrl]) < 2:
            continue
        g = nv.iloc[rows[ctrl]].sort_values("t_ns").reset_index(drop=True)
        frames.append(_controller(str(ctrl), g, desc.get(ctrl, {}), by_device, rec.samples(f"power_{ctrl}")))
    if not frames:
        return empty
    out = pd.concat(frames, ignore_index=True)
    out["t_s"] = (out["t_ns"] - rec.start_ns) / 1e9
    out.attrs["columns"] = COLUMNS
    return out


def power_state_changes(rec: Recording) -> pd.DataFrame:
    """Each change of an NVMe controller's power state seen by the 1 Hz polls: t_ns, ctrl, from, to."""
    cols = ["t_ns", "ctrl", "from_state", "to_state"]
    nv = rec.samples("nvme", columns=["ctrl", "power_state"])
    if nv.empty or "power_state" not in nv or "ctrl" not in nv:
        return pd.DataFrame(columns=cols)
    nv = nv[nv["power_state"].notna() & nv["ctrl"].notna()].sort_values("t_ns")
    ctrl = nv["ctrl"].astype("category")
    names = np.asarray(ctrl.cat.categories, dtype=object)
    rank = np.argsort(np.argsort(names.astype(str), kind="stable"))  # category → place in name order
    key = rank[ctrl.cat.codes.to_numpy()]
    order = np.argsort(key, kind="stable")  # by controller, then time
    key = key[order]
    ps = nv["power_state"].to_numpy()[order].astype(int)
    changed = np.zeros(len(ps), bool)
    changed[1:] = (key[1:] == key[:-1]) & (ps[1:] != ps[:-1])
    if not changed.any():
        return pd.DataFrame(columns=cols)
    at = np.flatnonzero(changed)
    return pd.DataFrame(
        {
            "t_ns": nv["t_ns"].to_numpy(dtype=np.int64)[order][at],
            "ctrl": pd.array(names[ctrl.cat.codes.to_numpy()[order][at]].astype(str), dtype="str"),
            "from_state": ps[at - 1],
            "to_state": ps[at],
        },
        columns=cols,
    )
