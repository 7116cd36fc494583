"""The durability verdict by what is behind a checkpoint's files, on built recordings: the kinds this
machine cannot mount (NFS, 9p, an object store) and recordings made before the file system was
recorded. The real tmpfs, FUSE, ext4 and btrfs runs are in test_durable_storage.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import ckprof
from ckprof.analysis import analyze
from ckprof.record import fskind
from ckprof.recording import fstypes
from ckprof.testing import START_NS, RecordingBuilder

MiB = 2**20
NFS, P9, EXT4, OVERLAY = 0x6969, 0x01021997, 0xEF53, 0x794C7630


def _rec(tmp_path):
    s = RecordingBuilder(tmp_path / "rec", duration_s=10)
    s.host(lambda t: 0 * t)
    s.block("sda", lambda t: np.where((t > 2) & (t <= 3), 64 * MiB, 0))
    return s.file_tracker()


def _save(s, a, b, path, **kw) -> str:
    return s.checkpoint(a, b, 64 * MiB, step=int(a), path=path, **kw).last_checkpoint_id


def _report(s) -> dict:
    return analyze(ckprof.load(s.finish())).report


@pytest.mark.parametrize("magic,name", [(NFS, "nfs"), (P9, "9p")])
def test_network_file_system_is_durable_on_the_server_never_the_device(tmp_path, magic, name):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/nfs/1.bin", pending_bytes_at_return=64 * MiB, files_at_return=1)
    s.file_event("file_durable", 4.0, a, "/nfs/1.bin", 64 * MiB, first_pending_bytes=64 * MiB, fs_magic=magic)
    b = _save(s, 5, 5.5, "/nfs/2.bin", pending_bytes_at_return=64 * MiB, files_at_return=1)
    s.file_event(
        "file_deleted_before_durable",
        5.6,
        b,
        "/nfs/2.bin",
        64 * MiB,
        first_pending_bytes=64 * MiB,
        pending_bytes=8 * MiB,
        fs_magic=magic,
    )
    c1, c2 = _report(s)["checkpoints"]
    assert c1["durable"] is True and c1["durable_where"] == "server" and c1["file_system"] == name
    assert c1["durable_basis"][0].startswith("on the server: "), c1["durable_basis"]
    assert c1["durable_end_s"] == pytest.approx(4.0, abs=1e-6) and c1["durable_at_return"] is False
    assert c2["durable"] is False and "8.00 MiB not on the server" in c2["durable_basis"][0]
    assert not any("on the device" in b for c in (c1, c2) for b in c["durable_basis"])


def test_block_device_file_system_is_durable_on_the_device(tmp_path):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/ck/1.bin", pending_bytes_at_return=0, files_at_return=1)
    s.file_event("file_durable", 3.05, a, "/ck/1.bin", 64 * MiB, fs_magic=EXT4)
    (c,) = _report(s)["checkpoints"]
    assert (c["durable"], c["durable_at_return"], c["durable_where"], c["file_system"]) == (
        True,
        True,
        "device",
        "ext4",
    )
    assert c["durable_basis"][0].startswith("on the device: every page")


@pytest.mark.parametrize(
    "magic,why",
    [(OVERLAY, "unknown: overlayfs: the file below it is not visible"), (0x12345678, "unknown: f_type 0x12345678")],
)
def test_stacked_or_unknown_file_system_is_unknown(tmp_path, magic, why):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/ov/1.bin", pending_bytes_at_return=0, files_at_return=1)
    s.file_event("file_durable", 3.05, a, "/ov/1.bin", 64 * MiB, fs_magic=magic)
    (c,) = _report(s)["checkpoints"]
    assert c["durable"] is None and c["durable_at_return"] is None and c["pending_bytes_at_return"] is None
    assert c["durable_where"] is None and c["durable_basis"][0].startswith(why), c["durable_basis"]


def test_recording_without_file_system_is_judged_as_before_and_says_so(tmp_path):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/ck/1.bin", pending_bytes_at_return=0, files_at_return=1)
    s.file_event("file_durable", 3.05, a, "/ck/1.bin", 64 * MiB)  # no fs_magic: recorded before ckprof wrote it
    (c,) = _report(s)["checkpoints"]
    assert c["durable"] is True and c["durable_at_return"] is True
    assert c["durable_where"] is None and c["file_system"] is None
    assert any("file system behind the files was not recorded" in b for b in c["durable_basis"])


def test_object_store_is_durable_when_its_upload_completed(tmp_path):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "s3://bucket/ck/1.pt", uploaded=True)  # the completing call returned, no error
    _save(s, 4, 5, "s3://bucket/ck/2.pt")  # no event says it completed
    c1, c2 = _report(s)["checkpoints"]
    assert c1["id"] == a
    assert (c1["durable"], c1["durable_at_return"], c1["durable_where"]) == (True, True, "object store")
    assert c1["durable_end_s"] == pytest.approx(3.0, abs=1e-6)
    assert c1["durable_basis"][0].startswith("in the object store: ")
    assert c2["durable"] is None and c2["durable_where"] is None
    assert c2["durable_basis"][0].startswith("unknown: an object-store path")


def _extend(s, t_s, cid, op, path=None, **kw):
    s.events.append(
        {"t_ns": START_NS + int(t_s * 1e9), "event": "checkpoint_extend", "source": "patch", "id": cid, "op": op}
        | ({"path": path} if path else {})
        | kw
    )


@pytest.mark.parametrize("op", ["fsync", "fdatasync", "sync"])
def test_own_flush_inside_the_window_is_durable_at_its_end(tmp_path, op):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/ck/1.pt", pending_bytes_at_return=64 * MiB, files_at_return=1)
    _extend(s, 3.2, a, op, None if op == "sync" else "/ck/1.pt")
    s.file_event("file_durable", 3.3, a, "/ck/1.pt", 64 * MiB, first_pending_bytes=0, fs_magic=EXT4)
    (c,) = _report(s)["checkpoints"]
    assert c["app_end_s"] == pytest.approx(3.2, abs=1e-6)  # the window ends when the app's call returned
    assert c["durable_at_return"] is True and c["pending_bytes_at_return"] == 0
    assert c["durable"] is True and c["durable_end_s"] == pytest.approx(3.2, abs=1e-6)


def test_rename_alone_does_not_make_it_durable_at_the_end(tmp_path):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/ck/1.pt.tmp", pending_bytes_at_return=64 * MiB, files_at_return=1)
    _extend(s, 3.1, a, "replace", "/ck/1.pt.tmp", renamed_to="/ck/1.pt")
    s.file_event("file_gone_before_poll", 3.15, a, "/ck/1.pt.tmp", 64 * MiB, fs_magic=EXT4)
    s.file_event("file_durable", 6.0, a, "/ck/1.pt", 64 * MiB, first_pending_bytes=64 * MiB, fs_magic=EXT4)
    (c,) = _report(s)["checkpoints"]
    assert c["durable_at_return"] is False and c["pending_bytes_at_return"] == 64 * MiB
    assert c["durable"] is True and c["durable_end_s"] == pytest.approx(6.0, abs=1e-6)


def test_fsync_before_the_rename_follows_the_file(tmp_path):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/ck/1.pt.tmp", pending_bytes_at_return=64 * MiB, files_at_return=1)
    _extend(s, 3.1, a, "fsync", "/ck/1.pt.tmp")
    _extend(s, 3.2, a, "replace", "/ck/1.pt.tmp", renamed_to="/ck/1.pt")
    s.file_event("file_durable", 3.3, a, "/ck/1.pt", 64 * MiB, first_pending_bytes=0, fs_magic=EXT4)
    (c,) = _report(s)["checkpoints"]
    assert c["durable_at_return"] is True and c["durable_end_s"] == pytest.approx(3.2, abs=1e-6)


def test_statfs_names_the_file_system_of_a_file_and_of_a_gone_one(tmp_path):
    here = fskind.magic_of(str(tmp_path))
    assert here is not None
    assert fskind.magic_of(str(tmp_path / "gone" / "deeper" / "x.bin")) == here  # its nearest directory's
    assert fstypes.kind_of(0x01021994) == ("memory", "tmpfs")
    assert fstypes.kind_of(0x65735546) == ("fuse", "fuse")
    assert fstypes.kind_of(None) == (None, "unknown")


def test_report_tables_name_where_it_is_durable(tmp_path):
    from ckprof.report.render import to_markdown

    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/nfs/1.bin", pending_bytes_at_return=0, files_at_return=1)
    s.file_event("file_durable", 3.05, a, "/nfs/1.bin", 64 * MiB, fs_magic=NFS)
    b = _save(s, 4, 5, "/dev/shm/2.bin", pending_bytes_at_return=0, files_at_return=1)
    s.file_event("file_durable", 5.05, b, "/dev/shm/2.bin", 64 * MiB, fs_magic=0x01021994)
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    md = to_markdown(rep)
    assert "| yes; on the server |" in md
    assert "| NO (page cache); no storage behind tmpfs |" in md
    assert [(n.code, n.subject) for n in an.model.notes if n.code.startswith(("not_durable", "deleted"))] == [
        ("not_durable", b)
    ]
    assert [c["durable_where"] for c in rep["checkpoints"]] == ["server", None]


def test_advice_says_no_storage_behind_tmpfs_not_fsync(tmp_path):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/dev/shm/1.bin", pending_bytes_at_return=0, files_at_return=1)
    s.file_event("file_durable", 3.05, a, "/dev/shm/1.bin", 64 * MiB, fs_magic=0x01021994)
    ids = {x["id"]: x for x in _report(s)["advice"]}
    assert ids["no_storage_behind"]["figures"] == {"checkpoints": 1, "file_systems": ["tmpfs"], "ids": [a]}
    assert "not_durable_at_return" not in ids and "deleted_before_durable" not in ids


def test_files_on_several_kinds_take_the_one_that_says_least(tmp_path):
    s = _rec(tmp_path)
    a = _save(s, 2, 3, "/ck/1", pending_bytes_at_return=0, files_at_return=2)
    s.file_event("file_durable", 3.05, a, "/ck/1/a", 64 * MiB, fs_magic=EXT4)
    s.file_event("file_durable", 3.05, a, "/ck/1/b", 64 * MiB, fs_magic=0x01021994)
    b = _save(s, 4, 5, "/ck/2", pending_bytes_at_return=0, files_at_return=2)
    s.file_event("file_durable", 5.05, b, "/ck/2/a", 64 * MiB, fs_magic=EXT4)
    s.file_event("file_durable", 5.05, b, "/ck/2/b", 64 * MiB, fs_magic=NFS)
    c1, c2 = _report(s)["checkpoints"]
    assert (c1["durable"], c1["file_system"], c1["durable_where"]) == (False, "ext4, tmpfs", None)
    assert (c2["durable"], c2["file_system"], c2["durable_where"]) == (True, "ext4, nfs", "server")
