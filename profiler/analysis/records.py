"""The analysis's own typed records: a checkpoint window as the steps build it (windows.py →
grouping.py → filesaves.py → durability.py → checkpoints.py), and the recording's events they read,
each parsed once where the events are read (`from_event`), so the steps read attributes.

The recording's format is unchanged (events.jsonl, docs/recording-format.md): these are read-side
views of it. A NaN a pandas row holds for a field an event did not have is None here
(ckprof.jsonsafe.json_value, the one NaN rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ckprof.jsonsafe import json_value

from .model import Writer


def _v(row: Any, key: str) -> Any:
    """An event's field as a plain value (None where the event lacks it or pandas filled NaN)."""
    return json_value(row.get(key)) if hasattr(row, "get") else None


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


@dataclass(slots=True)
class SavedFile:
    """One file of a file-level save (filesaves.py): its path after any rename, the processes that
    wrote it, its first burst's start and last burst's end (monotonic ns), its size after the save
    (bytes; None: unknown, 0.0: deleted) and why the size is unknown, where the recorder said."""

    path: str
    start_ns: float
    end_ns: float = 0.0
    writers: list[int] = field(default_factory=list)
    bytes: float | None = None
    size_unknown: object = None


@dataclass(frozen=True, slots=True)
class ProcessSeen:
    """A `file_activity_process` event: a process of the recorded tree that wrote under --path."""

    pid: int
    ppid: int | None
    comm: str | None
    cmdline: list[str] | None
    why_unknown: str | None
    comm_from: str | None = None  # set where the comm is not the process's own reading (its parent's)

    @classmethod
    def from_event(cls, row: Any) -> ProcessSeen:
        cmdline = row.get("cmdline")
        return cls(
            pid=int(row["pid"]),
            ppid=_int(_v(row, "ppid")),
            comm=_v(row, "comm"),
            cmdline=list(cmdline) if isinstance(cmdline, list) else None,
            why_unknown=_v(row, "why_unknown") or None,
            comm_from=_v(row, "comm_from") or None,
        )


@dataclass(slots=True)
class Window:
    """One checkpoint window (a save or a load): its id and where it came from (`source`: api,
    patch, workload... for markers; files; inferred), its start and application end (monotonic ns;
    the end None: it never returned), and what the markers, the file activity and the grouping
    said of it. Built by windows.py (markers, bursts), filesaves.py (file saves, the join) and
    grouping.py (one checkpoint per save, `parts` the windows it was made of)."""

    id: str
    source: str
    kind: str
    start_ns: float
    app_end_ns: float | None
    bytes_app: float | None = None  # B: what the program said it wrote, or its files' sizes
    path: str | None = None
    step: int | None = None
    rank: int | None = None
    name: str | None = None  # the framework call (torch.save, ...): the report's `api`
    ok: bool | None = None
    blocking_s: float | None = None  # s the caller was held (an async save's blocking part)
    error: str | None = None
    pid: int | None = None
    host: str | None = None
    # a load's page-cache look as it started (cachestat(2)), bytes
    cached_bytes_at_start: float | None = None
    file_bytes_at_start: float | None = None
    own_finish_s: float | None = None  # s the app's own fsync/rename of its files took after the return
    finished_by: list[str] | None = None  # those calls: fsync, rename, sync...
    nested_ids: list[str] = field(default_factory=list)  # ids of windows folded into this one
    parts: list[Window] | None = None  # a grouped checkpoint's windows
    # what the file activity showed (filesaves.py): its files, writers, the bytes several wrote
    files: list[SavedFile] | None = None
    writers: list[Writer] | None = None
    bytes_shared: float | None = None
    file_window: tuple[float, float] | None = None  # first file event → last, monotonic ns
    own_folder: bool = False  # a folder of its own: one save whatever calls wrote it
    seen_by: list[str] | None = None  # a marker joined with file activity: both sources
    call_id: str | None = None  # a stream's piece: the call it belongs to
    # a file save's makings, to split a stream among several calls (filesaves._split_stream)
    file_group: tuple[Any, ...] | None = None


# -- the file tracker's events (record/filetracker.py), read by durability.py -----------------


@dataclass(frozen=True, slots=True)
class FileEvent:
    """A file tracker's verdict on one file of a checkpoint (`file_durable`,
    `file_deleted_before_durable`, `file_gone_before_poll`, `file_pending_at_end`,
    `file_untracked`): when (monotonic ns), the tracker's first look (ns, and its dirty bytes),
    the dirty bytes it ended with, the f_type behind it (`fs_magic`; `has_fs_magic` False where the
    recording has no such field: made before ckprof recorded it)."""

    event: str
    id: str
    path: str | None
    t_ns: float | None = None
    pending_bytes: float | None = None
    first_poll_ns: float | None = None
    first_poll_pending_bytes: float | None = None
    fs_magic: int | None = None
    has_fs_magic: bool = False
    reason: str | None = None

    @classmethod
    def from_event(cls, row: Any) -> FileEvent:
        return cls(
            event=str(row["event"]),
            id=str(row["id"]),
            path=_str(_v(row, "path")),
            t_ns=_float(_v(row, "t_ns")),
            pending_bytes=_float(_v(row, "pending_bytes")),
            first_poll_ns=_float(_v(row, "first_poll_ns")),
            first_poll_pending_bytes=_float(_v(row, "first_poll_pending_bytes")),
            fs_magic=_int(_v(row, "fs_magic")),
            has_fs_magic="fs_magic" in row,
            reason=_str(_v(row, "reason")),
        )


