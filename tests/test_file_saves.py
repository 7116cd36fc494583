"""Saves from file activity (analysis/filesaves.py): the split rule and the join with framework calls,
on synthetic `file_activity` events with known answers (ckprof.testing (profiler/testing.py))."""

from __future__ import annotations

import ckprof
from ckprof.analysis import windows as W
from ckprof.analysis.analyze import analyze
from ckprof.testing import RecordingBuilder

MiB = 2**20
ROOT = "/ck"


def _rb(tmp_path, source="fanotify"):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=20)
    rb.event("file_activity_source", 0.0, file_activity_source=source, paths=[ROOT], source="recorder")
    return rb


def _file(rb, path, a, b, size, writers=(100,), ops=("create", "modify", "close_write"), **kw):
    """One file's burst, as record/fileactivity.py writes it: an entry of a `file_activity` event."""
    entry = {"path": path, "start_ns": rb.ns(a), "end_ns": rb.ns(b), "ops": list(ops), "writers": list(writers)}
    rb.event("file_activity", b, source="fanotify", files=[{**entry, "size_bytes": size, "kernel_events": 3, **kw}])


def _proc(rb, pid, comm, t=0.5):
    rb.event("file_activity_process", t, source="fanotify", pid=pid, ppid=1, comm=comm, cmdline=[comm])


def test_a_directory_per_save_and_a_quiet_gap_split_saves_and_deletions_are_none(tmp_path):
    rb = _rb(tmp_path)
    _proc(rb, 100, "writer")
    _proc(rb, 101, "dd")
    for k, t0 in enumerate((1.0, 5.0)):
        _file(rb, f"{ROOT}/step_{k}", t0, t0, None, dir=True, ops=["create"])
        _file(rb, f"{ROOT}/step_{k}/a.bin", t0 + 0.1, t0 + 1.0, 3 * MiB, writers=[100])
        _file(rb, f"{ROOT}/step_{k}/b.bin", t0 + 0.2, t0 + 1.5, 5 * MiB, writers=[101])
    # files directly in the root: one stream, split where it is quiet for 1 s or more
    _file(rb, f"{ROOT}/latest.pt", 10.0, 10.5, 1 * MiB)
    _file(rb, f"{ROOT}/optim.pt", 10.6, 11.0, 2 * MiB)
    _file(rb, f"{ROOT}/latest.pt", 13.0, 13.5, 1 * MiB)
    # retention: a deletion alone is no save; a file outside the root is not ours
    _file(rb, f"{ROOT}/step_0/a.bin", 15.0, 15.0, None, ops=["delete"], size_unknown="deleted")
    _file(rb, "/elsewhere/x.bin", 16.0, 16.5, MiB)
    rec = ckprof.load(rb.finish())
    saves = W.file_windows(rec)
    assert [(s.path, round((s.start_ns - rb.ns(0)) / 1e9, 3)) for s in saves] == [
        (f"{ROOT}/step_0", 1.0),
        (f"{ROOT}/step_1", 5.0),
        (ROOT, 10.0),
        (f"{ROOT}/latest.pt", 13.0),
    ]
    first = saves[0]
    assert first.app_end_ns == rb.ns(2.5)
    assert first.bytes_app == 8 * MiB and first.step == 0
    by_pid = {w.pid: (w.comm, w.files, w.bytes) for w in first.writers}
    assert by_pid == {100: ("writer", 1, 3 * MiB), 101: ("dd", 1, 5 * MiB)}
    assert saves[2].bytes_app == 3 * MiB
    an = analyze(rec)
    assert an.report["run"]["windows_from"] == "files"
    assert an.report["run"]["checkpoints"] == 4


