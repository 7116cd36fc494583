"""The fault tier, workload generator: `ckprof workload` and `ckprof workload load` under faults.

Real rank processes, real signals (to the launcher, and to its whole process group as a
terminal's Ctrl-C is), real full and read-only file systems (small tmpfs mounts, root only),
a real permission refusal (root without CAP_DAC_OVERRIDE), real damaged checkpoints. Faults
inside a rank use the generator's own test hook, CKPROF_WORKLOAD_FAULT (workloads/rank.py):
a rank that stalls, raises, is SIGKILLed, or fills the file system it writes to.
docs/faults/workload.md lists the guarantees these tests hold the generator to.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time

import psutil
import pytest
from support.command import CKPROF, ckprof_cmd, clean_env

import ckprof
from ckprof.errors import CkprofError, UsageError
from ckprof.workloads import store
from ckprof.workloads.options import ModelOptions

MiB = 2**20
SMALL = ["--total-size", "8MiB", "--ranks", "2", "--chunk-size", "1MiB"]
STALL = "rank=1,after=1048576,action=stall"  # rank 1 stops for good after 1 MiB: a save that never ends
RANK1_FILE = "zero_pp_rank_1_mp_rank_0_optim_states.pt"


def one_error_line(stderr: str) -> str:
    """The one `ckprof: ...` line a failure prints (other lines are the recorder's notes)."""
    assert "Traceback" not in stderr, stderr
    lines = [x for x in stderr.splitlines() if x.startswith("ckprof: error:") or x.startswith("ckprof: interrupted")]
    assert len(lines) == 1, stderr
    return lines[0]


def entries(d) -> list[str]:
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def windows(rec) -> list[dict]:
    w = ckprof.load(str(rec)).checkpoints()
    return w.to_dict("records")


def end_events(rec) -> list[dict]:
    lines = (rec / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == "checkpoint_end"]


@pytest.fixture
def tmpfs(tmp_path):
    """Factory: tmpfs(size='96m', ro=False) → a fresh small tmpfs mount point; unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts a small tmpfs")
    mounts = []

    def make(size="96m", ro=False):
        mp = tmp_path / f"fs{len(mounts)}"
        mp.mkdir()
        opts = f"size={size},mode=0755" + (",ro" if ro else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mp)], check=True, capture_output=True)
        mounts.append(mp)
        return mp

    yield make
    for mp in reversed(mounts):
        subprocess.run(["umount", str(mp)], capture_output=True)


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory):
    """One complete checkpoint of 2 ranks (4 files, 8 MiB), written once for the module."""
    base = tmp_path_factory.mktemp("ckpt")
    r = ckprof_cmd("workload", *SMALL, "--target", str(base), "--no-record")
    assert r.returncode == 0, r.stderr
    return base / "global_epoch1_step1"


def _copy(good, tmp_path):
    d = tmp_path / "global_epoch1_step1"
    shutil.copytree(good, d)
    m = json.loads((d / store.MANIFEST).read_text())
    return d, m


def _write_manifest(d, m):
    (d / store.MANIFEST).write_text(json.dumps(m))


# --- F8: a signal mid-save --------------------------------------------------------------------


def _start_stalled(argv, started) -> subprocess.Popen:
    """Start `argv` with rank 1 stalling for good after 1 MiB (a save or load that never ends), in
    a session of its own (so a test can signal its whole process group, as a terminal does), with
    SIGINT at its default disposition whatever the test runner's is. Returns once `started()`."""
    p = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env({"CKPROF_WORKLOAD_FAULT": STALL}),
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        if started():
            time.sleep(0.5)  # rank 1 moves its first MiB and stalls
            return p
        time.sleep(0.05)
    p.kill()
    pytest.fail(f"it never started: {p.communicate()[1]}")


def _saving(target):
    """True once rank 1 writes into the unpublished directory of the first checkpoint."""

    def started():
        partial = [n for n in entries(target) if n.startswith(store.PARTIAL)]
        return bool(partial) and os.path.exists(target / partial[0] / RANK1_FILE)

    return started


@pytest.mark.parametrize(
    "sig,to_group,twice",
    [
        (signal.SIGTERM, False, False),
        (signal.SIGINT, True, False),
        (signal.SIGHUP, False, False),
        (signal.SIGINT, True, True),
    ],
    ids=["SIGTERM", "ctrl-c", "SIGHUP", "ctrl-c-twice"],
)
def test_signal_mid_save_stops_ranks_removes_partial_and_exits_128_plus_n(tmp_path, sig, to_group, twice):
    """F8: SIGTERM left a .partial-* behind; SIGINT printed click's 'Aborted!' and exited 1. A
    second Ctrl-C while the launcher cleans up must not cut the cleaning short."""
    target, rec = tmp_path / "t", tmp_path / "rec"
    argv = [*CKPROF, "workload", *SMALL, "--count", "2", "--target", str(target), "-o", str(rec)]
    p = _start_stalled(argv, _saving(target))
    ranks = psutil.Process(p.pid).children(recursive=True)
    assert len([r for r in ranks if "multiprocessing" in " ".join(r.cmdline())]) >= 2
    if to_group:
        os.killpg(p.pid, sig)  # a terminal's Ctrl-C: the launcher and every rank get it
    else:
        p.send_signal(sig)
    if twice:
        time.sleep(0.05)
        os.killpg(p.pid, sig)
    _, err = p.communicate(timeout=30)
    name = signal.Signals(sig).name
    assert p.returncode == 128 + sig, err
    line = one_error_line(err)
    assert line.startswith(f"ckprof: interrupted by {name} while writing global_epoch1_step1"), line
    assert "nothing partial was published" in line and "Aborted!" not in err
    assert entries(target) == []  # no .partial-*, nothing published
    _, alive = psutil.wait_procs(ranks, timeout=10)
    assert not alive, f"left running: {alive}"
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["exit"]["code"] == 128 + sig and meta["exit"]["signal"] == sig
    (w,) = windows(rec)
    assert w["ok"] is not None and not w["ok"]  # failed, not "did not return"
    (end,) = end_events(rec)
    assert end["ok"] is False and end["error"] == f"interrupted by {name}"


def test_ctrl_c_mid_load_stops_the_readers_and_leaves_the_checkpoint_as_it_was(good_checkpoint, tmp_path):
    d, _ = _copy(good_checkpoint, tmp_path)
    before = {n: (d / n).read_bytes() for n in entries(d)}
    seen = tmp_path / "rec" / "events.jsonl"
    argv = [*CKPROF, "workload", "load", str(d), "-o", str(tmp_path / "rec")]
    p = _start_stalled(argv, lambda: seen.exists() and '"checkpoint_start"' in seen.read_text())
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    line = one_error_line(err)
    assert (
        line
        == f"ckprof: interrupted by SIGINT while reading {d}: the readers were stopped; the checkpoint was not changed"
    )
    assert {n: (d / n).read_bytes() for n in entries(d)} == before
    (end,) = end_events(tmp_path / "rec")
    assert end["kind"] == "load" and end["ok"] is False and end["error"] == "interrupted by SIGINT"


def test_a_failed_run_removes_its_own_unfinished_directories_and_retentions_leftovers(tmp_path):
    """What the launcher calls after a failure or a signal: this run's .partial-* and any
    .partial-deleting-* (a checkpoint retention had unpublished and was deleting) go; another
    run's unfinished directory stays (it may still be writing)."""
    mine, other = "host-1-aaa", "host-2-bbb"
    for n in (
        f"{store.PARTIAL}global_epoch1_step2-{mine}",
        f"{store.PARTIAL}deleting-global_epoch1_step1",
        f"{store.PARTIAL}global_epoch1_step9-{other}",
        "global_epoch1_step3",
    ):
        (tmp_path / n).mkdir()
        (tmp_path / n / "shard").write_bytes(b"x" * 4096)
    assert store.remove_partials(str(tmp_path), mine) == ["global_epoch1_step2"]
    assert entries(tmp_path) == [f"{store.PARTIAL}global_epoch1_step9-{other}", "global_epoch1_step3"]


# --- F9 and what must keep holding: a rank that fails ---------------------------------------


@pytest.mark.parametrize(
    "rank,action,why",
    [
        (1, "raise", "rank 1 failed: OSError: injected fault on rank 1"),
        (1, "die", "rank 1 was killed by signal 9 (SIGKILL)"),
        (0, "die", "rank 0 was killed by signal 9 (SIGKILL)"),  # the rank that marks and publishes
    ],
)
def test_failed_rank_publishes_nothing_and_the_report_shows_the_checkpoint_failed(tmp_path, rank, action, why):
    """F9: a checkpoint whose rank raised was `ok: None` ('did not return before the recording
    ended'); must keep holding: a rank SIGKILLed mid-save publishes nothing, exit 1 naming it."""
    from ckprof.analysis.analyze import analyze
    from ckprof.jsonsafe import to_json
    from ckprof.report.render import to_markdown

    target, rec = tmp_path / "t", tmp_path / "rec"
    r = ckprof_cmd(
        "workload",
        *SMALL,
        "--target",
        str(target),
        "-o",
        str(rec),
        env=clean_env({"CKPROF_WORKLOAD_FAULT": f"rank={rank},after={2 * MiB},action={action}"}),
    )
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert why in line and "nothing of that checkpoint was published" in line
    assert entries(target) == []
    (end,) = end_events(rec)
    assert end["ok"] is False and why in end["error"]
    rep = analyze(ckprof.load(str(rec))).report
    (c,) = json.loads(to_json(rep))["checkpoints"]
    assert c["ok"] is False and why in c["error"]
    assert rep["run"]["failed_checkpoints"] == 1
    md = to_markdown(rep)
    assert "FAILED" in md and why in md
    assert "did not return before the recording ended" not in md


def test_exit_codes_pass_through_ckprof_record(tmp_path):
    """Must keep holding: under `ckprof record`, a failed workload is exit 1 and a SIGTERM to
    ckprof record (forwarded to the workload) 143, the workload's own statuses."""
    target, rec = tmp_path / "t", tmp_path / "rec"
    r = ckprof_cmd(
        "record",
        "-q",
        "-o",
        str(rec),
        "--",
        *CKPROF,
        "workload",
        *SMALL,
        "--target",
        str(target),
        env=clean_env({"CKPROF_WORKLOAD_FAULT": f"rank=1,after={2 * MiB},action=die"}),
    )
    assert r.returncode == 1, r.stderr
    assert "rank 1 was killed by signal 9" in one_error_line(r.stderr)
    (end,) = end_events(rec)  # the markers went to the enclosing recording, the window ended failed
    assert end["ok"] is False
    rec2 = tmp_path / "rec2"
    argv = [*CKPROF, "record", "-q", "-o", str(rec2), "--", *CKPROF, "workload", *SMALL, "--target", str(target)]
    p = _start_stalled(argv, _saving(target))
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=40)
    assert p.returncode == 143, err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    assert entries(target) == []
    assert json.loads((rec2 / "meta.json").read_text())["exit"]["code"] == 143


