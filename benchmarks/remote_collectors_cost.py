"""CPU cost of the net, nfs and nfs_mount collectors at 10 Hz, printed for a person (never asserted).

Per collector: the sampling thread's CPU per reading (what read() costs: the preads) and the
flusher's CPU per reading (take(): parsing and the Arrow table), as a share of one core at 10 Hz.
net reads this machine's /sys/class/net. nfs and nfs_mount read /proc/self/mountstats where this
machine has an NFS mount, else the guest capture in tests/data/nfs (a regular file: its pread is
cheaper than the kernel generating mountstats, the parse the same).

    python benchmarks/remote_collectors_cost.py [--readings 600]
"""

import argparse
import os
import time

from ckprof.collectors.net import NetCollector
from ckprof.collectors.nfs import NfsMountCollector, NfsOpsCollector
from ckprof.collectors.nfs_parse import parse_mountstats

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE = os.path.join(HERE, "..", "tests", "data", "nfs", "mountstats-nfs4-after.txt")


def cost(c, n: int) -> tuple[float, float]:
    """(CPU seconds per read(), CPU seconds per reading converted by take())."""
    c.read(0)
    c.take()  # warm: the first table pays pyarrow's lazy imports
    t0 = time.thread_time()
    for i in range(n):
        c.read(i * 100_000_000)
    t1 = time.thread_time()
    c.take()
    t2 = time.thread_time()
    return (t1 - t0) / n, (t2 - t1) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--readings", type=int, default=600, help="readings per collector (600 = a minute at 10 Hz)")
    n = ap.parse_args().readings
    with open("/proc/self/mountstats") as f:
        real = bool(parse_mountstats(f.read()))
    path = None if real else CAPTURE
    where = "/proc/self/mountstats" if real else "tests/data/nfs capture (no NFS mount here)"
    rows = [
        ("net", NetCollector(), f"{len(NetCollector().interfaces)} interfaces"),
        ("nfs", NfsOpsCollector(path=path), where),
        ("nfs_mount", NfsMountCollector(path=path), where),
    ]
    print(f"{'collector':<10} {'read µs':>9} {'flush µs':>9} {'% of a core at 10 Hz':>22}  source")
    for name, c, src in rows:
        read_s, take_s = cost(c, n)
        pct = (read_s + take_s) * 10 * 100
        print(f"{name:<10} {read_s * 1e6:>9.1f} {take_s * 1e6:>9.1f} {pct:>22.3f}  {src}")
        c.close()


if __name__ == "__main__":
    main()
