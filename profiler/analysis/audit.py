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
- `run_timer`: the run's own timer (a `ckprof workload` run's results; DLIO's per-rank
  per_epoch_stats.json) against ckprof's window, and not stopped while the save's files were dirty.
- the run's config, where the recording names it: a `ckprof workload` run's (meta.json), DLIO's
  `workload.checkpoint.fsync=` override, else its workload YAML (read when the report is made).

The v3.0 numbers are ckprof.recording.mlperf_rules', the one place the workload's checks read them
too (the read side never imports the write side: docs/architecture.md, Layers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ckprof.recording import hydra
from ckprof.recording import mlperf_rules as R
from ckprof.recording.timebase import Timebase

from . import durability as D
from .meta import Meta, parsed
from .model import Audit, Checkpoint, FileFsync, RuleCheck
from .records import Window

RULES = "MLPerf Storage v3.0 checkpointing"
WRITE_READ_GAP_MAX_S = R.READ_AFTER_WRITE_MAX_GAP_S_V3  # the read starts within 30 s of the write's end
DATA_OVER_MEMORY = float(R.CACHE_EXEMPT_MEMORY_RATIO_V3)  # no cache clearing needed over 3x the client's memory
SUBSET_MODELS = R.SUBSET_MODELS[R.V3]  # subset mode only for the 8B model (storage#841)
OVER = f"over {DATA_OVER_MEMORY:g}x"  # the data over 3x the client's memory: no cache clearing needed
# a load counts as cold when at most this share of its bytes was cached as it started: the
# workload's small manifest, read just before, is cached by design
CACHE_SERVED_MAX = 0.01
STAMP_SLACK_S = 0.001  # two stamps of one CLOCK_MONOTONIC compared: the rounding of s since start
FILES_LISTED = 64  # files per audit listed by name (the counts cover all)
PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
GAP_RULE = f"a read run starts within {WRITE_READ_GAP_MAX_S:g} s of the write's end (a negative gap is clock skew)"


@dataclass(frozen=True)
class AuditInput:
    """What the audit reads: meta.json (typed: meta.py), the windows and their rows (parallel
    lists), the files' evidence (durability.py), the recording's clock."""

    meta: Meta
    windows: Sequence[Window]
    rows: Sequence[Checkpoint]
    evidence: D.FileEvidence
    timebase: Timebase | None = None  # the recording's monotonic <-> wall (another program's stamps)


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


# a Hydra override of DLIO's key (dlio_benchmark/utils/config.py reads config['checkpoint']['fsync'])
DLIO_FSYNC_KEY = "workload.checkpoint.fsync"


def fsync_config(meta: Meta) -> tuple[bool | None, str]:
    """(whether the run's config asks for fsync, where that was read); None: not in the recording."""
    fsync = meta.workload.config.fsync
    if fsync is not None:
        return fsync, f"ckprof workload config fsync: {fsync}"
    argv = meta.argv
    value = hydra.value(argv, DLIO_FSYNC_KEY) if argv is not None else None
    if value is not None and value.lower() in ("true", "false"):
        return value.lower() == "true", f"the command's override {DLIO_FSYNC_KEY}={value}"
    dlio = dlio_argv(meta)
    if dlio is not None:
        return dlio_workload_fsync(meta, dlio)
    return None, "the run's config is not in the recording (only a ckprof workload run's, or a command-line override)"


# -- fsync --------------------------------------------------------------------------------------


def files_fsynced(w: Window, fe: D.FileEvidence) -> list[FileFsync]:
    """Per file of one save: fsync seen, clean, dirty or unknown at the save's end (module docstring)."""
    ids = (w.id, *w.nested_ids)
    synced, fsynced = D.flushed_by_app(fe, ids)  # durability.py's rule: the app's flushes, renames followed
    files = list({f.path: f for f in reversed(D.save_files(w, fe))}.values())[::-1]  # each path once, its first
    storage = D.storage_of(w.path, files)
    end = D.end_of(w, fe)
    clean_at_return = end.pending_bytes_at_return == 0 and bool(end.files_at_return)
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


@dataclass(frozen=True)
class FilesByState:
    """Saves' files (files_fsynced) by their state at their save's end, each in the files' order."""

    fsync: list[FileFsync]
    clean: list[FileFsync]
    dirty: list[FileFsync]
    unknown: list[FileFsync]

    @classmethod
    def of(cls, files: Sequence[FileFsync]) -> FilesByState:
        return cls(*([f for f in files if f.state == s] for s in ("fsync", "clean", "dirty", UNKNOWN)))


def fsync_rule(inp: AuditInput) -> RuleCheck:
    rule = "fsync verified: each checkpoint file fsync'd (no dirty page left) when its save ends"
    asked, where = fsync_config(inp.meta)
    saves = [w for w, r in zip(inp.windows, inp.rows) if w.kind == "save" and r.ok is not False]
    per_save = [files_fsynced(w, inp.evidence) for w in saves]
    files = [f for fs in per_save for f in fs]
    unwatched = [w.id for w, fs in zip(saves, per_save) if not fs]
    by_state = FilesByState.of(files)
    figures: dict[str, Any] = {
        "config_fsync": asked,
        "config_source": where,
        "saves": len(saves),
        "saves_unwatched": len(unwatched),
        "files": len(files),
        "files_fsync": len(by_state.fsync),
        "files_clean": len(by_state.clean),
        "files_dirty": len(by_state.dirty),
        "files_unknown": len(by_state.unknown),
        "dirty_bytes": sum(f.pending_bytes or 0.0 for f in by_state.dirty) if files else None,
    }
    listed = sorted(files, key=lambda f: ("dirty", UNKNOWN, "clean", "fsync").index(f.state))[:FILES_LISTED]

    def check(status: str, reason: str) -> RuleCheck:
        return RuleCheck("fsync", rule, status, reason, figures, listed)

    if not saves:
        return check(UNKNOWN, "no save in this recording")
    dirty = [f.path for f in by_state.dirty]
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
    if by_state.unknown:
        return check(
            UNKNOWN,
            f"{len(by_state.unknown)} of {len(files)} file(s) unknown: {by_state.unknown[0].basis}",
        )
    n_sync, n_clean = len(by_state.fsync), len(by_state.clean)
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
    mem = inp.meta.host.mem_total_bytes
    return data, float(mem) if mem is not None and mem > 0 else None


def _over_memory(inp: AuditInput) -> bool | None:
    data, mem = _data_and_memory(inp)
    return None if data is None or mem is None else data > DATA_OVER_MEMORY * mem


def restore_page_cache_rule(inp: AuditInput) -> RuleCheck:
    rule = f"the page cache cleared between write and read, unless the data is {OVER} the client's memory"
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
            f"{share:.1%} of {worst.id}'s bytes in the page cache as it started; allowed: the data is {OVER} memory",
        )
    if over is None:
        return check(
            UNKNOWN,
            f"{share:.1%} of {worst.id}'s bytes in the page cache, and the client's memory or data size is unknown",
        )
    return check(
        FAIL,
        f"{share:.1%} of {worst.id}'s bytes were in the page cache as it started (cachestat(2)), "
        f"and the data is not {OVER} the client's memory",
    )


