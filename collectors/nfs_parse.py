"""/proc/self/mountstats: the NFS client's statistics per mount, parsed.

The file lists every mount the reading process sees, one `device ... mounted on ... with fstype
...` line each (fs/proc_namespace.c mountstats_show); an NFS mount's line ends `statvers=1.1`
and is followed by the NFS client's block (fs/nfs/super.c nfs_show_stats) and the RPC client's
(net/sunrpc/stats.c rpc_clnt_show_stats):

    device srv:/export mounted on /mnt with fstype nfs4 statvers=1.1
        opts:   rw,vers=4.2,rsize=...,proto=tcp,...
        age:    12                                   seconds since the mount
        bytes:  8 counters (NFS_BYTES: normal/direct/server read/write bytes, read/write pages)
        RPC iostats version: 1.1  p/v: 100003/4 (nfs)
        xprt:   tcp <srcport> <bind_count> <connect_count> <connect_time> <idle_time> <sends>
                <recvs> <bad_xids> <req_u> <bklog_u> <max_slots> <sending_u> <pending_u>
        per-op statistics
                READ: <ops> <ntrans> <timeouts> <bytes_sent> <bytes_recv> <queue_ms> <rtt_ms>
                      <execute_ms> [<errors>]

xprt fields per transport: net/sunrpc/xprtsock.c xs_tcp_print_stats / xs_udp_print_stats,
net/sunrpc/xprtrdma/transport.c xprt_rdma_print_stats. `req_u`, `bklog_u`, `sending_u` and
`pending_u` are running sums, each added to at every send (net/sunrpc/xprt.c
xprt_request_transmit): the requests outstanding (sends - recvs), the backlog queue's length
(requests waiting for a transport slot), and the sending and pending queues' lengths; their
deltas over the sends' delta are mean queue lengths at a send. Per-op fields: net/sunrpc/stats.c _print_rpc_iostats (ops, ntrans,
timeouts, bytes sent, bytes received, and the queue, RTT and execute times as cumulative
milliseconds; `errors`, om_error_status, since Linux 5.3). Names are printed with seq_escape:
a space in a path is `\\040`. The per-mount names follow nfsiostat (nfs-utils
tools/nfs-iostat/nfs-iostat.py, Debian nfs-common 1:2.6.2), which this parser agrees with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NFS_FSTYPES = ("nfs", "nfs4")

# "bytes:" (include/linux/nfs_iostat.h enum nfs_stat_bytecounters), in the kernel's order
BYTE_COUNTERS = (
    "normal_read_bytes",
    "normal_write_bytes",
    "direct_read_bytes",
    "direct_write_bytes",
    "server_read_bytes",
    "server_write_bytes",
    "read_pages",
    "write_pages",
)

# per-op fields, in the kernel's order (_print_rpc_iostats); `errors` since Linux 5.3
OP_FIELDS = (
    "ops",
    "transmissions",
    "major_timeouts",
    "bytes_sent",
    "bytes_received",
    "queue_ms",
    "rtt_ms",
    "execute_ms",
    "errors",
)

# the xprt line's fields after the protocol, per protocol (statvers 1.1; older kernels print a
# prefix of these: the missing ones are None)
XPRT_FIELDS = {
    "tcp": (
        "port",
        "bind_count",
        "connect_count",
        "connect_time_s",
        "idle_time_s",
        "sends",
        "recvs",
        "bad_xids",
        "req_u",
        "bklog_u",
        "max_slots",
        "sending_u",
        "pending_u",
    ),
    "udp": (
        "port",
        "bind_count",
        "sends",
        "recvs",
        "bad_xids",
        "req_u",
        "bklog_u",
        "max_slots",
        "sending_u",
        "pending_u",
    ),
    "rdma": (
        "port",
        "bind_count",
        "connect_count",
        "connect_time_s",
        "idle_time_s",
        "sends",
        "recvs",
        "bad_xids",
        "req_u",
        "bklog_u",
    ),
}
# xprt counters summed over a mount's transports (nconnect=N prints N xprt lines)
XPRT_SUMS = ("connect_count", "sends", "recvs", "bad_xids", "req_u", "bklog_u", "sending_u", "pending_u")

_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape(name: str) -> str:
    """A name as seq_escape printed it (`\\040` for a space) back to itself."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), name)


