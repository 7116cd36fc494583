"""MLPerf Storage's checkpointing rules, in one place: their numbers, their wording, and the check of
a `ckprof workload` run (or `ckprof workload load`) against them.

Source: mlcommons/storage Rules.md, section 4 "Validating the Checkpointing Workloads" (the v3.0
round's rules, kept as they are for v4.0: its Table 2 note says so), and for v2.0 the round's
Submission_guidelines.md §2.2 "Checkpointing". The rule numbers below (4.3.1 ...) are Rules.md's.
storage#841 (a missing "not" in 4.3.5 let subset runs of 70B/405B/1T publish; withdrawn) is why
subset is refused outright here.

A check is one of four results:
- meets:          the run does what the rule asks;
- violates:       it cannot be a valid run, and a real run is refused before any rank starts
                  (a UsageError saying what to do); --dry-run shows it;
- flagged:        it is not what the rule asks, but the run is useful anyway (a scaled model, one
                  checkpoint, a warm load): printed as a warning, kept in the summary;
- not applicable: the rule has nothing to say about this invocation (and why).

The numbers and wording live in ckprof.recording.mlperf_rules, which the audit of recorded runs
(ckprof.analysis.audit) reads too; here are the workload's checks against them.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass, field

from ckprof.errors import UsageError
from ckprof.recording.mlperf_rules import (
    ACCELERATOR_GB_BYTES,
    ACCELERATORS,
    CACHE_EXEMPT_MEMORY_RATIO,
    CHECKPOINTS_READ,
    CHECKPOINTS_WRITTEN,
    EDITIONS,
    MODELS,
    NONE,
    READ_AFTER_WRITE_MAX_GAP_S,
    RULES,
    RULES_SOURCE,
    SUBSET_ACCELERATORS,
    SUBSET_MODELS,
    V3,
    Accelerator,
)
from ckprof.units import fmt_bytes

MEETS, VIOLATES, FLAGGED, NOT_APPLICABLE = "meets", "violates", "flagged", "not applicable"


@dataclass
class Check:
    rule: str  # Rules.md's number, e.g. "4.3.5"
    status: str  # meets | violates | flagged | not applicable
    why: str
    hint: str | None = None  # what to do, for a violation
    figures: dict = field(default_factory=dict)  # the numbers it was judged on, units in the names

    @property
    def name(self) -> str:
        return RULES[self.rule][0]

    @property
    def title(self) -> str:
        return RULES[self.rule][1]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["name"], d["title"] = self.name, self.title
        return d


def check_edition(edition: str) -> str:
    if edition not in EDITIONS:
        raise UsageError(f"unknown --rules {edition!r}; give one of {', '.join(EDITIONS)}")
    return edition


def accelerator(edition: str, name: str | None) -> Accelerator | None:
    """The declared accelerator of `edition`'s table; an unknown name is refused with the list."""
    if name is None or edition == NONE:
        return None
    table = ACCELERATORS[edition]
    try:
        return table[name.lower()]
    except KeyError:
        names = ", ".join(f"{a.name} ({a.memory_gb} GB{', whatif only' if a.whatif else ''})" for a in table.values())
        raise UsageError(
            f"unknown --accelerator-type {name!r} for MLPerf Storage {edition}; its accelerators: {names}",
            hint="Rules.md Table 3 (4.3.4)",
        ) from None


def client_memory_bytes() -> int:
    """This host's memory: psutil.virtual_memory().total (MemTotal of /proc/meminfo)."""
    import psutil

    return int(psutil.virtual_memory().total)


# -- a save run (`ckprof workload`) -------------------------------------------------------------


