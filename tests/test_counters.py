import numpy as np

from ckprof.recording.counters import counter_delta


def test_plain_delta():
    assert counter_delta(10, 25) == 15


def test_32bit_tick_counter_wraps():
    # io_ticks is printed as unsigned int: 2**32 - 100 → 50 is 150 ms of busy time
    assert counter_delta(2**32 - 100, 50) == 150


def test_64bit_counter_wraps_approximately():
    # Recordings store counters as int64, so a 64-bit wrap is out of reach in practice
    # (2**63 sectors is 4 EiB); where one is seen the delta is right to float64 precision.
    assert counter_delta(2.0**64 - 2.0**12, 2.0**12) == 2.0**13


def test_reset_is_not_read_as_wrap():
    # a loop device detached and attached again starts from zero: the delta is the new value
    assert counter_delta(1_000_000, 40) == 40


def test_explicit_width_rapl():
    width = 262143328850 + 1  # max_energy_range_uj + 1 of a real package domain
    assert counter_delta(width - 1000, 500, width=width) == 1500


def test_vectorised():
    d = counter_delta(np.array([1, 2**32 - 1, 5]), np.array([3, 1, 9]))
    assert list(d) == [2, 2, 4]
