"""NFS client statistics on a real NFS mount: the QEMU guest (Debian's kernel has NFS; this
machine's has not) exports a tmpfs directory over NFSv4.2 on its own loopback (the kernel's nfsd,
rpcbind and rpc.mountd from the host's nfs-kernel-server, seen through the 9p share), mounts it,
and writes three 8 MiB files under `ckprof record` while Debian's nfsiostat runs over the same
span. The recording's WRITE and COMMIT figures, by nfsiostat's formulas, must match nfsiostat's
own within 1 %, and the mount's byte counters the bytes written.

Also kept: the guest's /proc/self/mountstats before and after (tests/data/nfs/ holds one such
pair, for the parser's unit tests).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import pytest
from support.nfsiostat_text import parse_nfsiostat

import ckprof
from ckprof.analysis.remote import RemoteSeries, interface_window, nfs_window
from ckprof.recording.remote_rates import nfs_mount_rates, nfs_op_rates

from .harness import QemuNvmeGuest

# one guest boot, about 4-5 minutes under TCG on a loaded 2-core machine (Python starts slowly there)
pytestmark = pytest.mark.timeout(600)

HERE = os.path.dirname(os.path.abspath(__file__))
SAVES, SAVE_BYTES = 3, 8 * 2**20  # nfs_writer.py's
NFS_TOOLS = (
    ("rpc.nfsd", "nfs-kernel-server"),
    ("rpc.mountd", "nfs-kernel-server"),
    ("exportfs", "nfs-kernel-server"),
    ("rpcbind", "rpcbind"),
    ("mount.nfs", "nfs-common"),
    ("nfsiostat", "nfs-common"),
)


def guest_script(ckprof_bin: str, python: str) -> str:
    writer = shlex.quote(os.path.join(HERE, "nfs_writer.py"))
    return f"""set -ex
