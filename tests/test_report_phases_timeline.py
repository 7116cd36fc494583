"""The timelines draw an async save's phases and the training steps (issue 25, item 5): in the
interactive timeline's Bokeh document, each phase of the report is one bar (one glyph for all of
them) whose data are the report's own figures; the steps are one glyph of ticks at the recorded
step ends, or, past plots.MAX_STEP_TICKS, one bar per second whose counts add up to the steps, and
the page says so. The PNG timeline draws the same lanes, derived phases hatched. The Markdown and
HTML list every phase with its unit and provenance.

The real H200 recording (tests/data/gpu/h200-dcp-async-steps: four dcp.async_save calls, 240
optimizer steps) is the main subject; a built recording gives the thousands of steps."""

from __future__ import annotations

import base64
import gzip
from pathlib import Path

import numpy as np
import pytest

import ckprof
from ckprof.analysis import phases as PH
from ckprof.analysis.analyze import analyze
from ckprof.report import interactive, plots, render
from ckprof.testing import RecordingBuilder

GiB = 2**30
STEPS_REC = Path(__file__).resolve().parent / "data" / "gpu" / "h200-dcp-async-steps"
SYNC_REC = Path(__file__).resolve().parent / "data" / "gpu" / "h100-train-torch-save"


def _decode(v):
    """A Bokeh JSON value as plain Python: maps, ndarrays (base64 buffers) and lists."""
    if isinstance(v, dict):
        if v.get("type") == "map":
            return {k: _decode(x) for k, x in v.get("entries", [])}
        if v.get("type") == "ndarray":
            arr = v["array"]
            if isinstance(arr, dict) and arr.get("type") == "bytes":
                raw = base64.b64decode(arr["data"])
                raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw  # Bokeh gzips large buffers
                return np.frombuffer(raw, dtype=v["dtype"]).reshape(v["shape"]).tolist()
            return list(arr)
        return {k: _decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


def _objects(o):
    if isinstance(o, dict):
        if o.get("type") == "object":
            yield o
        for v in o.values():
            yield from _objects(v)
    elif isinstance(o, list):
        for v in o:
            yield from _objects(v)


def source_data(item: dict, name: str) -> dict:
    """The data of the ColumnDataSource called `name` in a Bokeh JSON item."""
    found = [o for o in _objects(item) if o.get("name") == "ColumnDataSource" and o["attributes"].get("name") == name]
    assert found, f"no data source {name}"
    return _decode(found[0]["attributes"]["data"])


def renderers_of(item: dict, name: str) -> set[str]:
    """The ids of the glyph renderers drawing the data source called `name` (a renderer appears in
    every tool that refers to it, once by value and elsewhere by id: count distinct ids)."""
    ids = set()
    for o in _objects(item):
        if o.get("name") == "GlyphRenderer":
            src = o["attributes"].get("data_source", {})
            if src.get("attributes", {}).get("name") == name:
                ids.add(o["id"])
    return ids


@pytest.fixture(scope="module")
def steps_an():
    return analyze(ckprof.load(str(STEPS_REC)))


def test_the_interactive_timeline_draws_each_phase_and_step_of_the_real_async_recording(steps_an):
    an = steps_an
    item = interactive.timeline_item(an)
    ph = source_data(item, interactive.PHASES)
    want = [(n, p.name, p.start_s, p.end_s) for n, c in enumerate(an.model.checkpoints, 1) for p in c.phases]
    assert len(want) == 16  # four saves: blocked, staging, persist, durable each
    assert list(zip(ph["n"], ph["name"])) == [(n, name) for n, name, _, _ in want]
    assert ph["left"] == pytest.approx([a for *_, a, _ in want], abs=1e-3)
    assert ph["right"] == pytest.approx([b for *_, b in want], abs=1e-3)
    provs = [p.provenance for c in an.model.checkpoints for p in c.phases]
    assert ph["provenance"] == provs and set(provs) == {"measured", "derived"}
    # the hover's figures: seconds and bytes with their unit; blocked and durable carry no bytes
    persist = [k for k, name in enumerate(ph["name"]) if name == "persist"]
    assert all(ph["bytes"][k] == "402,861,120 B" and ph["gib_per_s"][k].endswith(" GiB/s") for k in persist)
    assert all(ph["bytes"][k].startswith("n/a") for k, name in enumerate(ph["name"]) if name == "blocked")
    assert len(renderers_of(item, interactive.PHASES)) == 1  # one glyph for every phase

    # the steps: one tick at each recorded step end, by the analysis' own rule
    ends = sorted(t for v in PH.step_ends(ckprof.load(str(STEPS_REC)), an.timeline.start_ns).values() for t in v)
    assert len(ends) >= 200  # 240 optimizer steps
    st = source_data(item, interactive.STEPS)
    assert st["x"] == pytest.approx(ends, abs=1e-3) and set(st["count"]) == {1}
    assert len(renderers_of(item, interactive.STEPS)) == 1  # one glyph, not one per step
    html = interactive.timeline_html(an)
    assert "id='timeline-steps'" not in html  # every step has its own tick: nothing to say


def test_a_sync_recording_without_steps_gets_no_phases_panel():
    an = analyze(ckprof.load(str(SYNC_REC)))
    assert plots.phase_lanes(an) is None
    item = interactive.timeline_item(an)
    names = {o["attributes"].get("name") for o in _objects(item) if o.get("name") == "ColumnDataSource"}
    assert interactive.PHASES not in names and interactive.STEPS not in names


def test_thousands_of_steps_become_per_second_bars_and_the_page_says_so(tmp_path):
    n_steps, dur = 6000, 60.0
    rb = RecordingBuilder(tmp_path / "many", duration_s=dur)
    rb.block("sda", lambda t: 0.0)
    rb.checkpoint(20, 24, 2 * GiB, step=1, blocking_s=0.5)
    ends = np.linspace(0.005, dur - 0.005, n_steps)
    for k, t in enumerate(ends, 1):
        rb.event("train_step", float(t), n=k, via="api", pid=7)
    an = analyze(ckprof.load(rb.finish()))
    item = interactive.timeline_item(an)
    st = source_data(item, interactive.STEPS)
    assert len(st["x"]) <= dur + 1 < plots.MAX_STEP_TICKS  # per second, not per step
    assert sum(st["count"]) == n_steps
    # each bar's count is the steps that ended in its second
    want = np.bincount(np.floor(ends).astype(int))
    assert st["count"] == [int(c) for c in want if c]
    assert len(renderers_of(item, interactive.STEPS)) == 1
    html = interactive.timeline_html(an)
    assert "id='timeline-steps'" in html and f"{n_steps:,} training steps" in html
    png = plots.timeline(an)
    assert png and png[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_png_timeline_draws_the_lanes_derived_phases_hatched(steps_an):
    plt = plots.pyplot_module()
    lanes = plots.phase_lanes(steps_an)
    fig, ax = plt.subplots()
    plots._draw_lanes(ax, lanes, steps_an.model.checkpoints)
    bars = [c for c in ax.collections if type(c).__name__ == "PolyCollection"]
    # one collection per phase, each the four saves' bars; staging and durable are derived here
    # (hatched), blocked and persist measured (solid)
    assert [len(c.get_paths()) for c in bars] == [4, 4, 4, 4]
    assert sorted(bool(c.get_hatch()) for c in bars) == [False, False, True, True]
    ticks = [c for c in ax.collections if type(c).__name__ == "LineCollection"]
    assert len(ticks) == 1 and len(ticks[0].get_segments()) == lanes.ticks.total  # one collection of ticks
    plt.close(fig)


def test_markdown_and_html_list_each_phase_with_unit_and_provenance(steps_an):
    md = render.to_markdown(steps_an.model)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "| persist |" in line]
    assert len(rows) == 4
    assert "| # | phase | start [s since recording start] | end [s since recording start] | duration [s] |" in md
    assert all("| measured |" in r and "384.20 MiB" in r for r in rows)
    staging = [line for line in md.splitlines() if "| staging |" in line]
    assert len(staging) == 4 and all("| derived | staged inside the call (no stager) |" in r for r in staging)
    html = render.to_html(steps_an.model, {})
    assert "id='async-phase-rows'" in html and html.count("<td>persist</td>") == 4


def test_a_long_run_s_step_bars_widen_to_whole_seconds_and_stay_few():
    """10,000 s of two steps a second from two processes: bars of 5 s (⌈10,000 / 2,000⌉), each
    counting the steps that ended in it, at most MAX_STEP_TICKS of them."""
    ends = np.arange(0.25, 10_000, 0.5)
    t = plots.step_ticks({"rank0": ends, "rank1": ends + 0.1})
    assert t.bin_s == 5.0 and len(t.x_s) <= plots.MAX_STEP_TICKS
    assert t.total == 2 * len(ends) == int(t.count.sum()) and t.processes == 2
    assert set(t.count.tolist()) == {20}  # 2 processes × 2 a second × 5 s
    assert "40,000 training steps (2 process(es)) drawn as steps ended per 5 s" in t.note


def test_each_phase_s_gpu_idle_is_shown_where_a_gpu_was_recorded(steps_an):
    """The H200's NVML samples give each phase its GPU idle seconds (analysis/gpu_idle.py): the
    Markdown's phase table and the timeline's hover show them, with what they stand on."""
    md = render.to_markdown(steps_an.model)
    assert "| GPU idle [s] [d] | device-to-host copy: bytes [m], seconds [d], GiB/s [d] |" in md
    for c in steps_an.model.checkpoints:
        for p in c.phases:
            assert f"| {p.name} |" in md
            assert f"{p.gpu_idle_s:.3f} s ({p.gpu_idle_basis})" in md
    ph = source_data(interactive.timeline_item(steps_an), interactive.PHASES)
    idle = [p.gpu_idle_s for c in steps_an.model.checkpoints for p in c.phases]
    assert [float(x.split(" s (")[0]) for x in ph["gpu_idle"]] == pytest.approx(idle, abs=5e-4)
    assert set(ph["d2h"]) == {"—"}  # recorded before the patch said its D2H bytes: nothing to show


def test_a_staging_event_s_device_to_host_copy_is_shown(tmp_path):
    """A stager's event that carries the D2H bytes and seconds (the patch writes them on a GPU:
    tests/test_async_d2h.py): the staging row and its hover say bytes, seconds and GiB/s."""
    rb = RecordingBuilder(tmp_path / "d2h", duration_s=5)
    rb.block("sda", lambda t: 0.0)
    rb.checkpoint(2, 3, GiB, step=1, blocking_s=0.05)
    basis = "the staging span: no CUDA event brackets the copy"
    rb.event(
        "checkpoint_phase", 2.25, id=rb.last_checkpoint_id, phase="staging", ok=True, staged_by="stager",
        d2h_bytes=GiB, d2h_s=0.25, d2h_basis=basis,
    )  # fmt: skip
    an = analyze(ckprof.load(rb.finish()))
    (st,) = [p for p in an.model.checkpoints[0].phases if p.name == "staging"]
    assert (st.d2h_bytes, st.d2h_s) == (GiB, 0.25)
    want = f"1.00 GiB, 0.250 s, 4.000 GiB/s ({basis})"
    (row,) = [line for line in render.to_markdown(an.model).splitlines() if line.startswith("| 1 | staging |")]
    assert row.endswith(f"| {want} |") and "| — | " in row  # no GPU recorded: its idle is "—", not 0
    ph = source_data(interactive.timeline_item(an), interactive.PHASES)
    assert ph["d2h"][ph["name"].index("staging")] == want
