"""The audit (profiler/analysis/audit.py) of real DLIO runs under `ckprof record`: the fsync rule
reads DLIO's own config (its workload YAML, `checkpoint.fsync: True`) and the run_timer rule DLIO's
own timer of each save (its per-rank per_epoch_stats.json). As released DLIO never fsyncs
(dlio_run.py: its key is stored under a name nothing reads), so both rules fail, naming the files
and the dirty bytes its timer stopped with; with the one-line fix both pass.

Slow (two DLIO runs under mpirun, ~25 s each here); DLIO as tests/frameworks/test_dlio.py installs it,
on the machine's own file system (no loop device: the rules need no device bytes).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import dlio_run
import pytest
from support.command import ckprof_cmd, clean_env

from ckprof.analysis.audit_runs import audit_recording

pytestmark = [pytest.mark.slow]

RANKS, SAVES, BETWEEN_S = 2, 2, 0.5
FILES = 2 * RANKS * SAVES  # ZeRO-3: each rank its model states and its optimizer states, a save
SHAPE = {"layers": 4, "hidden": 192, "ffn": 672, "heads": 32, "kv_heads": 8, "vocab": 8192}  # ~68 MiB a save


def record(tmp: Path, fixed: bool) -> tuple[dict, Path]:
    """DLIO recorded (as released or fixed): the audit's checks by id, and DLIO's output folder."""
    pkg = dlio_run.package_for_test()
    name = "fixed" if fixed else "released"
    target, conf, out = tmp / f"{name}-ckpt", tmp / f"{name}-conf", tmp / f"{name}-dlio-out"
    target.mkdir()
    dlio_run.write_workload(conf, SHAPE, target, SAVES, BETWEEN_S, fsync=True)
    env = clean_env(PYTHONUNBUFFERED="1")
    if fixed:
        dlio_run.use_fixed_copy(pkg, tmp / "dlio-fixed", env)
    rec = tmp / f"rec-{name}"
    cmd = dlio_run.command(conf, out, RANKS)
    r = ckprof_cmd("record", "-q", "-o", rec, "--path", target, "--", *cmd, env=env, cwd=tmp, timeout=150)
    assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return {c.id: c for c in audit_recording(str(rec)).checks}, out


def test_dlio_as_released_fails_fsync_and_its_timer(tmp_path):
    checks, out = record(tmp_path, fixed=False)
    fs, timer = checks["fsync"], checks["run_timer"]
    print(f"\nfsync: {fs.status}: {fs.reason}\nrun_timer: {timer.status}: {timer.reason}\n{timer.figures}")
    assert fs.status == "fail" and "asks for fsync" in fs.reason and "no fsync happened" in fs.reason
    assert fs.figures["config_fsync"] is True and "workload YAML" in fs.figures["config_source"]
    assert fs.figures["files"] == FILES and fs.figures["files_dirty"] == FILES
    for f in fs.files:
        assert f.state == "dirty" and f.pending_bytes > 0 and Path(f.path).name.startswith("zero_pp_rank_")
    assert timer.status == "fail" and "still dirty" in timer.reason
    assert timer.figures["timers"] == SAVES and len(timer.figures["per_checkpoint"]) == SAVES
    assert str(out) in timer.figures["timer_source"]
    # DLIO's timer and ckprof's window are of one save: mostly the same span
    for p in timer.figures["per_checkpoint"]:
        assert p["dirty_bytes_at_window_end"] > 0
        assert abs(p["timer_s"] - p["window_s"]) < 0.5 * p["timer_s"] + 0.05, p


def test_dlio_fixed_passes_fsync_and_its_timer(tmp_path):
    checks, _ = record(tmp_path, fixed=True)
    fs, timer = checks["fsync"], checks["run_timer"]
    print(f"\nfsync: {fs.status}: {fs.reason}\nrun_timer: {timer.status}: {timer.reason}\n{timer.figures}")
    assert fs.status == "pass", fs.reason
    assert fs.figures["files_fsync"] == FILES and fs.figures["config_fsync"] is True
    assert timer.status == "pass", timer.reason
    assert len(timer.figures["per_checkpoint"]) == SAVES
    # DLIO stamps its timer in local time: the report made in another time zone reads the same
    # (the recording's UTC offset, meta.json host.utc_offset_s), not this machine's
    tz = os.environ.get("TZ")
    try:
        os.environ["TZ"] = "Asia/Kolkata" if time.localtime().tm_gmtoff != 19800 else "America/New_York"
        time.tzset()
        again = {c.id: c for c in audit_recording(str(tmp_path / "rec-fixed")).checks}["run_timer"]
    finally:
        if tz is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = tz
        time.tzset()
    assert again.status == "pass" and again.figures == timer.figures, (again.reason, again.figures)
