"""Restore prediction on a real block device (zram): the cold read rate measured by one recording's
`ckprof workload` loads predicts another recording's cold restores within ±15 % (root)."""

import json
import os
import statistics
import subprocess
from pathlib import Path

import pytest
from support.command import CKPROF, ckprof_cmd

pytestmark = pytest.mark.root
MiB = 2**20


LOADS = 7  # cold loads per recording: the figures below are medians, one slow read is not the rule
SIZE = "512MiB"  # per checkpoint: two fit the 2 GiB zram device with room
ATTEMPTS = 2  # pairs of recordings at most (see the test)


def _ck(*args) -> str:
    return " ".join([*CKPROF, *map(str, args), "--no-record", ">/dev/null"])


def _wait(turn) -> str:
    return f"read _ < {turn}"  # blocks on a FIFO: no polling process while the other program reads


def record_in_turns(mnt, rate_rec, run_rec):
    """Two `ckprof record`s whose programs take turns: each saves a checkpoint (a, then b) and
    cold-loads it LOADS times, the two recordings' loads alternating load for load. The read rate of this VM's zram (CPU-bound) wanders by up to 20 % between runs a minute
    apart here; taking turns gives both recordings the same machine, so what is measured is the
    prediction, not the drift."""
    flags = mnt / "turns"
    flags.mkdir(parents=True)
    for i in range(LOADS):
        for side in "ab":
            os.mkfifo(flags / f"{side}{i}")
    os.mkfifo(flags / "go")
    a, b = mnt / "a" / "global_epoch1_step1", mnt / "b" / "global_epoch1_step1"

    def save(name):
        return _ck("workload", "--preset", "llama3-8b", "--total-size", SIZE, "--ranks", "1",
                   "--target", mnt / name, "--count", "1")  # fmt: skip

    # each records a save (the run's is what is predicted) and then its loads, one turn each
    rate_script = f"{save('a')} && echo > {flags / 'go'}; " + "; ".join(
        f"{_wait(flags / f'a{i}')} && {_ck('workload', 'load', a)} && echo > {flags / f'b{i}'}" for i in range(LOADS)
    )
    run_script = f"{_wait(flags / 'go')} && {save('b')} && echo > {flags / 'a0'}; " + "; ".join(
        f"{_wait(flags / f'b{i}')} && {_ck('workload', 'load', b)}"
        + (f" && echo > {flags / f'a{i + 1}'}" if i + 1 < LOADS else "")
        for i in range(LOADS)
    )
    procs = [
        subprocess.Popen(
            [*CKPROF, "record", "-q", "-o", str(out), "--path", str(mnt), "--", "sh", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for out, script in ((rate_rec, rate_script), (run_rec, run_script))
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err


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
        Path(f"/sys/block/zram{n}/disksize").write_text("2G")
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
        mnt.mkdir()
        subprocess.run(["mount", dev, str(mnt)], check=True)
        yield f"zram{n}", mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        Path(f"/sys/block/zram{n}/reset").write_text("1")
        Path("/sys/class/zram-control/hot_remove").write_text(str(n))


def _judge(mnt, rate_rec, run_rec) -> tuple[float, dict]:
    """Records a pair in turns; returns (the median load's prediction error, the run's report)."""
    record_in_turns(mnt, rate_rec, run_rec)
    r = ckprof_cmd("report", str(rate_rec), "--format", "json")
    assert r.returncode == 0, r.stderr
    rate_loads = [c["duration_s"] for c in json.loads(r.stdout)["checkpoints"] if c["kind"] == "load"]
    print("rate recording's loads (s):", " ".join(f"{d:.3f}" for d in rate_loads))
    r = ckprof_cmd("report", str(run_rec), "--read-bw", str(rate_rec), "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    (save,) = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    loads = [c for c in rep["checkpoints"] if c["kind"] == "load"]
    assert len(loads) == LOADS
    print(f"save {save['bytes_app'] / MiB:.0f} MiB: predicted cold restore {save['predicted_cold_restore_s']:.3f} s")
    print(f"  ({save['restore_prediction_basis']})")
    for c in loads:
        print(
            f"  load measured {c['duration_s']:.3f} s, predicted {c['predicted_cold_restore_s']:.3f} s, error "
            f"{c['prediction_error']:+.1%}, cache-served {c['cache_served_share']:.1%}"
        )
        assert c["cache_served_share"] <= 0.10  # the workload's loads are cold: their files are evicted first
        assert save["predicted_cold_restore_s"] == pytest.approx(c["predicted_cold_restore_s"], rel=0.01)
    measured = statistics.median(c["duration_s"] for c in loads)
    error = (save["predicted_cold_restore_s"] - measured) / measured
    print(f"  median measured {measured:.3f} s: prediction error {error:+.1%}")
    return error, rep


def test_a_measured_read_rate_predicts_a_cold_restore(zram_ext4, tmp_path):
    """±15 % on the median load. This VM's zram reads are CPU-bound, and on a busy CI host one
    recording's loads were once 58 % slower than the other's while taking turns (its median made
    of three slowed loads); a pair that misses is followed by one more fresh pair, at most
    ATTEMPTS in all, every pair printed. A prediction that is wrong misses on every pair."""
    _, mnt = zram_ext4
    errors = []
    for attempt in range(ATTEMPTS):
        rate_rec, run_rec = tmp_path / f"rate{attempt}", tmp_path / f"run{attempt}"
        error, rep = _judge(mnt / f"pair{attempt}", rate_rec, run_rec)
        errors.append(error)
        if abs(error) <= 0.15:
            break
        subprocess.run(["rm", "-rf", str(mnt / f"pair{attempt}")], check=True)  # room for the next pair
    assert abs(errors[-1]) <= 0.15, f"prediction errors of {len(errors)} pairs: {[f'{e:+.1%}' for e in errors]}"
    # a rate given by hand, and one that cannot be read
    r = ckprof_cmd("report", str(run_rec), "--read-bw", "1GiB/s", "--format", "json")
    (save,) = [c for c in json.loads(r.stdout)["checkpoints"] if c["kind"] == "save"]
    assert save["predicted_cold_restore_s"] == pytest.approx(save["bytes_app"] / 2**30)
    r = ckprof_cmd("report", str(run_rec), "--read-bw", "fast", "--format", "json")
    assert r.returncode == 2 and "not a rate" in r.stderr