def client_memory_rule(inp: AuditInput) -> RuleCheck:
    rule = f"the data {OVER} the client's memory, or the cache cleared between write and read"
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
    said = f"the saves wrote {ratio:.3g}x the client's memory (not {OVER}), so the cache must be cleared"
    if cache.status == PASS:
        return check(PASS, f"{said}: it was (every load started cold)")
    if cache.status == FAIL:
        return check(FAIL, f"{said}: it was not ({cache.reason})")
    return check(UNKNOWN, f"{said}: {cache.reason}")


# -- subset and model size ----------------------------------------------------------------------------


def subset_rule(meta: Meta) -> RuleCheck:
    rule = "subset mode only for the 8B model"
    plan = meta.workload.plan

    def check(status: str, reason: str, figures: dict[str, Any] | None = None) -> RuleCheck:
        return RuleCheck("subset", rule, status, reason, figures or {})

    if plan is None:
        return check(
            UNKNOWN,
            "not a ckprof workload recording: the model and whether it ran a subset are in the command's own "
            "config (DLIO, mlpstorage), which the recording does not hold",
        )
    figures: dict[str, Any] = {
        "preset": plan.preset,
        "parameters": plan.parameters,
        "subset": plan.subset,
        "ranks": plan.ranks,
        "world": plan.world,
        "scale": plan.scale,
        "bytes_per_checkpoint": plan.bytes,
        "full_bytes_per_checkpoint": plan.full_bytes,
        "run_rules": meta.workload.config.rules,  # the edition the run held itself to
    }
    preset, subset, scale = plan.preset, plan.subset, plan.scale
    scaled = f"; scaled to {scale:.3g} of the full size" if scale is not None and scale != 1 else ""
    model = f"{preset or 'a custom model'} ({plan.parameters} parameters)"
    if subset is None:
        return check(UNKNOWN, "the workload's plan does not say whether it ran a subset (a load invocation)", figures)
    if not subset:
        return check(PASS, f"the full layout of {model}: {plan.ranks} ranks{scaled}", figures)
    ranks = f"a subset ({plan.ranks} of {plan.world} ranks) of {model}"
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
            "write_read_gap",
            rule,
            FAIL,
            f"{gap_s:.3f} s from the write's end to the read ({how}), over {WRITE_READ_GAP_MAX_S:g} s",
            figures,
        )
    return RuleCheck("write_read_gap", rule, PASS, f"{gap_s:.3f} s from the write's end to the read ({how})", figures)


