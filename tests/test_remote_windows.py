"""Per-window NFS and interface figures (ckprof.analysis.remote): the window rule (every interval
it touches), sums of the kernel's counters, the mean RTT over requests and the peak of interval
means, on the guest's real mountstats capture and on hand-made readings."""

from __future__ import annotations

import pandas as pd
import pytest
from support.system import DATA

from ckprof.analysis.remote import RemoteSeries, interface_window, nfs_window
from ckprof.collectors.nfs import NfsMountCollector, NfsOpsCollector
from ckprof.recording.remote_rates import interface_rates, nfs_mount_rates, nfs_op_rates

BEFORE = DATA / "nfs" / "mountstats-nfs4-before.txt"
AFTER = DATA / "nfs" / "mountstats-nfs4-after.txt"
MOUNT = "/tmp/h5/out2/.guest/tmp/mnt"
S = 1_000_000_000


def _series_from_capture() -> RemoteSeries:
    raws = [BEFORE.read_bytes(), AFTER.read_bytes()]
    ops = NfsOpsCollector(path=str(BEFORE)).table([0, 5 * S], raws).to_pandas()
    mounts = NfsMountCollector(path=str(BEFORE)).table([0, 5 * S], raws).to_pandas()
    return RemoteSeries.of_frames(nfs_op_rates(ops), nfs_mount_rates(mounts), pd.DataFrame())


def test_a_window_inside_the_interval_gets_the_whole_interval():
    fig = nfs_window(_series_from_capture(), 1 * S, 2 * S)[MOUNT]
    assert fig.export == "127.0.0.1:/" and fig.span_s == pytest.approx(5.0)
    assert fig.write_ops == 192 and fig.ops_by_op["WRITE"] == 192 and fig.ops_by_op["COMMIT"] == 3
    assert fig.server_write_bytes == fig.normal_write_bytes == 3 * 8 * 2**20
    assert fig.bytes_sent >= 3 * 8 * 2**20  # the data plus RPC headers of every op
    assert fig.retransmits == 0 and fig.major_timeouts == 0
    assert fig.gib_per_s_to_server == pytest.approx(fig.bytes_sent / 5.0 / 2**30)
    assert "READ" not in fig.ops_by_op  # none in the interval


def _ops_rows(t_s: float, ops: int, rtt_ms: int, sent: int) -> dict:
    return {
        "t_ns": int(t_s * S), "mount": "/m", "export": "s:/e", "op": "WRITE", "ops": ops, "transmissions": ops,
        "major_timeouts": 0, "bytes_sent": sent, "bytes_received": 0, "queue_ms": 0, "rtt_ms": rtt_ms,
        "execute_ms": rtt_ms, "errors": 0,
    }  # fmt: skip


def test_window_rule_mean_and_peak_rtt():
    # readings at 0, 1, 2, 3 s: 10 ops at 2 ms, then 30 ops at 4 ms, then 5 ops at 10 ms
    rows = [_ops_rows(0, 0, 0, 0), _ops_rows(1, 10, 20, 1000), _ops_rows(2, 40, 140, 4000), _ops_rows(3, 45, 190, 4500)]
    series = RemoteSeries.of_frames(nfs_op_rates(pd.DataFrame(rows)), pd.DataFrame(), pd.DataFrame())
    fig = nfs_window(series, 1.2 * S, 1.8 * S)["/m"]  # inside (1, 2]: that interval alone
    assert fig.ops == 30 and fig.mean_rtt_ms == pytest.approx(4.0) and fig.bytes_sent == 3000
    fig = nfs_window(series, 0.5 * S, 2.5 * S)["/m"]  # touches all three
    assert fig.ops == 45 and fig.mean_rtt_ms == pytest.approx(190 / 45)
    assert fig.max_interval_mean_rtt_ms == pytest.approx(10.0) and fig.span_s == pytest.approx(3.0)
    assert fig.server_write_bytes is None  # no nfs_mount samples: unknown, not 0


def test_interfaces_in_a_window_and_an_unreadable_counter():
    rows = [
        {"t_ns": 0, "interface": "eth0", "rx_bytes": 0, "tx_bytes": 0},
        {"t_ns": S, "interface": "eth0", "rx_bytes": 100, "tx_bytes": 2**30},
        {"t_ns": 2 * S, "interface": "eth0", "rx_bytes": None, "tx_bytes": 2**31},
    ]
    series = RemoteSeries.of_frames(pd.DataFrame(), pd.DataFrame(), interface_rates(pd.DataFrame(rows)))
    fig = interface_window(series, 0.1 * S, 0.9 * S)["eth0"]
    assert fig.tx_bytes == 2**30 and fig.rx_bytes == 100 and fig.tx_gib_per_s == pytest.approx(1.0)
    fig = interface_window(series, 0.1 * S, 1.9 * S)["eth0"]
    assert fig.rx_bytes is None and fig.tx_bytes == 2**31  # one interval's rx unknown: the sum is
    assert fig.rx_packets is None  # not recorded


def test_a_window_s_mount_bytes_are_the_counters_deltas_exactly():
    """8 MiB over an interval of 0.49996695 s: a rate times its interval gives 8388607.999999999 B
    back; the window sums the counters' own deltas, so a save's bytes are its bytes (a CI run's case)."""
    rows = [
        {"t_ns": t, "mount": "/m", "export": "s:/e", "normal_write_bytes": b, "server_write_bytes": b,
         "normal_read_bytes": 0, "direct_read_bytes": 0, "direct_write_bytes": 0, "server_read_bytes": 0,
         "xprt_sends": 0, "xprt_recvs": 0, "xprt_bad_xids": 0, "xprt_req_u": 0, "xprt_bklog_u": 0}
        for t, b in ((S, 0), (S + 499_966_950, 2**23))
    ]  # fmt: skip
    mounts = nfs_mount_rates(pd.DataFrame(rows))
    assert (mounts["server_write_bytes_per_s"] * mounts["dt_s"]).iloc[0] != 2**23  # why the deltas are kept
    series = RemoteSeries.of_frames(
        nfs_op_rates(pd.DataFrame([_ops_rows(1.0, 0, 0, 0), _ops_rows(1.49996695, 64, 64, 2**23)])),
        mounts,
        pd.DataFrame(),
    )
    fig = nfs_window(series, S, S + 499_966_950)["/m"]
    assert fig.normal_write_bytes == fig.server_write_bytes == 2**23
