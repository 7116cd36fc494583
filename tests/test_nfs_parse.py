"""/proc/self/mountstats parsed, and nfsiostat's formulas, on a real capture (tests/data/nfs/:
the QEMU guest's NFSv4.2 mount over loopback, before and after three 8 MiB writes), held to
nfsiostat's own code (Debian nfs-common's /usr/sbin/nfsiostat, run on the same two files)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import types

import pytest
from support.nfsiostat_text import parse_mount_lines, parse_nfsiostat
from support.system import DATA

from ckprof.collectors.nfs import NFS_MOUNT_SCHEMA, NFS_OPS_SCHEMA, NfsMountCollector, NfsOpsCollector
from ckprof.collectors.nfs_parse import parse_mountstats, unescape
from ckprof.recording import remote_rates
from ckprof.recording.remote_rates import nfs_mount_rates, nfs_op_rates

BEFORE = DATA / "nfs" / "mountstats-nfs4-before.txt"
AFTER = DATA / "nfs" / "mountstats-nfs4-after.txt"
MOUNT = "/tmp/h5/out2/.guest/tmp/mnt"  # where the guest mounted it (tests/data/nfs/README.md)
NFSIOSTAT = "/usr/sbin/nfsiostat"
DT_S = 5.0  # the interval both are given between the two captures


def test_parse_real_capture():
    mounts = parse_mountstats(AFTER.read_text())
    assert len(mounts) == 1  # ten other mounts (proc, sysfs, tmpfs, 9p, nfsd, rpc_pipefs...) skipped
    m = mounts[0]
    assert (m.export, m.mount_point, m.fstype, m.statvers) == ("127.0.0.1:/", MOUNT, "nfs4", "1.1")
    assert m.opts["vers"] == "4.2" and m.opts["proto"] == "tcp" and m.opts["hard"] is True
    assert m.age_s == 142 and m.protocol == "tcp" and m.program == "100003/4" and m.rpc_version == "1.1"
    assert m.byte_counters["normal_write_bytes"] == m.byte_counters["server_write_bytes"] == 25165824 + 0
    assert m.ops["WRITE"] == {
        "ops": 192,
        "transmissions": 192,
        "major_timeouts": 0,
        "bytes_sent": 25204224,
        "bytes_received": 35328,
        "queue_ms": 28342,
        "rtt_ms": 40716,
        "execute_ms": 69276,
        "errors": 0,
    }
    assert m.ops["OPEN"]["errors"] == 7  # the server's grace period, answered NFS4ERR_GRACE
    assert len(m.ops) == 69 and {"READ", "COMMIT", "GETATTR", "SEQUENCE", "LAYOUTGET"} <= set(m.ops)
    x = m.xprt_totals()
    assert x["sends"] == m.xprts[0]["sends"] > 0 and x["bklog_u"] == 0


def test_older_and_other_layouts():
    text = (
        "device srv:/a\\040b mounted on /mnt/with\\040space with fstype nfs statvers=1.0\n"
        "\tage:\t7\n\tbytes:\t1 2 3 4 5 6 7 8\n"
        "\tRPC iostats version: 1.0  p/v: 100003/3 (nfs)\n"
        "\txprt:\tudp 0 1 10 9 0 20 0\n"  # statvers 1.0: up to bklog_u, then nothing
        "\tper-op statistics\n\t        WRITE: 3 4 1 300 30 5 6 7\n"  # before Linux 5.3: no errors
        "device /dev/sda1 mounted on / with fstype ext4\n"
        "device srv2:/x mounted on /n with fstype nfs4 statvers=1.1\n"
        "\txprt:\ttcp 1 0 1 0 0 5 5 0 5 0 1 0 0\n\txprt:\ttcp 2 0 1 0 0 7 7 0 7 2 1 0 0\n"
    )
    a, b = parse_mountstats(text)
    assert (a.export, a.mount_point, a.age_s) == ("srv:/a b", "/mnt/with space", 7)
    assert a.ops["WRITE"]["errors"] is None and a.ops["WRITE"]["transmissions"] == 4
    assert a.xprts[0]["sends"] == 10 and a.xprts[0]["bklog_u"] == 0 and a.xprts[0]["max_slots"] is None
    assert b.xprt_totals()["sends"] == 12 and b.xprt_totals()["bklog_u"] == 2  # nconnect=2: summed
    assert unescape("a\\011b") == "a\tb"


def test_collectors_read_the_file_and_rates_follow_nfsiostat_formulas():
    ops, mount = NfsOpsCollector(path=str(BEFORE)), NfsMountCollector(path=str(BEFORE))
    assert ops.probe().ok and "127.0.0.1:/" in ops.probe().detail
    assert ops.describe()["mounts"][MOUNT]["vers"] == "4.2"
    for c in (ops, mount):
        c.read(0)
        c.path = str(AFTER)
        c._reader.close()
        c._reader = type(c._reader)(str(AFTER))
        c.read(int(DT_S * 1e9))
    t_ops, t_mount = ops.take(), mount.take()
    assert t_ops.schema == NFS_OPS_SCHEMA and t_mount.schema == NFS_MOUNT_SCHEMA
    assert t_ops.num_rows == 2 * 69 and t_mount.num_rows == 2
    r = nfs_op_rates(t_ops.to_pandas())
    w = r[r.op == "WRITE"].iloc[0]
    assert w.ops == 192 and w.ops_per_s == pytest.approx(192 / DT_S)
    assert w.kib_per_s == pytest.approx((25204224 + 35328) / 1024 / DT_S)
    assert w.avg_rtt_ms == pytest.approx(40716 / 192) and w.avg_execute_ms == pytest.approx(69276 / 192)
    assert w.retransmits == 0 and w.avg_queue_ms == pytest.approx(28342 / 192)
    read = r[r.op == "READ"].iloc[0]
    assert read.ops == 0 and read.avg_rtt_ms != read.avg_rtt_ms  # no READ: no mean (NaN), not 0
    m = nfs_mount_rates(t_mount.to_pandas()).iloc[0]
    assert m.server_write_bytes == 3 * 8 * 2**20  # the counter's delta, exact
    assert m.server_write_bytes_per_s == pytest.approx(3 * 8 * 2**20 / DT_S)
    ops.close()
    mount.close()


def test_rate_columns_are_the_collectors_counters():
    """remote_rates names the counters by column (it sits below the collectors): the same names."""

    def counters(schema):
        return {f.name for f in schema if f.metadata[b"kind"] == b"counter"}

    assert set(remote_rates.NFS_OP_COUNTERS) == counters(NFS_OPS_SCHEMA)
    assert set(remote_rates.NFS_MOUNT_COUNTERS) <= counters(NFS_MOUNT_SCHEMA)
    from ckprof.collectors.net import NET_SCHEMA

    assert set(remote_rates.NET_COUNTERS) == counters(NET_SCHEMA)


def _nfsiostat_module() -> types.SimpleNamespace:
    """nfsiostat's own definitions (everything above its `# Main`), executed here."""
    with open(NFSIOSTAT) as f:
        src = f.read()
    head, sep, _ = src.partition("\n# Main\n")
    assert sep, "nfsiostat's layout changed: no '# Main' section"
    ns: dict = {"__name__": "nfsiostat"}
    exec(compile(head, NFSIOSTAT, "exec"), ns)  # noqa: S102 - the installed tool's own code
    return types.SimpleNamespace(**ns)


