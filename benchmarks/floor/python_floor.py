"""The floor of a sampler written in Python, for benchmarks/recorder_process_cpu.py: the same reads
as sampler_floor.c (files kept open, os.pread, absolute deadlines), each reading kept as bytes with
its time, nothing else. Prints the CPU seconds spent after the first second and the seconds covered.

    python python_floor.py HZ SECONDS FILE...
"""

import os
import sys
import time

hz, secs, paths = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
fds = [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in paths]
pread, now, sleep = os.pread, time.monotonic_ns, time.sleep
kept = []
period_ns, start, cpu0 = 10**9 // hz, time.monotonic_ns(), 0.0
for k in range(1, int(secs * hz) + 1):
    if k == hz + 1:
        cpu0 = time.process_time()  # after the first second: start-up left out
    kept.append((now(), [pread(fd, 65536, 0) for fd in fds]))
    delay_ns = start + k * period_ns - now()
    if delay_ns > 0:
        sleep(delay_ns / 1e9)
print(f"{time.process_time() - cpu0:.6f} {secs - 1.0:.3f}")
