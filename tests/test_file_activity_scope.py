"""What the file-activity source marks (record/fileactivity.py): the directories under --path, not
the whole file system, so other processes' writes elsewhere on it never reach the reader; and the
recursive-watch race: a directory the tree makes and fills at once, and a --path made by the
command, still give every file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from support.command import CKPROF

from ckprof.record import fileactivity
from ckprof.record.fileactivity import FileActivity, own_file_system

pytestmark = pytest.mark.root


@pytest.fixture
def root_only():
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root (CAP_SYS_ADMIN)")


def _record(tmp_path, root, script: str, *args: str) -> tuple[dict, list[dict]]:
    (tmp_path / "w.py").write_text(script)
    out = tmp_path / "rec"
    cmd = [*CKPROF, "record", "-q", "-o", str(out), "--path", str(root), "--"]
    cmd += [sys.executable, str(tmp_path / "w.py"), str(root), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    meta = json.loads((out / "meta.json").read_text())
    with open(out / "events.jsonl") as f:
        files = [x for line in f if '"file_activity"' in line for x in json.loads(line).get("files", ())]
    return meta["file_activity"], files


def test_other_processes_writes_elsewhere_on_the_file_system_never_reach_the_reader(root_only, tmp_path):
    root, other = tmp_path / "ckpt", tmp_path / "other"
    root.mkdir()
    other.mkdir()
    stop = threading.Event()
    written = [0]

    def elsewhere():  # this test's own process: not the recorded tree, same file system
        while not stop.is_set():
            with open(other / f"f{written[0] % 50}", "wb") as f:
                f.write(b"x" * 100)
            written[0] += 1
            time.sleep(0.002)

    t = threading.Thread(target=elsewhere)
    t.start()
    try:
        fa, files = _record(tmp_path, root, "import time; time.sleep(3)")
    finally:
        stop.set()
        t.join()
    print(fa, written[0])
    assert written[0] > 300
    assert fa["source"] == "fanotify"
    assert fa["marks"] == {"directories": 1}
    assert fa["events_read"] == 0, fa  # a file-system mark read ~1 event per file written elsewhere
    assert files == []


MAKE_AND_FILL = r"""
import os, sys, time
root = sys.argv[1]
time.sleep(0.5)
for s in range(3):
    d = os.path.join(root, f"iter_{s}", "shards", "rank_0")
    os.makedirs(d)  # three new directories, filled straight away: before the reader can mark them
    for i in range(40):
        with open(os.path.join(d, f"part_{i}.bin"), "wb") as f:
            f.write(b"y" * (1000 + i))
    with open(os.path.join(root, f"iter_{s}", ".metadata"), "w") as f:
        f.write("{}")
    time.sleep(0.3)
"""


def _check_every_file(root, files):
    by_path = {f["path"]: f for f in files if not f.get("dir")}
    want = {
        os.path.join(root, f"iter_{s}", "shards", "rank_0", f"part_{i}.bin"): 1000 + i
        for s in range(3)
        for i in range(40)
    }
    want.update({os.path.join(root, f"iter_{s}", ".metadata"): 2 for s in range(3)})
    missing = sorted(set(want) - set(by_path))
    assert not missing, f"{len(missing)} files missing, e.g. {missing[:3]}"
    assert {p: by_path[p]["size_bytes"] for p in want} == want
    for p in want:
        f = by_path[p]
        # a file seen only in its new directory's listing says so, and names no writer it did not see
        assert f["writers"] or f.get("writers_unknown"), f
    dirs = {f["path"] for f in files if f.get("dir")}
    assert {os.path.join(root, f"iter_{s}") for s in range(3)} <= dirs


def test_a_directory_made_and_filled_at_once_gives_every_file(root_only, tmp_path):
    root = tmp_path / "ckpt"
    root.mkdir()
    fa, files = _record(tmp_path, root, MAKE_AND_FILL)
    print(fa)
    assert fa["marks"]["directories"] == 1 + 3 * 3
    assert "file_systems" not in fa["marks"]
    _check_every_file(str(root), files)


REMAKE_ROOT = r"""
import os, shutil, sys, time
root = sys.argv[1]
time.sleep(0.3)
shutil.rmtree(root)  # a script that starts from an empty output folder
time.sleep(0.3)
os.mkdir(root)
time.sleep(0.3)
with open(os.path.join(root, "model.bin"), "wb") as f:
    f.write(b"m" * 4096)
"""


def test_a_path_deleted_and_made_again_is_still_watched(root_only, tmp_path):
    root = tmp_path / "ckpt"
    (root / "old").mkdir(parents=True)
    (root / "old" / "stale.bin").write_bytes(b"s")
    fa, files = _record(tmp_path, root, REMAKE_ROOT)
    print(fa, files)
    assert "file_systems" not in fa["marks"]
    model = [f for f in files if f["path"] == str(root / "model.bin")]
    assert [(f["size_bytes"], f["writers"] != []) for f in model] == [(4096, True)], files


REPLACE_FILE = r"""
import os, sys, time
path = sys.argv[1]
time.sleep(0.3)
with open(path + ".tmp", "wb") as f:  # a save beside it, renamed over it
    f.write(b"w" * 3000)
os.rename(path + ".tmp", path)
time.sleep(0.3)
with open(os.path.join(os.path.dirname(path), "unrelated.log"), "w") as f:
    f.write("not the recorded path")
"""


def test_a_file_path_is_watched_through_its_folder(root_only, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    path = folder / "model.bin"
    path.write_bytes(b"old")
    fa, files = _record(tmp_path, path, REPLACE_FILE)
    print(fa, files)
    assert fa["marks"] == {"directories": 1}  # the folder: its children's events
    assert [(f["path"], f["size_bytes"], f.get("renamed_from")) for f in files] == [
        (str(path), 3000, str(path) + ".tmp")
    ]


class _Writer:
    def __init__(self):
        self.events = []

    def event(self, ev):
        self.events.append(ev)


class _Clock:
    @staticmethod
    def now_ns():
        return time.monotonic_ns()


def test_past_the_bound_of_directories_the_file_system_is_marked_and_meta_says_why(root_only, tmp_path, monkeypatch):
    monkeypatch.setattr(fileactivity, "MAX_DIR_MARKS", 3)
    root = tmp_path / "ckpt"
    for s in range(4):
        (root / f"iter_{s}").mkdir(parents=True)
    fa = FileActivity(_Writer(), _Clock(), [str(root)]).start()
    fa.set_root(os.getpid())
    (root / "iter_0" / "a.bin").write_bytes(b"z" * 10)
    time.sleep(0.3)
    meta = fa.stop()
    assert meta["source"] == "fanotify"
    assert meta["marks"]["file_systems"] == [{"path": str(root), "why": "more than 3 directories under the paths"}]
    files = [f for ev in fa.writer.events if ev["event"] == "file_activity" for f in ev["files"]]
    assert str(root / "iter_0" / "a.bin") in {f["path"] for f in files}


def test_a_whole_file_systems_mount_point_is_told_from_a_folder(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(
        "27 1 254:0 / / rw - ext4 /dev/vda rw\n"
        "42 27 7:0 / /mnt/ck\\040pt rw - ext4 /dev/loop0 rw\n"
        "43 27 254:0 /srv/data /mnt/bind rw - ext4 /dev/vda rw\n"
    )
    assert own_file_system("/mnt/ck pt", str(info))
    assert not own_file_system(
        "/mnt/bind", str(info)
    )  # a bind mount of a folder: the rest of the file system is not ours
    assert not own_file_system("/mnt", str(info))
