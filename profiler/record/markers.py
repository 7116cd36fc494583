"""Markers: the one-line API a training script uses to mark its checkpoints.

    import ckprof
    with ckprof.checkpoint(step=100, path="/ckpt/step100", bytes=n):
        save(...)
    ckprof.mark("epoch 3 done")

Under `ckprof record`, CKPROF_EVENTS names the recording's events.jsonl; each event is one
JSON line appended with a single write(2) on an O_APPEND descriptor, so many processes and ranks
can write at once without interleaving (lines stay well under a page), and an event is on disk
the moment it happens, whatever becomes of the recorder. The writing itself (which descriptor; a
command running as another user; a mark that cannot be written) is the one writer's,
ckprof/recording/events.py, shared with the automatic markers. Not under ckprof, every
call returns after one dictionary lookup.
"""

from __future__ import annotations

import itertools
import os
import socket
import sys
import time

# the injected sitecustomize loaded the writer already in a process under `ckprof record`: the
# same module, so a lost mark is said once per process whichever marker lost it
eventfile = sys.modules.get("_ckprof_events")
if eventfile is None:
    from ckprof.recording import events as eventfile

ENV_EVENTS = eventfile.ENV_EVENTS
ENV_EVENTS_FD = eventfile.ENV_EVENTS_FD
ENV_RECORDING = "CKPROF_RECORDING"
ENV_SOURCE = "CKPROF_MARKER_SOURCE"
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")

_ids = itertools.count(1)
ENV_HOST = "CKPROF_HOST"  # the host name a job's recording files this process under
_HOST = os.environ.get(ENV_HOST) or socket.gethostname()


def current_rank() -> int | None:
    for var in _RANK_VARS:
        v = os.environ.get(var)
        if v is not None and v.lstrip("-").isdigit():
            return int(v)
    return None


def active() -> bool:
    """True when running under `ckprof record` (or a workload that records itself)."""
    return ENV_EVENTS in os.environ


def emit(event: str, **fields) -> None:
    """Write one event into the enclosing recording; a no-op outside one. Never raises."""
    path = os.environ.get(ENV_EVENTS)
    if not path:
        return
    rec = {"t_ns": time.monotonic_ns(), "event": event, "pid": os.getpid(), "host": _HOST}
    rank = fields.pop("rank", None)
    rec["rank"] = current_rank() if rank is None else rank
    rec.setdefault("source", os.environ.get(ENV_SOURCE, "api"))
    rec.update({k: v for k, v in fields.items() if v is not None})
    eventfile.append_or_say(path, eventfile.line(rec))  # never raises: a lost mark is said once, the run goes on


def step(n: int | None = None, **fields) -> None:
    """The end of a training step, e.g. ckprof.step() at the bottom of the loop: for loops whose
    steps torch.optim's post-hook cannot see (no torch optimizer). A no-op outside a recording."""
    emit("train_step", n=n, via="api", **fields)


def mark(text: str, **fields) -> None:
    """A point event with a note, e.g. ckprof.mark("epoch 3 done")."""
    emit("mark", text=text, **fields)


class checkpoint:  # noqa: N801  (used as `with ckprof.checkpoint(...)`, like a function)
    """Marks one checkpoint window: start when entered, application end when left.

    `kind` is "save" or "load". `bytes` may be set on the object inside the block
    (`with ckprof.checkpoint(step=1) as w: ...; w.bytes = n`) when known only after the save;
    `end` holds more fields for the end event of a block that returned (`w.end["uploaded"] = True`:
    every object of a save to an object store was completed, ckprof.analysis.durability).
    """

    def __init__(
        self,
        step: int | None = None,
        path: str | None = None,
        bytes: int | None = None,
        kind: str = "save",
        name: str | None = None,
        rank: int | None = None,
        source: str | None = None,
    ):
        self.step, self.path, self.bytes = step, path, bytes
        self.kind, self.name, self.rank, self.source = kind, name, rank, source
        self.id: str | None = None
        self.end: dict = {}

    def _fields(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "step": self.step,
            "path": self.path,
            "name": self.name,
            "rank": self.rank,
            "source": self.source,
        }

    def __enter__(self) -> "checkpoint":
        if active():
            self.id = f"{_HOST}:{os.getpid()}:{next(_ids)}"
            at_start = _at_start(self.path) if self.kind == "load" else {}
            emit("checkpoint_start", bytes=self.bytes, **at_start, **self._fields())
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.id is not None:
            t_ns = time.monotonic_ns()  # the save's return, before the look at its pages below
            emit(
                "checkpoint_end",
                t_ns=t_ns,
                bytes=self.bytes,
                ok=exc_type is None,
                error=None if exc is None else f"{exc_type.__name__}: {exc}",
                **_at_return(self.path if self.kind == "save" and exc_type is None else None),
                **self._fields(),
                **(self.end if exc_type is None else {}),
            )


def _at_start(path: str | None) -> dict:
    """A load's files already in the page cache as it starts (cachestat(2)): what it can read
    from memory rather than from the device."""
    if not path:
        return {}
    from .pagecache import cached_bytes

    try:
        got = cached_bytes(path)
    except OSError:
        got = None
    return (
        {} if got is None else {"cached_bytes_at_start": got["cached_bytes"], "file_bytes_at_start": got["file_bytes"]}
    )


def _at_return(path: str | None) -> dict:
    """The save's files' pages still dirty or under writeback as it returns (cachestat(2)): the
    recorder's tracker looks only later, and a file deleted at once is never seen by it."""
    if not path:
        return {}
    from .pagecache import pending_bytes

    try:
        got = pending_bytes(path)
    except OSError:
        got = None
    return {} if got is None else {"pending_bytes_at_return": got[0], "files_at_return": got[1]}