def _workload_gap(meta: Meta) -> tuple[float, dict[str, Any]] | None:
    """A `ckprof workload load` invocation's own write-to-read gap (meta.json workload.rules, rule
    4.7.1: the manifest's written_unix_ns to the invocation's start), else None."""
    gap = meta.workload.rules.read_after_write()
    if gap is None or gap.gap_s is None:
        return None
    return float(gap.gap_s), {
        "workload_write_end_unix_ns": gap.write_end_unix_ns,
        "workload_read_start_unix_ns": gap.read_start_unix_ns,
    }


def write_read_gap_rule(rows: Sequence[Checkpoint], meta: Meta) -> RuleCheck:
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
    # a save that never returned has no end to measure from
    ends = [(end_s(r), r) for r in rows if r.kind == "save" and r.ok is not False]
    before = [r for e, r in ends if e is not None and e <= read.start_s]
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


RUN_TIMER_RULE = "the run's own timer against ckprof's window, not stopped while the save's pages were dirty"


@dataclass(frozen=True)
class Timer:
    """One save or load as the run timed it, on the recording's CLOCK_MONOTONIC (ns)."""

    kind: str
    start_ns: int
    end_ns: int
    step: int | None = None


def workload_timers(meta: Meta) -> list[Timer]:
    """A `ckprof workload` run's own seconds (meta.json workload.results: barrier to the last rank's
    fsync, CLOCK_MONOTONIC, the recording's clock)."""
    results = meta.workload.results
    found = [("save", c) for c in results.checkpoints]
    if results.load is not None:
        found.append(("load", results.load))
    return [
        Timer(kind, c.start_ns, c.end_ns, c.step)
        for kind, c in found
        if c.start_ns is not None and c.end_ns is not None
    ]


def _timed(w: Window, r: Checkpoint, t: Timer, fe: D.FileEvidence, inside: bool, bad: list[str]) -> dict[str, Any]:
    """One timer against its window: the seconds of each and their offsets; a failure said in `bad`
    (outside the window where both are on one clock and should nest, or stopped while dirty)."""
    end_ns = w.app_end_ns
    start_after_s = (t.start_ns - w.start_ns) / 1e9
    end_before_s = None if end_ns is None else (end_ns - t.end_ns) / 1e9
    dirty = [f for f in files_fsynced(w, fe) if f.state == "dirty"] if r.kind == "save" else []
    dirty_bytes = sum(f.pending_bytes or 0.0 for f in dirty)
    item = {
        "id": r.id,
        "kind": r.kind,
        "timer_s": (t.end_ns - t.start_ns) / 1e9,
        "window_s": None if end_ns is None else (end_ns - w.start_ns) / 1e9,
        "timer_start_after_window_s": start_after_s,
        "timer_end_before_window_end_s": end_before_s,
        "dirty_files_at_window_end": len(dirty) if r.kind == "save" else None,
        "dirty_bytes_at_window_end": dirty_bytes if r.kind == "save" else None,
    }
    if inside and (start_after_s < -STAMP_SLACK_S or (end_before_s is not None and end_before_s < -STAMP_SLACK_S)):
        bad.append(f"{r.id}: the timer runs outside ckprof's window")
    elif dirty:
        # dirty at the window's end (the fsync rule's files), so dirty when a timer inside or before it stopped
        bad.append(
            f"{r.id}: the timer stopped with {len(dirty)} file(s), {int(dirty_bytes)} B, still dirty: its rate is "
            "partly the page cache's"
        )
    return item


