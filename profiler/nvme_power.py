"""SSD power and energy per NVMe controller, from a recording: measured where the drive measured
it, otherwise estimated from its power-state table. Nothing here touches hardware.

Per interval between two NVMe SMART samples, in order of preference:
  0. measured  `external:power_<ctrl>`: a lab power analyzer's trace imported with
     `ckprof import-power REC trace.csv --device nvme0` (samples/power_nvme0), integrated over
     the interval (ckprof.energy.integrate_power) where it covers it;
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

import numpy as np
import pandas as pd

from ckprof.counters import counter_delta
from ckprof.energy import integrate_power

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


def _util_at(block: pd.DataFrame, devices: list[str], t_ns: np.ndarray) -> np.ndarray:
    """%util of the busiest of `devices` over each interval t_ns[i-1]..t_ns[i] (NaN for the first)."""
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


def _pm_interval(g: pd.DataFrame, i: int):
    """(W, provenance) over rows i-1..i from the Power Measurement log's running mean, or None."""
    if "pm_count" not in g or "pm_avg_power_w" not in g:
        return None
    n0, n1 = g.at[i - 1, "pm_count"], g.at[i, "pm_count"]
    a0, a1 = g.at[i - 1, "pm_avg_power_w"], g.at[i, "pm_avg_power_w"]
    if pd.isna(n0) or pd.isna(n1) or pd.isna(a0) or pd.isna(a1) or not n1 > n0:
        return None  # nothing measured in between, or a new Start reset the count
    if g.at[i - 1, "pm_generation"] != g.at[i, "pm_generation"]:
        return None
    w = (float(a1) * float(n1) - float(a0) * float(n0)) / (float(n1) - float(n0))
    est = g.at[i, "pm_estimated"] if "pm_estimated" in g else None
    return w, "estimated" if (pd.notna(est) and bool(est)) else "derived"


def ssd_power(rec) -> pd.DataFrame:
    """One row per interval between NVMe samples per controller: power_w with its provenance and
    source, power_upper_w, util_pct, energy_j. Column units in `.attrs["columns"]`."""
    nv = rec.samples("nvme")
    empty = pd.DataFrame(columns=["t_ns", "ctrl", "dt_s", "power_state", "util_pct", "power_w",
                                  "power_upper_w", "energy_j", "provenance", "power_source"])
    empty.attrs["columns"] = COLUMNS
    if nv.empty:
        return empty
    desc = rec.meta.get("collectors", {}).get("nvme", {}).get("describe", {}).get("controllers", {})
    block = rec.samples("block")
    frames = []
    answered = nv["temp_c"].notna() | nv["data_units_written"].notna()  # not the rows of failed polls
    for ctrl, g in nv[answered].groupby("ctrl"):
        g = g.sort_values("t_ns").reset_index(drop=True)
        if len(g) < 2:
            continue
        info = desc.get(ctrl, {})
        table = info.get("power_states") or []
        t = g["t_ns"].to_numpy(dtype=np.int64)
        util = _util_at(block, info.get("devices", []), t)
        ext = rec.samples(f"power_{ctrl}")
        rows = []
        for i in range(1, len(g)):
            # The state read at the end of the interval stands for it (1 Hz: a state held < 1 s
            # between polls is not seen; the OCP power-state change counter, when present, says so).
            ps = g.at[i, "power_state"]
            psd = table[int(ps)] if pd.notna(ps) and 0 <= int(ps) < len(table) else None
            upper = psd["max_power_w"] if psd else np.nan
            ipm = g.at[i, "ipm_w"] if "ipm_w" in g else np.nan
            pm = _pm_interval(g, i)
            ext_j, cover = (integrate_power(ext["t_ns"], ext["power_w"], int(t[i - 1]), int(t[i]))
                            if not ext.empty else (np.nan, 0.0))
            if cover >= EXTERNAL_MIN_COVERAGE:
                p, prov, src = ext_j / ((t[i] - t[i - 1]) / 1e9), "measured", f"external:power_{ctrl}"
            elif pd.notna(ipm):
                p, prov, src = float(ipm), "measured", "nvme:interval_power_measurement"
            elif pm is not None:
                p, prov, src = pm[0], pm[1], "nvme:power_measurement_log"
            elif psd and psd.get("idle_power_w") is not None and psd.get("active_power_w") is not None \
                    and not np.isnan(util[i]):
                idle, active = psd["idle_power_w"], psd["active_power_w"]
                p = idle + (active - idle) * util[i] / 100
                prov, src = "estimated", "power_state_table:idle_active_util"
            elif psd:
                p, prov, src = psd["max_power_w"], "estimated", "power_state_table:max_power"
            else:
                p, prov, src = np.nan, "none", "no power-state table and no measurement"
            dt = (t[i] - t[i - 1]) / 1e9
            rows.append({"t_ns": int(t[i]), "ctrl": ctrl, "dt_s": dt,
                         "power_state": None if pd.isna(ps) else int(ps), "util_pct": util[i],
                         "power_w": p, "power_upper_w": upper, "energy_j": p * dt,
                         "provenance": prov, "power_source": src})
        frames.append(pd.DataFrame(rows))
    if not frames:
        return empty
    out = pd.concat(frames, ignore_index=True)
    out["t_s"] = (out["t_ns"] - rec.start_ns) / 1e9
    out.attrs["columns"] = COLUMNS
    return out


def ssd_energy_j(rec, start_ns: int | None = None, end_ns: int | None = None) -> pd.DataFrame:
    """Energy per controller between two times (whole intervals whose end falls inside), with the
    provenance of every interval that went into it ('measured', 'derived', 'estimated' or 'mixed')."""
    p = ssd_power(rec)
    if p.empty:
        return pd.DataFrame(columns=["ctrl", "energy_j", "seconds", "provenance", "power_source"])
    if start_ns is not None:
        p = p[p["t_ns"] > start_ns]
    if end_ns is not None:
        p = p[p["t_ns"] <= end_ns]
    rows = []
    for ctrl, g in p.groupby("ctrl"):
        provs = sorted(set(g["provenance"]))
        rows.append({"ctrl": ctrl, "energy_j": g["energy_j"].sum(), "seconds": g["dt_s"].sum(),
                     "provenance": provs[0] if len(provs) == 1 else "mixed",
                     "power_source": ", ".join(sorted(set(g["power_source"])))})
    return pd.DataFrame(rows)


def power_state_changes(rec) -> pd.DataFrame:
    """Each change of an NVMe controller's power state seen by the 1 Hz polls: t_ns, ctrl, from, to."""
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
