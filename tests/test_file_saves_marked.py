"""File saves beside the saves a program marks itself (analysis/filesaves.py): a scratch file made
and removed at once, a file written and closed before the call, and the bytes the program stated
(synthetic `file_activity` events with known answers, ckprof.testing (profiler/testing.py); the real cases are the
bundled workload's write test and manifest in tests/test_job.py's torchrun test)."""

from __future__ import annotations

import ckprof
from ckprof.analysis import windows as W
from ckprof.testing import RecordingBuilder

MiB = 2**20
ROOT = "/ck"


def _rb(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=20)
    rb.event("file_activity_source", 0.0, file_activity_source="fanotify", paths=[ROOT], source="recorder")
    return rb


def _file(rb, path, a, b, size, writers=(100,), ops=("create", "modify", "close_write"), **kw):
    entry = {"path": path, "start_ns": rb.ns(a), "end_ns": rb.ns(b), "ops": list(ops), "writers": list(writers)}
    rb.event("file_activity", b, source="fanotify", files=[{**entry, "size_bytes": size, "kernel_events": 3, **kw}])


def _checkpoints(rb):
    rec = ckprof.load(rb.finish())
    return W.join_file_windows(W.marker_windows(rec), W.file_windows(rec))


def test_a_file_made_and_removed_in_one_burst_is_no_save(tmp_path):
    """The workload's `.ckprof-write-test-PID` (created, written, deleted within ms, before the first
    save) left no file: it was a checkpoint '#1' of 0 bytes beside the marked saves."""
    rb = _rb(tmp_path)
    _file(rb, f"{ROOT}/.ckprof-write-test-7", 0.5, 0.52, None, ops=["create", "modify", "close_write", "delete"])
    rb.checkpoint(1.0, 2.0, 4 * MiB, step=1, path=f"{ROOT}/ckpt-1", source="workload")
    _file(rb, f"{ROOT}/ckpt-1/a.pt", 1.1, 1.9, 4 * MiB)
    (c,) = _checkpoints(rb)
    assert c.step == 1 and c.seen_by == ["files", "workload"]
    assert [f.path for f in c.files] == [f"{ROOT}/ckpt-1/a.pt"]


def test_a_file_written_and_closed_before_the_call_is_not_the_calls(tmp_path):
    """A data file written for 0.17 s, closed, then the call: its close is stamped when the reader
    reads it, 3 ms into the call; it is the program's own file, not the call's (it stays a save of
    its own), and the call's window starts at the call."""
    rb = _rb(tmp_path)
    _file(rb, f"{ROOT}/data-0.bin", 0.83, 1.003, 8 * MiB)
    rb.checkpoint(1.0, 1.1, MiB, step=1, path=ROOT, source="api")
    data, call = _checkpoints(rb)
    assert data.source == "files" and data.bytes_app == 8 * MiB
    assert call.step == 1 and call.start_ns == rb.ns(1.0) and call.bytes_app == MiB
    assert call.seen_by is None
    # a small file the call itself makes, closed within ms, still joins it: it began after the call
    rb = _rb(tmp_path / "small")
    _file(rb, f"{ROOT}/run/.metadata", 0.5, 0.52, 100)
    rb.checkpoint(1.0, 1.1, None, step=2, path=f"{ROOT}/run", source="patch")
    _file(rb, f"{ROOT}/run/.metadata", 1.01, 1.02, 2374)
    (c,) = _checkpoints(rb)
    assert c.step == 2 and c.bytes_app == 2374 and c.start_ns == rb.ns(0.5)


def test_the_bytes_a_program_stated_for_its_save_are_kept(tmp_path):
    """The workload states its ranks' shard bytes; the save's folder also holds rank 0's manifest:
    the checkpoint is the stated bytes (the files stay listed with their sizes). A patched call's
    bytes still come from the files."""
    rb = _rb(tmp_path)
    rb.checkpoint(1.0, 2.0, 8 * MiB, step=1, path=f"{ROOT}/global_epoch1_step1", source="workload")
    _file(rb, f"{ROOT}/global_epoch1_step1/shard.pt", 1.1, 1.8, 8 * MiB)
    _file(rb, f"{ROOT}/global_epoch1_step1/ckprof-manifest.json", 1.85, 1.9, 1815)
    rb.checkpoint(5.0, 6.0, 3 * MiB, step=2, path=f"{ROOT}/step_2/model.pt", source="patch")
    _file(rb, f"{ROOT}/step_2/model.pt", 5.1, 5.9, 5 * MiB)
    stated, patched = _checkpoints(rb)
    assert stated.bytes_app == 8 * MiB
    assert sorted(f.bytes for f in stated.files) == [1815, 8 * MiB]
    assert patched.bytes_app == 5 * MiB


def test_a_close_alone_is_no_save_but_ends_an_open_one(tmp_path):
    """`echo > turns/a0` into a FIFO under --path (tests/test_restore_prediction.py's turns): the
    kernel reports a close for writing and nothing else; it was a 0-byte save per echo. A file of an
    open save reopened and closed (to fsync it) still ends that save."""
    rb = _rb(tmp_path)
    rb.checkpoint(1.0, 2.0, None, step=1, path=f"{ROOT}/b/step_1", source="workload")
    _file(rb, f"{ROOT}/b/step_1/shard.pt", 1.1, 1.8, 8 * MiB)
    _file(rb, f"{ROOT}/b/step_1/shard.pt", 2.3, 2.3, 8 * MiB, ops=["close_write"])
    for k in range(3):
        _file(rb, f"{ROOT}/turns/a{k}", 4.0 + k, 4.0 + k, 0, ops=["close_write"])
    (c,) = _checkpoints(rb)
    assert c.step == 1 and c.bytes_app == 8 * MiB and c.app_end_ns == rb.ns(2.3)
