"""A checkpoint folder deleted by retention less than a second after it was made: the reader keeps a
directory's create and delete in one burst (QUIET_S, record/fileactivity.py), and the save must not
end at the deletion (analysis/filesaves.py). HF Trainer with save_total_limit=2 and saves ~0.3 s
apart deletes checkpoint-2 0.84 s after making it: its window ran to the deletion and covered the
next two saves (tests/frameworks/test_frameworks.py::test_hf_trainer, 2 runs of 2 at a load
average of ~5). Built recordings with known answers (ckprof.testing)."""

from __future__ import annotations

import json

import pytest

from ckprof.testing import RecordingBuilder
from tests.support.command import ckprof_cmd

MiB = 2**20
ROOT = "/ck"


def _burst(rb, path, a, b, ops, size=None, is_dir=False):
    entry = {"path": path, "start_ns": rb.ns(a), "end_ns": rb.ns(b), "ops": list(ops), "writers": [100]}
    entry.update({"dir": True} if is_dir else {"size_bytes": size, "kernel_events": 3})
    rb.event("file_activity", b, source="fanotify", files=[entry])


def test_a_folder_deleted_by_retention_does_not_stretch_its_save(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.event("file_activity_source", 0.0, file_activity_source="fanotify", paths=[ROOT], source="recorder")
    for n, t in ((2, 1.0), (4, 1.3), (6, 1.6)):
        _burst(rb, f"{ROOT}/checkpoint-{n}/model.safetensors", t, t + 0.1, ("create", "modify", "close_write"), MiB)
    # checkpoint-2's folder: made at 1.0, removed with its file at 1.84 (the third save's rotation)
    _burst(rb, f"{ROOT}/checkpoint-2/model.safetensors", 1.84, 1.84, ("delete",))
    _burst(rb, f"{ROOT}/checkpoint-2", 1.0, 1.84, ("create", "delete"), is_dir=True)
    res = ckprof_cmd("report", rb.finish(), "--format", "json", in_process=True)
    assert res.exit_code == 0, res.output
    saves = [c for c in json.loads(res.stdout)["checkpoints"] if c["kind"] == "save"]
    assert [c["step"] for c in saves] == [2, 4, 6]
    for c, t in zip(saves, (1.0, 1.3, 1.6)):
        assert (c["start_s"], c["app_end_s"]) == (pytest.approx(t, abs=1e-6), pytest.approx(t + 0.1, abs=1e-6)), c