@dataclass(frozen=True, slots=True)
class TrackerRun:
    """The `file_tracker` event: whether the tracker ran, and why not."""

    ok: bool
    reason: str | None

    @classmethod
    def from_event(cls, row: Any) -> TrackerRun:
        return cls(ok=bool(_v(row, "ok")), reason=_str(_v(row, "reason")))


@dataclass(frozen=True, slots=True)
class CheckpointEnd:
    """A `checkpoint_end` event's durability fields: the dirty bytes of its files as the call
    returned and how many files were looked at, whether an upload's completing call returned
    without error (`uploaded`), when (monotonic ns); the seconds an async save held its caller
    (`blocking_s`)."""

    id: str = ""
    t_ns: float | None = None
    pending_bytes_at_return: float | None = None
    files_at_return: int | None = None
    uploaded: bool | None = None
    blocking_s: float | None = None

    @classmethod
    def from_event(cls, row: Any) -> CheckpointEnd:
        up = _v(row, "uploaded")
        return cls(
            id=str(row["id"]),
            t_ns=_float(_v(row, "t_ns")),
            pending_bytes_at_return=_float(_v(row, "pending_bytes_at_return")),
            files_at_return=_int(_v(row, "files_at_return")),
            uploaded=up if isinstance(up, bool) else None,
            blocking_s=_v(row, "blocking_s"),
        )


@dataclass(frozen=True, slots=True)
class CheckpointExtend:
    """A `checkpoint_extend` event of the window `id`: the app's own fsync/fdatasync/rename/sync of
    a save's file after the call (`op`, the path, the name it was renamed to), or an upload's
    completion; when (monotonic ns)."""

    id: str
    t_ns: float
    op: str | None
    path: str | None
    renamed_to: str | None
    uploaded: bool | None

    @classmethod
    def from_event(cls, row: Any) -> CheckpointExtend:
        up = _v(row, "uploaded")
        return cls(
            id=str(row["id"]),
            t_ns=float(row["t_ns"]),
            op=_str(_v(row, "op")),
            path=_str(_v(row, "path")),
            renamed_to=_str(_v(row, "renamed_to")),
            uploaded=up if isinstance(up, bool) else None,
        )


@dataclass(frozen=True, slots=True)
class Mark:
    """A `mark` event (`ckprof.mark(text)`): when (monotonic ns) and its text ("" where it has none)."""

    t_ns: int
    text: str

    @classmethod
    def from_event(cls, row: Any) -> Mark:
        text = _v(row, "text")
        return cls(t_ns=int(row["t_ns"]), text="" if text is None else str(text))


@dataclass(frozen=True, slots=True)
class TrainStep:
    """A `train_step` event: when (monotonic ns), its process (`pid`; `host` in a job's events)
    and how it was counted (`via` "api": ckprof.step(); else an optimizer's post-hook, `optimizer`
    its index, read by phases.step_ends). A field the event lacks is None."""

    t_ns: float
    pid: Any = None
    host: Any = None
    via: Any = None
    optimizer: Any = None

    @classmethod
    def from_event(cls, row: Any) -> TrainStep:
        return cls(
            t_ns=float(row["t_ns"]),
            pid=_v(row, "pid"),
            host=_v(row, "host"),
            via=_v(row, "via"),
            optimizer=_v(row, "optimizer"),
        )


@dataclass(frozen=True, slots=True)
class PhaseEvent:
    """A `checkpoint_phase` event (docs/recording-format.md): the save `id`, the `phase` it reports
    and whether it went well (`ok`; None: the event did not say), when (monotonic ns) and, for
    staging, its own start (ns), who staged and the D2H copy's bytes, seconds and basis (read by
    phases.staged_at). A field the event lacks is None."""

    id: Any
    t_ns: float
    phase: Any = None
    ok: Any = None
    start_ns: float | None = None
    staged_by: Any = None
    d2h_bytes: float | None = None
    d2h_s: float | None = None
    d2h_basis: Any = None

    @classmethod
    def from_event(cls, row: Any) -> PhaseEvent:
        return cls(
            id=row["id"],
            t_ns=float(row["t_ns"]),
            phase=_v(row, "phase"),
            ok=_v(row, "ok"),
            start_ns=_float(_v(row, "start_ns")),
            staged_by=_v(row, "staged_by"),
            d2h_bytes=_float(_v(row, "d2h_bytes")),
            d2h_s=_float(_v(row, "d2h_s")),
            d2h_basis=_v(row, "d2h_basis"),
        )


def events_of(events: pd.DataFrame, *kinds: str) -> pd.DataFrame:
    """The rows of events.jsonl (read as a table, Recording.events) of the given kinds, in their
    order; none where the table has no `event` column (a recording without events)."""
    if "event" not in events:
        return events.iloc[0:0]
    return events[events["event"].isin(kinds)]


def checkpoint_ends(events: pd.DataFrame) -> list[CheckpointEnd]:
    """The recording's `checkpoint_end` events, in the events' order."""
    return [CheckpointEnd.from_event(r) for r in events_of(events, "checkpoint_end").to_dict("records")]


def checkpoint_extends(events: pd.DataFrame) -> list[CheckpointExtend]:
    """The recording's `checkpoint_extend` events, in the events' order."""
    return [CheckpointExtend.from_event(r) for r in events_of(events, "checkpoint_extend").to_dict("records")]


def marks(events: pd.DataFrame) -> list[Mark]:
    """The recording's `mark` events, in the events' order."""
    return [Mark.from_event(r) for r in events_of(events, "mark").to_dict("records")]
