"""meta.json's parts the analysis reads (docs/recording-format.md), parsed once into frozen
dataclasses, so the audit, the provenance and the report's recording section read attributes.

One rule for every part (`parsed`): a field is read from the key of its name; a key that is
missing, or that holds another JSON type than the field's annotation allows, is None (an object
the field requires: an empty part; a list or mapping it requires: empty). Keys a part does not
name are left alone, so a newer recorder's meta.json still reads. A list's items are parsed where
they are objects (a part per item, an item that is not an object skipped); other lists are kept as
recorded. The same rule reads another program's files (DLIO's YAML and statistics, audit.py).

Why not model_base's `from_jsonable`: that one reads back what ckprof itself wrote (the report's
JSON, a round trip) and refuses a key it does not know, so nothing is lost silently; this one reads
what another version, or another program, wrote, and must take what it finds. Two contracts, so two
readers; each is the one place for its rule.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .model import DlioProvenance

T = TypeVar("T")


def parsed(cls: type[T], d: object) -> T:
    """`cls` (a dataclass) from a JSON object by the rule above; not an object: every field empty."""
    src = d if isinstance(d, dict) else {}
    hints = _hints(cls)
    return cls(**{f.name: _value(hints[f.name], src.get(f.name)) for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


_HINTS: dict[type, dict[str, Any]] = {}  # a part's annotations, resolved once


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _fits(hint: Any, v: object) -> bool:
    """Whether a JSON value is of the type a (non-union) annotation names (a bool is no number)."""
    if hint is Any:
        return True
    if dataclasses.is_dataclass(hint):
        return isinstance(v, dict)
    kind = typing.get_origin(hint) or hint
    if kind is tuple:
        kind = list  # JSON has lists; a part holds them as tuples
    if kind in (int, float):
        return isinstance(v, (int, float) if kind is float else int) and not isinstance(v, bool)
    return isinstance(v, kind)


def _value(hint: Any, v: object) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None: None where v is not an X
        return next((_value(a, v) for a in typing.get_args(hint) if a is not type(None) and _fits(a, v)), None)
    if dataclasses.is_dataclass(hint):
        return parsed(typing.cast(type, hint), v)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:  # tuple[Part, ...]: the items that are objects, each a part
        return tuple(_value(args[0], x) for x in v if _fits(args[0], x)) if isinstance(v, list) else ()
    if origin is dict:  # dict[str, X]: every value read as an X
        return {k: _value(args[1], x) for k, x in v.items()} if isinstance(v, dict) else {}
    if hint in (list, dict):
        return v if isinstance(v, hint) else hint()
    return v if _fits(hint, v) else None


# -- host, start, topology, collectors ---------------------------------------------------------------


@dataclass(frozen=True)
class Host:
    """meta.json `host` (record/session.py)."""

    hostname: str | None = None
    kernel: str | None = None
    python: str | None = None
    mem_total_bytes: float | None = None  # B, MemTotal (psutil.virtual_memory().total)
    utc_offset_s: int | None = None  # s east of UTC at the start (tm_gmtoff, localtime(3))


@dataclass(frozen=True)
class Start:
    wall_ns: int | None = None  # ns since the Unix epoch (CLOCK_REALTIME) at the start
    uncertainty_ns: int | None = None  # ns, half the monotonic span the wall reading was taken in (record/clock.py)


@dataclass(frozen=True)
class Mount:
    """A --path's mount (topology.paths[].mount: /proc/self/mountinfo, proc(5))."""

    mount_point: str | None = None
    fstype: str | None = None
    source: str | None = None
    options: str | None = None
    super_options: str | None = None


@dataclass(frozen=True)
class PathChain:
    """One --path and what is behind it (topology.paths[])."""

    path: Any = None  # as given on the command line
    mount: Mount = field(default_factory=Mount)


@dataclass(frozen=True)
class DiskIdentity:
    firmware_rev: str | None = None


@dataclass(frozen=True)
class Topology:
    paths: tuple[PathChain, ...] = ()
    identity: dict[str, DiskIdentity] = field(default_factory=dict)  # disk → its identity


@dataclass(frozen=True)
class GpuProbe:
    ok: bool | None = None


@dataclass(frozen=True)
class GpuDescribe:
    driver_version: str | None = None  # NVML's
    driver_version_error: str | None = None  # why it is not known


@dataclass(frozen=True)
class GpuCollector:
    probe: GpuProbe = field(default_factory=GpuProbe)
    describe: GpuDescribe = field(default_factory=GpuDescribe)


@dataclass(frozen=True)
class NvmeController:
    devices: list = field(default_factory=list)  # the recorded block devices behind it


