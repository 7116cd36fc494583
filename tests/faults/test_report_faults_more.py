"""Reports under faults, round two (issue 22): a recording with very many marks draws in bounded
time; every message that names a user's string is one line without control bytes; a report that
cannot be written whole leaves the previous one as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest
from recbuild import RecordingBuilder

import ckprof
from ckprof.analysis import analyze
from ckprof.report import interactive, plots

MiB = 2**20


def marked_recording(path, n_marks: int, duration_s: float = 60.0) -> str:
    """Two block devices and a checkpoint, with `n_marks` ckprof.mark() events over the run."""
    rb = RecordingBuilder(duration_s=duration_s, interval_s=0.5)
    for dev in ("nvme0n1", "nvme1n1"):
        rb.block(dev, lambda t: np.where((t > 10) & (t < 20), 100 * MiB, 0), queue=lambda t: 2.0)
    rb.checkpoint(10, 20, 1000 * MiB, step=1)
    for i, t_s in enumerate(np.linspace(0, duration_s * 0.999, n_marks)):
        rb.event("mark", float(t_s), text=f"step {i}")
    return rb.finish(path)


@pytest.fixture(scope="module")
def few_and_many(tmp_path_factory):
    d = tmp_path_factory.mktemp("marks")
    return (
        analyze(ckprof.load(marked_recording(d / "few", 10))),
        analyze(ckprof.load(marked_recording(d / "many", 20_000))),
    )


def _png_artists(an, monkeypatch) -> list[int]:
    """The PNG timeline's artists per panel (the figure as it is saved)."""
    seen = []

    def keep(fig):
        seen.extend(len(ax.get_children()) for ax in fig.axes)
        plots._mpl().close(fig)
        return b"png"

    monkeypatch.setattr(plots, "_png", keep)
    assert plots.timeline(an) == b"png"
    return seen


def test_the_png_timeline_draws_marks_in_a_bounded_number_of_artists(few_and_many, monkeypatch):
    few, many = few_and_many
    assert len(many.plot["marks"]) == 20_000
    # one collection per panel whatever the marks: 20,000 marks cost what 10 do
    assert _png_artists(many, monkeypatch) == _png_artists(few, monkeypatch)


def _mark_rows(item) -> list[int]:
    """Rows of every data source in a Bokeh JSON item that carries hover `text` (the marks')."""
    rows = []

    def walk(o):
        if isinstance(o, dict):
            entries = o.get("entries") if o.get("type") == "map" else None
            if entries and any(k == "text" for k, _ in entries):
                rows.append(len(dict(entries)["text"]))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(item)
    return rows


def test_the_interactive_timeline_sends_a_bounded_number_of_mark_lines(few_and_many):
    few, many = few_and_many
    assert _mark_rows(interactive.timeline_item(few)) == [10]  # few: each mark its own line
    rows = _mark_rows(interactive.timeline_item(many))
    # one source for every panel, no more lines than a wide screen has pixel columns
    assert len(rows) == 1 and 0 < rows[0] <= 2000


def test_binned_marks_stand_for_every_mark_and_the_report_says_how_many_were_drawn(few_and_many):
    few, many = few_and_many
    marks = many.plot["marks"]
    lines = plots.mark_lines(marks, many.timeline.duration_s)
    assert lines.total == 20_000 and lines.count.sum() == 20_000 and len(lines.x_s) <= plots.MAX_MARK_LINES
    # every mark lies within one bin after the line that stands for it
    t = np.array([m[0] for m in marks])
    i = np.searchsorted(lines.x_s, t, side="right") - 1
    assert (i >= 0).all() and (t - lines.x_s[i] < lines.bin_s).all()
    assert f"{len(lines.x_s):,} dotted lines" in lines.note and "20,000 ckprof.mark() events" in lines.note
    assert "id='timeline-marks'" in interactive.timeline_html(many)
    assert "timeline-marks" not in interactive.timeline_html(few)  # all drawn: nothing to say
    exact = plots.mark_lines(few.plot["marks"], few.timeline.duration_s)
    assert exact.note is None and list(exact.x_s) == [m[0] for m in few.plot["marks"]]


def test_a_mark_text_is_cut_for_the_hover_and_a_lone_mark_keeps_its_time():
    marks = [(float(i) / 1000, "x" * 500) for i in range(5000)] + [(59.0, "the lone one")]
    lines = plots.mark_lines(marks, 60.0)
    assert lines.x_s[-1] == 59.0 and lines.text[-1] == "the lone one" and lines.count[-1] == 1
    assert max(len(s) for s in lines.text) <= plots.MAX_MARK_TEXT + 40
    assert json.dumps(lines.text).count("x" * (plots.MAX_MARK_TEXT + 1)) == 0
