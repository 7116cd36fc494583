"""A token bucket: the one rule for the recorder's budgets (the file tracker's looks and their CPU,
record/filetracker.py; the file-activity source's size reads, record/fileactivity.py and its C
twin, fanreader.c size_budget, which does the same arithmetic so that the two readers agree)."""

from __future__ import annotations

import time


class TokenBucket:
    """`level` filled at `rate` per unit of the clock, up to `cap`, at each fill(); drawn by
    subtracting from `level`, below zero too (an overdraft waits for the fills to pay it back). The
    clock is time.monotonic() (s) unless fill() is given `now` (then `at` is in that unit: a stamp
    earlier than the last fill fills nothing). The rate and cap are the caller's at each fill
    (module constants a test may change)."""

    __slots__ = ("level", "at")

    def __init__(self, level: float, at: float | None = None):
        self.level, self.at = level, time.monotonic() if at is None else at

    def fill(self, rate: float, cap: float, now: float | None = None) -> float:
        if now is None:
            now = time.monotonic()
        if now > self.at:
            self.level, self.at = min(cap, self.level + (now - self.at) * rate), now
        return self.level
