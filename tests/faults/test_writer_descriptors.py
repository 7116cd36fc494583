"""The recording writer outlives a shortage of file descriptors (issue 22, item 12): EMFILE is not a
full disk. While the recorder's process has no descriptor to spare, samples and events wait in
memory; when descriptors come back they are written and the recording ends complete, with the
stall said once on stderr and once in events.jsonl."""

from __future__ import annotations

import errno
import json
import os
import resource

import pyarrow as pa

import ckprof
from ckprof.recording.schema import T_NS, col
from ckprof.recording.writer import RecordingWriter

SCHEMA = pa.schema([T_NS, col("device", pa.string(), "", "label"), col("x", pa.int64(), "B", "counter")])
START = {"wall_ns": 1_700_000_000_000_000_000, "monotonic_ns": 1_000_000_000, "uncertainty_ns": 10}


class NoDescriptors:
    """Take every descriptor this process may still open (a lowered soft RLIMIT_NOFILE keeps that
    quick), and give them back on exit."""

    def __enter__(self):
        self.limit = resource.getrlimit(resource.RLIMIT_NOFILE)
        in_use = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 32, self.limit[1]))
        self.fds = []
        try:
            while True:
                self.fds.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
        except OSError as e:
            assert e.errno == errno.EMFILE
        return self

    def __exit__(self, *exc):
        for fd in self.fds:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, self.limit)


def _rows(first: int, n: int = 3) -> list[dict]:
    return [{"t_ns": START["monotonic_ns"] + (first + j) * 1000, "device": "d", "x": first + j} for j in range(n)]


def test_writer_holds_rows_and_events_while_out_of_descriptors_and_recovers(tmp_path):
    warnings = []
    w = RecordingWriter(str(tmp_path / "rec"), merge_parts=2, warn=warnings.append)
    w.create({"start": START, "command": ["true"]})
    w.add_collector("c", SCHEMA)
    w.append("c", _rows(0))
    w.flush()
    w.close_streams()  # a Parquet part: the next flush must open a new stream (a descriptor)
    with NoDescriptors():
        for k in range(1, 4):
            w.append("c", _rows(3 * k))
            w.flush()
        w.event({"t_ns": START["monotonic_ns"] + 5, "event": "mark", "text": "while out of descriptors"})
        assert w.failed is None  # not a dead end, unlike a full disk
    # descriptors are back: the next flush writes what waited
    w.append("c", _rows(12))
    w.flush()
    w.finish()
    meta = json.loads((tmp_path / "rec" / "meta.json").read_text())
    assert meta["status"] == "complete", meta.get("truncated")
    rec = ckprof.load(w.path)
    assert sorted(rec.samples("c")["x"]) == list(range(15))  # nothing lost
    ev = rec.events
    assert "while out of descriptors" in set(ev["text"].dropna())
    stalls = ev[ev["event"] == "recording_writer_stalled"]
    assert len(stalls) == 1 and "Too many open files" in stalls.iloc[0]["reason"]
    assert stalls.iloc[0]["held_flushes_max"] == 3 and stalls.iloc[0]["dropped_rows"] == 0
    assert len(warnings) == 1 and "Too many open files" in warnings[0], warnings


def test_a_full_disk_still_truncates(tmp_path, monkeypatch):
    """ENOSPC keeps its meaning: samples stop, status `truncated` with the reason."""
    warnings = []
    w = RecordingWriter(str(tmp_path / "rec"), warn=warnings.append)
    w.create({"start": START})
    w.add_collector("c", SCHEMA)

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pa, "OSFile", no_space)
    w.append("c", _rows(0))
    w.flush()
    monkeypatch.undo()
    w.append("c", _rows(3))
    w.flush()
    w.finish()
    meta = json.loads((tmp_path / "rec" / "meta.json").read_text())
    assert meta["status"] == "truncated" and meta["truncated"].startswith("disk full"), meta
    assert len(warnings) == 1