# --- F13: free space and retention ----------------------------------------------------------


def test_free_space_check_counts_what_retention_deletes(tmpfs, tmp_path):
    """F13: 118 MiB free and one old 32 MiB checkpoint: --count 2 --keep 1 needs only 32 MiB more
    at its peak (the old one is deleted after the first new one is published)."""
    mnt = tmpfs("200m")
    target = mnt / "t"
    args = ["--total-size", "32MiB", "--ranks", "1", "--target", str(target), "--no-record"]
    r = ckprof_cmd("workload", *args)
    assert r.returncode == 0, r.stderr
    size = store.read_manifest(str(target / "global_epoch1_step1"))["bytes"]
    assert size == 32 * MiB
    st = os.statvfs(mnt)
    with open(mnt / "filler", "wb") as f:  # leave exactly 118 MiB free
        os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - 118 * MiB)
    st = os.statvfs(mnt)
    assert st.f_bavail * st.f_frsize == 118 * MiB
    # without retention, two new checkpoints (64 MiB) and the 64 MiB margin do not fit: refused
    r = ckprof_cmd("workload", *args, "--count", "2")
    assert r.returncode == 2
    line = one_error_line(r.stderr)
    assert "118.00 MiB free; 2 checkpoint(s) of 32.00 MiB need 64.00 MiB plus a margin of 64.00 MiB" in line
    # --keep 2 keeps the old one and both new ones at once: 64 MiB more at the peak, refused too
    assert ckprof_cmd("workload", *args, "--count", "2", "--keep", "2").returncode == 2
    r = ckprof_cmd("workload", *args, "--count", "2", "--keep", "1")
    assert r.returncode == 0, r.stderr
    assert [os.path.basename(p) for _, p in store.complete_checkpoints(str(target))] == ["global_epoch1_step3"]
    assert entries(target) == ["global_epoch1_step3"]


