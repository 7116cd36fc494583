"""A recorded checkpointing run audited against MLPerf Storage v3.0's checkpoint rules: per rule
pass, fail or unknown, with the evidence from the recording (docs/report-format.md *Rules*).

MLPerf checks a run's config; ckprof checks what happened. Each rule reads figures the analysis
already has, so each is judged by the one rule that measures it:

- `fsync`: per checkpoint file, the app's own os.fsync/os.fdatasync/os.sync of it inside its save's
  window (the injected patch's `checkpoint_extend` events: a Python caller's fsync of a save's file
  within EXTEND_S, 0.25 s, of the save's return, as DLIO's `os.fsync(f.fileno())` right after its
  torch.save; record/instrument/site/_ckprof_autopatch.py) and the file's pages at the save's end
  (cachestat(2): the save call's return, the file tracker's looks; durability.py's evidence). A
  file still dirty at its save's end was not fsync'd (fsync(2) returns once the file's dirty pages
  are written), whoever wrote it: that needs no code in the writer. A writer outside Python (a C
  library's fsync) leaves a clean file and no call: "clean at the end", not "fsync seen".
- `restore_page_cache`: each load's bytes already in the page cache as it started
  (checkpoints.restore_truth, cachestat(2)).
- `client_memory`: the bytes the run's saves wrote against the client's MemTotal (3×).
- `subset`: subset mode only for the 8B model; the model's size (a `ckprof workload` run's plan).
- `write_read_gap`: the last save's end to the first load's start (≤ 30 s), and clock skew; two
  invocations recorded apart: `audit_runs.audit_two_invocations`.
- `run_timer`: the run's own timer (a `ckprof workload` run's results) inside ckprof's window, and
  not stopped while the save's pages were dirty.

The v3.0 constants are here, not imported from ckprof.workloads: the read side never imports the
write side (docs/architecture.md, Layers).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import durability as D
from .model import Audit, Checkpoint, FileFsync, RuleCheck
from .records import Window

RULES = "MLPerf Storage v3.0 checkpointing"
WRITE_READ_GAP_MAX_S = 30.0  # v3.0: the read invocation starts within 30 s of the write's end
DATA_OVER_MEMORY = 3.0  # v3.0: no cache clearing needed when the data is over 3x the client's memory
SUBSET_MODELS = ("llama3-8b",)  # v3.0: subset mode only for the 8B model (storage#841)
# a load counts as cold when at most this share of its bytes was cached as it started: the
# workload's small manifest, read just before, is cached by design
CACHE_SERVED_MAX = 0.01
STAMP_SLACK_S = 0.001  # two stamps of one CLOCK_MONOTONIC compared: the rounding of s since start
FILES_LISTED = 64  # files per audit listed by name (the counts cover all)
PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
GAP_RULE = "a read run starts within 30 s of the write's end (a negative gap is clock skew)"


@dataclass(frozen=True)
class AuditInput:
    """What the audit reads: meta.json, the windows and their rows (parallel lists), the file
    evidence and the durability verdicts (parallel to the windows)."""

    meta: dict
    windows: Sequence[Window]
    rows: Sequence[Checkpoint]
    evidence: D.FileEvidence
    verdicts: Sequence[D.Verdict]
    start_ns: int  # the rows' zero (s since recording start)


def audit(inp: AuditInput) -> Audit:
    checks = [
        fsync_rule(inp),
        restore_page_cache_rule(inp),
        client_memory_rule(inp),
        subset_rule(inp.meta),
        write_read_gap_rule(inp.rows, inp.meta),
        run_timer_rule(inp),
    ]
    return Audit(
        rules=RULES,
        passed=sum(c.status == PASS for c in checks),
        failed=sum(c.status == FAIL for c in checks),
        unknown=sum(c.status == UNKNOWN for c in checks),
        checks=checks,
    )


# -- meta.json --------------------------------------------------------------------------------


def section(d: Any, *keys: str) -> dict:
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d if isinstance(d, dict) else {}


# a Hydra override of DLIO's key (dlio_benchmark/utils/config.py reads config['checkpoint']['fsync'])
DLIO_FSYNC_KEY = "workload.checkpoint.fsync"


def fsync_config(meta: dict) -> tuple[bool | None, str]:
    """(whether the run's config asks for fsync, where that was read); None: not in the recording."""
    cfg = section(meta, "workload", "config")
    if isinstance(cfg.get("fsync"), bool):
        return cfg["fsync"], f"ckprof workload config fsync: {cfg['fsync']}"
    argv = meta.get("command")
    for arg in argv if isinstance(argv, list) else []:
        key, eq, value = str(arg).lstrip("+").partition("=")
        if eq and key == DLIO_FSYNC_KEY and value.lower() in ("true", "false"):
            return value.lower() == "true", f"the command's override {arg}"
    return None, "the run's config is not in the recording (only a ckprof workload run's, or a command-line override)"


# -- fsync --------------------------------------------------------------------------------------


def files_fsynced(w: Window, fe: D.FileEvidence) -> list[FileFsync]:
    """Per file of one save: fsync seen, clean, dirty or unknown at the save's end (module docstring)."""
    ids = (w.id, *w.nested_ids)
    synced, fsynced = D.flushed_by_app(fe, ids)  # durability.py's rule: the app's flushes, renames followed
    files = list({f.path: f for f in reversed(D.save_files(w, fe))}.values())[::-1]  # each path once, its first
    storage = D.storage_of(w.path, files)
    end = fe.ends.get(w.id)
    clean_at_return = end is not None and end.pending_bytes_at_return == 0 and bool(end.files_at_return)
    # a file named by one call of a grouped save (a rank's, a file's torch.save) ends with that call
    # and the app's own finishing of it; a file no call named, with the save
    ends_by_id = {p.id: p.app_end_ns for p in w.parts or ()}
    out = []
    for f in files:
        path = os.path.normpath(f.path) if f.path else None
        t_end = ends_by_id.get(f.id, w.app_end_ns)

        def row(fsync, state, basis, pending=None, f=f):
            return FileFsync(w.id, f.path, fsync, state, pending, basis)

        if path is not None and path in fsynced:
            out.append(row(True, "fsync", "the app's os.fsync/os.fdatasync of it returned inside the save's window"))
        elif synced:
            out.append(row(True, "fsync", "the app's os.sync() returned inside the save's window"))
        elif storage.kind in ("memory", "object", "fuse", "stacked", "unrecognised"):
            out.append(
                row(
                    None,
                    UNKNOWN,
                    f"no fsync call seen, and on {storage.file_system or storage.kind} a clean page cache "
                    "does not tell an fsync (cachestat(2) sees no dirty page there)",
                )
            )
        elif clean_at_return:
            out.append(row(None, "clean", "no fsync call seen; no dirty page when the save returned (cachestat)", 0.0))
        elif f.event == "file_durable" and t_end is not None and f.t_ns is not None and f.t_ns <= t_end:
            out.append(row(None, "clean", "no fsync call seen; seen clean before the save's end (cachestat)", 0.0))
        elif f.event in ("file_pending_at_end", "file_deleted_before_durable") and f.pending_bytes:
            # still dirty long after the save: an fsync inside its window would have left it clean
            when = "when the recording ended" if f.event == "file_pending_at_end" else "when it was deleted"
            out.append(
                row(
                    False,
                    "dirty",
                    f"not fsync'd: {int(f.pending_bytes)} B still dirty {when} (cachestat)",
                    float(f.pending_bytes),
                )
            )
        elif f.first_poll_pending_bytes is not None and f.first_poll_ns is not None and t_end is not None:
            lag_ms = (f.first_poll_ns - t_end) / 1e6
            if f.first_poll_pending_bytes > 0 and lag_ms >= 0:
                # pages only get cleaner without new writes: dirty then means dirty at the save's end
                out.append(
                    row(
                        False,
                        "dirty",
                        f"not fsync'd: {int(f.first_poll_pending_bytes)} B dirty at the tracker's first look, "
                        f"{lag_ms:.0f} ms after the save's end (cachestat)",
                        float(f.first_poll_pending_bytes),
                    )
                )
            elif f.first_poll_pending_bytes == 0:
                out.append(
                    row(
                        None,
                        "clean",
                        f"no fsync call seen; clean at the tracker's first look, {lag_ms:.0f} ms from the save's end",
                        0.0,
                    )
                )
            else:
                out.append(row(None, UNKNOWN, "the tracker's first look came before the save's end"))
        else:
            why = f.reason or f"no look at its pages ({f.event})"
            out.append(row(None, UNKNOWN, f"no fsync call seen; {why}"))
    return out


def _some(paths: Sequence[str | None], most: int = 5) -> str:
    shown = ", ".join(str(p) for p in paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


def fsync_rule(inp: AuditInput) -> RuleCheck:
    rule = "fsync verified: each checkpoint file fsync'd (no dirty page left) when its save ends"
    asked, where = fsync_config(inp.meta)
    saves = [w for w, r in zip(inp.windows, inp.rows) if w.kind == "save" and r.ok is not False]
    per_save = [files_fsynced(w, inp.evidence) for w in saves]
    files = [f for fs in per_save for f in fs]
    unwatched = [w.id for w, fs in zip(saves, per_save) if not fs]
    by_state = {s: [f for f in files if f.state == s] for s in ("fsync", "clean", "dirty", UNKNOWN)}
    figures: dict[str, Any] = {
        "config_fsync": asked,
        "config_source": where,
        "saves": len(saves),
        "saves_unwatched": len(unwatched),
        "files": len(files),
        **{f"files_{s}": len(v) for s, v in by_state.items()},
        "dirty_bytes": sum(f.pending_bytes or 0.0 for f in by_state["dirty"]) if files else None,
    }
    listed = sorted(files, key=lambda f: ("dirty", UNKNOWN, "clean", "fsync").index(f.state))[:FILES_LISTED]

    def check(status: str, reason: str) -> RuleCheck:
        return RuleCheck("fsync", rule, status, reason, figures, listed)

    if not saves:
        return check(UNKNOWN, "no save in this recording")
    dirty = [f.path for f in by_state["dirty"]]
    if dirty:
        head = {
            True: f"the run's config asks for fsync ({where}) but no fsync happened: ",
            False: f"the run's config turns fsync off ({where}); v3.0 requires it: ",
            None: "",
        }[asked]
        return check(
            FAIL, f"{head}{len(dirty)} file(s) still dirty in the page cache at their save's end: {_some(dirty)}"
        )
    if asked is False:
        return check(FAIL, f"the run's config turns fsync off ({where}); v3.0 requires it")
    if unwatched:
        return check(
            UNKNOWN,
            f"{len(unwatched)} of {len(saves)} save(s) with no file watched (no path, or recorded without the "
            f"file tracker): {_some(unwatched)}",
        )
    if by_state[UNKNOWN]:
        return check(
            UNKNOWN,
            f"{len(by_state[UNKNOWN])} of {len(files)} file(s) unknown: {by_state[UNKNOWN][0].basis}",
        )
    n_sync, n_clean = len(by_state["fsync"]), len(by_state["clean"])
    if n_sync:
        reason = f"{n_sync} of {len(files)} file(s) fsync'd by the app inside their save's window"
        if n_clean:
            reason += f"; {n_clean} without a call seen but clean at their save's end (cachestat)"
    else:
        reason = (
            f"all {n_clean} file(s) clean at their save's end (cachestat); no fsync call seen (a writer "
            "ckprof does not patch: outside Python, or its own saves marked by itself)"
        )
    return check(PASS, reason + (f" ({where})" if asked else ""))


# -- the page cache and the client's memory ---------------------------------------------------------


def _data_and_memory(inp: AuditInput) -> tuple[float | None, float | None]:
    saves = [r for r in inp.rows if r.kind == "save" and r.ok is not False and r.bytes_app is not None]
    data = float(sum(r.bytes_app or 0.0 for r in saves)) if saves else None
    mem = section(inp.meta, "host").get("mem_total_bytes")
    return data, float(mem) if isinstance(mem, (int, float)) and mem > 0 else None


def _over_memory(inp: AuditInput) -> bool | None:
    data, mem = _data_and_memory(inp)
    return None if data is None or mem is None else data > DATA_OVER_MEMORY * mem


def restore_page_cache_rule(inp: AuditInput) -> RuleCheck:
    rule = "the page cache cleared between write and read, unless the data is over 3x the client's memory"
    loads = [r for r in inp.rows if r.kind == "load"]
    shares = [r.cache_served_share for r in loads]
    figures: dict[str, Any] = {
        "loads": len(loads),
        "cache_served_share_max": max((s for s in shares if s is not None), default=None),
        "cache_served_share_by_load": {r.id: r.cache_served_share for r in loads},
        "cold_share_max": CACHE_SERVED_MAX,
        "data_over_3x_memory": _over_memory(inp),
    }

    def check(status: str, reason: str) -> RuleCheck:
        return RuleCheck("restore_page_cache", rule, status, reason, figures)

    if not loads:
        return check(UNKNOWN, "no load (restore) in this recording")
    missing = [r for r in loads if r.cache_served_share is None]
    if missing:
        basis = missing[0].restore_basis if missing[0].restore_basis else []
        return check(UNKNOWN, f"{len(missing)} load(s) with no page-cache figure: {'; '.join(basis) or 'no look'}")
    worst = max(loads, key=lambda r: r.cache_served_share or 0.0)
    share = worst.cache_served_share or 0.0
    if share <= CACHE_SERVED_MAX:
        return check(
            PASS, f"every load started cold: at most {share:.2%} of its bytes in the page cache (cachestat(2))"
        )
    over = _over_memory(inp)
    if over:
        return check(
            PASS,
            f"{share:.1%} of {worst.id}'s bytes in the page cache as it started; allowed: the data is over 3x memory",
        )
    if over is None:
        return check(
            UNKNOWN,
            f"{share:.1%} of {worst.id}'s bytes in the page cache, and the client's memory or data size is unknown",
        )
    return check(
        FAIL,
        f"{share:.1%} of {worst.id}'s bytes were in the page cache as it started (cachestat(2)), "
        "and the data is not over 3x the client's memory",
    )


def client_memory_rule(inp: AuditInput) -> RuleCheck:
    rule = "the data over 3x the client's memory, or the cache cleared between write and read"
    data, mem = _data_and_memory(inp)
    figures: dict[str, Any] = {
        "data_bytes": data,
        "client_memory_bytes": mem,
        "data_over_memory_ratio": None if data is None or mem is None else data / mem,
        "required_ratio": DATA_OVER_MEMORY,
    }

    def check(status: str, reason: str) -> RuleCheck:
        return RuleCheck("client_memory", rule, status, reason, figures)

    if data is None:
        return check(UNKNOWN, "no save with known bytes in this recording")
    if mem is None:
        return check(UNKNOWN, "the client's memory is not in meta.json (host.mem_total_bytes)")
    ratio = data / mem
    if ratio > DATA_OVER_MEMORY:
        return check(PASS, f"the saves wrote {ratio:.2f}x the client's memory (MemTotal): no cache clearing needed")
    cache = restore_page_cache_rule(inp)
    said = f"the saves wrote {ratio:.3g}x the client's memory (not over 3x), so the cache must be cleared"
    if cache.status == PASS:
        return check(PASS, f"{said}: it was (every load started cold)")
    if cache.status == FAIL:
        return check(FAIL, f"{said}: it was not ({cache.reason})")
    return check(UNKNOWN, f"{said}: {cache.reason}")


# -- subset and model size ----------------------------------------------------------------------------


def subset_rule(meta: dict) -> RuleCheck:
    rule = "subset mode only for the 8B model"
    plan = section(meta, "workload", "plan")

    def check(status: str, reason: str, figures: dict[str, Any] | None = None) -> RuleCheck:
        return RuleCheck("subset", rule, status, reason, figures or {})

    if not plan:
        return check(
            UNKNOWN,
            "not a ckprof workload recording: the model and whether it ran a subset are in the command's own "
            "config (DLIO, mlpstorage), which the recording does not hold",
        )
    figures: dict[str, Any] = {
        "preset": plan.get("preset"),
        "parameters": plan.get("parameters"),
        "subset": plan.get("subset"),
        "ranks": plan.get("ranks"),
        "world": plan.get("world"),
        "scale": plan.get("scale"),
        "bytes_per_checkpoint": plan.get("bytes"),
        "full_bytes_per_checkpoint": plan.get("full_bytes"),
        "run_rules": section(meta, "workload", "config").get("rules"),  # the edition the run held itself to
    }
    preset, subset, scale = plan.get("preset"), plan.get("subset"), plan.get("scale")
    scaled = f"; scaled to {scale:.3g} of the full size" if isinstance(scale, (int, float)) and scale != 1 else ""
    model = f"{preset or 'a custom model'} ({plan.get('parameters')} parameters)"
    if not isinstance(subset, bool):
        return check(UNKNOWN, "the workload's plan does not say whether it ran a subset (a load invocation)", figures)
    if not subset:
        return check(PASS, f"the full layout of {model}: {plan.get('ranks')} ranks{scaled}", figures)
    ranks = f"a subset ({plan.get('ranks')} of {plan.get('world')} ranks) of {model}"
    if preset in SUBSET_MODELS:
        return check(PASS, f"{ranks}{scaled}", figures)
    return check(FAIL, f"{ranks}: v3.0 allows subset mode only for {', '.join(SUBSET_MODELS)}{scaled}", figures)


# -- the write-to-read gap ------------------------------------------------------------------------------


def end_s(r: Checkpoint) -> float | None:
    return r.durable_end_s if r.durable_end_s is not None else r.app_end_s


def gap_check(gap_s: float, skew_s: float | None, figures: dict[str, Any], how: str) -> RuleCheck:
    rule = GAP_RULE
    figures = {**figures, "gap_s": gap_s, "clock_skew_s": skew_s, "gap_max_s": WRITE_READ_GAP_MAX_S}
    if gap_s < 0:
        return RuleCheck(
            "write_read_gap",
            rule,
            FAIL,
            f"the read began {-gap_s:.3f} s before the write ended ({how}): clock skew",
            figures,
        )
    if gap_s > WRITE_READ_GAP_MAX_S:
        return RuleCheck(
            "write_read_gap", rule, FAIL, f"{gap_s:.3f} s from the write's end to the read ({how}), over 30 s", figures
        )
    return RuleCheck("write_read_gap", rule, PASS, f"{gap_s:.3f} s from the write's end to the read ({how})", figures)


def _workload_gap(meta: dict) -> tuple[float, dict[str, Any]] | None:
    """A `ckprof workload load` invocation's own write-to-read gap (meta.json workload.rules, rule
    4.7.1: the manifest's written_unix_ns to the invocation's start), else None."""
    for c in section(meta, "workload", "rules").get("checks") or []:
        fig = c.get("figures") if isinstance(c, dict) and c.get("rule") == "4.7.1" else None
        if isinstance(fig, dict) and isinstance(fig.get("gap_s"), (int, float)):
            keep = ("write_end_unix_ns", "read_start_unix_ns")
            return float(fig["gap_s"]), {f"workload_{k}": fig.get(k) for k in keep}
    return None


def write_read_gap_rule(rows: Sequence[Checkpoint], meta: dict) -> RuleCheck:
    rule = GAP_RULE
    loads = sorted((r for r in rows if r.kind == "load"), key=lambda r: r.start_s)
    if not loads:
        return RuleCheck(
            "write_read_gap",
            rule,
            UNKNOWN,
            "no load in this recording (a read run recorded apart: audit_runs.audit_two_invocations(write, read))",
        )
    read = loads[0]
    before = [r for r in rows if r.kind == "save" and r.ok is not False and (end_s(r) or 0) <= read.start_s]
    if not before:
        own = _workload_gap(meta)
        if own is not None:
            gap_s, figures = own
            how = "the workload's own: its manifest's write time to this invocation's start, wall clock"
            return gap_check(gap_s, gap_s if gap_s < 0 else None, {**figures, "read_id": read.id}, how)
        return RuleCheck(
            "write_read_gap",
            rule,
            UNKNOWN,
            "no save ended before the first load here: the write was another invocation "
            "(audit_runs.audit_two_invocations(write, read))",
        )
    write = max(before, key=lambda r: end_s(r) or 0.0)
    end = end_s(write) or 0.0
    figures = {"write_id": write.id, "write_end_s": end, "read_id": read.id, "read_start_s": read.start_s}
    # one recording: one host's CLOCK_MONOTONIC stamps both ends, so there is no skew between them
    return gap_check(read.start_s - end, 0.0, figures, "one recording, one clock: no skew between them")


# -- the run's own timer ----------------------------------------------------------------------------


def run_timer_rule(inp: AuditInput) -> RuleCheck:
    rule = "the run's own timer inside ckprof's window, not stopped while the save's pages were dirty"
    results = section(inp.meta, "workload", "results")
    if not results:
        return RuleCheck(
            "run_timer",
            rule,
            UNKNOWN,
            "the command's own timer is not in the recording (ckprof reads a ckprof workload run's results; "
            "DLIO's and mlpstorage's output files are not read)",
        )
    timers = {("save", c.get("step")): c for c in results.get("checkpoints") or [] if isinstance(c, dict)}
    load = results.get("load")
    if isinstance(load, dict):
        timers[("load", load.get("step"))] = load
    per: list[dict[str, Any]] = []
    bad: list[str] = []
    for w, r in zip(inp.windows, inp.rows):
        t = timers.get((r.kind, r.step)) if r.source == "workload" else None
        if not t or not isinstance(t.get("start_ns"), int) or not isinstance(t.get("end_ns"), int):
            continue
        end_ns = w.app_end_ns
        item = {
            "id": r.id,
            "kind": r.kind,
            "timer_s": (t["end_ns"] - t["start_ns"]) / 1e9,
            "window_s": None if end_ns is None else (end_ns - w.start_ns) / 1e9,
            "timer_start_after_window_s": (t["start_ns"] - w.start_ns) / 1e9,
            "timer_end_before_window_end_s": None if end_ns is None else (end_ns - t["end_ns"]) / 1e9,
        }
        per.append(item)
        if item["timer_start_after_window_s"] < -STAMP_SLACK_S or (
            item["timer_end_before_window_end_s"] is not None and item["timer_end_before_window_end_s"] < -STAMP_SLACK_S
        ):
            bad.append(f"{r.id}: the timer runs outside ckprof's window")
        elif r.kind == "save" and r.durable_at_return is False:
            bad.append(
                f"{r.id}: the timer stopped with {int(r.pending_bytes_at_return or 0)} B still dirty: its rate is "
                "partly the page cache's"
            )
    figures: dict[str, Any] = {"per_checkpoint": per}
    if not per:
        return RuleCheck("run_timer", rule, UNKNOWN, "no workload checkpoint's timer matches a window", figures)
    if bad:
        return RuleCheck("run_timer", rule, FAIL, "; ".join(bad[:5]), figures)
    return RuleCheck(
        "run_timer",
        rule,
        PASS,
        f"{len(per)} timer(s) inside ckprof's windows (same CLOCK_MONOTONIC), none stopped with dirty pages",
        figures,
    )
