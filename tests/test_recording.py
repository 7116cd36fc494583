"""The recording format: parts written atomically, merged by level, read back after a crash."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ckprof
from ckprof.errors import RecordingError
from ckprof.recording.format import META, parse_part_name
from ckprof.recording.reader import read_part
from ckprof.recording.schema import T_NS, col
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


def write_rows(w, n_flushes, rows_per_flush=3, first_flush=0):
    t = START["monotonic_ns"]
    for i in range(first_flush, first_flush + n_flushes):
        w.append(
            "c",
            [
                {"t_ns": t + (i * rows_per_flush + j) * 1000, "device": "d", "x": i * rows_per_flush + j}
                for j in range(rows_per_flush)
            ],
        )
        w.flush()


def write_parts(w, n_flushes):
    """A Parquet part per flush (its stream closed after each, as every 16 flushes)."""
    for i in range(n_flushes):
        write_rows(w, 1, first_flush=i)
        w.close_streams()


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
    """A crash after writing a merged part but before removing its inputs duplicates nothing: the
    inputs being Parquet parts (a level merge), or the open stream of flushes (its Parquet part)."""
    w = new_writer(tmp_path, merge_parts=100)
    write_parts(w, 3)
    d = w.collector_dir("c")
    assert parts(w) == [(0, 0), (1, 1), (2, 2)]
    tables = [pq.read_table(os.path.join(d, f)) for f in sorted(os.listdir(d))]
    pq.write_table(pa.concat_tables(tables), os.path.join(d, "part-000000-000002.parquet"))
    assert list(ckprof.load(w.path).samples("c")["x"]) == list(range(9))

    w = new_writer(tmp_path / "stream", merge_parts=100)
    write_rows(w, 3)
    d = w.collector_dir("c")
    assert os.listdir(d) == ["part-000000-open.arrows"]  # three flushes, one batch each
    pq.write_table(read_part(os.path.join(d, "part-000000-open.arrows")), os.path.join(d, "part-000000-000002.parquet"))
    assert list(ckprof.load(w.path).samples("c")["x"]) == list(range(9))


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


def test_a_batch_torn_by_a_kill_leaves_the_ones_before_it(tmp_path):
    """The open stream cut in the middle of its third flush's batch (the kill came mid-write):
    the first two flushes read back whole, the third not at all."""
    w = new_writer(tmp_path, merge_parts=100)
    write_rows(w, 2)
    stream = os.path.join(w.collector_dir("c"), "part-000000-open.arrows")
    two = os.path.getsize(stream)
    write_rows(w, 1, first_flush=2)
    with open(stream, "r+b") as f:
        f.truncate(two + (os.path.getsize(stream) - two) // 2)
    assert list(ckprof.load(w.path).samples("c")["x"]) == list(range(6))


def test_a_stream_cut_before_its_schema_holds_no_rows(tmp_path):
    """Killed as it created a stream (or the disk full then): an empty stream file is no rows and
    no problem, beside the parts before it."""
    w = new_writer(tmp_path, merge_parts=100)
    write_parts(w, 2)
    open(os.path.join(w.collector_dir("c"), "part-000002-open.arrows"), "wb").close()
    rec = ckprof.load(w.path)
    assert list(rec.samples("c")["x"]) == list(range(6))
    assert not [p for p in rec.problems if "unreadable" in p]


def test_truncated_part_is_reported_not_fatal(tmp_path):
    w = new_writer(tmp_path, merge_parts=100)
    write_parts(w, 2)
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
    write_rows(w, 2)  # appended to the open stream, whose descriptor still writes
    w.close_streams()  # its Parquet part cannot be written
    write_rows(w, 1)
    assert w.failed and len(warnings) == 1
    assert "stopped recording samples" in warnings[0]
