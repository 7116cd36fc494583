"""A stream's file save that several calls wrote is split among them, and each piece stays with
the call it was given (analysis/filesaves.py _split_stream, join), on synthetic file_activity
events laid out as tests/test_instrument.py's real recording of them:

    with ckprof.checkpoint(step=7, path=ROOT):   # the root itself
        torch.save(..., ROOT/a.pt)
    torch.save(..., ROOT/b.pt)                    # 10 ms after the marked window ended

Both files' bursts were read in one wake-up 150 ms later (their end_ns), so b.pt's piece overlaps
the marked window within the join's 50 ms slack, and the marked window's path holds b.pt: it was
joined to both pieces, and the two saves became one checkpoint."""

from __future__ import annotations

import ckprof
from ckprof.analysis import windows as W
from ckprof.testing import RecordingBuilder

MiB = 2**20
ROOT = "/ck"


def test_each_piece_of_a_split_stream_stays_with_its_own_call(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=5)
    rb.event("file_activity_source", 0.0, file_activity_source="fanotify", paths=[ROOT], source="recorder")
    rb.checkpoint(1.0, 1.067, None, step=7, path=ROOT, source="api")
    mark = {"id": "vm:1:patch2", "kind": "save", "source": "patch", "pid": 1, "path": f"{ROOT}/b.pt"}
    rb.event("checkpoint_start", 1.077, **mark, name="torch.save")
    rb.event("checkpoint_end", 1.078, **mark, name="torch.save", ok=True)
    files = [
        {"path": f"{ROOT}/{n}", "start_ns": rb.ns(a), "end_ns": rb.ns(1.222), "size_bytes": MiB}
        for n, a in (("a.pt", 1.002), ("b.pt", 1.077))
    ]
    ops = {"ops": ["create", "modify", "close_write"], "writers": [1], "kernel_events": 3}
    rb.event("file_activity", 1.222, source="fanotify", files=[{**f, **ops} for f in files])
    rec = ckprof.load(rb.finish())
    wins = W.join_file_windows(W.marker_windows(rec), W.file_windows(rec))
    assert [(w.source, w.step, w.path, w.bytes_app) for w in wins] == [
        ("api", 7, ROOT, MiB),
        ("patch", None, f"{ROOT}/b.pt", MiB),
    ]