def test_a_file_two_processes_wrote_counts_to_neither_alone_and_unknown_sizes_stay_unknown(tmp_path):
    rb = _rb(tmp_path)
    _file(rb, f"{ROOT}/d/shared.bin", 1.0, 2.0, 4 * MiB, writers=[100, 101])
    _file(rb, f"{ROOT}/d/own.bin", 1.0, 2.0, 1 * MiB, writers=[100])
    _file(rb, f"{ROOT}/e/gone.bin", 5.0, 6.0, None, writers=[100], size_unknown="stat after the burst: No such file")
    rec = ckprof.load(rb.finish())
    d, e = W.file_windows(rec)
    assert d.bytes_app == 5 * MiB and d.bytes_shared == 4 * MiB
    assert {w.pid: w.bytes for w in d.writers} == {100: 1 * MiB, 101: 0.0}
    assert e.bytes_app is None  # unknown, never 0
    assert e.writers[0].bytes is None


def test_a_save_whose_sizes_were_not_read_in_a_flood_has_unknown_bytes_and_says_why(tmp_path):
    """The file-activity source reads sizes within a budget (record/fileactivity.py SIZES_PER_S): a
    save with files past it has no app bytes (never a partial sum), and its checkpoint says how many
    files had no size and why; the table says unknown. A save with every size known says nothing."""
    from ckprof.record.fileactivity import SIZE_BUDGET
    from ckprof.report.tables import checkpoint_rows

    rb = _rb(tmp_path)
    for i in range(3):
        _file(rb, f"{ROOT}/step_1/f{i}", 1.0, 1.5, 512)
    _file(rb, f"{ROOT}/step_1/f3", 1.0, 1.5, None, size_unknown=SIZE_BUDGET, start_from="read")
    _file(rb, f"{ROOT}/step_1/f4", 1.0, 1.6, None, size_unknown=SIZE_BUDGET, start_from="read")
    _file(rb, f"{ROOT}/step_1/f5", 1.0, 1.6, None, size_unknown="gone when its burst ended")
    _file(rb, f"{ROOT}/step_2/f0", 5.0, 5.5, 512)
    rec = ckprof.load(rb.finish())
    report = analyze(rec).report
    first, second = report["checkpoints"]
    assert first["bytes_app"] is None
    assert first["bytes_app_unknown"] == (f"3 of 6 file(s) with no size: 2 {SIZE_BUDGET}; 1 gone when its burst ended")
    assert second["bytes_app"] == 512 and "bytes_app_unknown" not in second
    said = [n for n in report["notes"] if "app bytes unknown" in n]
    assert said == [f"checkpoint {first['id']}: app bytes unknown: {first['bytes_app_unknown']}"]
    bytes_col = checkpoint_rows(report)[0][9]
    assert bytes_col == "unknown"


def test_files_written_before_their_directory_was_renamed_take_the_final_path(tmp_path):
    rb = _rb(tmp_path)
    _file(rb, f"{ROOT}/tmp-checkpoint-500", 1.0, 1.0, None, dir=True, ops=["create"])
    _file(rb, f"{ROOT}/tmp-checkpoint-500/model.safetensors", 1.1, 2.0, 6 * MiB)
    _file(
        rb,
        f"{ROOT}/checkpoint-500",
        3.5,
        3.5,
        None,
        dir=True,
        ops=["rename"],
        renamed_from=f"{ROOT}/tmp-checkpoint-500",
    )
    rec = ckprof.load(rb.finish())
    (s,) = W.file_windows(rec)
    assert s.path == f"{ROOT}/checkpoint-500" and s.step == 500
    assert s.app_end_ns == rb.ns(3.5) and s.bytes_app == 6 * MiB


def test_many_patch_windows_of_forked_writers_and_their_files_are_one_checkpoint(tmp_path):
    """Megatron-like: each forked writer's torch.save per tensor is a patch window; the files say
    they are one save, which keeps the call's step and starts with the call."""
    rb = _rb(tmp_path)
    rb.checkpoint(0.9, 2.4, None, step=10, path=f"{ROOT}/iter_0000010", source="api")
    for i in range(6):
        p = f"{ROOT}/iter_0000010/__{i % 2}_{i}.distcp"
        mark = {"id": f"patch:{i}", "kind": "save", "source": "patch", "pid": 200 + i % 2, "path": p, "bytes": MiB}
        rb.event("checkpoint_start", 1.0 + 0.3 * i, **mark, name="torch.save")
        rb.event("checkpoint_end", 1.2 + 0.3 * i, **mark, name="torch.save", ok=True)
        _file(rb, p, 1.0 + 0.3 * i, 1.25 + 0.3 * i, MiB, writers=[200 + i % 2])
    rec = ckprof.load(rb.finish())
    marked = W.marker_windows(rec)
    wins = W.join_file_windows(marked, W.file_windows(rec))
    (c,) = wins
    assert c.step == 10 and c.source == "api"
    assert c.start_ns == rb.ns(0.9)
    assert c.app_end_ns == rb.ns(2.75)  # the last file's close, after the call's return
    assert c.bytes_app == 6 * MiB
    assert sorted(w.pid for w in c.writers) == [200, 201]


