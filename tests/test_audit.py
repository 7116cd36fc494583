"""The MLPerf Storage v3.0 audit of recorded runs (profiler/analysis/audit.py), on real recordings
made here: DLIO's way of saving (torch.save into an open file, then os.fsync or not) under
`ckprof record`, and `ckprof workload` runs; each rule's pass, fail and unknown, and the report's
JSON, Markdown and HTML rules section."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from support.command import ckprof_cmd
from support.system import REPO

from ckprof.analysis.audit_runs import audit_recording, audit_two_invocations

pytest.importorskip("torch")

SCRIPT = REPO / "tests" / "support" / "dlio_like_saves.py"
DLIO_FSYNC_TRUE = "++workload.checkpoint.fsync=True"  # the override DLIO's Hydra config takes


def record(tmp, name, *script_args, target=None):
    """`ckprof record --path TARGET -- python dlio_like_saves.py TARGET ARGS`: the recording's path."""
    target = target or tmp / f"{name}-ckpt"
    target.mkdir(parents=True, exist_ok=True)
    out = tmp / name
    r = ckprof_cmd(
        "record", "-o", out, "--path", target, "--", sys.executable, SCRIPT, target, *script_args, timeout=180
    )
    assert r.returncode == 0, r.stderr
    return out


def workload(tmp, name, *args, ranks: int | None = 2):
    """`ckprof workload` of 32 MiB a checkpoint (`ranks` None: the layout's own, as a subset needs)."""
    out = tmp / name
    ranks_args = () if ranks is None else ("--ranks", ranks)
    r = ckprof_cmd("workload", "--total-size", "32MiB", *ranks_args, "-o", out, *args, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def checks(rec):
    a = audit_recording(str(rec))
    return {c.id: c for c in a.checks}


@pytest.fixture(scope="module")
def dlio(tmp_path_factory):
    """DLIO as released (its fsync key read under another name: no fsync) and with it fixed."""
    tmp = tmp_path_factory.mktemp("dlio")
    return {
        "dropped": record(tmp, "dropped", DLIO_FSYNC_TRUE),
        "fixed": record(tmp, "fixed", "--fsync", DLIO_FSYNC_TRUE),
    }


def test_dropped_fsync_fails_with_the_files_named(dlio):
    c = checks(dlio["dropped"])["fsync"]
    assert c.status == "fail"
    assert "asks for fsync" in c.reason and "no fsync happened" in c.reason
    assert c.figures["config_fsync"] is True and "workload.checkpoint.fsync=True" in c.figures["config_source"]
    assert c.figures["files"] == 4 and c.figures["files_dirty"] == 4
    for step in (1, 2):
        for r in (0, 1):
            assert f"global_step{step}/model_states-{r}.pt" in c.reason
    assert all(f.state == "dirty" and f.fsync is False and f.pending_bytes > 4 * 2**20 for f in c.files)


def test_fixed_fsync_passes_each_file_fsyncd(dlio):
    c = checks(dlio["fixed"])["fsync"]
    assert c.status == "pass", c.reason
    assert c.figures["files_fsync"] == 4 and c.figures["files_dirty"] == 0
    assert {os.path.basename(f.path) for f in c.files} == {"model_states-0.pt", "model_states-1.pt"}
    assert all(f.state == "fsync" and f.fsync is True for f in c.files)


def test_without_config_each_file_says_whether_it_was_fsyncd(tmp_path):
    rec = record(tmp_path, "half", "--fsync-first")
    c = checks(rec)["fsync"]
    assert c.figures["config_fsync"] is None
    by_name = {}
    for f in c.files:
        by_name.setdefault(os.path.basename(f.path), set()).add(f.state)
    assert by_name == {"model_states-0.pt": {"fsync"}, "model_states-1.pt": {"dirty"}}
    assert c.status == "fail" and c.reason.startswith("2 file(s) still dirty")  # no config to cite
    assert "model_states-0.pt" not in c.reason


def test_fsync_unknown_where_the_page_cache_cannot_tell(tmp_path):
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm (tmpfs) here")
    target = Path("/dev/shm") / f"ckprof-audit-{os.getpid()}-{time.monotonic_ns()}"
    try:
        c = checks(record(tmp_path, "tmpfs", "--saves", "1", target=target))["fsync"]
        assert c.status == "unknown", c.reason
        assert "tmpfs" in c.reason and c.figures["files_unknown"] == 2
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_other_commands_rules_unknown_with_the_reason(dlio):
    c = checks(dlio["fixed"])
    assert c["subset"].status == "unknown" and "not a ckprof workload recording" in c["subset"].reason
    assert c["run_timer"].status == "unknown" and "own timer is not in the recording" in c["run_timer"].reason
    assert c["restore_page_cache"].status == "unknown" and "no load" in c["restore_page_cache"].reason
    assert c["write_read_gap"].status == "unknown" and "no load" in c["write_read_gap"].reason
    assert c["client_memory"].status == "unknown"  # a small write and no load: clearing unverifiable


def test_load_after_a_write_cold_passes_warm_fails(tmp_path):
    cold = checks(record(tmp_path, "cold", "--saves", "1", "--fsync", "--load", "cold", "--sleep-before-load", "1"))
    warm = checks(record(tmp_path, "warm", "--saves", "1", "--fsync", "--load", "warm"))
    assert cold["restore_page_cache"].status == "pass", cold["restore_page_cache"].reason
    assert cold["restore_page_cache"].figures["cache_served_share_max"] <= 0.01
    assert cold["client_memory"].status == "pass" and "every load started cold" in cold["client_memory"].reason
    gap = cold["write_read_gap"]
    assert gap.status == "pass" and gap.figures["clock_skew_s"] == 0.0
    assert 1.0 <= gap.figures["gap_s"] < 10, gap.figures  # the evict and the 1 s sleep, then the load

    assert warm["restore_page_cache"].status == "fail", warm["restore_page_cache"].reason
    assert warm["restore_page_cache"].figures["cache_served_share_max"] > 0.9
    assert warm["client_memory"].status == "fail" and "not over 3x" in warm["client_memory"].reason
    data, mem = warm["client_memory"].figures["data_bytes"], warm["client_memory"].figures["client_memory_bytes"]
    assert (
        data > 8 * 2**20 and mem == json.loads((tmp_path / "warm" / "meta.json").read_text())["host"]["mem_total_bytes"]
    )


def test_read_over_30_s_after_the_write_fails(tmp_path):
    rec = record(tmp_path, "late", "--saves", "1", "--fsync", "--load", "cold", "--sleep-before-load", "31")
    gap = checks(rec)["write_read_gap"]
    assert gap.status == "fail" and "over 30 s" in gap.reason
    assert gap.figures["gap_s"] > 30


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("workload")
    return {
        "write": workload(tmp, "write", "--target", tmp / "t", "--count", "2", "--load"),
        "no_fsync": workload(tmp, "no_fsync", "--target", tmp / "t2", "--no-fsync"),
        "tmp": tmp,
    }


def test_the_workloads_own_run_passes_every_rule(runs):
    a = audit_recording(str(runs["write"]))
    assert (a.passed, a.failed, a.unknown) == (6, 0, 0), [(c.id, c.status, c.reason) for c in a.checks]
    c = {c.id: c for c in a.checks}
    assert c["fsync"].figures["config_fsync"] is True and c["fsync"].figures["files_clean"] == 10
    timers = c["run_timer"].figures["per_checkpoint"]
    meta = json.loads((runs["write"] / "meta.json").read_text())
    own = meta["workload"]["results"]["checkpoints"]
    assert [t["kind"] for t in timers] == ["save", "save", "load"]
    for t, o in zip(timers, own):
        assert t["timer_s"] == pytest.approx(o["seconds"])
        assert t["timer_start_after_window_s"] >= 0 and t["timer_end_before_window_end_s"] >= 0
        assert t["window_s"] >= t["timer_s"]
    assert c["subset"].figures["preset"] == "llama3-8b" and c["subset"].figures["subset"] is False


def test_the_workload_without_fsync_fails_fsync_and_its_timer(runs):
    c = checks(runs["no_fsync"])
    assert c["fsync"].status == "fail" and "turns fsync off" in c["fsync"].reason
    assert c["fsync"].figures["files_dirty"] >= 4
    assert c["run_timer"].status == "fail" and "still dirty" in c["run_timer"].reason


def test_subset_only_for_8b(runs):
    tmp = runs["tmp"]
    big = checks(
        workload(
            tmp, "s70", "--rules", "v2.0", "--preset", "llama3-70b", "--subset", "--target", tmp / "s70t", ranks=None
        )
    )
    small = checks(workload(tmp, "s8", "--preset", "llama3-8b", "--subset", "--target", tmp / "s8t", ranks=None))
    assert big["subset"].status == "fail" and "only for llama3-8b" in big["subset"].reason
    assert big["subset"].figures["run_rules"] == "v2.0"
    assert small["subset"].status == "pass", small["subset"].reason
    assert small["subset"].figures["subset"] is True


def test_two_invocations_gap_and_skew(runs):
    tmp = runs["tmp"]
    write = workload(tmp, "write-apart", "--target", tmp / "apart")
    written = json.loads((write / "meta.json").read_text())["workload"]["results"]["checkpoints"][-1]["path"]
    out = tmp / "read"
    r = ckprof_cmd("workload", "load", written, "-o", out, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    read = checks(out)
    # the read invocation alone: the workload's own gap (its manifest's write time), wall clock
    assert read["write_read_gap"].status == "pass" and "workload's own" in read["write_read_gap"].reason
    both = audit_two_invocations(str(write), str(out))
    assert both.status == "pass" and both.figures["gap_s"] > 0 and both.figures["clock_skew_s"] is None
    assert both.figures["hosts"][0] == both.figures["hosts"][1]
    # a "write" that ended after the read began: by the wall clocks a negative gap, clock skew
    later = workload(tmp, "later", "--target", tmp / "t3")
    skew = audit_two_invocations(str(later), str(out))
    assert skew.status == "fail" and "clock skew" in skew.reason
    assert skew.figures["clock_skew_s"] < 0


def test_report_json_markdown_and_html_carry_the_rules(dlio, tmp_path):
    rec = dlio["dropped"]
    js = json.loads(ckprof_cmd("report", rec, "--format", "json").stdout)
    fs = next(c for c in js["audit"]["checks"] if c["id"] == "fsync")
    assert fs["status"] == "fail" and len(fs["files"]) == 4
    assert js["audit"]["failed"] >= 1 and js["audit"]["rules"].startswith("MLPerf Storage v3.0")
    md = ckprof_cmd("report", rec, "--format", "md").stdout
    section = md.split("## Rules: ", 1)[1].split("\n## ", 1)[0]
    assert "| FAILED |" in section and "model_states-1.pt | dirty |" in section
    html = tmp_path / "r.html"
    assert ckprof_cmd("report", rec, "-o", html).returncode == 0
    page = html.read_text()
    assert "id='rules'" in page and "<td class='bad'>FAILED</td>" in page and "rules-fsync-files" in page