def check_save(plan, cfg, memory_bytes: int | None = None) -> list[Check]:
    """Every rule against a save run's plan and config (nothing is run or written)."""
    edition = check_edition(cfg.rules)
    if cfg.accelerators is not None and cfg.accelerator_type is None:
        raise UsageError("--accelerators needs --accelerator-type (which accelerator there are N of)")
    if cfg.accelerators is not None and cfg.accelerators < 1:
        raise UsageError(f"--accelerators must be at least 1 (got {cfg.accelerators})")
    if edition == NONE:
        return []
    acc = accelerator(edition, cfg.accelerator_type)
    return [
        _model(plan),
        _subset(plan, edition),
        _accelerators(plan, cfg, acc),
        _fsync(cfg),
        _counts(writes=cfg.count, reads=1 if cfg.load else 0, two_invocations=not cfg.load),
        _cache_save(plan, cfg, edition, memory_bytes),
        _gap_save(cfg),
    ]


def _model(plan) -> Check:
    name = plan.preset.name
    if name not in MODELS:
        return Check(
            "4.3.3",
            FLAGGED,
            f"{name} is none of MLPerf's four models ({', '.join(MODELS)}; a changed shape or layout is named "
            "with a '*')",
            figures={"model": name},
        )
    from .model import PRESETS

    table_world = PRESETS[name].par.world
    if plan.world != table_world:
        return Check(
            "4.3.3",
            FLAGGED,
            f"{name} over {plan.world} ranks, not Table 2's {table_world} (CLOSED takes {table_world}; OPEN "
            "multiples of TP×PP, 4.6.4)",
            figures={"model": name, "world": plan.world, "table_world": table_world},
        )
    if plan.scale != 1.0:
        return Check(
            "4.3.3",
            FLAGGED,
            f"{name}'s layout, but every file scaled × {plan.scale:.6g}: {fmt_bytes(plan.nbytes)} per checkpoint "
            f"instead of {fmt_bytes(plan.full_bytes)}",
            figures={"model": name, "scale": plan.scale, "bytes": plan.nbytes, "full_bytes": plan.full_bytes},
        )
    return Check("4.3.3", MEETS, f"{name} as Table 2, at full size", figures={"model": name, "scale": 1.0})


def _subset(plan, edition: str) -> Check:
    if not plan.subset:
        return Check("4.3.5", NOT_APPLICABLE, "not a subset run")
    allowed = SUBSET_MODELS[edition]
    name = plan.preset.name
    figures = {"model": name, "ranks": plan.nranks}
    if name not in allowed:
        return Check(
            "4.3.5",
            VIOLATES,
            f"--subset of {name}: MLPerf Storage {edition} allows subset runs only of {', '.join(allowed)}",
            hint=f"drop --subset to run {name} in full, or --preset {allowed[0]} --subset"
            + (", or --rules v2.0 to compare with that round" if edition == V3 else ""),
            figures=figures,
        )
    if plan.nranks != SUBSET_ACCELERATORS:
        return Check(
            "4.3.5",
            VIOLATES,
            f"--subset of {plan.nranks} ranks: a subset run has exactly {SUBSET_ACCELERATORS} accelerators",
            hint=f"leave --ranks out, or --ranks {SUBSET_ACCELERATORS}",
            figures=figures,
        )
    return Check("4.3.5", MEETS, f"subset of {name}, {plan.nranks} ranks", figures=figures)