def test_a_marker_elsewhere_stays_and_without_fanotify_nothing_changes(tmp_path):
    rb = _rb(tmp_path, source="none: fanotify_init: Operation not permitted (needs root (CAP_SYS_ADMIN))")
    rb.checkpoint(1.0, 2.0, MiB, path="/other/model.pt", source="patch")
    _file(rb, f"{ROOT}/x.bin", 1.0, 2.0, MiB)  # not read: the source says none ran
    rec = ckprof.load(rb.finish())
    assert W.file_windows(rec) == []
    assert W.file_activity_note(rec) == [
        "file activity not recorded (fanotify_init: Operation not permitted (needs root (CAP_SYS_ADMIN)))"
    ]


def test_a_root_above_the_checkpoints_folder_still_gives_one_save_per_step(tmp_path):
    """`--path` is the mount (or the working directory): saves 0.3 s apart into one folder are told
    apart by the step their names carry, and one step's two files are one save."""
    rb = _rb(tmp_path)
    for k in range(3):
        t0 = 1.0 + 0.3 * k
        p = f"{ROOT}/run/ckpt-{k:05d}.pt"
        mark = {"id": f"patch:{k}", "kind": "save", "source": "patch", "pid": 100, "path": p, "bytes": MiB}
        rb.event("checkpoint_start", t0, **mark, name="torch.save")
        rb.event("checkpoint_end", t0 + 0.1, **mark, name="torch.save", ok=True)
        _file(rb, p, t0, t0 + 0.15, MiB)  # its fsync and close after the call returned
    _file(rb, f"{ROOT}/run/model_step_10.pt", 5.0, 5.2, MiB)
    _file(rb, f"{ROOT}/run/optim_step_10.pt", 5.2, 5.5, 2 * MiB)
    rec = ckprof.load(rb.finish())
    saves = W.file_windows(rec)
    assert [(s.path, s.step, s.bytes_app) for s in saves] == [
        (f"{ROOT}/run/ckpt-00000.pt", 0, MiB),
        (f"{ROOT}/run/ckpt-00001.pt", 1, MiB),
        (f"{ROOT}/run/ckpt-00002.pt", 2, MiB),
        (f"{ROOT}/run", 10, 3 * MiB),
    ]
    wins = W.join_file_windows(W.marker_windows(rec), saves)
    assert [w.id for w in wins] == ["patch:0", "patch:1", "patch:2", "files:4"]
    assert wins[0].app_end_ns == rb.ns(1.15)  # the file's last event, after the call returned


def test_calls_rewriting_one_file_in_a_shared_folder_stay_one_checkpoint_each(tmp_path):
    """A loop saving `latest.pt` every 0.4 s: the file's bursts are one stream (no step, no folder of
    its own), and the calls tell the saves apart; each keeps the bytes and end of its own burst."""
    rb = _rb(tmp_path)
    p = f"{ROOT}/latest.pt"
    for k in range(3):
        t0 = 1.0 + 0.4 * k
        mark = {"id": f"patch:{k}", "kind": "save", "source": "patch", "pid": 100, "path": p, "bytes": MiB}
        rb.event("checkpoint_start", t0, **mark, name="torch.save")
        rb.event("checkpoint_end", t0 + 0.2, **mark, name="torch.save", ok=True)
        _file(rb, p, t0 + 0.01, t0 + 0.25, (k + 1) * MiB, ops=["modify", "close_write"])
    rec = ckprof.load(rb.finish())
    (stream,) = W.file_windows(rec)  # one stream of bursts less than 1 s apart
    wins = W.join_file_windows(W.marker_windows(rec), [stream])
    assert [w.id for w in wins] == ["patch:0", "patch:1", "patch:2"]
    assert [w.app_end_ns for w in wins] == [rb.ns(1.25), rb.ns(1.65), rb.ns(2.05)]
    assert [w.bytes_app for w in wins] == [MiB, 2 * MiB, 3 * MiB]


