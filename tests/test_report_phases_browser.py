"""The interactive timeline's async phases and training steps in a real headless Chromium (issue 25,
item 5), on the real H200 recording of four dcp.async_save calls and 240 optimizer steps
(tests/data/gpu/h200-dcp-async-steps).

What the page's Bokeh document holds after it rendered is checked against the JSON report of the
same recording: one phase bar per phase (its save's row, name, start and end, provenance), one
step tick per recorded step end, each drawn by exactly one glyph in a figure of the page; hovering
the persist bar shows its measured provenance and its rate. Driven like tests/test_report_interactive.py
(Playwright's Python package with the system's chromium; nothing downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.browser import CHROMIUM_ARGS, chromium
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis import phases as PH
from ckprof.analysis.analyze import analyze

REC = Path(__file__).resolve().parent / "data" / "gpu" / "h200-dcp-async-steps"

# the page's Bokeh document: the phase and step sources, and how many glyph renderers of a figure
# draw each (a renderer is in a figure's `renderers`)
DOC = """() => {
  const t = window.ckprofTimeline, all = [...t.doc.all_models];
  const figs = all.filter(m => m.constructor.__name__ === 'Figure');
  const drawn = src => figs.flatMap(f => f.renderers).filter(r => r.data_source === src);
  const p = t.phases.data, s = t.steps.data;
  return {n: Array.from(p.n), name: Array.from(p.name), left: Array.from(p.left), right: Array.from(p.right),
          provenance: Array.from(p.provenance), step_x: Array.from(s.x), step_count: Array.from(s.count),
          phase_glyphs: drawn(t.phases).map(r => r.glyph.constructor.__name__),
          step_glyphs: drawn(t.steps).map(r => r.glyph.constructor.__name__)};
}"""


def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright not installed (pip install -e '.[dev]'; it uses the system chromium)")
    return sync_playwright


def test_phase_bars_and_step_ticks_are_drawn_in_the_page(tmp_path):
    exe = chromium()
    sp = sync_playwright()
    html = tmp_path / "report.html"
    r = ckprof_cmd("report", str(REC), "-o", str(html), in_process=True)
    assert r.exit_code == 0, r.output
    rows = json.loads(ckprof_cmd("report", str(REC), "--format", "json", in_process=True).stdout)["checkpoints"]
    want = [
        (n, p["name"], p["start_s"], p["end_s"], p["provenance"]) for n, c in enumerate(rows, 1) for p in c["phases"]
    ]
    an = analyze(ckprof.load(str(REC)))
    ends = sorted(t for v in PH.step_ends(ckprof.load(str(REC)), an.timeline.start_ns).values() for t in v)
    url = html.as_uri()
    with sp() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1900})
            errors, console = [], []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.goto(url)
            page.wait_for_selector("body[data-timeline-ready='1']", timeout=20_000)
            doc = page.evaluate(DOC)
            assert list(zip(doc["n"], doc["name"], doc["provenance"])) == [(n, a, pr) for n, a, _, _, pr in want]
            assert doc["left"] == pytest.approx([w[2] for w in want], abs=1e-3)
            assert doc["right"] == pytest.approx([w[3] for w in want], abs=1e-3)
            assert doc["phase_glyphs"] == ["Quad"]  # one glyph for every phase bar
            assert doc["step_x"] == pytest.approx(ends, abs=1e-3) and set(doc["step_count"]) == {1}
            assert doc["step_glyphs"] == ["Segment"]  # one glyph for every tick

            # hover the first save's persist bar: zoom the shared time axis to inside it, then move
            # down the middle of the phases panel (the last canvas) until its tooltip shows
            k = doc["name"].index("persist")
            a, b = doc["left"][k], doc["right"][k]
            page.evaluate(f"ckprofTimeline.x.setv({{start: {a + 0.02 * (b - a)}, end: {b - 0.02 * (b - a)}}})")
            page.wait_for_timeout(200)
            last = page.locator("#ckprof-timeline canvas").last  # the phases panel is the last
            last.scroll_into_view_if_needed()
            page.wait_for_timeout(200)
            lanes = last.bounding_box()
            tips = []
            for frac in [i / 40 for i in range(4, 38)]:
                page.mouse.move(lanes["x"] + lanes["width"] * 0.5, lanes["y"] + lanes["height"] * frac, steps=2)
                page.wait_for_timeout(60)
                tips = [t for t in page.locator(".bk-tooltip-content").all_inner_texts() if "persist" in t]
                if tips:
                    break
            assert tips, "no persist tooltip in the phases panel"
            assert "#1 persist (measured)" in tips[0] and "GiB/s" in tips[0] and "402,861,120 B" in tips[0], tips
            shot = tmp_path / "phases.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")
        finally:
            browser.close()
    assert errors == [], errors
    assert [c for c in console if c.startswith(("error", "warning"))] == [], console
