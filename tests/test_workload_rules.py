"""`ckprof workload --rules`: MLPerf Storage's checkpointing rules (ckprof.workloads.rules), one test
per rule: what is refused (one line, nothing started), what is flagged (a warning and meta.json's
workload.rules), what --dry-run says, and the write-to-read gap measured on a real write then a
real `ckprof workload load` in another process."""

import json
import os
import time

import pytest
from support.command import ckprof_cmd

from ckprof.workloads import rules, store
from ckprof.workloads.config import RunConfig
from ckprof.workloads.options import ModelOptions

TINY = ("--total-size", "4MiB", "--ranks", "1")


def dry(*args):
    r = ckprof_cmd("workload", "--dry-run", *args, in_process=True)
    assert r.exit_code == 0, r.output
    return r.output


def rule_line(output: str, rule: str) -> str:
    """The dry-run's line of `rule` ("  4.3.5  meets  ...")."""
    lines = [ln for ln in output.splitlines() if ln.split()[:1] == [rule]]
    assert len(lines) == 1, output
    return lines[0]


def status_of(output: str, rule: str) -> str:
    line = rule_line(output, rule)
    for s in (rules.NOT_APPLICABLE, rules.VIOLATES, rules.FLAGGED, rules.MEETS):
        if line.split(None, 1)[1].startswith(s):
            return s
    raise AssertionError(line)


def refused(tmp_path, *args):
    """A real run that must be refused before any rank starts: exit 2, one line, nothing written."""
    target = tmp_path / "ckpt"
    r = ckprof_cmd("workload", "--target", target, "--no-record", *args, in_process=True)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert not target.exists() or not os.listdir(target)
    return r.output


def checks_of(meta_dir) -> dict:
    with open(os.path.join(meta_dir, "meta.json")) as f:
        got = json.load(f)["workload"]["rules"]
    return {c["rule"]: c for c in got["checks"]} | {"edition": got["edition"]}


def test_dry_run_prints_the_plan_and_every_rule_with_its_result():
    out = dry("--preset", "llama3-8b")
    assert "16 files, 112,425,623,552 B" in out  # the plan, as before
    assert "MLPerf Storage v3.0" in out and "Rules.md §4" in out
    for rule in rules.RULES:
        assert rule_line(out, rule)
    assert status_of(out, "4.3.3") == rules.MEETS  # llama3-8b at full size, 8 ranks
    assert status_of(out, "4.3.5") == rules.NOT_APPLICABLE
    assert status_of(out, "4.3.4") == rules.FLAGGED and "no --accelerator-type" in rule_line(out, "4.3.4")
    out = dry("--preset", "llama3-8b", "--rules", "none")
    assert "rules       none" in out and "4.3.3" not in out


def test_4_3_3_a_scaled_or_custom_model_is_flagged():
    assert status_of(dry("--preset", "llama3-70b"), "4.3.3") == rules.MEETS
    scaled = dry("--preset", "llama3-70b", "--scale", "0.001")
    assert status_of(scaled, "4.3.3") == rules.FLAGGED and "scaled × 0.001" in rule_line(scaled, "4.3.3")
    custom = dry("--params", "13B")
    assert status_of(custom, "4.3.3") == rules.FLAGGED and "none of MLPerf's four models" in custom
    fewer = dry("--preset", "llama3-8b", "--ranks", "2")
    assert status_of(fewer, "4.3.3") == rules.FLAGGED and "not Table 2's 8" in rule_line(fewer, "4.3.3")


def test_4_3_5_subset_of_any_model_but_8b_is_refused(tmp_path):
    out = refused(tmp_path, "--preset", "llama3-405b", "--subset", "--scale", "0.0001")
    assert "--subset of llama3-405b" in out and "only of llama3-8b" in out and "4.3.5" in out
    assert "drop --subset" in out  # what to do
    # the dry-run shows it as a violation and what a run would do
    shown = dry("--preset", "llama3-405b", "--subset", "--scale", "0.0001")
    assert status_of(shown, "4.3.5") == rules.VIOLATES and "a run is refused" in shown
    # a subset must be 8 accelerators
    out = refused(tmp_path, "--preset", "llama3-8b", "--subset", "--ranks", "4", "--total-size", "4MiB")
    assert "exactly 8 accelerators" in out
    assert status_of(dry("--preset", "llama3-8b", "--subset"), "4.3.5") == rules.MEETS
    # v2.0, kept for comparison: subset was for the larger models
    assert status_of(dry("--preset", "llama3-405b", "--subset", "--rules", "v2.0"), "4.3.5") == rules.MEETS
    assert "4.3.5" not in dry("--preset", "llama3-405b", "--subset", "--rules", "none")