@pytest.mark.skipif(not os.path.exists(NFSIOSTAT), reason="nfsiostat not installed (apt-get install nfs-common)")
@pytest.mark.parametrize("which", ["write", "read"])
def test_same_figures_as_nfsiostat_on_the_same_two_readings(which):
    nio = _nfsiostat_module()
    old, new = nio.parse_stats_file(str(BEFORE)), nio.parse_stats_file(str(AFTER))
    opts = types.SimpleNamespace(which=0, sort=False, list=sys.maxsize)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        nio.print_iostat_summary(old, new, [MOUNT], DT_S, opts)
    theirs = parse_nfsiostat(buf.getvalue(), which)[0]
    ops_c, mount_c = NfsOpsCollector(path=str(BEFORE)), NfsMountCollector(path=str(BEFORE))
    t_ops = ops_c.table([0, int(DT_S * 1e9)], [BEFORE.read_bytes(), AFTER.read_bytes()])
    t_mount = mount_c.table([0, int(DT_S * 1e9)], [BEFORE.read_bytes(), AFTER.read_bytes()])
    r = nfs_op_rates(t_ops.to_pandas())
    ours = r[r.op == which.upper()].iloc[0]
    # nfsiostat prints 3 decimals
    assert ours.ops_per_s == pytest.approx(theirs["ops/s"], abs=5e-4)
    assert ours.kib_per_s == pytest.approx(theirs["kB/s"], abs=5e-4)
    assert ours.retransmits == theirs["retrans"]
    if ours.ops:
        assert ours.kib_per_op == pytest.approx(theirs["kB/op"], abs=5e-4)
        assert ours.avg_rtt_ms == pytest.approx(theirs["rtt"], abs=5e-4)
        assert ours.avg_execute_ms == pytest.approx(theirs["exe"], abs=5e-4)
        assert ours.avg_queue_ms == pytest.approx(theirs["queue"], abs=5e-4)
        assert ours.error_pct == pytest.approx(theirs["errors_pct"], abs=0.05)
    else:  # nfsiostat prints 0 where no op completed; ckprof says it has no mean
        assert theirs["rtt"] == 0 and ours.avg_rtt_ms != ours.avg_rtt_ms
    m = nfs_mount_rates(t_mount.to_pandas()).iloc[0]
    line = parse_mount_lines(buf.getvalue())[0]
    assert m.rpc_sends_per_s == pytest.approx(line["ops/s"], abs=5e-4)
    # nfsiostat's "rpc bklog" is the mean backlog at a send, divided once more by the interval
    assert m.backlog_per_send / DT_S == pytest.approx(line["rpc bklog"], abs=5e-4)
