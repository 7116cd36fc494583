"""What is behind a file is asked once per file system (record/fskind.py PerFileSystem): the file
tracker's file events each carry `fs_magic`, and statfs(2) per event is a request to the server on
NFS; f_type is the superblock's, one per st_dev, so the tracker asks once per st_dev it has seen
and shares that answer with its rule for how often a served file is looked at.
"""

from __future__ import annotations

import json
import os

from ckprof.record import fskind
from ckprof.recording import fstypes


def _counting(monkeypatch) -> list[bytes]:
    calls: list[bytes] = []
    real = fskind._statfs()

    def statfs(path, buf):
        calls.append(path)
        return real(path, buf)

    monkeypatch.setattr(fskind, "_statfs", lambda: statfs)
    return calls


def test_one_statfs_per_file_system_for_many_files(tmp_path, monkeypatch):
    paths = []
    for i in range(50):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x")
        paths.append(str(p))
    want = fskind.magic_of(paths[0])
    calls = _counting(monkeypatch)
    fs = fskind.PerFileSystem()
    got = [fs.fields(p, os.stat(p).st_dev) for p in paths]
    assert got == [{"fs_magic": want}] * 50
    assert len(calls) == 1
    assert fs.kind(paths[3], os.stat(paths[3]).st_dev) == fstypes.kind_of(want)[0]
    assert len(calls) == 1
    # with no st_dev known (a file never looked at) it is asked each time, as before
    fs.fields(paths[0])
    assert len(calls) == 2


def test_an_unanswered_statfs_is_asked_again(tmp_path, monkeypatch):
    """A statfs that failed is not kept: the next file asks again."""
    p = tmp_path / "f"
    p.write_bytes(b"x")
    monkeypatch.setattr(fskind, "_statfs", lambda: lambda path, buf: (_ for _ in ()).throw(OSError("no libc")))
    fs = fskind.PerFileSystem()
    assert fs.fields(str(p), 1) == {"fs_magic": None}
    monkeypatch.undo()
    assert fs.fields(str(p), 1) == {"fs_magic": fskind.magic_of(str(p))}


def test_the_file_tracker_asks_once_for_many_files(tracker, tmp_path, monkeypatch):
    files = []
    for i in range(20):
        f = tmp_path / f"shard_{i}.bin"
        f.write_bytes(b"s" * 4096)
        files.append(f)
    os.sync()  # clean: each settles at its first look, one file event each
    want = fskind.magic_of(str(files[0]))
    calls = _counting(monkeypatch)
    for i, f in enumerate(files):
        tracker.writer.event({"t_ns": 1, "event": "checkpoint_end", "id": f"c{i}", "path": str(f), "kind": "save"})
    tracker.tick(every_file=True)
    events = [json.loads(line) for line in open(tracker.events_path)]
    settled = [e for e in events if e["event"] in ("file_durable", "file_pending_at_end")]
    assert len(settled) == 20
    assert {e["fs_magic"] for e in settled} == {want}
    assert len(calls) == 1, calls