@dataclass
class NfsMount:
    """One NFS mount's statistics at one reading."""

    export: str
    mount_point: str
    fstype: str
    statvers: str | None = None
    age_s: int | None = None
    opts: dict = field(default_factory=dict)
    byte_counters: dict = field(default_factory=dict)
    rpc_version: str | None = None  # "RPC iostats version"
    program: str | None = None  # p/v, e.g. 100003/4
    xprts: list[dict] = field(default_factory=list)
    op_names: list[str] = field(default_factory=list)  # the per-op lines' names, in file order
    op_numbers: list[str] = field(default_factory=list)  # and their numbers, as printed

    @property
    def ops(self) -> dict[str, dict]:
        """op name → OP_FIELDS (`errors` None before Linux 5.3)."""
        out = {}
        for name, nums in zip(self.op_names, self.op_numbers):
            vals = nums.split()
            op = dict(zip(OP_FIELDS, map(int, vals)))
            for f in OP_FIELDS[len(vals) :]:
                op[f] = None
            out[name] = op
        return out

    def op_columns(self) -> dict[str, list]:
        """The per-op statistics as columns (OP_FIELDS, each a list in `op_names`' order): one
        int() pass over all the numbers where every line has the same fields, as they do."""
        widths = {len(nums.split()) for nums in self.op_numbers}
        if len(widths) != 1:
            ops = self.ops
            return {f: [ops[n][f] for n in self.op_names] for f in OP_FIELDS}
        (k,) = widths
        flat = list(map(int, " ".join(self.op_numbers).split()))
        return {f: flat[j::k] if j < k else [None] * len(self.op_names) for j, f in enumerate(OP_FIELDS)}

    @property
    def protocol(self) -> str | None:
        return self.xprts[0]["protocol"] if self.xprts else self.opts.get("proto")

    def xprt_totals(self) -> dict:
        """The transports' counters summed (nconnect=N), and the most slots each had in use at
        once (max_slots) added; a field no transport printed is None."""
        out: dict = {}
        for k in (*XPRT_SUMS, "max_slots"):
            vals = [x.get(k) for x in self.xprts if x.get(k) is not None]
            out[k] = sum(vals) if vals else None
        return out


def _device_line(words: list[str]) -> tuple[str, str, str, str | None] | None:
    """(export, mount point, fstype, statvers) of a `device X mounted on Y with fstype Z [statvers=V]`."""
    if len(words) < 8 or words[0] != "device" or words[2:4] != ["mounted", "on"] or words[5:7] != ["with", "fstype"]:
        return None
    statvers = words[8].partition("=")[2] if len(words) > 8 and words[8].startswith("statvers=") else None
    return unescape(words[1]), unescape(words[4]), words[7], statvers


def _ints(words: list[str]) -> list[int]:
    return [int(w) for w in words]


def _xprt(words: list[str]) -> dict:
    proto = words[0]
    names = XPRT_FIELDS.get(proto, ())
    out: dict = {"protocol": proto}
    vals = words[1:]
    for i, name in enumerate(names):
        out[name] = int(vals[i]) if i < len(vals) and vals[i].lstrip("-").isdigit() else None
    return out


# a mount's `device ...` line and the indented lines after it (its statistics; none for other fs)
_SECTION = re.compile(r"^device (.*)\n((?:[ \t][^\n]*(?:\n|$))*)", re.M)
# a per-op line: the kernel's procedure names are upper case, every other key of the block is not
_OP_LINE = re.compile(r"^[ \t]+([A-Z][A-Z0-9_]*): ([0-9 ]*[0-9])[ \t]*$", re.M)


def parse_mountstats(text: str, ops: bool = True) -> list[NfsMount]:
    """Every NFS mount (fstype nfs or nfs4) in a /proc/self/mountstats text, in file order;
    `ops` False leaves the per-op statistics out (`NfsMount.ops` empty), for a reader of the rest.

    Other mounts' lines are skipped. A line that does not parse is skipped with its mount kept
    (its fields stay None): a kernel adding fields must not lose the ones known."""
    mounts: list[NfsMount] = []
    for sec in _SECTION.finditer(text):
        dev = _device_line(["device", *sec.group(1).split()])
        if not dev or dev[2] not in NFS_FSTYPES:
            continue
        cur = NfsMount(*dev)
        mounts.append(cur)
        head, _, per_op = sec.group(2).partition("per-op statistics")
        for line in head.splitlines():
            _head_line(cur, line.split())
        for name, nums in _OP_LINE.findall(per_op) if ops else ():
            cur.op_names.append(name)
            cur.op_numbers.append(nums)
    return mounts


def _head_line(cur: NfsMount, words: list[str]) -> None:
    """One line of a mount's block before its per-op statistics."""
    if not words:
        return
    key = words[0]
    try:
        if key == "opts:":
            for o in "".join(words[1:]).split(","):
                k, eq, v = o.partition("=")
                cur.opts[k] = v if eq else True
        elif key == "age:":
            cur.age_s = int(words[1])
        elif key == "bytes:":
            cur.byte_counters = dict(zip(BYTE_COUNTERS, _ints(words[1 : 1 + len(BYTE_COUNTERS)])))
        elif key == "RPC" and len(words) >= 4:  # RPC iostats version: 1.1  p/v: 100003/4 (nfs)
            cur.rpc_version = words[3]
            if len(words) >= 6 and words[4] == "p/v:":
                cur.program = words[5]
        elif key == "xprt:" and len(words) >= 2:
            cur.xprts.append(_xprt(words[1:]))
    except (ValueError, IndexError):
        pass
