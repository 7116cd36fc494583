"""Reading nfsiostat's printout (nfs-utils tools/nfs-iostat/nfs-iostat.py), for the NFS tests."""

from __future__ import annotations

OP_HEADS = ("ops/s", "kB/s", "kB/op", "retrans", "retrans_pct", "rtt", "exe", "queue", "errors", "errors_pct")


def parse_nfsiostat(text: str, op: str = "write") -> list[dict]:
    """Each report's `op` figures as nfsiostat printed them, in order (`op` lower case)."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"{op}:"):
            vals = lines[i + 1].replace("(", " ").replace("%)", " ").split()
            out.append(dict(zip(OP_HEADS, map(float, vals))))
    return out


def parse_mount_lines(text: str) -> list[dict]:
    """Each report's mount line: nfsiostat's `ops/s` and `rpc bklog`."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.split() == ["ops/s", "rpc", "bklog"]:
            ops, bklog = map(float, lines[i + 1].split())
            out.append({"ops/s": ops, "rpc bklog": bklog})
    return out
