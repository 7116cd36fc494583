"""The job report's figures: each node's time per checkpoint (derived), the stall and the slowest
node; the whole job's device writes and reads over time (analysis/job_throughput.py)."""

from __future__ import annotations

import numpy as np

from ckprof.analysis.job_model import JobCheckpoint, JobReport
from ckprof.units import GIB

from .plots import fig_png, pyplot_module

MAX_LEGEND_NODES = 10


def _seconds(c: JobCheckpoint, host: str) -> float:
    """A node's time for the checkpoint; NaN where it took no part or never ended."""
    n = c.per_host.get(host)
    return np.nan if n is None or n.seconds is None else n.seconds


def node_durations(rep: JobReport) -> bytes | None:
    cps = [c for c in rep.job.checkpoints if c.per_host]
    if not cps:
        return None
    plt = pyplot_module()
    hosts = rep.job.hosts
    fig, ax = plt.subplots(figsize=(min(4 + 0.5 * len(cps), 14), 3.8))
    x = np.arange(len(cps))
    legend = len(hosts) <= MAX_LEGEND_NODES
    for i, h in enumerate(hosts):
        ys = np.array([_seconds(c, h) for c in cps], dtype=float)
        xs = x + (0 if legend else (i / max(len(hosts) - 1, 1) - 0.5) * 0.3)  # spread many nodes out
        ax.plot(
            xs,
            ys,
            "o",
            ms=5 if legend else 3,
            alpha=0.8 if legend else 0.5,
            color=None if legend else "tab:blue",
            label=h if legend else None,
        )
    stall = np.array([c.stall_s if c.stall_s is not None else np.nan for c in cps], dtype=float)
    ax.plot(x, stall, "k_", ms=18, mew=2, label="job stall (first start → last end)")
    for xi, c in zip(x, cps):
        if c.slowest_host and c.hosts > 1:
            ax.annotate(
                str(c.slowest_host),
                (xi, c.slowest_host_s),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color="tab:red",
            )
    ax.set_xticks(x, [f"{c.kind} {c.step}" for c in cps], fontsize=7, rotation=45 if len(cps) > 8 else 0)
    ax.set_xlabel("checkpoint (kind, step)")
    ax.set_ylabel("seconds")
    top = np.nanmax(np.append(stall, 0.0))
    ax.set_ylim(0, top * 1.15 if top > 0 else None)  # room for the slowest nodes' names
    ax.set_title(f"Each node's time per checkpoint (s, derived; {len(hosts)} nodes, slowest named)", fontsize=9)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        ax.legend(fontsize=7, loc="lower right", framealpha=0.9)
    return fig_png(fig)


def job_throughput(rep: JobReport) -> bytes | None:
    tp = rep.job.throughput
    if not tp:
        return None
    plt = pyplot_module()
    bin_s = tp.bin_s
    t0 = (tp.start_wall_ns - rep.job.start_wall_ns) / 1e9
    x = t0 + bin_s * np.arange(len(tp.write_bytes) + 1)
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for series, label, color in ((tp.write_bytes, "write", "tab:red"), (tp.read_bytes, "read", "tab:blue")):
        y = np.asarray(series, dtype=float) / bin_s / GIB
        ax.stairs(y, x, label=f"{label} (all {tp.hosts} nodes)", color=color)
    for c in rep.job.checkpoints:  # the stalls, where the job waited
        if c.stall_s is not None:
            a = (c.start_wall_ns - rep.job.start_wall_ns) / 1e9
            ax.axvspan(a, a + c.stall_s, color="0.85", zorder=0)
    ax.set_xlabel("seconds since the job's first start (wall clock)")
    ax.set_ylabel("GiB/s")
    ax.set_title(
        f"The job's device writes and reads, summed over nodes (GiB/s per {bin_s} s bin, measured counters; "
        "grey: checkpoint stalls)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    return fig_png(fig)