def test_4_3_4_accelerator_memory_must_hold_the_checkpoint(tmp_path):
    # llama3-8b's 104.70 GiB on one 80 GB h100: refused, saying how many it takes
    out = refused(tmp_path, *TINY, "--preset", "llama3-8b", "--accelerator-type", "h100", "--accelerators", "1")
    assert "1 × h100" in out and "cannot hold the 104.70 GiB checkpoint" in out and "--accelerators 2" in out
    # unknown type: refused with the list, even in a dry-run
    r = ckprof_cmd("workload", "--dry-run", "--accelerator-type", "tpu7", in_process=True)
    assert r.exit_code == 2 and "unknown --accelerator-type 'tpu7'" in r.output
    assert "b200 (180 GB)" in r.output and "mi355 (288 GB)" in r.output and "h100 (80 GB, whatif only)" in r.output
    r = ckprof_cmd("workload", "--dry-run", "--accelerators", "8", in_process=True)
    assert r.exit_code == 2 and "--accelerators needs --accelerator-type" in r.output
    r = ckprof_cmd("workload", "--dry-run", "--accelerator-type", "b200", "--accelerators", "0", in_process=True)
    assert r.exit_code == 2 and "--accelerators must be at least 1 (got 0)" in r.output
    # declared and large enough: meets; h100/a100 hold it but are whatif only
    assert status_of(dry("--preset", "llama3-8b", "--accelerator-type", "b200"), "4.3.4") == rules.MEETS
    whatif = dry("--preset", "llama3-8b", "--accelerator-type", "a100")
    assert status_of(whatif, "4.3.4") == rules.FLAGGED and "whatif only" in rule_line(whatif, "4.3.4")
    # v2.0 knew h100 and a100 only, at 80 GB, not whatif
    assert status_of(dry("--accelerator-type", "h100", "--rules", "v2.0"), "4.3.4") == rules.MEETS
    r = ckprof_cmd("workload", "--dry-run", "--accelerator-type", "b200", "--rules", "v2.0", in_process=True)
    assert r.exit_code == 2 and "for MLPerf Storage v2.0" in r.output


def test_4_3_4_accelerator_figures_use_the_models_full_size_not_the_scaled_files():
    plan = ModelOptions(preset="llama3-70b", total_bytes=64 * 2**20).plan()
    checks = rules.check_save(plan, RunConfig(target="/x", accelerator_type="mi355", accelerators=3))
    acc = next(c for c in checks if c.rule == "4.3.4")
    assert acc.status == rules.VIOLATES  # 3 × 288 GiB < 911.2 GiB, however small the files are scaled
    assert acc.figures["checkpoint_bytes"] == plan.full_bytes == 978_406_572_032
    assert acc.figures["aggregate_memory_bytes"] == 3 * 288 * 2**30
    assert "--accelerators 4" in acc.hint


def test_4_3_2_no_fsync_is_flagged():
    assert status_of(dry(*TINY), "4.3.2") == rules.MEETS
    assert status_of(dry(*TINY, "--no-fsync"), "4.3.2") == rules.FLAGGED


def test_4_6_3_ten_writes_then_ten_reads():
    one = dry(*TINY)
    assert status_of(one, "4.6.3") == rules.FLAGGED and "1 checkpoint(s) written, not 10" in one
    ten = dry(*TINY, "--count", "10")  # the write invocation of the two-invocation workflow
    assert status_of(ten, "4.6.3") == rules.MEETS and "two-invocation" in rule_line(ten, "4.6.3")
    ten_load = dry(*TINY, "--count", "10", "--load")
    assert status_of(ten_load, "4.6.3") == rules.FLAGGED and "then 1 read, not 10" in ten_load


