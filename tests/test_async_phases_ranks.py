"""A grouped async save (two ranks) and the steps beside it (analysis/phases.py): each process's
steps are set against its own rank's call and persist, not the save's union of them. Hand-made
spans where the answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from ckprof.analysis import phases as P


def two_rank_save():
    # rank 0 (pid 10) blocks 10.0-10.2 and writes until 11.0; rank 1 (pid 11) blocks 10.0-10.2 and
    # writes until 13.0: the save's window is 10.0-13.0
    r0 = P.SaveSpan("a/0", start_s=10.0, end_s=11.0, blocking_s=0.2)
    r1 = P.SaveSpan("a/1", start_s=10.0, end_s=13.0, blocking_s=0.2)
    save = P.SaveSpan("a", 10.0, 13.0, 0.2, by_process=((("h", 10), r0), (("h", 11), r1)))
    return save, r0, r1


def steps_of(slow_until: float) -> list[float]:
    """Step ends of a process training in 0.1 s steps, 0.2 s ones from 10.2 until `slow_until`."""
    ends = list(np.round(np.arange(0.1, 10.01, 0.1), 3))
    t = 10.2
    ends.append(t)  # 10.0-10.2 holds the blocked call 10.0-10.2 whole: no time of its own, left out
    while t < slow_until - 1e-9:
        t = round(t + 0.2, 3)
        ends.append(t)
    while t < 20.0:
        t = round(t + 0.1, 3)
        ends.append(t)
    return ends


def test_each_rank_s_steps_are_set_against_its_own_persist():
    save, _, _ = two_rank_save()
    # each rank slowed to 0.2 s steps while its own write ran, then back to 0.1 s
    steps = {("h", 10): steps_of(11.0), ("h", 11): steps_of(13.0)}
    e = P.step_effects([save], steps)["a"]
    # rank 0: 4 slow steps in 10.2-11.0; rank 1: 14 in 10.2-13.0; rank 0's 0.1 s steps in 11-13
    # are beside its own write no more, so they are neither overlapping nor "other"
    assert e.steps_overlapping == 4 + 14
    assert e.median_step_overlapping_s == pytest.approx(0.2)
    assert e.median_step_other_s == pytest.approx(0.1)
    assert e.inflation_pct == pytest.approx(100.0)


def test_without_a_rank_s_own_span_the_save_s_window_is_used():
    save, _, _ = two_rank_save()
    plain = P.SaveSpan("a", 10.0, 13.0, 0.2)
    steps = {("h", 10): steps_of(11.0), ("h", 11): steps_of(13.0)}
    e = P.step_effects([plain], steps)["a"]
    # the save's persist (10.2-13.0) holds rank 0's 0.1 s steps of 11-13 too: the median is diluted
    assert e.steps_overlapping == 4 + 20 + 14
    assert e.inflation_pct < 100.0


def test_a_step_key_without_a_host_matches_the_rank_by_pid():
    save, r0, _ = two_rank_save()
    assert P.span_of(save, (None, 10)) is r0
    assert P.span_of(save, ("other-host", 10)) is save
    assert P.span_of(save, (None, 99)) is save
