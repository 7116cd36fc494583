"""The block layer's own account of each request, from its accounting tracepoints, as a peer for
ckprof's queue-depth figures.

/proc/diskstats' time_in_queue (field 11, Documentation/admin-guide/iostats.rst) is, on blk-mq,
the sum over finished requests of (completion − start) (block/blk-mq.c, blk_account_io_done).
The tracepoints block:block_io_start and block:block_io_done (kernel ≥ 6.5) fire at that same
start and completion, so summing each request's lifetime from a trace gives the same integral
from an independent source. Read through a private tracefs instance, so no one else's tracing is
touched. Needs root and tracefs; `need_block_io_trace()` skips with the reason otherwise.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

TRACEFS = Path("/sys/kernel/tracing")
EVENTS = ("block_io_start", "block_io_done")


def need_block_io_trace():
    """Skip, saying why, where the trace cannot be read (tracefs is mounted only for the trace)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: reads the block layer's tracepoints through tracefs")
    with _tracefs() as why_not:
        if why_not:
            pytest.skip(why_not)
        if not (TRACEFS / "events" / "block" / "block_io_done").is_dir():
            pytest.skip("this kernel has no block:block_io_start/block_io_done tracepoints (added in 6.5)")


@contextmanager
def _tracefs():
    """tracefs at TRACEFS for the block (None), mounted here and unmounted after where it was not;
    else why not."""
    if (TRACEFS / "events").is_dir():
        yield None
        return
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True)
    if r.returncode != 0:
        yield f"tracefs cannot be mounted at {TRACEFS}: {r.stderr.strip()}"
        return
    try:
        yield None
    finally:
        subprocess.run(["umount", str(TRACEFS)], capture_output=True)


@dataclass
class RequestLives:
    requests: int  # started and finished inside the trace
    unfinished: int  # started, not seen finished
    busy_s: float  # Σ (done − start) over the finished requests: the queue-depth integral


@contextmanager
def block_io_trace(dev: str):
    """Trace `dev`'s requests while the block runs; `.result` is its RequestLives afterwards."""
    with _tracefs() as why_not:
        if why_not:
            raise OSError(why_not)
        with _instance(dev) as holder:
            yield holder


@contextmanager
def _instance(dev: str):
    """A tracefs instance of its own tracing `dev`'s requests, removed after."""
    rdev = os.stat(dev).st_rdev
    dev_t = (os.major(rdev) << 20) | os.minor(rdev)  # the kernel's dev_t: MINORBITS = 20
    inst = TRACEFS / "instances" / f"ckprof-test-{uuid.uuid4().hex[:8]}"
    inst.mkdir()

    def put(name: str, value: str):
        (inst / name).write_text(value)

    holder = _Holder()
    try:
        put("buffer_size_kb", "4096")  # per CPU; 3,072 requests are 6,144 events of < 100 bytes
        put("trace_clock", "mono")
        for ev in EVENTS:
            put(f"events/block/{ev}/filter", f"dev == {dev_t}")
            put(f"events/block/{ev}/enable", "1")
        put("tracing_on", "1")
        yield holder
        put("tracing_on", "0")
        holder.result = _request_lives((inst / "trace").read_text())
    finally:
        for ev in EVENTS:
            (inst / f"events/block/{ev}/enable").write_text("0")
        inst.rmdir()


class _Holder:
    result: RequestLives | None = None


def _request_lives(trace: str) -> RequestLives:
    """Pair each block_io_start with the block_io_done of the same sector (the print format:
    `... TIMESTAMP: block_io_done: MAJ,MIN RWBS BYTES () SECTOR + NR ...`)."""
    started: dict[str, float] = {}
    busy_s = 0.0
    finished = 0
    for line in trace.splitlines():
        if line.startswith("#"):
            continue
        head, sep, rest = line.partition(": block_io_")
        if not sep:
            continue
        ts = float(head.rsplit(None, 1)[-1])
        event, fields = rest.split(":", 1)
        sector = fields.split()[4]
        if event == "start":
            started[sector] = ts
        elif sector in started:
            busy_s += ts - started.pop(sector)
            finished += 1
    return RequestLives(requests=finished, unfinished=len(started), busy_s=busy_s)