M=$TMPDIR/mnt; E=$TMPDIR/export
ip link set lo up
modprobe nfsd; modprobe nfsv4
# the host's / is read-only here: the NFS tools' state and /run on tmpfs
mount -t tmpfs tmpfs /var/lib/nfs; mount -t tmpfs tmpfs /run
mkdir -p /run/rpcbind /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery "$E" "$M"
mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs
mount -t nfsd nfsd /proc/fs/nfsd
rpcbind -w
touch /var/lib/nfs/etab
exportfs -o rw,no_root_squash,insecure,fsid=0,no_subtree_check "127.0.0.1:$E"
rpc.mountd
rpc.nfsd -G 10 -L 10 4   # grace and lease 10 s: a first OPEN waits out the grace period
mount -t nfs4 -o vers=4.2 127.0.0.1:/ "$M"
touch "$M/.grace"        # before anything is measured
cat /proc/self/mountstats > mountstats-before.txt
{ckprof_bin} record --interval 100ms -o "$OUT/rec" --path "$M" -- {python} {writer} "$M" "$OUT/go" "$OUT/ready" &
rec=$!
while [ ! -e "$OUT/ready" ]; do sleep 0.1; done
nfsiostat 1 16 "$M" > nfsiostat.txt &
nio=$!
# go once nfsiostat has read its first snapshot (it prints and flushes a report after each read;
# its Python takes seconds to start in this emulated guest)
while ! grep -q "^write:" nfsiostat.txt; do sleep 0.1; done
sleep 1
touch "$OUT/go"
wait $rec
wait $nio
cat /proc/self/mountstats > mountstats-after.txt
echo "$M" > mountpoint.txt
{ckprof_bin} doctor --path "$M" > doctor.txt 2>&1
umount "$M"
"""


@pytest.fixture(scope="module")
def nfs_run(tmp_path_factory):
    g = QemuNvmeGuest()
    reason = g.why_not()
    if reason:
        pytest.skip(f"QEMU guest cannot run here: {reason}")
    missing = [pkg for tool, pkg in NFS_TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"NFS tools not installed: apt-get install {' '.join(sorted(set(missing)))}")
    out = tmp_path_factory.mktemp("qemu-nfs")
    bindir = os.path.dirname(sys.executable)
    script = guest_script(shlex.quote(os.path.join(bindir, "ckprof")), shlex.quote(os.path.join(bindir, "python")))
    res = g.run(script, str(out), timeout_s=360)
    if res.rc != 0:
        pytest.fail(f"the guest run failed: {res.describe()}")
    keep = os.environ.get("CKPROF_KEEP_QEMU_NFS")
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(out, keep, ignore=shutil.ignore_patterns(".guest"))
    return out


def _ours(rec, mount: str, op: str) -> dict:
    r = nfs_op_rates(rec.samples("nfs"))
    r = r[(r["mount"] == mount) & (r["op"] == op)]
    moved = r[r["ops"] > 0]
    return {
        "ops": r["ops"].sum(),
        "kB": r["kib_per_s"].mul(r["dt_s"]).sum(),
        "retrans": r["retransmits"].sum(),
        "rtt_ms": (moved["avg_rtt_ms"] * moved["ops"]).sum(),
        "exe_ms": (moved["avg_execute_ms"] * moved["ops"]).sum(),
    }


def _theirs(text: str, op: str) -> dict:
    reports = parse_nfsiostat(text, op)[1:]  # the first report is since the mount
    return {
        "ops": sum(x["ops/s"] for x in reports),  # `nfsiostat 1`: each interval is 1 s
        "kB": sum(x["kB/s"] for x in reports),
        "retrans": sum(x["retrans"] for x in reports),
        "rtt_ms": sum(x["rtt"] * x["ops/s"] for x in reports),
        "exe_ms": sum(x["exe"] * x["ops/s"] for x in reports),
    }


def test_nfs_writes_match_nfsiostat(nfs_run):
    """WRITE ops, kB, retransmits, and total RTT and execute time (mean × ops per interval)
    over the span both saw all the writes in (nfsiostat prints READ and WRITE only)."""
    op = "WRITE"
    rec = ckprof.load(str(nfs_run / "rec"))
    mount = (nfs_run / "mountpoint.txt").read_text().strip()
    text = (nfs_run / "nfsiostat.txt").read_text()
    ours, theirs = _ours(rec, mount, op), _theirs(text, op.lower())
    print(f"{op}: ckprof {ours}\n{op}: nfsiostat {theirs}")
    assert ours["ops"] > 0 and ours["ops"] == pytest.approx(theirs["ops"], rel=0.01)
    for k in ("kB", "rtt_ms", "exe_ms"):
        assert ours[k] == pytest.approx(theirs[k], rel=0.01, abs=0.01), (k, ours, theirs)
    assert ours["retrans"] == theirs["retrans"]


def test_nfs_mount_bytes_are_the_bytes_written(nfs_run):
    rec = ckprof.load(str(nfs_run / "rec"))
    mount = (nfs_run / "mountpoint.txt").read_text().strip()
    r = nfs_mount_rates(rec.samples("nfs_mount"))
    r = r[r["mount"] == mount]
    # each interval's bytes are the counters' deltas: their sum is exact, a float's rounding included
    assert r["normal_write_bytes"].sum() == SAVES * SAVE_BYTES
    assert r["server_write_bytes"].sum() == SAVES * SAVE_BYTES
    assert (r["server_write_bytes_per_s"] * r["dt_s"]).sum() == pytest.approx(SAVES * SAVE_BYTES, rel=1e-9)
    assert r["rpc_sends"].sum() > 0
    meta = rec.meta["collectors"]
    assert meta["nfs"]["columns"]["rtt_ms"]["unit"] == "ms" and meta["nfs"]["columns"]["rtt_ms"]["kind"] == "counter"
    assert mount in meta["nfs"]["describe"]["mounts"]
    doctor = (nfs_run / "doctor.txt").read_text()
    assert "nfs " in doctor and "1 NFS mount(s)" in doctor, doctor
    assert f"{mount} is on NFS (127.0.0.1:/, nfs4)" in doctor, doctor
    # what record records on the target, and what not (cli/doctor_targets.py)
    assert f"{mount}: NFS 127.0.0.1:/, version 4.2, protocol tcp, on {mount}" in doctor, doctor
    assert 'durable: "on the server"' in doctor and "NOT recorded: file activity (fanotify)" in doctor, doctor


def test_each_save_window_has_its_own_bytes_on_the_mount(nfs_run):
    """Three marked saves, three windows: each one's server write bytes are its 8 MiB exactly,
    its WRITE ops 64 (128 KiB wsize), a COMMIT (the fsync), and the loopback carried them."""
    rec = ckprof.load(str(nfs_run / "rec"))
    mount = (nfs_run / "mountpoint.txt").read_text().strip()
    cps = rec.checkpoints().sort_values("start_ns")
    assert len(cps) == SAVES
    series = RemoteSeries.of(rec)
    for _, cp in cps.iterrows():
        fig = nfs_window(series, cp["start_ns"], cp["end_ns"])[mount]
        print(f"step {cp['step']}: {fig}")
        assert fig.server_write_bytes == SAVE_BYTES and fig.normal_write_bytes == SAVE_BYTES
        assert fig.ops_by_op["WRITE"] == SAVE_BYTES / 2**17 and fig.ops_by_op["COMMIT"] >= 1
        assert SAVE_BYTES <= fig.bytes_sent <= SAVE_BYTES * 1.01
        assert fig.mean_rtt_ms > 0 and fig.retransmits == 0
        lo = interface_window(series, cp["start_ns"], cp["end_ns"])["lo"]
        assert lo.tx_bytes >= SAVE_BYTES  # client to server and back, both on lo