def run_timer_rule(inp: AuditInput) -> RuleCheck:
    rule = RUN_TIMER_RULE
    timers, source = workload_timers(inp.meta), "the ckprof workload's own (CLOCK_MONOTONIC, the recording's clock)"
    inside = True
    if not timers:
        dlio, why = dlio_timers(inp)
        if dlio is None:
            return RuleCheck("run_timer", rule, UNKNOWN, why)
        timers, source, inside = dlio, why, False
    per: list[dict[str, Any]] = []
    bad: list[str] = []
    pairs = list(zip(inp.windows, inp.rows))
    for t in timers:
        if inside:  # the workload's: its own windows, by step
            match = [(w, r) for w, r in pairs if r.source == "workload" and r.kind == t.kind and r.step == t.step]
        else:  # another program's: the window of its kind that overlaps the timer most
            overlap = [
                (min(t.end_ns, w.app_end_ns) - max(t.start_ns, w.start_ns), w, r)
                for w, r in pairs
                if r.kind == t.kind and w.app_end_ns is not None
            ]
            match = [(w, r) for o, w, r in sorted(overlap, key=lambda x: -x[0])[:1] if o > 0]
        if match:
            per.append(_timed(*match[0], t, inp.evidence, inside, bad))
    figures: dict[str, Any] = {"timer_source": source, "timers": len(timers), "per_checkpoint": per}
    if not per:
        return RuleCheck("run_timer", rule, UNKNOWN, f"no timer of the run matches a window ({source})", figures)
    if bad:
        return RuleCheck("run_timer", rule, FAIL, "; ".join(bad[:5]), figures)
    where = "inside ckprof's windows" if inside else "beside ckprof's windows"
    return RuleCheck("run_timer", rule, PASS, f"{len(per)} timer(s) {where}, none stopped with dirty pages", figures)


# -- DLIO as the command (dlio_benchmark: Hydra arguments, its output folder) ------------------------


def dlio_argv(meta: Meta) -> list[str] | None:
    """The argv when DLIO is the command (the recorder named it in meta.json provenance.dlio)."""
    if meta.provenance is None or meta.provenance.dlio is None:
        return None
    return meta.argv


@dataclass(frozen=True)
class DlioCheckpointConfig:
    fsync: bool | None = None


@dataclass(frozen=True)
class DlioWorkloadConfig:
    """The part of DLIO's workload YAML the audit reads (dlio_benchmark/utils/config.py: its
    checkpoint section's fsync)."""

    checkpoint: DlioCheckpointConfig = field(default_factory=DlioCheckpointConfig)


@dataclass(frozen=True)
class DlioSaveSpan:
    """One save_ckpt entry of DLIO's per-epoch stats: its start and end, local time (utcnow())."""

    start: Any = None  # a string; another type fails as the file's damage (_dlio_unix_s)
    end: Any = None