@dataclass(frozen=True)
class NvmeDescribe:
    controllers: dict[str, NvmeController] = field(default_factory=dict)


@dataclass(frozen=True)
class NvmeCollector:
    describe: NvmeDescribe = field(default_factory=NvmeDescribe)


@dataclass(frozen=True)
class Collectors:
    """meta.json `collectors`: the parts of their descriptions the analysis reads."""

    gpu: GpuCollector | None = None
    nvme: NvmeCollector = field(default_factory=NvmeCollector)


@dataclass(frozen=True)
class ProvenanceMeta:
    """meta.json `provenance` (record/provenance.py)."""

    libraries: dict[str, str] | None = None  # version per library installed for the command's Python
    libraries_unknown: str | None = None
    dlio: DlioProvenance | None = None  # when DLIO is the command
    command_sha256: str | None = None
    config_sha256: dict[str, str] = field(default_factory=dict)
    config_not_hashed: dict[str, str] = field(default_factory=dict)


# -- a `ckprof workload` run (workloads/launch.py, distributed.py: meta.json `workload`) ---------------


@dataclass(frozen=True)
class WorkloadPlan:
    """The plan it ran (workloads/plan.py Plan.to_dict)."""

    preset: str | None = None
    parameters: int | None = None
    subset: bool | None = None
    ranks: int | None = None  # the ranks that ran
    world: int | None = None  # the full layout's ranks
    scale: float | None = None
    bytes: int | None = None  # B, one checkpoint
    full_bytes: int | None = None  # B, one checkpoint at full size


@dataclass(frozen=True)
class WorkloadConfig:
    fsync: bool | None = None
    rules: Any = None  # the edition of the rules the run held itself to, as recorded
    target: str | None = None  # where it wrote: a path or a URL


@dataclass(frozen=True)
class WorkloadTimed:
    """One save or load as the workload timed it: barrier to the last rank's fsync, on the
    recording's CLOCK_MONOTONIC (ns), and its seconds."""

    step: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class WorkloadResults:
    checkpoints: tuple[WorkloadTimed, ...] = ()
    load: WorkloadTimed | None = None


@dataclass(frozen=True)
class ReadAfterWrite:
    """The figures of the workload's own rule 4.7.1 check: its manifest's write time to a load
    invocation's start (s; the two ends Unix ns)."""

    gap_s: float | None = None
    write_end_unix_ns: int | None = None
    read_start_unix_ns: int | None = None


READ_AFTER_WRITE_RULE = "4.7.1"  # mlpstorage's rule number, as the workload's checks name it


@dataclass(frozen=True)
class WorkloadRuleCheck:
    rule: str | None = None
    figures: dict = field(default_factory=dict)  # the rule's own figures (their keys differ by rule)


@dataclass(frozen=True)
class WorkloadRules:
    checks: tuple[WorkloadRuleCheck, ...] = ()

    def read_after_write(self) -> ReadAfterWrite | None:
        """The first rule 4.7.1 check with a gap, else None."""
        found = (parsed(ReadAfterWrite, c.figures) for c in self.checks if c.rule == READ_AFTER_WRITE_RULE)
        return next((g for g in found if g.gap_s is not None), None)


@dataclass(frozen=True)
class Workload:
    plan: WorkloadPlan | None = None  # None: not a `ckprof workload` run (or a load's, without one)
    config: WorkloadConfig = field(default_factory=WorkloadConfig)
    results: WorkloadResults = field(default_factory=WorkloadResults)
    rules: WorkloadRules = field(default_factory=WorkloadRules)


# -- the whole -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Meta:
    """The parts of meta.json the analysis reads (docs/recording-format.md)."""

    command: list | str | None = None  # the argv as recorded
    cwd: str | None = None
    status: str | None = None  # complete, truncated, ...
    truncated: Any = None  # why the recording was cut short, as recorded
    exit: Any = None
    interval_s: float | None = None  # s, the sampling period asked for
    notes: list = field(default_factory=list)  # the recorder's own notes
    ckprof_version: str | None = None
    host: Host = field(default_factory=Host)
    start: Start = field(default_factory=Start)
    topology: Topology = field(default_factory=Topology)
    collectors: Collectors = field(default_factory=Collectors)
    provenance: ProvenanceMeta | None = None  # None: recorded before meta.json had it
    workload: Workload = field(default_factory=Workload)

    @classmethod
    def from_meta(cls, meta: object) -> Meta:
        return parsed(cls, meta)

    @property
    def argv(self) -> list[str] | None:
        """The command as a list of strings; None where it is not a list."""
        return [str(a) for a in self.command] if isinstance(self.command, list) else None
