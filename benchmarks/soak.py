"""Soak: `ckprof record --interval 10ms` for N minutes (default 5) of `sleep`, printing the
recorder's RSS every 15 s for a person to read (a flat line is the target; nothing is asserted).
The fault tier runs a 36 s version of it (tests/faults/test_record_faults.py).

    python benchmarks/soak.py [--minutes 5] [--interval 10ms]
"""

import argparse
import subprocess
import sys
import tempfile
import time

import psutil


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--interval", default="10ms")
    a = ap.parse_args()
    seconds = int(a.minutes * 60)
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.Popen([sys.executable, "-m", "ckprof", "record", "-q", "--interval", a.interval,
                              "-o", f"{tmp}/rec", "--", "sleep", str(seconds)])  # fmt: skip
        proc, t0 = psutil.Process(p.pid), time.monotonic()
        first = None
        while p.poll() is None:
            time.sleep(15)
            try:
                rss = proc.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                break
            first = first or rss
            print(
                f"{time.monotonic() - t0:6.0f} s  RSS {rss:7.1f} MiB  ({rss - first:+.1f} MiB since the first reading)"
            )
        print(f"exit {p.wait()}")


if __name__ == "__main__":
    main()
