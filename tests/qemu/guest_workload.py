"""Runs inside the QEMU guest as the command `ckprof record` wraps (see conftest.py).

Writes a known byte count to the NVMe namespace with O_DIRECT (dd oflag=direct), then raises a
real thermal warning: an over-temperature threshold (Set Features, FID 04h) of 300 K, below the
323 K QEMU's controller reports, sets SMART critical_warning bit 1 and hwmon temp1_alarm. The
raise is logged with the guest's CLOCK_MONOTONIC just before and after the command, as a
ckprof.mark event in the recording.

usage: guest_workload.py BYTES DEVICE CTRL
"""

import subprocess
import sys
import time

import ckprof

nbytes, dev, ctrl = int(sys.argv[1]), sys.argv[2], sys.argv[3]
time.sleep(1.5)  # a baseline before the writes
subprocess.run(
    ["dd", "if=/dev/zero", f"of={dev}", "bs=1M", f"count={nbytes // 2**20}", "oflag=direct", "status=none"], check=True
)
ckprof.mark("workload_written", bytes=nbytes)
time.sleep(1.5)  # the writes reach a SMART sample before the thermal event
before = time.monotonic_ns()
subprocess.run(["nvme", "set-feature", f"/dev/{ctrl}", "-f", "4", "-v", "300"], check=True, stdout=subprocess.DEVNULL)
after = time.monotonic_ns()
ckprof.mark("thermal_warning_raised", before_ns=before, after_ns=after)
time.sleep(3.0)  # several SMART polls and many hwmon samples see the warning
