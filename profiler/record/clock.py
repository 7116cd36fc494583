"""One clock per host: CLOCK_MONOTONIC in integer nanoseconds, plus a wall-clock anchor.

The recorder, the collectors and every process the wrapped command starts read the same
CLOCK_MONOTONIC (clock_gettime(2)), so marker events and samples line up without translation.
Tests pass a FakeClock instead; nothing in ckprof calls time.monotonic_ns() directly but this module.
"""

from __future__ import annotations

import threading
import time


class MonotonicClock:
    """The real clock. `now_ns()` is CLOCK_MONOTONIC; `sleep_until_ns()` waits for a deadline."""

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def sleep_until_ns(self, deadline_ns: int, stop: threading.Event | None = None) -> bool:
        """Sleep until `deadline_ns`; return False early if `stop` is set."""
        delay_s = (deadline_ns - time.monotonic_ns()) / 1e9
        if delay_s <= 0:
            return not (stop and stop.is_set())
        return not nap(delay_s, stop)


# Below this a sleeping thread checks `stop` only when it wakes: time.sleep(2) costs about half the
# CPU of Event.wait (no Condition, no lock made per wait), paid every tick of a 100 Hz sampler.
NAP_MAX_S = 0.25


def nap(delay_s: float, stop: threading.Event | None = None) -> bool:
    """Sleep `delay_s`; True if `stop` is set (at once for long waits, on waking for short ones)."""
    if stop is None or delay_s <= NAP_MAX_S:
        if delay_s > 0:
            time.sleep(delay_s)
        return stop is not None and stop.is_set()
    return stop.wait(delay_s)


class FakeClock:
    """A clock tests move by hand: sleeping advances it instantly, so no test waits."""

    def __init__(self, start_ns: int = 1_000_000_000):
        self.t_ns = start_ns

    def now_ns(self) -> int:
        return self.t_ns

    def advance_s(self, seconds: float) -> None:
        self.t_ns += int(seconds * 1e9)

    def sleep_until_ns(self, deadline_ns: int, stop: threading.Event | None = None) -> bool:
        if stop is not None and stop.is_set():
            return False
        self.t_ns = max(self.t_ns, deadline_ns)
        return True


# A test hook: pretend this host's wall clock is off by this many ns (a job's clock-offset test
# runs two "hosts" on one machine, whose clocks are otherwise the same). Never set in production.
ENV_TEST_WALL_SKEW = "CKPROF_TEST_WALL_SKEW_NS"


def wall_ns() -> int:
    """CLOCK_REALTIME in Unix ns (plus the test hook's skew, if set)."""
    import os

    return time.time_ns() + int(os.environ.get(ENV_TEST_WALL_SKEW, "0") or 0)


def wall_anchor(clock=None) -> dict:
    """A pair of readings taken back to back: wall time (Unix ns) and monotonic ns.

    Lines up hosts (each has its own monotonic clock) and converts sample times to dates.
    """
    clock = clock or MonotonicClock()
    # Bracket the wall reading between two monotonic ones and take the midpoint: error ≤ half the gap.
    m0 = clock.now_ns()
    w = wall_ns()
    m1 = clock.now_ns()
    return {"wall_ns": w, "monotonic_ns": (m0 + m1) // 2, "uncertainty_ns": (m1 - m0) // 2}