# --- F14: a manifest that cannot be verified against ----------------------------------------


@pytest.mark.parametrize(
    "damage,says",
    [
        ("empty", "the manifest lists no files"),
        ("chunk0", "chunk_bytes must be a whole number of bytes from 1 to 1073741824 (got 0)"),
        ("chunk-negative", "chunk_bytes must be a whole number of bytes from 1 to 1073741824 (got -4096)"),
        ("chunk-string", "chunk_bytes must be a whole number of bytes from 1 to 1073741824 (got '1048576')"),
        ("chunk-huge", "chunk_bytes must be a whole number of bytes from 1 to 1073741824 (got 1099511627776)"),
        ("dotdot", "entry 3 names '../outside.bin', which is not a file inside the checkpoint"),
        ("absolute", "which is not a file inside the checkpoint"),
        ("nested-dotdot", "entry 3 names 'sub/../../outside.bin', which is not a file inside the checkpoint"),
        ("twice", "entry 3 names 'zero_pp_rank_0_mp_rank_0_model_states.pt' a second time"),
        ("bad-bytes", "has a bad bytes: -1"),
        ("not-an-object", "entry 3 lacks name, rank, bytes or xxh3"),
        ("list", "not a ckprof workload manifest"),
        ("garbage", "unreadable manifest"),
    ],
)
def test_manifest_that_cannot_be_verified_is_refused_naming_the_entry(good_checkpoint, tmp_path, damage, says):
    """F14: an empty manifest was 'verified', chunk_bytes 0 divided by zero, and entries naming
    ../outside.bin or an absolute path were followed and 'verified'. Here the file outside holds
    exactly the bytes its entry's checksum says: only where it is gives it away."""
    d, m = _copy(good_checkpoint, tmp_path)
    last = m["files"][3]
    outside = tmp_path / "outside.bin"
    os.rename(d / last["name"], outside)
    if damage == "empty":
        m["files"] = []
    elif damage.startswith("chunk"):
        m["chunk_bytes"] = {"chunk0": 0, "chunk-negative": -4096, "chunk-string": "1048576", "chunk-huge": 2**40}[
            damage
        ]
    elif damage == "dotdot":
        last["name"] = "../outside.bin"
    elif damage == "absolute":
        last["name"] = str(outside)
    elif damage == "nested-dotdot":
        (d / "sub").mkdir()
        last["name"] = "sub/../../outside.bin"
    elif damage == "twice":
        last["name"] = m["files"][0]["name"]
    elif damage == "bad-bytes":
        last["bytes"] = -1
    elif damage == "not-an-object":
        m["files"][3] = "zero_pp_rank_1_mp_rank_0_optim_states.pt"
    if damage == "list":
        (d / store.MANIFEST).write_text("[]")
    elif damage == "garbage":
        (d / store.MANIFEST).write_text('{"format": "ckprof-workload-checkpoint", "files": [')
    else:
        _write_manifest(d, m)
    r = ckprof_cmd("workload", "load", str(d), "--no-record", in_process=True)  # refused before any reader
    assert r.exit_code == 1, r.output
    line = one_error_line(r.output)
    assert says in line and str(d / store.MANIFEST) in line, line
    assert "checksums verified" not in r.output
    with pytest.raises(CkprofError, match=re.escape(says)):
        store.read_manifest(str(d))  # the same rule from Python


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_link_or_fifo_in_a_files_place_is_refused_not_followed(good_checkpoint, tmp_path, kind):
    """F14 from the other side: the entry is a plain name, but what is there is a symbolic link to
    a file outside (with the right bytes) or a FIFO (which would block the reader's open)."""
    d, m = _copy(good_checkpoint, tmp_path)
    name = m["files"][3]["name"]
    outside = tmp_path / "outside.bin"
    os.rename(d / name, outside)
    if kind == "symlink":
        os.symlink("../outside.bin", d / name)
        says = f"{d / name}: a symbolic link, not the file the manifest lists"
    else:
        os.mkfifo(d / name)
        says = f"{d / name}: not a regular file"
    r = ckprof_cmd("workload", "load", str(d), "--no-record", timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    line = one_error_line(r.stderr)
    assert line.startswith(f"ckprof: error: load of {d} failed: rank 1: ") and says in line, line


# --- F16: model values no model can have ----------------------------------------------------


@pytest.mark.parametrize(
    "args,says",
    [
        (["--scale", "inf"], "--scale must be more than 0 and finite (got inf)"),
        (["--scale", "nan"], "--scale must be more than 0 and finite (got nan)"),
        (["--scale", "1e300"], "would be more than a file can hold (9,223,372,036,854,775,807 B)"),
        (["--params", "1e400"], "bad parameter count '1e400'"),
        (["--params", "1e30"], "would be more than a file can hold"),
        (["--tp", "0"], "--tp must be at least 1 (got 0)"),
        (["--pp", "0"], "--pp must be at least 1 (got 0)"),
        (["--tp", "0", "--params", "8B"], "--tp must be at least 1 (got 0)"),
        (["--tp", "-1"], "--tp must be at least 1 (got -1)"),
        (["--ranks", "0"], "--ranks must be at least 1 (got 0)"),
        (["--zero", "7"], "--zero must be a ZeRO stage 0, 1, 2 or 3 (got 7)"),
        (["--layers", "0"], "--layers must be at least 1 (got 0)"),
    ],
)
def test_impossible_model_values_are_one_line_usage_errors(args, says, tmp_path):
    """F16: --scale inf and --params 1e400 were OverflowErrors, --tp 0 and --pp 0 ZeroDivisionErrors."""
    r = ckprof_cmd("workload", *args, "--dry-run", in_process=True)
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and r.output.startswith("ckprof: error: ") and says in r.output, r.output


def test_impossible_model_values_from_python_and_the_real_command(tmp_path):
    for kw in (
        dict(scale=float("inf")),
        dict(params="1e400"),
        dict(tp=0),
        dict(pp=0),
        dict(ranks=0),
        dict(zero=7),
        dict(scale=1e300),
        dict(tp="2"),
        dict(scale="x"),
        dict(ranks=True),
    ):
        with pytest.raises(UsageError):
            ModelOptions(**kw).plan()
    target = tmp_path / "t"
    r = ckprof_cmd("workload", "--scale", "inf", "--target", str(target), "--no-record")
    assert r.returncode == 2 and "--scale must be more than 0 and finite" in one_error_line(r.stderr)
    assert not target.exists()  # refused before anything was made


# --- own cases: full, read-only and unwritable targets; bad sizes; not a checkpoint -----------


def test_file_system_filling_up_mid_save_fails_the_checkpoint(tmpfs, tmp_path):
    """Another tenant fills the target's file system while the ranks write (ENOSPC from write(2)):
    a failed checkpoint with the error, one line naming the file, nothing partial, exit 1."""
    mnt = tmpfs("96m")  # room for 8 MiB and the 64 MiB margin: the preflight lets it start
    target, rec = mnt / "t", tmp_path / "rec"
    filler = mnt / "filler"
    r = ckprof_cmd(
        "workload",
        *SMALL,
        "--target",
        str(target),
        "-o",
        str(rec),
        env=clean_env({"CKPROF_WORKLOAD_FAULT": f"rank=1,after={MiB},action=fill,path={filler}"}),
    )
    assert r.returncode == 1, r.stderr
    line = one_error_line(r.stderr)
    assert "No space left on device" in line and str(target / store.PARTIAL) in line, line
    assert "nothing of that checkpoint was published" in line
    assert entries(target) == [] and entries(mnt) == ["filler", "t"]
    (end,) = end_events(rec)
    assert end["ok"] is False and "No space left on device" in end["error"]


def test_read_only_target_is_refused_before_any_rank_starts(tmpfs):
    mnt = tmpfs("4m", ro=True)
    r = ckprof_cmd("workload", *SMALL, "--target", str(mnt), "--no-record")
    assert r.returncode == 2
    assert f"cannot write to --target {mnt}: Read-only file system" in one_error_line(r.stderr)


def test_target_without_write_permission_is_refused(tmp_path):
    """The kernel's permission check, not a guess from the mode bits: root without CAP_DAC_OVERRIDE
    (capabilities(7)) is held to the owner's r-x like any user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv(1) to drop CAP_DAC_OVERRIDE")
    parent = tmp_path / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    for target in (parent, parent / "sub"):  # the target itself, and one that would have to be made
        r = subprocess.run(
            [
                "setpriv",
                "--bounding-set=-dac_override,-dac_read_search",
                "--",
                *CKPROF,
                "workload",
                *SMALL,
                "--target",
                str(target),
                "--no-record",
            ],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
        )
        assert r.returncode == 2, r.stderr
        assert f"cannot write to --target {target}: Permission denied" in one_error_line(r.stderr)
    assert entries(parent) == []


@pytest.mark.parametrize(
    "args,says",
    [
        (["--chunk-size", "0"], "--chunk-size must be a multiple of 4 KiB (got 0 B)"),
        (["--chunk-size", "1000"], "--chunk-size must be a multiple of 4 KiB (got 1000 B)"),
        (["--chunk-size", "2GiB"], "--chunk-size must be at most 1.00 GiB (got 2.00 GiB)"),
        (["--chunk-size", "-1"], "bad size '-1'"),
        (["--chunk-size", "abc"], "bad size 'abc'"),
        (["--chunk-size", "1" + "0" * 400], "too large"),
        (["--total-size", "0"], "--total-size must be more than 0"),
        (["--count", "0"], "--count must be at least 1 (got 0)"),
        (["--threads", "0"], "--threads must be at least 1 (got 0)"),
        (["--keep", "-1"], "--keep must be 0 (keep all) or more (got -1)"),
    ],
)
def test_bad_sizes_and_counts_are_refused_before_anything_is_written(tmp_path, args, says):
    target = tmp_path / "t"
    r = ckprof_cmd(
        "workload",
        "--total-size",
        "8MiB",
        "--ranks",
        "1",
        "--target",
        str(target),
        "--no-record",
        *args,
        in_process=True,
    )
    assert r.exit_code == 2, r.output
    assert says in r.output and "Traceback" not in r.output
    assert entries(target) == []


def test_load_of_what_is_not_a_checkpoint_says_what_it_is(good_checkpoint, tmp_path):
    target = good_checkpoint.parent
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("x")
    partial = tmp_path / f"{store.PARTIAL}global_epoch1_step1-host-1-abc"
    partial.mkdir()
    cases = [
        (
            target,
            f"{target}: not a complete checkpoint (no {store.MANIFEST}) (it holds 1 checkpoint(s); "
            f"the newest is {good_checkpoint})",
        ),
        (tmp_path / "empty", "not a complete checkpoint"),
        (partial, "a .partial-* directory is a checkpoint that was never published"),
        (tmp_path / "afile", f"{tmp_path / 'afile'}: not a directory"),
        (tmp_path / "missing", f"{tmp_path / 'missing'}: no such directory"),
    ]
    for path, says in cases:
        r = ckprof_cmd("workload", "load", str(path), "--no-record", in_process=True)
        assert r.exit_code == 1, r.output
        assert says in one_error_line(r.output), (path, r.output)
    r = ckprof_cmd("workload", "load", str(tmp_path / "afile"), "--no-record")  # the real command: one line, status 1
    assert r.returncode == 1 and "not a directory" in one_error_line(r.stderr)
    r = ckprof_cmd("workload", "load", str(good_checkpoint), "--no-record", "--threads", "0", in_process=True)
    assert r.exit_code == 2 and "--threads must be at least 1 (got 0)" in r.output  # was a false checksum mismatch


@pytest.mark.parametrize("damage", ["flip", "truncate", "missing"])
def test_damaged_shard_fails_the_load_naming_the_file(good_checkpoint, tmp_path, damage):
    d, m = _copy(good_checkpoint, tmp_path)
    victim = d / m["files"][3]["name"]
    if damage == "flip":
        with open(victim, "r+b") as f:
            f.seek(12345)
            b = f.read(1)
            f.seek(12345)
            f.write(bytes([b[0] ^ 0x01]))
        says = f"{victim}: checksum"
    elif damage == "truncate":
        os.truncate(victim, 4096)
        says = f"{victim}: 4,096 B on disk, the manifest says"
    else:
        victim.unlink()
        says = f"{victim}: missing"
    rec = tmp_path / "rec"
    r = ckprof_cmd("workload", "load", str(d), "-o", str(rec))
    assert r.returncode == 1
    assert says in one_error_line(r.stderr)
    (end,) = end_events(rec)  # the load's window ends failed, with why
    assert end["kind"] == "load" and end["ok"] is False and says in end["error"]