def test_a_temporary_file_renamed_is_one_file_and_a_folder_alone_is_no_save(tmp_path):
    """DCP writes `.metadata.tmp` and renames it: the recorder finds the temporary name gone when it
    closes, the rename's entry has the size; and the run's output folder made at start-up is no save."""
    rb = _rb(tmp_path)
    _file(rb, f"{ROOT}/run", 0.5, 0.5, None, dir=True, ops=["create"])
    _file(rb, f"{ROOT}/run/step-1/__0_0.distcp", 1.0, 1.4, 4 * MiB, writers=[100])
    _file(
        rb, f"{ROOT}/run/step-1/.metadata.tmp", 1.5, 1.6, None, writers=[100], size_unknown="gone when its burst ended"
    )
    _file(
        rb,
        f"{ROOT}/run/step-1/.metadata",
        1.6,
        1.6,
        2374,
        writers=[],
        ops=["rename"],
        pids=[100],
        renamed_from=f"{ROOT}/run/step-1/.metadata.tmp",
    )
    rec = ckprof.load(rb.finish())
    (s,) = W.file_windows(rec)
    assert s.path == f"{ROOT}/run/step-1" and s.bytes_app == 4 * MiB + 2374
    assert [f.path.rsplit("/", 1)[1] for f in s.files] == [".metadata", "__0_0.distcp"]
    assert s.writers[0].bytes == 4 * MiB + 2374


def test_a_rename_read_with_its_files_writes_joins_it_however_its_lines_are_ordered(tmp_path):
    """The writer made, wrote, closed and renamed `.metadata.tmp` within one of the reader's merge
    pauses: both entries carry the same read stamp (start = end). The temporary name's entry is
    written at once (its close ends it); the rename's waits for its burst to go quiet and comes in a
    later line whose time is that earlier stamp, so it is read back first. Seen in CI (Megatron's
    finalize): the save's bytes went unknown. The rename still follows the writes it publishes."""
    rb = _rb(tmp_path)
    _file(rb, f"{ROOT}/iter_3/__0_0.distcp", 1.0, 1.4, 4 * MiB, writers=[100])
    entry = {"start_ns": rb.ns(1.6), "end_ns": rb.ns(1.6), "kernel_events": 1}
    tmp = {**entry, "path": f"{ROOT}/iter_3/.metadata.tmp", "ops": ["create", "modify", "close_write"],
           "writers": [100], "size_bytes": None, "size_unknown": "gone when its burst ended"}  # fmt: skip
    meta = {**entry, "path": f"{ROOT}/iter_3/metadata.json", "ops": ["create", "modify", "close_write"],
            "writers": [100], "size_bytes": 119, "end_ns": rb.ns(1.65)}  # fmt: skip
    renamed = {**entry, "path": f"{ROOT}/iter_3/.metadata", "ops": ["rename"], "writers": [], "pids": [100],
               "size_bytes": 4149, "renamed_from": f"{ROOT}/iter_3/.metadata.tmp"}  # fmt: skip
    rb.event("file_activity", 1.65, source="fanotify", files=[tmp, meta])
    rb.event("file_activity", 1.6, source="fanotify", files=[renamed])  # written later, its time earlier
    rec = ckprof.load(rb.finish())
    (s,) = W.file_windows(rec)
    assert sorted(f.path.rsplit("/", 1)[1] for f in s.files) == [".metadata", "__0_0.distcp", "metadata.json"]
    assert s.bytes_app == 4 * MiB + 4149 + 119
    assert s.writers[0].bytes == 4 * MiB + 4149 + 119
