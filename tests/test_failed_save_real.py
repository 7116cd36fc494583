"""A save that fails on a real full file system is a failed checkpoint in the report, and a marked
checkpoint and an automatic (patched) save outside it both show (root: a 2 MiB tmpfs)."""
import json
import subprocess
import sys

import pytest
from conftest import ckprof_cmd, need_root

# a stand-in for the `torch` module with the one function the patch wraps; the patch itself, the
# markers, the write(2) that fills the file system and the report are all real
TORCH = '''
def save(obj, f):
    with open(f, "wb") as out:
        out.write(obj)
'''

SCRIPT = '''
import sys, time, ckprof, torch
ok_dir, full_dir = sys.argv[1], sys.argv[2]
with ckprof.checkpoint(step=1, path=ok_dir):
    torch.save(b"x" * (1 << 20), ok_dir + "/inside.pt")  # part of the marked window
time.sleep(0.2)
torch.save(b"y" * (1 << 20), ok_dir + "/outside.pt")  # an automatic window of its own
time.sleep(0.2)
try:
    torch.save(b"z" * (4 << 20), full_dir + "/too-big.pt")  # ENOSPC on the 2 MiB tmpfs
except OSError as e:
    print("save failed:", e)
'''


@pytest.fixture
def full_fs(tmp_path):
    need_root()
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.root
def test_enospc_save_is_failed_and_marked_and_patched_windows_show_together(tmp_path, full_fs):
    (tmp_path / "torch.py").write_text(TORCH)
    (tmp_path / "train.py").write_text(SCRIPT)
    ok_dir = tmp_path / "ck"
    ok_dir.mkdir()
    out = tmp_path / "rec"
    r = ckprof_cmd("record", "-q", "-o", str(out), "--", sys.executable, str(tmp_path / "train.py"),
                   str(ok_dir), str(full_fs), timeout=60)
    assert r.returncode == 0, r.stderr
    r = ckprof_cmd("report", str(out), "--format", "json", "-o", str(tmp_path / "rep.json"))
    assert r.returncode == 0, r.stderr
    cps = json.loads((tmp_path / "rep.json").read_text())["checkpoints"]
    assert [(c["source"], c["api"], c["outcome"]) for c in cps] == [
        ("api", None, "ok"), ("patch", "torch.save", "ok"), ("patch", "torch.save", "failed")], cps
    assert cps[1]["path"].endswith("outside.pt") and cps[1]["bytes_app"] == 1 << 20
    failed = cps[2]
    assert failed["ok"] is False and "No space left on device" in failed["error"]
    r = ckprof_cmd("report", str(out), "--format", "md", "-o", str(tmp_path / "rep.md"))
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "rep.md").read_text()
    assert f"failed: {failed['error']}" in md
