"""The recording format: parts written atomically, merged by level, read back after a crash."""

import json
import os

import pyarrow as pa
import pytest

import ckprof
from ckprof.collectors.base import T_NS, col
from ckprof.errors import RecordingError
from ckprof.recording.format import META, parse_part_name
from ckprof.recording.writer import RecordingWriter

SCHEMA = pa.schema([T_NS, col("device", pa.string(), "", "label"), col("x", pa.int64(), "B", "counter")])
START = {"wall_ns": 1_700_000_000_000_000_000, "monotonic_ns": 1_000_000_000, "uncertainty_ns": 10}


def new_writer(tmp_path, merge_parts=4):
    w = RecordingWriter(str(tmp_path / "rec"), merge_parts=merge_parts, warn=lambda m: None)
    w.create({"start": START, "command": ["true"]})
    w.add_collector("c", SCHEMA)
    return w


def parts(w):
    return sorted(parse_part_name(f) for f in os.listdir(w.collector_dir("c")) if parse_part_name(f))


def write_rows(w, n_flushes, rows_per_flush=3):
    t = START["monotonic_ns"]
    for i in range(n_flushes):
        w.append(
            "c",
            [
                {"t_ns": t + (i * rows_per_flush + j) * 1000, "device": "d", "x": i * rows_per_flush + j}
                for j in range(rows_per_flush)
            ],
        )
        w.flush()


def test_round_trip_and_levelled_merge(tmp_path):
    w = new_writer(tmp_path, merge_parts=4)
    write_rows(w, 21)
    # 21 flushes with merges of 4: level-1 parts 0-3, 4-7 ... 16-19 then 20 alone; 4 level-1 parts
    # do not merge further (level needs 16 flushes per part to count as level 1 by range).
    assert all(p[1] >= p[0] for p in parts(w))
    w.finish()
    rec = ckprof.load(w.path)
    df = rec.samples("c")
    assert list(df["x"]) == list(range(63))
    assert rec.problems == []
    assert rec.meta["status"] == "complete"
    assert len(parts(w)) < 21


def test_unfinished_merge_is_not_read_twice(tmp_path):
    """A crash after writing a merged part but before removing its inputs duplicates nothing."""
    w = new_writer(tmp_path, merge_parts=100)
    write_rows(w, 3)
    d = w.collector_dir("c")
    import pyarrow.parquet as pq

    tables = [pq.read_table(os.path.join(d, f)) for f in sorted(os.listdir(d))]
    pq.write_table(pa.concat_tables(tables), os.path.join(d, "part-000000-000002.parquet"))
    assert len(os.listdir(d)) == 4
    df = ckprof.load(w.path).samples("c")
    assert list(df["x"]) == list(range(9))


def test_killed_recorder_leaves_readable_files(tmp_path):
    w = new_writer(tmp_path)
    write_rows(w, 2)
    # what SIGKILL leaves: a half-written temporary part, a torn last event line, status 'recording'
    open(os.path.join(w.collector_dir("c"), ".tmp-part-000002-000002.parquet"), "wb").write(b"PAR1\x00\x01")
    w.event({"t_ns": 5, "event": "mark", "text": "ok"})
    with open(w.events_path, "a") as f:
        f.write('{"t_ns": 6, "event": "che')
    rec = ckprof.load(w.path)
    assert len(rec.samples("c")) == 6
    assert list(rec.events["event"]) == ["mark"]
    assert any("did not finish" in p for p in rec.problems)
    assert any("events.jsonl:2" in p for p in rec.problems)


def test_truncated_part_is_reported_not_fatal(tmp_path):
    w = new_writer(tmp_path, merge_parts=100)
    write_rows(w, 2)
    first = os.path.join(w.collector_dir("c"), "part-000000-000000.parquet")
    data = open(first, "rb").read()
    open(first, "wb").write(data[: len(data) // 2])
    rec = ckprof.load(w.path)
    assert len(rec.samples("c")) == 3
    assert any("part-000000-000000.parquet" in p for p in rec.problems)


def test_bad_recordings_raise_one_line_errors(tmp_path):
    with pytest.raises(RecordingError, match="not a directory"):
        ckprof.load(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordingError, match="no meta.json"):
        ckprof.load(str(tmp_path / "empty"))
    w = new_writer(tmp_path)
    meta = json.load(open(os.path.join(w.path, META)))
    meta["schema_version"] = 99
    json.dump(meta, open(os.path.join(w.path, META), "w"))
    with pytest.raises(RecordingError, match="schema version 99"):
        ckprof.load(w.path)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / META).write_text('{"hello": 1}')
    with pytest.raises(RecordingError, match="not a ckprof recording"):
        ckprof.load(str(tmp_path / "foreign"))
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / META).write_text('{"format": "ckprof-rec')
    with pytest.raises(RecordingError, match="unreadable JSON"):
        ckprof.load(str(tmp_path / "torn"))


def test_write_error_stops_samples_once_and_keeps_what_was_written(tmp_path):
    warnings = []
    w = RecordingWriter(str(tmp_path / "rec"), warn=warnings.append)
    w.create({"start": START})
    w.add_collector("c", SCHEMA)
    write_rows(w, 1)
    os.chmod(w.collector_dir("c"), 0o500)
    if os.access(w.collector_dir("c"), os.W_OK):  # root ignores modes: make the dir a file instead
        os.chmod(w.collector_dir("c"), 0o700)
        for f in os.listdir(w.collector_dir("c")):
            os.rename(os.path.join(w.collector_dir("c"), f), os.path.join(tmp_path, f))
        os.rmdir(w.collector_dir("c"))
        open(w.collector_dir("c"), "w").close()
    write_rows(w, 2)
    assert w.failed and len(warnings) == 1
    assert "stopped recording samples" in warnings[0]
