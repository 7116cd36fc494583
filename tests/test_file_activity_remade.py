"""A --path deleted and made again before the reader has read its deletion is still watched.

A --path's mark goes with its inode (fanotify_mark(2): an inode mark is removed when the inode is
freed, FAN_DELETE_SELF its last event). The reader marks the nearest existing ancestor when it reads
that event, to see the path made again; on a loaded machine the reader may read the deletion only
after the path was made again (tests/test_file_activity_scope.py's
test_a_path_deleted_and_made_again_is_still_watched failed 2 of 6 runs at a load average of 5-7, on
the code before this test): the new directory then had no mark, and nothing written in it was seen.
The reader is driven by hand here (no thread): its reads come after the path was made again.
"""

from __future__ import annotations

import os
import shutil

import pytest

from ckprof.record import fanotify as F
from ckprof.record.clock import MonotonicClock
from ckprof.record.fanreplay import ListWriter
from ckprof.record.fileactivity import FileActivity
from ckprof.record.proctree_events import ProcTree

pytestmark = pytest.mark.root


@pytest.fixture(params=["c", "python"])
def reader(request, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root (CAP_SYS_ADMIN)")
    if request.param == "python":
        monkeypatch.setenv("CKPROF_FILE_ACTIVITY_READER", "python")
    return request.param


def _by_hand(root: str) -> FileActivity:
    """A FileActivity with its marks and tree, whose reads this test makes (no thread)."""
    fa = FileActivity(ListWriter(), MonotonicClock(), [root])
    fa.group = F.Group()
    fa._mark_paths()
    fa.tree = ProcTree()
    fa.tree.set_root(os.getpid())
    fa._start_reader()
    return fa


def _files(fa: FileActivity) -> dict[str, dict]:
    fa._read_all()
    fa._emit(fa.clock.now_ns() + 10**10, everything=True)
    fa._flush()
    return {f["path"]: f for e in fa.writer.events if e["event"] == "file_activity" for f in e["files"]}


def test_a_path_made_again_before_its_deletion_was_read_is_marked_again(reader, tmp_path):
    root = tmp_path / "ckpt"
    (root / "old").mkdir(parents=True)
    fa = _by_hand(str(root))
    try:
        shutil.rmtree(root)
        root.mkdir()  # made again before the reader read the deletion
        fa._read_all()  # the deletion read now: the path exists again
        (root / "model.bin").write_bytes(b"m" * 4096)
        files = _files(fa)
        assert files[str(root / "model.bin")]["size_bytes"] == 4096, files
        assert files[str(root / "model.bin")]["writers"] == [os.getpid()]
    finally:
        fa.group.close()
        fa.tree.close()
        if fa._c is not None:
            fa._c.close()


def test_a_directory_marked_twice_is_counted_once(reader, tmp_path):
    """meta.json's `marks.directories` counts directories, not marks made: a folder renamed (a save
    written under a temporary name, then renamed) is marked again under its new name, and a folder
    made while its parent's listing runs is marked by the listing and again by its own event (the
    scope test's count read 13 for 10 directories in 2 of 5 runs)."""
    root = tmp_path / "ckpt"
    root.mkdir()
    fa = _by_hand(str(root))
    try:
        (root / "tmp-step_1" / "shards").mkdir(parents=True)
        fa._read_all()  # marked and listed: ckpt, tmp-step_1, shards
        assert fa.dir_marks == 3
        os.rename(root / "tmp-step_1", root / "step_1")
        fa._read_all()
        assert fa.dir_marks == 3, fa._marks()
        shutil.rmtree(root / "step_1")
        fa._read_all()
        assert fa.dir_marks == 1, fa._marks()
    finally:
        fa.group.close()
        fa.tree.close()
        if fa._c is not None:
            fa._c.close()
