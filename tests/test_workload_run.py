"""`ckprof workload` end to end: real processes, a real ext4 on a real loop device, real recordings.

The loop device is made here (losetup --direct-io=on, mkfs.ext4) and always taken down. Tests
that need it skip, saying why, where the machine cannot make one (not root, no losetup).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from support.command import CKPROF, ckprof_cmd, clean_env

import ckprof
from ckprof.analysis import analyze
from ckprof.recording.schema import SECTOR_BYTES
from ckprof.workloads import store

MiB = 2**20


def _why_no_loop():
    if os.geteuid() != 0:
        return "needs root to make a loop device"
    for b in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(b) is None:
            return f"{b} not installed"
    return None


@pytest.fixture(scope="module")
def loopfs(tmp_path_factory):
    """A 1 GiB ext4 on a loop device with direct I/O to its backing file: (mountpoint, 'loopN')."""
    why = _why_no_loop()
    if why:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("loopfs")
    img, mnt = base / "disk.img", base / "mnt"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(1024 * MiB)
    dev = None
    mounted = False
    try:
        r = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", str(img)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"losetup failed: {r.stderr.strip()}")
        dev = r.stdout.strip()
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev],
            check=True,
            capture_output=True,
        )
        subprocess.run(["mount", dev, str(mnt)], check=True, capture_output=True)
        mounted = True
        yield str(mnt), os.path.basename(dev)
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], capture_output=True)
        if dev:
            subprocess.run(["losetup", "-d", dev], capture_output=True)


def workload(*args, env=None, timeout=180):
    return ckprof_cmd("workload", *args, timeout=timeout, env=clean_env(env))


def published(target):
    return [os.path.basename(p) for _, p in store.complete_checkpoints(str(target))]


def named_like_checkpoints(target):
    return sorted(n for n in os.listdir(target) if not n.startswith("."))


@pytest.mark.root
@pytest.mark.slow
def test_scaled_run_device_bytes_match_plan_inside_markers(loopfs, tmp_path):
    mnt, dev = loopfs
    target, rec = os.path.join(mnt, "scaled"), str(tmp_path / "rec")
    plan_bytes = 256 * MiB
    r = workload(
        "--preset",
        "llama3-8b",
        "--total-size",
        "256MiB",
        "--ranks",
        "2",
        "--count",
        "2",
        "--interval",
        "0.5s",
        "--target",
        target,
        "-o",
        rec,
        "--sample-interval",
        "50ms",
    )
    assert r.returncode == 0, r.stderr
    assert "global_epoch1_step2" in r.stdout and "GiB/s" in r.stdout and rec in r.stdout
    recording = ckprof.load(rec)
    windows = recording.checkpoints()
    saves = windows[windows["kind"] == "save"].sort_values("start_ns")
    assert len(saves) == 2 and saves["ok"].all()
    raw = recording.samples("block")
    raw = raw[raw["device"] == dev].sort_values("t_ns")
    assert not raw.empty, f"{dev} not recorded: {sorted(recording.samples('block')['device'].unique())}"

    def written(t_from, t_to):
        """Device bytes between the last sample at or before t_from and the first at or after t_to."""
        before = raw[raw["t_ns"] <= t_from].iloc[-1]
        after = raw[raw["t_ns"] >= t_to].iloc[0]
        return (after["write_sectors"] - before["write_sectors"]) * SECTOR_BYTES

    for _, w in saves.iterrows():
        inside = written(w["start_ns"], w["end_ns"])
        assert abs(inside - plan_bytes) / plan_bytes < 0.02, (w["step"], inside)
    # between the windows (the compute phase) the device is all but idle: the markers bracket the writes.
    # Counted from the first sample after one window to the last before the next (a sample counts the
    # I/O completed since the previous one, so the outer samples would hold the windows' own tails).
    first_after = raw[raw["t_ns"] >= saves.iloc[0]["end_ns"]].iloc[0]
    last_before = raw[raw["t_ns"] <= saves.iloc[1]["start_ns"]].iloc[-1]
    assert last_before["t_ns"] > first_after["t_ns"], "no sample fell between the windows"
    gap = (last_before["write_sectors"] - first_after["write_sectors"]) * SECTOR_BYTES
    assert gap < 0.02 * plan_bytes
    manifest = store.read_manifest(os.path.join(target, "global_epoch1_step2"))
    assert sum(f["bytes"] for f in manifest["files"]) == plan_bytes and len(manifest["files"]) == 4
    meta = recording.meta["workload"]
    assert meta["plan"]["bytes"] == plan_bytes and len(meta["results"]["checkpoints"]) == 2
    # the report gives each save the workload's own seconds beside its window, and says the rest
    an = analyze(recording)
    rep = an.report
    for c, own in zip(rep["checkpoints"], meta["results"]["checkpoints"]):
        assert c["workload_write_s"] == own["seconds"] and 0 < own["seconds"] <= c["duration_s"]
    assert ("workload_seconds", None) in [(n.code, n.subject) for n in an.model.notes]


@pytest.mark.root
def test_flipped_byte_fails_load_naming_the_file(loopfs, tmp_path):
    mnt, _ = loopfs
    target = os.path.join(mnt, "flip")
    r = workload("--total-size", "8MiB", "--ranks", "2", "--target", target, "--no-record")
    assert r.returncode == 0, r.stderr
    ckpt = os.path.join(target, "global_epoch1_step1")
    ok = workload("load", ckpt, "--no-record", "--drop-caches")
    assert ok.returncode == 0, ok.stderr
    assert "verified" in ok.stdout and "posix_fadvise(POSIX_FADV_DONTNEED) of its files + drop_caches" in ok.stdout
    victim = os.path.join(ckpt, "zero_pp_rank_1_mp_rank_0_optim_states.pt")
    with open(victim, "r+b") as f:
        f.seek(12345)
        b = f.read(1)
        f.seek(12345)
        f.write(bytes([b[0] ^ 0x01]))
    bad = workload("load", ckpt, "--no-record", "--direct")
    assert bad.returncode == 1
    assert victim in bad.stderr and "checksum" in bad.stderr


def test_keep_two_after_four_leaves_two(tmp_path):
    target = tmp_path / "keep"
    r = workload(
        "--total-size", "4MiB", "--ranks", "2", "--count", "4", "--keep", "2", "--target", str(target), "--no-record"
    )
    assert r.returncode == 0, r.stderr
    assert published(target) == ["global_epoch1_step3", "global_epoch1_step4"]
    assert named_like_checkpoints(target) == ["global_epoch1_step3", "global_epoch1_step4"]
    # a second run goes on numbering after the newest complete checkpoint
    r = workload("--total-size", "4MiB", "--ranks", "2", "--keep", "2", "--target", str(target), "--no-record")
    assert r.returncode == 0, r.stderr
    assert published(target) == ["global_epoch1_step4", "global_epoch1_step5"]


@pytest.mark.parametrize(
    "action,reason",
    [("die", "was killed by signal 9 (SIGKILL)"), ("raise", "failed: OSError: injected fault on rank 1")],
)
def test_a_rank_that_dies_stops_all_and_publishes_nothing(tmp_path, action, reason):
    target = tmp_path / "die"
    r = workload(
        "--total-size",
        "32MiB",
        "--ranks",
        "4",
        "--chunk-size",
        "1MiB",
        "--target",
        str(target),
        "--no-record",
        env={"CKPROF_WORKLOAD_FAULT": f"rank=1,after={2 * MiB},action={action}"},
    )
    assert r.returncode == 1
    assert f"rank 1 {reason}" in r.stderr and "nothing of that checkpoint was published" in r.stderr
    assert published(target) == [] and os.listdir(target) == []


def test_killed_mid_checkpoint_leaves_nothing_that_looks_complete(tmp_path):
    target, rec = tmp_path / "killed", tmp_path / "rec"
    e = dict(os.environ, CKPROF_WORKLOAD_FAULT=f"rank=1,after={MiB},action=stall")
    e.pop("CKPROF_EVENTS", None)
    p = subprocess.Popen(
        [
            *CKPROF,
            "workload",
            "--total-size",
            "16MiB",
            "--ranks",
            "2",
            "--chunk-size",
            "1MiB",
            "--count",
            "2",
            "--target",
            str(target),
            "-o",
            str(rec),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=e,
    )
    import psutil

    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            partial = [n for n in os.listdir(target)] if target.exists() else []
            if any(n.startswith(".partial-") for n in partial) and p.poll() is None:
                events = (rec / "events.jsonl").read_text() if (rec / "events.jsonl").exists() else ""
                if '"checkpoint_start"' in events:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the run never started a checkpoint")
        time.sleep(0.3)
        ranks = psutil.Process(p.pid).children()
        assert len(ranks) >= 2
        p.send_signal(signal.SIGKILL)  # the launcher, as a power cut or the OOM killer would
        p.wait(10)
        gone, alive = psutil.wait_procs(ranks, timeout=10)
        assert not alive, "ranks outlived the launcher"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert published(target) == []
    assert named_like_checkpoints(target) == []  # only the hidden .partial-* directory is left
    for n in os.listdir(target):
        assert not os.path.exists(os.path.join(target, n, store.MANIFEST))
    # the recording left behind loads and shows the window that never ended
    w = ckprof.load(str(rec)).checkpoints()
    assert len(w) == 1 and w["end_ns"].isna().all()


def test_async_reports_blocked_and_durable_separately(tmp_path):
    r = workload(
        "--total-size",
        "8MiB",
        "--ranks",
        "2",
        "--count",
        "2",
        "--interval",
        "0.2s",
        "--async",
        "--target",
        str(tmp_path / "a"),
        "-o",
        str(tmp_path / "rec"),
        "--load",
    )
    assert r.returncode == 0, r.stderr
    res = ckprof.load(str(tmp_path / "rec")).meta["workload"]["results"]
    for c in res["checkpoints"]:
        assert 0 < c["blocked_s"] <= c["seconds"]
    assert res["load"]["verified"]
    assert "blocked" in r.stdout and "durable" in r.stdout


def test_direct_threads_and_no_fsync_write_verifiable_checkpoints(tmp_path):
    for extra in (["--direct", "--threads", "2"], ["--no-fsync", "--chunk-size", "1MiB"]):
        t = tmp_path / extra[0].strip("-")
        r = workload("--total-size", "8MiB", "--ranks", "2", "--target", str(t), "--no-record", "--load", *extra)
        assert r.returncode == 0, r.stderr
        assert "verified" in r.stdout


def test_data_neither_compresses_nor_dedups(tmp_path):
    import zlib

    t = tmp_path / "d"
    r = workload(
        "--total-size",
        "8MiB",
        "--ranks",
        "2",
        "--count",
        "2",
        "--chunk-size",
        "64KiB",
        "--target",
        str(t),
        "--no-record",
    )
    assert r.returncode == 0, r.stderr
    blocks = set()
    total = 0
    for ck in published(t):
        for name in sorted(os.listdir(t / ck)):
            if name == store.MANIFEST:
                continue
            data = (t / ck / name).read_bytes()
            assert len(zlib.compress(data[:MiB], 6)) > 0.99 * len(data[:MiB])
            for i in range(0, len(data), 4096):
                blocks.add(data[i : i + 4096])
                total += 1
    assert len(blocks) == total  # no two 4 KiB blocks alike, within or across checkpoints


@pytest.mark.parametrize(
    "make,args,msg",
    [
        ("file-parent", [], "cannot write to --target"),
        ("tiny", [], "free; 1 checkpoint(s) of"),
    ],
)
def test_bad_targets_refused_before_any_rank_starts(tmp_path, make, args, msg):
    if make == "file-parent":
        (tmp_path / "afile").write_text("x")
        target = tmp_path / "afile" / "sub"
    else:
        target = tmp_path / "t"
        st = os.statvfs(tmp_path)
        args = ["--total-size", str(st.f_bavail * st.f_frsize * 3 // 2)]  # half as much again as is free
    r = workload("--ranks", "2", "--target", str(target), "--no-record", *args)
    assert r.returncode == 2
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert not target.exists() or os.listdir(target) == []


@pytest.mark.root
def test_too_small_loop_target_is_refused(loopfs):
    mnt, _ = loopfs
    r = workload("--total-size", "2GiB", "--ranks", "2", "--target", os.path.join(mnt, "big"), "--no-record")
    assert r.returncode == 2 and "free; 1 checkpoint(s) of 2.00 GiB need" in r.stderr
    assert os.listdir(os.path.join(mnt, "big")) == []


def test_chunk_size_must_align(tmp_path):
    r = workload(
        "--total-size", "4MiB", "--ranks", "2", "--chunk-size", "1000", "--target", str(tmp_path), "--no-record"
    )
    assert r.returncode == 2 and "multiple of 4 KiB" in r.stderr


@pytest.mark.slow
def test_torchrun_two_ranks_save_and_load(tmp_path):
    pytest.importorskip("torch", reason="torch not installed (pip install 'ckprof[torch]')")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not found")
    e = {k: v for k, v in os.environ.items() if not k.startswith("CKPROF_")}
    e["OMP_NUM_THREADS"] = "1"
    r = subprocess.run(
        [
            torchrun,
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "ckprof.cli",
            "workload",
            "--total-size",
            "8MiB",
            "--target",
            str(tmp_path / "t"),
            "-o",
            str(tmp_path / "rec"),
            "--load",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=e,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verified" in r.stdout
    res = ckprof.load(str(tmp_path / "rec")).meta["workload"]
    assert res["launcher"] == "torchrun" and res["world"] == 2
    w = ckprof.load(str(tmp_path / "rec")).checkpoints()
    assert list(w["kind"]) == ["save", "load"]
    m = json.loads((tmp_path / "t" / "global_epoch1_step1" / store.MANIFEST).read_text())
    assert sorted({f["rank"] for f in m["files"]}) == [0, 1]


def test_too_many_rank_processes_for_this_host_is_refused(tmp_path):
    import psutil

    if psutil.virtual_memory().available > 80 * 2**30:
        pytest.skip("this host has memory for 1,024 rank processes")
    r = workload("--preset", "llama3-1t", "--total-size", "64MiB", "--target", str(tmp_path / "t"), "--no-record")
    assert r.returncode == 2 and "1024 rank processes need about" in r.stderr and "--subset" in r.stderr
