"""`ckprof doctor --path` on targets with no local disk: what `ckprof record` records there and what
it does not, and why (docs/remote.md, profiler/cli/doctor_targets.py).

- s3:// URLs: without a server (no request unless --probe; a probe to a closed port fails in its
  5 s), and against moto's S3 server on 127.0.0.1 (started here, stopped by its pid): --probe's one
  LIST answers with the keys at the prefix, a missing bucket says NoSuchBucket; a Python without
  botocore is named with the fix;
- a real bindfs FUSE mount: its daemon (bindfs's pid) and the fuse collector; with a /sys where
  the control file system is not mounted, the mount command;
- a real tmpfs mount: never durable;
- NFS through the parse path: /proc/self/mountstats as captured in the QEMU guest
  (tests/data/nfs/), its mount point renamed to a directory here, and a mountinfo line for it in
  proc(5)'s format (this kernel has no NFS client; tests/qemu/test_qemu_nfs.py runs doctor on a
  real mount).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.command import ckprof_cmd, clean_env
from support.moto_server import CREDS, free_port, moto_server

from ckprof.cli.doctor_targets import path_lines
from ckprof.collectors.topology import Topology

HERE = Path(__file__).parent
BUCKET = "ckprof-doctor"


def doctor(*args, env: dict | None = None) -> str:
    r = ckprof_cmd("doctor", *args, env=clean_env(env or {}), timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_s3_without_a_server_says_what_is_recorded_and_sends_nothing():
    port = free_port()  # nothing listens there: any request would fail, none is sent
    env = dict(CREDS, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    out = doctor("--path", f"s3://{BUCKET}/ckpt", "--python", sys.executable, env=env)
    assert "does not exist" not in out
    assert f"s3://{BUCKET}/ckpt: not a local path (s3://): no mount, no device" in out
    assert "an s3_request event" in out and "upload's completion" in out and "network interfaces (net)" in out
    assert "device bandwidth and queue depth: n/a" in out
    assert "durability beyond the upload's completion" in out
    assert f"Python checked: {sys.executable} (Python {sys.version.split()[0]}" in out
    importable = next(ln for ln in out.splitlines() if "importable:" in ln and "not" not in ln)
    assert "boto3 " in importable and "botocore " in importable
    assert f"endpoint: http://127.0.0.1:{port} (set by AWS_ENDPOINT_URL" in out
    assert "credentials: found (env)" in out
    assert "probe: none sent (no network by surprise)" in out
    # --probe to a closed port: one failed attempt, said, inside the timeout
    t0 = time.monotonic()
    out = doctor("--path", f"s3://{BUCKET}/ckpt", "--python", sys.executable, "--probe", env=env)
    assert time.monotonic() - t0 < 60
    assert f"probe: one LIST of s3://{BUCKET}/ckpt failed: EndpointConnectionError" in out


def test_s3_with_a_python_without_botocore_names_it_and_the_fix(tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    out = doctor("--path", "s3://b/p", "--python", py, env=CREDS)
    assert f"Python checked: {py} " in out
    assert "importable: none" in out
    assert "not importable: boto3, botocore, s3transfer, aiobotocore, s3fs, fsspec, s3torchconnector" in out
    assert f"no botocore there: no S3 request is recorded from a program it runs; fix: {py} -m pip install boto3" in out
    assert "endpoint: not known here" in out
    out = doctor("--path", "s3://b/p", "--python", str(tmp_path / "no-such-python"), env=CREDS)
    assert f"Python checked: {tmp_path / 'no-such-python'}: cannot run" in out


def test_other_object_stores_and_unknown_schemes():
    out = doctor("--path", "gs://b/p", "--python", sys.executable)
    assert "gs://b/p: not a local path (gs://)" in out
    assert "the requests themselves: only botocore's S3 clients are instrumented, not gs://'s" in out
    assert "  probe:" not in out
    out = doctor("--path", "http://example.invalid/x", "--python", sys.executable)
    assert "http:// is not an object store ckprof knows" in out


@pytest.fixture(scope="module")
def moto_s3(tmp_path_factory):
    pytest.importorskip("boto3", reason="boto3 is not installed: pip install -e '.[dev]'")
    pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")
    with moto_server(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server.endpoint, server.client


def test_s3_probe_against_moto_says_whether_credentials_work(moto_s3):
    endpoint, client = moto_s3
    env = dict(CREDS, AWS_ENDPOINT_URL=endpoint)
    url = f"s3://{BUCKET}/ckpt/"
    out = doctor("--path", url, "--python", sys.executable, "--probe", env=env)
    assert f"endpoint: {endpoint} (set by AWS_ENDPOINT_URL" in out
    assert f"probe: one LIST of {url}: answered, credentials work (0 key(s) at the prefix" in out
    client.put_object(Bucket=BUCKET, Key="ckpt/shard-0", Body=b"x" * 1024)
    out = doctor("--path", url, "--python", sys.executable, "--probe", env=env)
    assert "answered, credentials work (1 key(s) at the prefix" in out
    out = doctor("--path", "s3://ckprof-no-such-bucket/x", "--python", sys.executable, "--probe", env=env)
    assert "probe: one LIST of s3://ckprof-no-such-bucket/x failed: NoSuchBucket" in out


def _mounted(path: str) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs, fusectl and bindfs needs root")


@root_only
def test_tmpfs_has_no_storage_and_is_never_durable(tmp_path):
    mnt = tmp_path / "shm"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", str(mnt)], check=True)
    try:
        out = doctor("--path", str(mnt))
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    assert f"{mnt}: tmpfs on {mnt}: no storage behind it (memory only)" in out
    assert "a save there is never durable" in out and "durable: false" in out


@root_only
@pytest.mark.skipif(shutil.which("bindfs") is None, reason="bindfs is not installed (apt-get install bindfs)")
def test_fuse_names_its_daemon_and_collector_and_the_fusectl_fix(tmp_path):
    ctl = "/sys/fs/fuse/connections"
    mine = False
    if not _mounted(ctl):
        subprocess.run(["mount", "-t", "fusectl", "none", ctl], check=True)
        mine = True
    src, mnt = tmp_path / "backing", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    proc = subprocess.Popen(["bindfs", "-f", str(src), str(mnt)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not _mounted(str(mnt)):
            assert proc.poll() is None and time.monotonic() < deadline, "bindfs did not mount"
            time.sleep(0.05)
        conn = os.stat(mnt).st_dev  # major 0: the minor, = the connection for minors under 256
        out = doctor("--path", str(mnt))
        assert f"{mnt}: FUSE (" in out and f"connection {conn}" in out
        assert f"daemon: pid {proc.pid} (" in out
        assert "recorded: the fuse collector: the connection's waiting requests (queue depth)" in out
        assert "durable: unknown: the backing file is not visible to ckprof" in out
        # a /sys where the control file system is not mounted: the collector is not run, the fix said
        lines = path_lines(str(mnt), Topology(sys_root=str(tmp_path / "sys")))
        text = "\n".join(lines)
        assert "NOT recorded: the fuse collector: the FUSE control file system is not mounted" in text
        assert f"fix: mount -t fusectl none {tmp_path / 'sys'}/fs/fuse/connections" in text
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if mine:
            subprocess.run(["umount", ctl], check=False)


def test_nfs_from_the_captured_mountstats(tmp_path):
    captured_mp = "/tmp/h5/out2/.guest/tmp/mnt"  # tests/data/nfs/README.md
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    stats = (HERE / "data" / "nfs" / "mountstats-nfs4-after.txt").read_text()
    assert f"device 127.0.0.1:/ mounted on {captured_mp} with fstype nfs4" in stats
    (proc / "mountstats").write_text(stats.replace(f"mounted on {captured_mp} ", f"mounted on {mnt} "))
    (proc / "mountinfo").write_text(
        "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
        f"98 22 0:52 / {mnt} rw,relatime shared:60 - nfs4 127.0.0.1:/ rw,vers=4.2,rsize=131072,proto=tcp\n"
    )
    topo = Topology(proc_root=str(tmp_path / "proc"))
    text = "\n".join(path_lines(str(mnt), topo, mountstats=str(proc / "mountstats")))
    assert f"{mnt}: NFS 127.0.0.1:/, version 4.2, protocol tcp, on {mnt} (/proc/self/mountstats)" in text
    assert "recorded: the nfs collector (per RPC operation" in text and "nfs_mount" in text
    assert 'durable: "on the server"' in text
    assert "NOT recorded: file activity (fanotify): the kernel refuses fanotify's marks on NFS" in text
    assert "ckprof.checkpoint() markers" in text
    # a mount mountstats does not list (its statistics unreadable): said, not guessed
    text = "\n".join(path_lines(str(mnt), topo, mountstats=str(tmp_path / "none")))
    assert f"{mnt}: NFS (127.0.0.1:/, nfs4) on {mnt}: cannot read {tmp_path / 'none'}" in text
