"""Deltas of cumulative counters, with wrap-around handled once, here.

/proc/diskstats prints the I/O and sector counts as unsigned long (64-bit on 64-bit kernels,
32-bit on 32-bit ones) and the millisecond tick fields as unsigned int (32-bit everywhere:
block/genhd.c diskstats_show, "%u" for rd_ticks, wr_ticks, io_ticks, time_in_queue), so a tick
counter wraps after 2**32 ms = 49.7 days of busy time. RAPL energy_uj wraps at max_energy_range_uj.

A decrease is read as a wrap of the narrowest width that the previous value fits in, when the
wrapped delta is plausible (under half that width); otherwise as a reset of the counter
(a loop device detached and attached again, a driver reloaded) and the delta is the new value.
Arithmetic is float64, exact below 2**53; recordings store counters as int64, where a 64-bit
wrap cannot occur in practice (2**63 sectors is 4 EiB), so the 32-bit wraps are the real ones.
"""

from __future__ import annotations

from typing import overload

import numpy as np
import numpy.typing as npt

WIDTHS = (2**32, 2**64)


@overload
def counter_delta(prev: float, cur: float, width: int | None = None) -> float: ...
@overload
def counter_delta(prev: npt.ArrayLike, cur: npt.ArrayLike, width: int | None = None) -> np.ndarray: ...
def counter_delta(prev: npt.ArrayLike, cur: npt.ArrayLike, width: int | None = None) -> np.ndarray | float:
    """Delta of one counter from `prev` to `cur` (scalars or numpy arrays of the same shape).

    `width`, when known (e.g. RAPL's max_energy_range_uj + 1), fixes the wrap point; otherwise the
    narrowest of 2**32 and 2**64 that holds `prev` is tried.
    """
    prev_a = np.asarray(prev, dtype=np.float64)
    cur_a = np.asarray(cur, dtype=np.float64)
    delta = cur_a - prev_a
    neg = delta < 0
    if np.any(neg):
        if width is not None:
            wrapped = cur_a + float(width) - prev_a
            ok = neg & (wrapped >= 0) & (wrapped < width / 2 + 1)
        else:
            wrapped = np.where(prev_a < 2**32, cur_a + 2.0**32 - prev_a, cur_a + 2.0**64 - prev_a)
            limit = np.where(prev_a < 2**32, 2.0**31, 2.0**63)
            ok = neg & (wrapped < limit)
        delta = np.where(ok, wrapped, np.where(neg, cur_a, delta))
    return delta if np.ndim(delta) else float(delta)
