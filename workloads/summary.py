"""The table a run ends with: per checkpoint and per load, with units and where figures come from."""

from __future__ import annotations

import statistics

from rich.console import Console
from rich.table import Table

from ckprof.units import fmt_bytes

from .config import is_s3


def _f(v, fmt="{:.3f}"):
    return "n/a" if v is None else fmt.format(v)


def render(results: dict, plan, cfg, recording: str | None, console: Console | None = None) -> None:
    if console is None:
        console = Console(highlight=False)
        if not console.is_terminal:
            console = Console(highlight=False, width=132)
    if is_s3(cfg.target):
        mode = f"S3 objects, {fmt_bytes(cfg.chunk_bytes)} parts, {cfg.threads} thread(s) a rank"
    else:
        mode = ("O_DIRECT" if cfg.direct else "buffered") + (" + fsync" if cfg.fsync else ", no fsync")
    if cfg.async_:
        mode += ", async (staged in memory)"
    t = Table(
        title=f"ckprof workload: {plan.preset.name}, {plan.nranks} ranks, {plan.nfiles} files, "
        f"{fmt_bytes(plan.nbytes)} per checkpoint ({mode})",
        caption="time: barrier → last rank done (MLPerf's slowest-rank rule), measured on CLOCK_MONOTONIC; "
        "GiB/s derived = bytes / time",
        title_justify="left",
        caption_justify="left",
    )
    t.add_column("checkpoint")
    t.add_column("bytes (B)", justify="right")
    t.add_column("durable after (s)" if cfg.async_ else "slowest rank (s)", justify="right")
    t.add_column("GiB/s", justify="right")
    t.add_column("blocked (s)", justify="right")
    t.add_column("ranks min/med/max (s)", justify="right")
    for c in results.get("checkpoints", []):
        per = [r["seconds"] for r in c["ranks"]]
        t.add_row(
            c["name"],
            f"{c['bytes']:,}",
            _f(c["seconds"]),
            _f(c["gib_per_s"]),
            _f(c["blocked_s"] if cfg.async_ else c["seconds"]),
            f"{min(per):.3f} / {statistics.median(per):.3f} / {max(per):.3f}",
        )
    load = results.get("load")
    if load:
        t.add_row(
            f"load {load['path'].rsplit('/', 1)[-1]}",
            f"{load['bytes']:,}",
            _f(load["seconds"]),
            _f(load["gib_per_s"]),
            "",
            "verified" if load["verified"] else "FAILED",
            end_section=False,
        )
    console.print(t)
    if cfg.async_:
        console.print(
            "blocked: until every rank had staged its shard in memory (training waits this long); "
            + (
                "slowest rank: until the last rank's objects were uploaded (their completing calls returned)."
                if is_s3(cfg.target)
                else "slowest rank: until the last rank's data was written and fsynced (durable)."
            )
        )
    if load:
        console.print(
            f"load: {'reads' if is_s3(cfg.target) else 'page cache bypassed with'} {load['cache_bypass']}; checksums "
            + ("verified (xxh3)" if load["verified"] else "FAILED: " + "; ".join(load["errors"]))
        )
    if plan.nranks <= 16 and results.get("checkpoints"):
        last = results["checkpoints"][-1]
        console.print(
            "per rank (last checkpoint): "
            + ", ".join(
                f"{r['rank']}: {r['seconds']:.3f} s {_f(r['gib_per_s'], '{:.2f}')} GiB/s" for r in last["ranks"]
            )
        )
    rss = [r.get("max_rss_bytes") for c in results.get("checkpoints", []) for r in c["ranks"]]
    rss = [x for x in rss if x]
    if rss:
        console.print(
            f"peak RSS per rank (measured, VmHWM): max {fmt_bytes(max(rss))}; "
            f"largest rank shard {fmt_bytes(max(r.nbytes for r in plan.ranks) if getattr(plan, 'ranks', None) else 0)}"
            + (
                " (with --compute gpu each rank also holds torch and its CUDA context: ~0.7 GiB on an H100)"
                if cfg.compute == "gpu" and cfg.has_compute_phases
                else ""
            )
        )
    for line in rules_lines(cfg.rule_checks):
        console.print(line)
    if recording:
        console.print(
            f"recording: {recording}  (python -c \"import ckprof; print(ckprof.load('{recording}').checkpoints())\")"
        )


def rules_lines(checked: dict | None) -> list[str]:
    """What the run was against MLPerf Storage's rules (ckprof.workloads.rules.summary): the counts,
    the write-to-read gap of a read invocation, and where the rest is."""
    if not checked or not checked.get("checks"):
        return []
    counts = checked["counts"]
    said = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    out = [f"MLPerf Storage {checked['edition']} rules: {said} (each with why: meta.json workload.rules, or --dry-run)"]
    for c in checked["checks"]:
        gap = c["figures"].get("gap_s") if c["rule"] == "4.7.1" else None
        if gap is not None:
            out.append(f"write-to-read gap (Rules.md 4.7.1): {gap:.3f} s, {c['status']}: {c['why']}")
    return out
