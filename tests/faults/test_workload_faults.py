"""`ckprof workload` under faults: signals mid-save, a rank that fails, retention and free space,
damaged manifests, impossible models — nothing partial is ever published, every error is a line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from .conftest import CKPROF, ck

SMALL = ["--preset", "llama3-8b", "--total-size", "16MiB"]


def leftovers(target) -> list[str]:
    return sorted(n for n in os.listdir(target) if n.startswith(".partial")) if os.path.isdir(target) else []


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_save_leaves_nothing_partial(tmp_path, sig, code):
    """F8: to the whole process group, as job control and launchers send it."""
    target = tmp_path / "t"
    p = subprocess.Popen(
        [*CKPROF, "workload", "--preset", "llama3-8b", "--total-size", "2GiB", "--target", str(target),
         "--count", "3", "-o", str(tmp_path / "rec")],
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not leftovers(target) and time.monotonic() < deadline:  # a save is under way
        time.sleep(0.05)
    os.killpg(p.pid, sig)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == code, err
    assert "Aborted!" not in err and "Traceback" not in err and "interrupted by" in err
    assert leftovers(target) == [] and not any(n.startswith("global_") for n in os.listdir(target))
    assert json.loads((tmp_path / "rec" / "meta.json").read_text())["status"] == "complete"


def test_a_rank_that_raised_is_a_failed_checkpoint_with_its_error(tmp_path):
    """F9."""
    env = {**os.environ, "CKPROF_WORKLOAD_FAULT": "rank=1,after=1048576,action=raise"}
    r = ck("workload", *SMALL, "--target", str(tmp_path / "t"), "-o", str(tmp_path / "rec"), env=env)
    assert r.returncode == 1 and "rank 1 failed" in r.stderr and leftovers(tmp_path / "t") == []
    rep = json.loads(ck("report", str(tmp_path / "rec"), "--format", "json").stdout)
    (cp,) = rep["checkpoints"]
    assert cp["ok"] is False and "injected fault on rank 1" in cp["error"]
    assert rep["run"]["failed_checkpoints"] == 1
    md = ck("report", str(tmp_path / "rec"), "--format", "md").stdout
    assert "FAILED: rank 1 failed" in md


def test_a_killed_rank_publishes_nothing(tmp_path):
    env = {**os.environ, "CKPROF_WORKLOAD_FAULT": "rank=0,after=1048576,action=die"}
    r = ck("workload", *SMALL, "--target", str(tmp_path / "t"), "--no-record", env=env)
    assert r.returncode == 1 and "rank 0" in r.stderr and "SIGKILL" in r.stderr
    assert os.listdir(tmp_path / "t") == []


def test_free_space_counts_what_retention_frees(tmp_path, small_fs):
    """F13: one old 32 MiB checkpoint and ~127 MiB free: `--count 2 --keep 1` needs 32 MiB more at
    its peak (the old one goes when the first new one is published), not 64 MiB."""
    fs = small_fs("160m")
    args = ["--preset", "llama3-8b", "--total-size", "32MiB", "--target", str(fs), "--no-record"]
    assert ck("workload", *args, "--count", "1").returncode == 0
    r = ck("workload", *args, "--count", "2", "--keep", "1")
    assert r.returncode == 0, r.stderr
    assert len([n for n in os.listdir(fs) if n.startswith("global_")]) == 1
    r = ck("workload", *args, "--count", "4", "--keep", "0")  # keep all: 128 MiB more does not fit
    assert r.returncode == 2 and "free" in r.stderr


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    d = tmp_path_factory.mktemp("pub")
    r = ck("workload", *SMALL, "--target", str(d), "--no-record")
    assert r.returncode == 0, r.stderr
    (ckpt,) = [d / n for n in os.listdir(d) if n.startswith("global_")]
    return ckpt


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda m: m.update(files=[]), "lists no files"),
        (lambda m: m.update(chunk_bytes=0), "chunk_bytes must be a positive integer"),
        (lambda m: m["files"][0].update(name="../outside.bin"), "not a file inside the checkpoint"),
        (lambda m: m["files"][0].update(name="/etc/passwd"), "not a file inside the checkpoint"),
    ],
)
def test_a_damaged_manifest_is_never_verified(published, tmp_path, edit, words):
    """F14."""
    ckpt = tmp_path / "ckpt"
    subprocess.run(["cp", "-a", str(published), str(ckpt)], check=True)
    path = ckpt / "ckprof-manifest.json"
    m = json.loads(path.read_text())
    edit(m)
    path.write_text(json.dumps(m))
    r = ck("workload", "load", str(ckpt), "--no-record")
    assert r.returncode == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_load_of_a_directory_that_is_not_a_checkpoint(tmp_path):
    r = ck("workload", "load", str(tmp_path), "--no-record")
    assert r.returncode == 1 and "not a complete checkpoint" in r.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["--preset", "llama3-8b", "--scale", "inf"], "--scale must be more than 0"),
        (["--params", "1e400"], "bad parameter count"),
        (["--preset", "llama3-8b", "--tp", "0"], "--tp must be at least 1"),
        (["--preset", "llama3-8b", "--pp", "0"], "--pp must be at least 1"),
        (["--preset", "llama3-8b", "--zero", "7"], "--zero must be"),
        (["--preset", "llama3-8b", "--chunk-size", "0"], "chunk-size"),
    ],
)
def test_impossible_values_are_one_line(tmp_path, args, words):
    """F16."""
    r = ck("workload", *args, "--target", str(tmp_path / "t"), "--no-record")
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
