"""The whole job's device writes and reads over time: every host's bytes summed on the wall clock.

Each host's part (analysis.job_hosts.host_part, also its summary.json) carries its own series: the bytes
its recorded devices wrote and read (its timeline's `total`, from the measured block counters), put
into wall-clock bins of 2^k seconds aligned to the Unix epoch, each timeline bin into the wall bin
holding its middle (the timeline's own rule), the series starting at the bin that holds the
recording's start. A host picks the smallest 2^k ≥ 1 s, and ≥ its timeline's resolution, that
gives at most MAX_HOST_BINS bins, so a part stays a few kilobytes
whatever the recording's length. The job takes the coarsest width among its hosts; every finer
2^k bin lies inside one coarse bin, so the join only adds: bytes are neither lost nor counted twice.
"""

from __future__ import annotations

import math

import numpy as np

from ckprof.units import GIB

from .job_model import HostSeries, JobThroughput

MAX_HOST_BINS = 1024


def host_series(rec, tl) -> HostSeries | None:
    """One host's series, or None without device samples."""
    total = tl.total
    if total is None or total.empty:
        return None
    res_ns = tl.res_s * 1e9
    middle_wall_ns = rec.timebase.to_wall_ns(total.t_ns.astype(float) - res_ns / 2)
    span_s = (middle_wall_ns.max() - middle_wall_ns.min()) / 1e9 + tl.res_s
    bin_s = 2 ** math.ceil(math.log2(max(tl.res_s, span_s / MAX_HOST_BINS, 1.0)))  # ≥ 1 s
    idx = np.floor(middle_wall_ns / (bin_s * 1e9)).astype(np.int64)
    # the series starts at the bin holding the recording's start, not its first interval's middle:
    # a recording that began 35 ms before a bin boundary had its series start after the job did
    start_bin = math.floor(rec.timebase.to_wall_ns(float(tl.start_ns)) / (bin_s * 1e9))
    first = min(int(idx.min()), start_bin)
    n = int(idx.max()) - first + 1
    return HostSeries(
        bin_s=bin_s,
        first_bin=first,
        write_bytes=np.rint(np.bincount(idx - first, total.write_bytes, n)).astype(int).tolist(),
        read_bytes=np.rint(np.bincount(idx - first, total.read_bytes, n)).astype(int).tolist(),
    )


def join(series: dict[str, HostSeries | None]) -> JobThroughput | None:
    """The job's series from its hosts' ({host: host_series or None}): bytes per bin summed over
    hosts, at the coarsest host's width; peaks as GiB/s over one bin."""
    have = {h: s for h, s in series.items() if s}
    if not have:
        return None
    bin_s = max(s.bin_s for s in have.values())
    starts = [s.first_bin * s.bin_s // bin_s for s in have.values()]
    ends = [(s.first_bin + len(s.write_bytes) - 1) * s.bin_s // bin_s for s in have.values()]
    first, n = min(starts), max(ends) - min(starts) + 1
    write, read = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for s in have.values():
        k = (s.first_bin + np.arange(len(s.write_bytes))) * s.bin_s // bin_s - first
        np.add.at(write, k, np.asarray(s.write_bytes, dtype=np.int64))
        np.add.at(read, k, np.asarray(s.read_bytes, dtype=np.int64))
    return JobThroughput(
        bin_s=bin_s,
        start_wall_ns=first * bin_s * 1_000_000_000,
        hosts=len(have),
        hosts_without_devices=sorted(h for h, s in series.items() if not s),
        write_bytes=write.tolist(),
        read_bytes=read.tolist(),
        write_bytes_total=int(write.sum()),
        read_bytes_total=int(read.sum()),
        peak_write_gib_per_s=float(write.max()) / bin_s / GIB,
        peak_read_gib_per_s=float(read.max()) / bin_s / GIB,
    )
