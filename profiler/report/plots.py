"""The report's figures (matplotlib, Agg): each returns PNG bytes, or None when there is no data.

Every axis names its unit, and every title says whether the figure is measured or derived.
"""

from __future__ import annotations

import io

import numpy as np

from ckprof.units import GIB

MAX_POINTS = 4000


def _mpl():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _mpl().close(fig)
    return buf.getvalue()


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_POINTS points: bin means (peaks stay visible in the max-preserving bins below)."""
    n = len(x)
    if n <= MAX_POINTS:
        return x, y
    k = int(np.ceil(n / MAX_POINTS))
    m = n // k * k
    return x[:m].reshape(-1, k).mean(1), np.nanmax(y[:m].reshape(-1, k), axis=1)


def _shade(ax, rows):
    for r in rows:
        if r["start_s"] is None:
            continue
        end = r["app_end_s"] if r["app_end_s"] is not None else r["start_s"]
        ax.axvspan(r["start_s"], end, color="tab:orange", alpha=0.25, lw=0)
        if r["durable_end_s"] is not None and r["durable_end_s"] > end:
            ax.axvspan(end, r["durable_end_s"], color="tab:orange", alpha=0.10, lw=0)


def timeline(an, max_devices: int = 8) -> bytes | None:
    """Write bandwidth, queue depth, temperature, power and GPU utilisation, windows shaded."""
    plt = _mpl()
    tl, rows = an.timeline, an.report["checkpoints"]
    panels = []
    devs = sorted(tl.devices, key=lambda d: -tl.devices[d]["write_bytes"].sum())[:max_devices]
    if devs:
        panels.append(("bw", "write bandwidth, GiB/s (measured, /proc/diskstats)"))
        panels.append(("qd", "queue depth, aqu-sz (derived from /proc/diskstats as iostat does)"))
    if an.ctx.temps:
        panels.append(("temp", "temperature, °C (measured)"))
    if "power" in an.plot:
        panels.append(("power", "power, W (measured or estimated: see legend)"))
    if an.ctx.gpu_idle:
        panels.append(("gpu", "GPU idle, % of time (derived: docs/power.md)"))
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 2.1 * len(panels) + 0.6), sharex=True, squeeze=False)
    axes = axes[:, 0]
    t0 = tl.start_ns
    for ax, (kind, label) in zip(axes, panels):
        if kind in ("bw", "qd"):
            for d in devs:
                df = tl.devices[d]
                x = (df["t_ns"].to_numpy() - t0) / 1e9
                y = df["write_bytes_per_s"].to_numpy() / GIB if kind == "bw" else df["aqu_sz"].to_numpy()
                ax.plot(*_thin(x, y), lw=0.9, label=d)
            if kind == "bw" and len(tl.devices) > 1 and tl.total is not None:
                x = (tl.total["t_ns"].to_numpy() - t0) / 1e9
                ax.plot(
                    *_thin(x, tl.total["write_bytes_per_s"].to_numpy() / GIB),
                    lw=1.2,
                    color="k",
                    label=f"all {len(tl.devices)} devices",
                )
        elif kind == "temp":
            for t in an.ctx.temps[:max_devices]:
                ax.plot(*_thin((t.t_ns - t0) / 1e9, t.values), lw=0.9, label=f"{t.name} ({t.provenance})")
        elif kind == "power":
            p = an.plot["power"]
            provs = {}
            for s in an.ctx.sources:
                provs.setdefault(s.component, set()).add(s.provenance)
            for c in [c for c in p.columns if c.endswith("_w")]:
                comp = c[:-2]
                ax.plot(
                    *_thin(p["t_s"].to_numpy(), p[c].to_numpy()),
                    lw=0.9,
                    label=f"{comp} ({'/'.join(sorted(provs.get(comp, [])))})",
                )
        elif kind == "gpu":
            for name, (t, f) in list(an.ctx.gpu_idle.items())[:max_devices]:
                ax.plot(*_thin((t - t0) / 1e9, f * 100), lw=0.9, label=name)
        _shade(ax, rows)
        ax.set_title(label, fontsize=8, loc="left")
        ax.set_ylabel(label.split(" (")[0].split(" ")[-1], fontsize=8)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right", ncol=2)
    axes[-1].set_xlabel("time since recording start (s)")
    fig.suptitle("Timeline — checkpoint windows shaded (dark: save running; light: until durable)", fontsize=10)
    return _png(fig)


def checkpoint_bars(an) -> bytes | None:
    """Per-checkpoint duration (derived) and energy by component (provenance in the legend)."""
    rows = an.report["checkpoints"]
    if not rows:
        return None
    plt = _mpl()
    has_energy = any(r["energy"] for r in rows)
    fig, axes = plt.subplots(1, 2 if has_energy else 1, figsize=(11 if has_energy else 6, 3.2), squeeze=False)
    x = np.arange(len(rows))
    labels = [str(r["step"]) if r["step"] is not None else str(i + 1) for i, r in enumerate(rows)]
    ax = axes[0, 0]
    dur = [r["duration_s"] or 0 for r in rows]
    durable = [(r["durable_duration_s"] or 0) - (r["duration_s"] or 0) for r in rows]
    ax.bar(x, dur, color="tab:blue", label="save call (derived)")
    ax.bar(x, np.clip(durable, 0, None), bottom=dur, color="tab:blue", alpha=0.35, label="until durable (derived)")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_xlabel("checkpoint (step)")
    ax.set_ylabel("seconds")
    ax.set_title("Duration per checkpoint (s, derived)")
    ax.legend(fontsize=7)
    if has_energy:
        ax = axes[0, 1]
        comps = sorted({c for r in rows for c in r["energy"]})
        bottom = np.zeros(len(rows))
        for c in comps:
            v = np.array([r["energy"].get(c, {}).get("energy_j") or 0 for r in rows])
            prov = sorted({r["energy"][c]["provenance"] for r in rows if c in r["energy"]})
            ax.bar(x, v, bottom=bottom, label=f"{c} ({'/'.join(prov)})")
            bottom += v
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_xlabel("checkpoint (step)")
        ax.set_ylabel("joules")
        ax.set_title("Energy per checkpoint by component (J)")
        ax.legend(fontsize=7)
    return _png(fig)


def temp_vs_bandwidth(an) -> bytes | None:
    pts = an.plot.get("temp_vs_bw")
    if pts is None or len(pts) == 0:
        return None
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.scatter(pts["temp_c"], pts["write_gib_per_s"], s=4, alpha=0.4)
    for o in an.report["throttling"]["onsets"][:1]:
        if o["temp_c"] is not None:
            ax.axvline(o["temp_c"], color="tab:red", ls="--", label=f"throttling began ({o['temp_c']:.1f} °C)")
            ax.legend(fontsize=7)
    ax.set_xlabel("hottest SSD temperature (°C, measured)")
    ax.set_ylabel("write GiB/s, all devices (measured)")
    ax.set_title("Temperature vs write bandwidth")
    ax.grid(alpha=0.3)
    return _png(fig)


def all_plots(an) -> dict[str, bytes]:
    out = {}
    for name, fn in (
        ("timeline", timeline),
        ("checkpoints", checkpoint_bars),
        ("temp_vs_bandwidth", temp_vs_bandwidth),
    ):
        png = fn(an)
        if png:
            out[name] = png
    return out
