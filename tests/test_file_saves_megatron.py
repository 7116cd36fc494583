"""Saves from file activity (analysis/filesaves.py) as Megatron-core's async dist_checkpointing makes
them, on synthetic `file_activity` events laid out like a real recording of it
(tests/frameworks/test_megatron.py records the real one):

  * rank 0 torch.saves common.pt into the step's folder (a patch window naming the file), then
    quiet for seconds while the ranks plan and fork their writers (a first save: 5.6 s measured);
  * forked writer processes torch.save each tensor into an open .distcp stream: patch windows
    that name no path, one per tensor, from processes that wrote the save's files;
  * quiet again (3.1 s measured) until rank 0's finalization writes .metadata and metadata.json.

One save, one checkpoint: the step's folder holds it across the quiet gaps, and a call naming no
path that a writer of the save's files made while they were written is part of it."""

from __future__ import annotations

import ckprof
from ckprof.analysis import windows as W
from ckprof.testing import RecordingBuilder

MiB = 2**20
ROOT = "/ck"
STEP = f"{ROOT}/run/iter_0000001"


def _rb(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=20)
    rb.event("file_activity_source", 0.0, file_activity_source="fanotify", paths=[ROOT], source="recorder")
    for pid, ppid in ((100, 1), (150, 100), (200, 150), (201, 150)):
        rb.event("file_activity_process", 0.5, source="fanotify", pid=pid, ppid=ppid, comm="python", cmdline=["python"])
    return rb


def _file(rb, path, a, b, size, writers, ops=("create", "modify", "close_write"), **kw):
    entry = {"path": path, "start_ns": rb.ns(a), "end_ns": rb.ns(b), "ops": list(ops), "writers": list(writers)}
    rb.event("file_activity", b, source="fanotify", files=[{**entry, "size_bytes": size, "kernel_events": 3, **kw}])


def _call(rb, n, pid, a, b, path=None):
    mark = {"id": f"vm:{pid}:patch{n}", "kind": "save", "source": "patch", "pid": pid, "name": "torch.save"}
    if path:
        mark["path"] = path
    rb.event("checkpoint_start", a, **mark)
    rb.event("checkpoint_end", b, **mark, ok=True)


def _megatron_save(rb, t0, step_dir=STEP, gap1=5.6, gap2=3.1, n=0, folder_lead=0.02):
    """One async dist_checkpointing.save starting at t0 (its calls numbered from n); returns its end
    (the last file's close)."""
    _file(rb, step_dir, t0 - folder_lead, t0 - folder_lead, None, writers=[100], dir=True, ops=["create"])
    _call(rb, n + 1, 100, t0, t0 + 0.01, path=f"{step_dir}/common.pt")
    _file(rb, f"{step_dir}/common.pt", t0 + 0.002, t0 + 0.01, 1255, writers=[100])
    w0 = t0 + 0.01 + gap1
    for k, pid in enumerate((200, 201)):
        _file(rb, f"{step_dir}/__0_{k}.distcp", w0, w0 + 0.7, 6 * MiB, writers=[pid])
        for i in range(3):  # one torch.save per tensor into the open stream: no path
            _call(rb, n + 10 + i, pid, w0 + 0.01 + 0.2 * i, w0 + 0.2 + 0.2 * i)
    f0 = w0 + 0.7 + gap2
    _file(rb, f"{step_dir}/.metadata", f0, f0 + 0.01, 4078, writers=[100])
    _file(rb, f"{step_dir}/metadata.json", f0 + 0.01, f0 + 0.02, 119, writers=[100])
    return f0 + 0.02


def _checkpoints(rec):
    return W.join_file_windows(W.marker_windows(rec), W.file_windows(rec))


def test_one_megatron_save_with_quiet_gaps_and_pathless_stream_calls_is_one_checkpoint(tmp_path):
    rb = _rb(tmp_path)
    end = _megatron_save(rb, 1.0)
    rec = ckprof.load(rb.finish())
    cps = _checkpoints(rec)
    assert [(c.id, c.path) for c in cps] == [("vm:100:patch1", STEP)], [  # the folder, not common.pt
        (c.id, c.path, c.start_ns, c.app_end_ns) for c in cps
    ]
    (c,) = cps
    assert c.start_ns == rb.ns(1.0)  # the call's start; the folder made 20 ms before is its preparation
    assert c.app_end_ns == rb.ns(end)  # the finalization's last file, 9.4 s later
    assert c.bytes_app == 1255 + 12 * MiB + 4078 + 119
    assert {w.pid: w.bytes for w in c.writers} == {100: 1255 + 4078 + 119, 200: 6 * MiB, 201: 6 * MiB}


def test_three_saves_three_checkpoints_and_a_step_folder_written_again_is_a_new_save(tmp_path):
    rb = _rb(tmp_path)
    t = 1.0
    for k in (1, 2):
        t = _megatron_save(rb, t, step_dir=f"{ROOT}/run/iter_000000{k}", gap1=0.05, gap2=0.05, n=100 * k) + 0.4
    # the same step saved again 2 s later (a rerun overwriting an incomplete checkpoint): its files
    # are written again, so it is a new save, not the first one's tail
    again = t + 2.0
    _file(rb, f"{STEP}/__0_0.distcp", again, again + 0.5, 6 * MiB, writers=[200], ops=["modify", "close_write"])
    rec = ckprof.load(rb.finish())
    cps = _checkpoints(rec)
    assert [c.step for c in cps] == [1, 2, 1], [(c.id, c.path, c.start_ns) for c in cps]
    assert [c.bytes_app for c in cps] == [1255 + 12 * MiB + 4197] * 2 + [6 * MiB]


def test_a_pathless_call_by_a_process_that_wrote_none_of_the_files_stays_its_own(tmp_path):
    """torch.save into a buffer by another process while a save's files are written is not that save."""
    rb = _rb(tmp_path)
    _megatron_save(rb, 1.0, gap1=0.05, gap2=0.05)
    _call(rb, 50, 999, 1.1, 1.2)  # pid 999 wrote nothing under the root
    rec = ckprof.load(rb.finish())
    cps = _checkpoints(rec)
    assert sorted(c.id for c in cps) == ["vm:100:patch1", "vm:999:patch50"]


def test_a_folder_made_before_the_call_is_its_preparation_not_its_start(tmp_path):
    """Megatron's save_checkpoint: rank 0 makes iter_N/, the ranks meet (0.5 s for a slow rank),
    then dist_checkpointing.save; the save starts with the call, not with the empty folder."""
    rb = _rb(tmp_path)
    end = _megatron_save(rb, 1.0, gap1=0.05, gap2=0.05, folder_lead=0.5)
    rec = ckprof.load(rb.finish())
    (c,) = _checkpoints(rec)
    assert (c.start_ns, c.app_end_ns) == (rb.ns(1.0), rb.ns(end))