def test_4_3_1_cache_cleared_unless_data_over_three_times_memory():
    plan = ModelOptions(preset="llama3-8b", total_bytes=64 * 2**20).plan()

    def cache(memory_bytes, **cfg):
        checks = rules.check_save(plan, RunConfig(target="/x", load=True, **cfg), memory_bytes=memory_bytes)
        return next(c for c in checks if c.rule == "4.3.1")

    assert cache(2**34).status == rules.MEETS and "evicted" in cache(2**34).why  # the default cold load
    assert "O_DIRECT" in cache(2**34, direct=True).why
    warm = cache(2**34, warm=True)
    assert warm.status == rules.FLAGGED and warm.figures["client_memory_bytes"] == 2**34
    # data over 3× the memory: no clearing needed (v3.0); v2.0 always asked for it
    assert cache(16 * 2**20, warm=True).status == rules.MEETS
    assert cache(16 * 2**20, warm=True, rules="v2.0").status == rules.FLAGGED
    # the memory it compares with is this host's (psutil), unless given
    import psutil

    real = next(c for c in rules.check_save(plan, RunConfig(target="/x", load=True, warm=True)) if c.rule == "4.3.1")
    assert real.figures["client_memory_bytes"] == psutil.virtual_memory().total
    # no read in this invocation
    no_read = next(c for c in rules.check_save(plan, RunConfig(target="/x")) if c.rule == "4.3.1")
    assert no_read.status == rules.NOT_APPLICABLE


def test_a_real_run_prints_flagged_rules_and_records_them(tmp_path):
    rec = tmp_path / "rec"
    r = ckprof_cmd("workload", *TINY, "--target", tmp_path / "ckpt", "--load", "--warm", "-o", rec)
    assert r.returncode == 0, r.stderr
    assert "rule 4.6.3 (10 writes, then 10 reads) flagged" in r.stderr
    assert "rule 4.3.1" in r.stderr and "--warm: the read may be served from the page cache" in r.stderr
    assert "MLPerf Storage v3.0 rules:" in r.stdout
    got = checks_of(rec)
    assert got["edition"] == "v3.0"
    assert got["4.3.1"]["status"] == "flagged" and got["4.3.1"]["figures"]["cleared_by"] is None
    assert got["4.6.3"]["figures"] == {"writes": 1, "reads": 1, "required_writes": 10, "required_reads": 10}
    assert got["4.7.1"]["status"] == "not applicable"  # write and read in one invocation
    # --rules none: nothing printed, and the key says so
    rec2 = tmp_path / "rec2"
    r = ckprof_cmd("workload", *TINY, "--target", tmp_path / "ckpt", "--rules", "none", "-o", rec2)
    assert r.returncode == 0 and "flagged" not in r.stderr
    assert checks_of(rec2)["edition"] == "none"


def write_one(target) -> str:
    r = ckprof_cmd("workload", *TINY, "--target", target, "--no-record", "--rules", "none")
    assert r.returncode == 0, r.stderr
    return store.complete_checkpoints(str(target))[-1][1]


def load(path, rec, *args):
    return ckprof_cmd("workload", "load", path, "-o", rec, *args)


def test_4_7_1_gap_measured_from_a_real_write_to_a_real_load(tmp_path):
    ckpt = write_one(tmp_path / "ckpt")
    written = store.read_manifest(ckpt)["written_unix_ns"]
    assert abs(time.time_ns() - written) < 120e9
    time.sleep(1.0)
    before_load = time.time_ns()
    r = load(ckpt, tmp_path / "rec")
    assert r.returncode == 0, r.stderr
    gap = checks_of(tmp_path / "rec")["4.7.1"]
    assert gap["status"] == "meets", gap
    f = gap["figures"]
    assert f["write_end_unix_ns"] == written and f["clock_skew"] is False
    assert f["gap_s"] == pytest.approx((f["read_start_unix_ns"] - written) / 1e9)
    # the load's process started after this test started it, and ~1 s after the write ended
    assert before_load - 0.05e9 <= f["read_start_unix_ns"] <= time.time_ns()
    assert 1.0 - 0.02 <= f["gap_s"] < 30  # the start is taken to a 10 ms tick, rounded down
    assert "write-to-read gap (Rules.md 4.7.1):" in r.stdout
    # v2.0 had no gap rule
    r = load(ckpt, tmp_path / "rec2", "--rules", "v2.0")
    assert r.returncode == 0 and checks_of(tmp_path / "rec2")["4.7.1"]["status"] == "not applicable"