def dlio_workload_fsync(meta: Meta, argv: Sequence[str]) -> tuple[bool | None, str]:
    """DLIO's `checkpoint.fsync` from its workload YAML (--config-dir DIR workload=NAME:
    DIR/workload/NAME.yaml, as Hydra composes it), read as the report is made: the recording keeps
    the argv and cwd, not the file."""
    cwd = meta.cwd or ""
    found = [
        os.path.normpath(os.path.join(cwd, p))
        for p in hydra.group_files(argv)
        if os.path.basename(os.path.dirname(p)) == "workload"
    ]
    if not found:
        return None, "DLIO's workload config is its packaged one (no --config-dir): not read"
    path = next((p for p in found if os.path.isfile(p)), found[0])
    try:
        import yaml  # type: ignore[import-untyped]  # PyYAML: Hydra's and OmegaConf's (DLIO needs them); not ckprof's
    except ImportError:
        return None, f"DLIO's workload YAML {path}: PyYAML is not installed to read it"
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        return (
            None,
            f"DLIO's workload YAML {path} cannot be read now ({e.__class__.__name__}): the recording keeps no copy",
        )
    value = parsed(DlioWorkloadConfig, doc).checkpoint.fsync
    if value is None:
        return None, f"DLIO's workload YAML {path} sets no checkpoint.fsync"
    return value, f"DLIO's workload YAML {path} checkpoint.fsync: {value} (read now: the recording keeps no copy)"


def dlio_timers(inp: AuditInput) -> tuple[list[Timer] | None, str]:
    """Each DLIO save as DLIO timed it: its per-rank {rank}_per_epoch_stats.json (statscounter
    start_save_ckpt/end_save_ckpt, local time to the µs) in ++workload.output.folder; per save the
    first rank's start to the last rank's end, put on the recording's clock (recording/timebase.py).
    Else (None, why)."""
    argv = dlio_argv(inp.meta)
    if argv is None or inp.timebase is None:
        return None, (
            "the command's own timer is not in the recording (ckprof reads a ckprof workload run's results "
            "and DLIO's per-epoch stats; not mlpstorage's)"
        )
    folder = hydra.value(argv, "workload.output.folder")
    if folder is None:
        return None, "DLIO's output folder is Hydra's run directory (no workload.output.folder= on its command line)"
    folder = os.path.normpath(os.path.join(inp.meta.cwd or "", folder))
    spans: dict[tuple[str, str], list[tuple[float, float]]] = {}
    offset_s = inp.meta.host.utc_offset_s  # the recording machine's local time
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith("_per_epoch_stats.json"))
        for n in names:
            with open(os.path.join(folder, n)) as f:
                stats = json.load(f)
            for epoch, got in (stats or {}).items():
                for key, t in (got or {}).items():
                    save = parsed(DlioSaveSpan, t) if key.startswith("save_ckpt") else None
                    if save is not None and save.start is not None and save.end is not None:
                        span = (_dlio_unix_s(save.start, offset_s), _dlio_unix_s(save.end, offset_s))
                        spans.setdefault((epoch, key), []).append(span)
    except (OSError, ValueError, TypeError, AttributeError) as e:
        return None, f"DLIO's per-epoch stats in {folder} cannot be read now ({e.__class__.__name__}: {e})"
    if not spans:
        return None, f"no DLIO save timed in {folder} (no *_per_epoch_stats.json with save_ckpt entries)"
    tb = inp.timebase
    timers = [
        Timer(
            "save",
            int(tb.to_monotonic_ns(int(min(a for a, _ in v) * 1e9))),
            int(tb.to_monotonic_ns(int(max(b for _, b in v) * 1e9))),
        )
        for v in spans.values()
    ]
    zone = (
        "the recording's UTC offset"
        if offset_s is not None
        else "this machine's time zone: the recording has no offset"
    )
    return sorted(timers, key=lambda t: t.start_ns), (
        f"DLIO's own: {len(names)} rank(s)' per-epoch stats in {folder} (local wall clock in {zone}, put on the recording's)"
    )


def _dlio_unix_s(stamp: str, offset_s: int | None) -> float:
    """A DLIO stamp (utility.utcnow(): datetime.now().isoformat(), local time, µs) as Unix seconds:
    local time at the recording machine's UTC offset (meta.json host.utc_offset_s), else in this
    machine's time zone (a recording from before ckprof kept the offset)."""
    t = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f")
    return (t.replace(tzinfo=timezone(timedelta(seconds=offset_s))) if offset_s is not None else t).timestamp()
