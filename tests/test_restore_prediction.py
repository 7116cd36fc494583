"""Restore prediction on a real block device (zram): the cold read rate measured by one recording's
`ckprof workload` load predicts another's cold restore within ±15 % (root)."""

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ckprof_cmd

pytestmark = pytest.mark.root
MiB = 2**20


def workload(mnt, name, out):
    r = ckprof_cmd(
        "workload", "--preset", "llama3-8b", "--total-size", "384MiB", "--ranks", "1",
        "--target", str(mnt / name), "--count", "1", "--load", "-o", str(out), timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr


@pytest.fixture
def zram_ext4(tmp_path):
    """ext4 on a fresh zram device: a real block device whose speed does not wander with the host's
    disk (the loop devices' backing file does, by ±20 % between two reads here)."""
    ctl = Path("/sys/class/zram-control/hot_add")
    if not ctl.exists():
        pytest.skip("no zram here (/sys/class/zram-control)")
    n = int(ctl.read_text())
    dev, mnt = f"/dev/zram{n}", tmp_path / "mnt"
    try:
        Path(f"/sys/block/zram{n}/disksize").write_text("1200M")
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
        mnt.mkdir()
        subprocess.run(["mount", dev, str(mnt)], check=True)
        yield f"zram{n}", mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        Path(f"/sys/block/zram{n}/reset").write_text("1")
        Path("/sys/class/zram-control/hot_remove").write_text(str(n))


def test_a_measured_read_rate_predicts_a_cold_restore(zram_ext4, tmp_path):
    _, mnt = zram_ext4
    rate_rec, run_rec = tmp_path / "rate", tmp_path / "run"
    workload(mnt, "a", rate_rec)
    workload(mnt, "b", run_rec)
    r = ckprof_cmd("report", str(run_rec), "--read-bw", str(rate_rec), "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    (save,) = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    (load,) = [c for c in rep["checkpoints"] if c["kind"] == "load"]
    print(
        f"save {save['bytes_app'] / MiB:.0f} MiB: predicted cold restore {save['predicted_cold_restore_s']:.3f} s "
        f"({save['restore_prediction_basis']}); load measured {load['duration_s']:.3f} s, predicted "
        f"{load['predicted_cold_restore_s']:.3f} s, error {load['prediction_error']:+.1%}, cache-served "
        f"{load['cache_served_share']:.1%}"
    )
    assert load["cache_served_share"] <= 0.10  # the workload's load is cold: its files were evicted first
    assert abs(load["prediction_error"]) <= 0.15
    assert save["predicted_cold_restore_s"] == pytest.approx(load["predicted_cold_restore_s"], rel=0.01)
    # a rate given by hand, and one that cannot be read
    r = ckprof_cmd("report", str(run_rec), "--read-bw", "1GiB/s", "--format", "json")
    (save,) = [c for c in json.loads(r.stdout)["checkpoints"] if c["kind"] == "save"]
    assert save["predicted_cold_restore_s"] == pytest.approx(save["bytes_app"] / 2**30)
    r = ckprof_cmd("report", str(run_rec), "--read-bw", "fast", "--format", "json")
    assert r.returncode == 2 and "not a rate" in r.stderr