def _restamp(ckpt: str, written_unix_ns):
    """The manifest as a writer with another clock would have left it (this machine has one host)."""
    path = os.path.join(ckpt, store.MANIFEST)
    with open(path) as f:
        m = json.load(f)
    if written_unix_ns is None:
        m.pop("written_unix_ns")
    else:
        m["written_unix_ns"] = written_unix_ns
    with open(path, "w") as f:
        json.dump(m, f)


def test_4_7_1_gap_over_30_s_is_flagged_and_a_negative_gap_is_clock_skew(tmp_path):
    ckpt = write_one(tmp_path / "ckpt")
    _restamp(ckpt, time.time_ns() - 45 * 10**9)  # written 45 s ago
    r = load(ckpt, tmp_path / "late")
    assert r.returncode == 0, r.stderr
    gap = checks_of(tmp_path / "late")["4.7.1"]
    assert (
        gap["status"] == "flagged" and "over 30 s" in gap["why"] and 45 - 0.02 <= gap["figures"]["gap_s"] < 90
    )  # a tick
    assert "rule 4.7.1" in r.stderr and "over 30 s" in r.stderr
    _restamp(ckpt, time.time_ns() + 60 * 10**9)  # a writer whose clock runs a minute ahead
    r = load(ckpt, tmp_path / "skew")
    assert r.returncode == 0, r.stderr
    gap = checks_of(tmp_path / "skew")["4.7.1"]
    assert gap["status"] == "flagged" and gap["figures"]["clock_skew"] is True and gap["figures"]["gap_s"] < 0
    assert "clock skew" in gap["why"] and "not a read before the write" in gap["why"]
    _restamp(ckpt, None)  # a checkpoint from before written_unix_ns
    r = load(ckpt, tmp_path / "old")
    assert r.returncode == 0, r.stderr
    gap = checks_of(tmp_path / "old")["4.7.1"]
    assert gap["status"] == "flagged" and gap["figures"]["gap_s"] is None and "gap unknown" in gap["why"]


def test_the_load_invocation_checks_its_reads_and_its_cache(tmp_path):
    ckpt = write_one(tmp_path / "ckpt")
    r = load(ckpt, tmp_path / "cold")
    got = checks_of(tmp_path / "cold")
    assert got["4.3.1"]["status"] == "meets" and "evicted" in got["4.3.1"]["why"]
    assert got["4.6.3"]["status"] == "flagged" and got["4.6.3"]["figures"]["reads"] == 1
    assert got["4.3.5"]["status"] == "not applicable"
    r = load(ckpt, tmp_path / "warm", "--warm")
    assert r.returncode == 0, r.stderr
    assert checks_of(tmp_path / "warm")["4.3.1"]["status"] == "flagged"


def test_a_run_refused_for_another_reason_says_one_line_not_the_rules_too(tmp_path):
    """Flagged rules are printed once the run goes ahead: a preflight refusal stays one line."""
    r = ckprof_cmd("workload", *TINY, "--target", tmp_path / "ckpt", "--no-record", "--chunk-size", "1000")
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1 and "--chunk-size must be a multiple of 4 KiB" in r.stderr


def test_4_7_1_an_unreadable_process_start_is_an_unknown_gap_not_a_guess(monkeypatch):
    """Where /proc/self/stat cannot be read (not on this machine), the gap is null with why."""
    monkeypatch.setattr(rules, "invocation_start_unix_ns", lambda: None)
    manifest = {"bytes": 4096, "run_id": "elsewhere-1-abc", "written_unix_ns": time.time_ns()}
    gap = next(c for c in rules.check_load(manifest, RunConfig(target="/x", load=True)) if c.rule == "4.7.1")
    assert gap.status == rules.FLAGGED and gap.figures["gap_s"] is None and "/proc/self/stat" in gap.why