def _accelerators(plan, cfg, acc: Accelerator | None) -> Check:
    if acc is None:
        return Check(
            "4.3.4",
            FLAGGED,
            "no --accelerator-type declared: whose memory must hold the checkpoint is unknown (v3.0's checker "
            "fails a run that records none)",
        )
    count = cfg.accelerators or plan.nranks
    have = acc.memory_gb * ACCELERATOR_GB_BYTES * count
    need = plan.full_bytes  # the model's checkpoint at MLPerf's size, of the ranks that run (not --scale'd)
    figures = {
        "accelerator": acc.name,
        "memory_gb": acc.memory_gb,
        "accelerators": count,
        "aggregate_memory_bytes": have,
        "checkpoint_bytes": need,
        "whatif": acc.whatif,
    }
    held = f"{count} × {acc.name} ({acc.memory_gb} GB, read as GiB) = {fmt_bytes(have)}"
    if have < need:
        least = -(-need // (acc.memory_gb * ACCELERATOR_GB_BYTES))
        return Check(
            "4.3.4",
            VIOLATES,
            f"{held} cannot hold the {fmt_bytes(need)} checkpoint of {plan.preset.name}",
            hint=f"declare --accelerators {least} or more, or a larger --accelerator-type",
            figures=figures,
        )
    if acc.whatif:
        return Check(
            "4.3.4", FLAGGED, f"{held} holds {fmt_bytes(need)}, but {acc.name} is whatif only", figures=figures
        )
    if cfg.accelerators is not None and cfg.accelerators != plan.nranks:
        return Check(
            "4.3.4",
            FLAGGED,
            f"{held} holds {fmt_bytes(need)}, but {plan.nranks} processes run: MLPerf's accelerators are its "
            "processes (4.6.2)",
            figures=figures,
        )
    return Check("4.3.4", MEETS, f"{held} holds the {fmt_bytes(need)} checkpoint", figures=figures)


def _fsync(cfg) -> Check:
    if cfg.fsync:
        return Check("4.3.2", MEETS, "every rank fsyncs each file it writes before the checkpoint is published")
    return Check("4.3.2", FLAGGED, "--no-fsync: the checkpoints are not fsynced", figures={"fsync": False})


def _counts(writes: int, reads: int, two_invocations: bool) -> Check:
    figures = {
        "writes": writes,
        "reads": reads,
        "required_writes": CHECKPOINTS_WRITTEN,
        "required_reads": CHECKPOINTS_READ,
    }
    if writes == 0 and reads and reads < CHECKPOINTS_READ:
        why = (
            f"this read invocation reads {reads} checkpoint, not {CHECKPOINTS_READ} "
            "(`ckprof workload load` reads one checkpoint)"
        )
        return Check("4.6.3", FLAGGED, why, figures=figures)
    if writes and writes != CHECKPOINTS_WRITTEN:
        why = f"{writes} checkpoint(s) written, not {CHECKPOINTS_WRITTEN} (--count {CHECKPOINTS_WRITTEN})"
        return Check("4.6.3", FLAGGED, why, figures=figures)
    if writes and two_invocations:
        why = (
            f"{writes} writes and no read: the write invocation of the two-invocation workflow; its reads "
            "follow in `ckprof workload load`"
        )
        return Check("4.6.3", MEETS, why, figures=figures)
    if writes and reads < CHECKPOINTS_READ:
        why = f"{writes} writes, then {reads} read, not {CHECKPOINTS_READ} (--load reads the newest checkpoint once)"
        return Check("4.6.3", FLAGGED, why, figures=figures)
    return Check("4.6.3", MEETS, f"{writes} writes, then {reads} reads", figures=figures)


def _cache(edition: str, data_bytes: int, memory_bytes: int, how: str | None, what: str) -> Check:
    """How a read is kept from the page cache: `how` it was cleared (None: it was not)."""
    ratio = CACHE_EXEMPT_MEMORY_RATIO[edition]
    figures = {
        "data_bytes": data_bytes,
        "client_memory_bytes": memory_bytes,
        "exempt_ratio": ratio,
        "cleared_by": how,
    }
    if how is not None:
        return Check("4.3.1", MEETS, f"{what} cleared before the read: {how}", figures=figures)
    if ratio is not None and data_bytes > ratio * memory_bytes:
        why = f"--warm, but {fmt_bytes(data_bytes)} per host is over {ratio}× its {fmt_bytes(memory_bytes)} of memory"
        return Check("4.3.1", MEETS, why, figures=figures)
    over = f" and {fmt_bytes(data_bytes)} is not over {ratio}× this host's {fmt_bytes(memory_bytes)}" if ratio else ""
    return Check(
        "4.3.1",
        FLAGGED,
        f"--warm: the read may be served from the page cache{over}",
        figures=figures,
    )


def _clearing(cfg) -> str | None:
    """How the workload keeps a load from the page cache (ckprof.workloads.store FileStore.before_read
    evicts each file: fdatasync, then posix_fadvise DONTNEED), or None with --warm."""
    if cfg.direct:
        how = "O_DIRECT reads"
    elif cfg.warm:
        how = None
    else:
        how = "each of its files evicted (fdatasync + posix_fadvise POSIX_FADV_DONTNEED)"
    if how is not None and cfg.drop_caches:
        how += " + /proc/sys/vm/drop_caches"
    elif cfg.drop_caches:
        how = "/proc/sys/vm/drop_caches"
    return how


def _cache_save(plan, cfg, edition: str, memory_bytes: int | None) -> Check:
    from .config import is_s3

    if is_s3(cfg.target):
        return Check("4.3.1", NOT_APPLICABLE, "an object store: its reads come over the network, no page cache")
    if not cfg.load:
        return Check(
            "4.3.1",
            NOT_APPLICABLE,
            "no read in this invocation: `ckprof workload load` evicts the checkpoint's files first (unless --warm)",
        )
    mem = client_memory_bytes() if memory_bytes is None else memory_bytes
    return _cache(edition, plan.nbytes, mem, _clearing(cfg), "the checkpoint's pages")


def _gap_save(cfg) -> Check:
    if cfg.load:
        return Check("4.7.1", NOT_APPLICABLE, "write and read in one invocation: no gap check applies")
    return Check(
        "4.7.1",
        NOT_APPLICABLE,
        "a write invocation: each checkpoint's manifest keeps when it was written (written_unix_ns); "
        "`ckprof workload load` measures the gap",
    )


# -- a read run (`ckprof workload load`) ----------------------------------------------------------


def invocation_start_unix_ns() -> int | None:
    """When this process started, wall clock, in ns: proc(5)'s starttime (field 22 of
    /proc/self/stat, clock ticks after boot, on CLOCK_BOOTTIME) taken back from now. MLPerf's
    read.invocation_start_time is its process's start too (4.7.1). psutil's create_time adds
    starttime to /proc/stat's btime, whole seconds, and was seen 0.76 s early; this is within a tick
    (10 ms), rounded down. Where /proc/self/stat cannot be read: None (the gap is then unknown)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            after_comm = f.read().rsplit(b")", 1)[1].split()
        ticks = int(after_comm[19])  # fields 3.. follow the command's ')': field 22 is index 19
        age_ns = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - ticks * 10**9 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time_ns() - max(0, age_ns)


def written_here(manifest: dict) -> bool:
    """Whether this very process wrote the checkpoint (its run id is `<host>-<pid>-<hex>`, launch.main):
    a write and load in one invocation, where no gap applies."""
    return str(manifest.get("run_id", "")).startswith(f"{socket.gethostname()}-{os.getpid()}-")


def check_load(manifest: dict, cfg, invoked_unix_ns: int | None = None, memory_bytes: int | None = None) -> list[Check]:
    """The rules a read invocation answers for: its reads, the cache and the gap since the write."""
    edition = check_edition(cfg.rules)
    if edition == NONE:
        return []
    from .config import is_s3

    what = "the write invocation's"
    out = [
        Check(r, NOT_APPLICABLE, f"{what} (checked when it was written)") for r in ("4.3.3", "4.3.5", "4.3.4", "4.3.2")
    ]
    out.append(_counts(writes=0, reads=1, two_invocations=True))
    data = int(manifest.get("bytes") or 0)
    if is_s3(cfg.target):
        out.append(Check("4.3.1", NOT_APPLICABLE, "an object store: its reads come over the network, no page cache"))
    else:
        mem = client_memory_bytes() if memory_bytes is None else memory_bytes
        out.append(_cache(edition, data, mem, _clearing(cfg), "its files' pages"))
    out.append(_gap(manifest, edition, invoked_unix_ns))
    return out


def _gap(manifest: dict, edition: str, invoked_unix_ns: int | None) -> Check:
    limit = READ_AFTER_WRITE_MAX_GAP_S[edition]
    if limit is None:
        return Check("4.7.1", NOT_APPLICABLE, f"MLPerf Storage {edition} has no write-to-read gap rule")
    if written_here(manifest):
        return Check("4.7.1", NOT_APPLICABLE, "written and read in one invocation: no gap check applies")
    written = manifest.get("written_unix_ns")
    if not isinstance(written, int) or isinstance(written, bool):
        return Check(
            "4.7.1",
            FLAGGED,
            "gap unknown: the manifest does not say when it was written (a checkpoint from a ckprof before "
            "written_unix_ns)",
            figures={"gap_s": None, "write_end_unix_ns": None, "read_start_unix_ns": invoked_unix_ns},
        )
    start = invocation_start_unix_ns() if invoked_unix_ns is None else invoked_unix_ns
    if start is None:
        return Check(
            "4.7.1",
            FLAGGED,
            "gap unknown: this process's start could not be read (/proc/self/stat, proc(5))",
            figures={"gap_s": None, "write_end_unix_ns": written, "read_start_unix_ns": None},
        )
    gap_s = (start - written) / 1e9
    figures = {
        "gap_s": gap_s,
        "max_gap_s": limit,
        "write_end_unix_ns": written,
        "read_start_unix_ns": start,
        "clock_skew": gap_s < 0,
    }
    if gap_s < 0:
        why = (
            f"the read started {-gap_s:.3f} s before the write ended by the clocks that stamped them: clock skew "
            "between the writing and the reading host, not a read before the write"
        )
        return Check("4.7.1", FLAGGED, why, figures=figures)
    said = f"the read invocation started {gap_s:.3f} s after the checkpoint was written"
    if gap_s > limit:
        return Check("4.7.1", FLAGGED, f"{said}: over {limit:g} s", figures=figures)
    return Check("4.7.1", MEETS, f"{said} (at most {limit:g} s)", figures=figures)


# -- what a run does with its checks ---------------------------------------------------------------


def enforce(checks: list[Check]) -> None:
    """Refuse a run one of whose checks is a violation: the first, as one line with what to do."""
    for c in checks:
        if c.status == VIOLATES:
            raise UsageError(f"{c.why}: MLPerf Storage Rules.md {c.rule}, {c.name}", hint=c.hint)


def flagged_lines(checked: dict | None) -> list[str]:
    """The warnings a run prints (from its summary()): one line per flagged rule."""
    if not checked:
        return []
    return [
        f"ckprof: warning: MLPerf Storage {checked['edition']} rule {c['rule']} ({c['title']}) flagged: {c['why']}"
        for c in checked.get("checks", [])
        if c["status"] == FLAGGED
    ]


def say_flagged(checked: dict | None) -> None:
    """Print each flagged rule on stderr, once (rank 0 under a launcher), when the run goes ahead:
    after everything that can refuse it, so a refusal stays one line."""
    from ckprof.errors import say

    from .comm import launcher_rank

    if launcher_rank() == 0:
        for line in flagged_lines(checked):
            say(line)


def summary(edition: str, checks: list[Check]) -> dict:
    """meta.json's workload.rules: the edition, where its rules come from, and every check."""
    if edition == NONE:
        return {"edition": NONE, "source": None, "checks": [], "why": "--rules none: not checked"}
    return {
        "edition": edition,
        "source": RULES_SOURCE[edition],
        "checks": [c.to_dict() for c in checks],
        "counts": {s: sum(c.status == s for c in checks) for s in (MEETS, VIOLATES, FLAGGED, NOT_APPLICABLE)},
    }


def describe(edition: str, checks: list[Check]) -> str:
    """The dry-run's rules: each rule, its result and why."""
    if edition == NONE:
        return "rules       none (--rules none): MLPerf Storage's rules not checked"
    lines = [f"rules       MLPerf Storage {edition} ({RULES_SOURCE[edition]}); --rules none skips them"]
    for c in checks:
        lines.append(f"  {c.rule:<6} {c.status:<15} {c.title}: {c.why}")
        if c.status == VIOLATES:
            lines.append(f"  {'':<6} {'':<15} a run is refused; {c.hint}" if c.hint else "  a run is refused")
    return "\n".join(lines)
