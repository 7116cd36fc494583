"""The HTML report's interactive timeline (report/interactive.py) in a real headless Chromium.

Driven by Playwright's Python package with the system's chromium (apt: .ci/apt-packages.txt;
`playwright install` is never run, nothing is downloaded). The page must load from the file
alone (no other request), log no console error, draw one band per checkpoint of the report in
every panel, show a value with its unit on hover in every panel, zoom to a checkpoint when its
row's # is clicked, and go to its row when its band is clicked. A second test measures the
HTML of an hour at 10 Hz against the 5 MB budget (no browser needed).
"""

import json
import re
import time

import numpy as np
import pytest
from support.browser import CHROMIUM_ARGS, chromium
from support.command import ckprof_cmd
from support.recordings import three_saves

from ckprof.testing import GPU_SCHEMA, NVME_SCHEMA, RecordingBuilder, bursts

MiB = 2**20
# each panel's hover: "<quantity>: <number> <unit>" (plots.timeline_panels' units)
UNITS = {
    "bandwidth": "GiB/s",
    "queue depth": "requests",
    "temperature": "°C",
    "power": "W",
    "GPU idle": "% of time",
}


def report(*args):
    r = ckprof_cmd("report", *args, in_process=True)
    assert r.exit_code == 0, r.output
    return r


def sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright not installed (pip install -e '.[dev]'; it uses the system chromium)")
    return sync_playwright


def hover_texts(page, x, y) -> list[str]:
    page.mouse.move(x, y, steps=4)
    page.wait_for_timeout(150)
    return [t for t in page.locator(".bk-tooltip-content").all_inner_texts() if t.strip()]


def test_interactive_timeline_in_headless_chromium(tmp_path):
    exe = chromium()
    sp = sync_playwright()
    rec = three_saves(tmp_path / "rec")
    html = tmp_path / "report.html"
    report(rec, "-o", html)
    rows = json.loads(report(rec, "--format", "json").stdout)["checkpoints"]
    assert len(rows) == 3
    url = html.as_uri()
    t0 = time.monotonic()
    with sp() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1500})
            console, errors, requests = [], [], []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url)
            page.wait_for_selector("body[data-timeline-ready='1']", timeout=20_000)

            # the checkpoint bands: one per checkpoint of the report, drawn in every panel
            bands = page.evaluate(
                """() => { const t = window.ckprofTimeline, d = t.bands.data;
                   const panels = [...t.doc.all_models].filter(m => m.constructor.__name__ === 'Figure');
                   const drawn = [...t.doc.all_models].filter(m => m.data_source === t.bands).length;
                   return {n: Array.from(d.n), x0: Array.from(d.x0), x1: Array.from(d.x1),
                           panels: panels.length, drawn: drawn, x: [t.x.start, t.x.end]}; }"""
            )
            assert bands["n"] == [1, 2, 3]
            assert bands["x0"] == pytest.approx([r["start_s"] for r in rows], abs=1e-3)
            assert bands["x1"] == pytest.approx([r["app_end_s"] for r in rows], abs=1e-3)
            assert bands["panels"] == 5  # bandwidth, queue depth, temperature, power, GPU idle
            assert bands["drawn"] == bands["panels"]
            assert bands["x"] == pytest.approx([0, 30], abs=0.2)

            # the table → the timeline: row 2's # zooms to checkpoint 2 and selects its band
            links = page.locator("a.ckpt-link")
            assert links.count() == len(rows)
            links.nth(1).click()
            page.wait_for_timeout(200)
            start, end, sel = page.evaluate(
                "[ckprofTimeline.x.start, ckprofTimeline.x.end, Array.from(ckprofTimeline.bands.selected.indices)]"
            )
            a, b = rows[1]["start_s"], rows[1]["app_end_s"]
            assert start < a < b < end and end - start < 3 * (b - a), (start, end)
            assert sel == [1]

            # hover: the middle of each panel (inside checkpoint 2, now zoomed) gives a value and its unit
            page.evaluate("document.getElementById('ckprof-timeline').scrollIntoView()")
            boxes = {}
            for c in page.locator("#ckprof-timeline canvas").all():
                bb = c.bounding_box()
                if bb and bb["height"] > 120:
                    boxes.setdefault(round(bb["y"]), bb)
            assert len(boxes) == 5, boxes
            seen, band_tips = {}, []
            for bb in sorted(boxes.values(), key=lambda bb: bb["y"]):
                for text in hover_texts(page, bb["x"] + bb["width"] * 0.45, bb["y"] + bb["height"] * 0.5):
                    if text.startswith("checkpoint"):  # the band's own hover
                        band_tips.append(text)
                        continue
                    m = re.search(
                        r"^(bandwidth|queue depth|temperature|power|GPU idle):\s*(-?[\d.]+) (.+)$", text, re.M
                    )
                    assert m, text
                    assert re.search(r"\((measured|derived|estimated)[^)]*\)", text), text  # provenance
                    assert re.search(r"time:\s*\d+\.\d\d s", text), text
                    seen.setdefault(m.group(1), []).append((float(m.group(2)), m.group(3)))
            assert set(seen) == set(UNITS), seen
            for q, vals in seen.items():
                assert all(unit == UNITS[q] for _, unit in vals), (q, vals)
            assert max(v for v, _ in seen["bandwidth"]) > 0.5  # GiB/s, inside the save (~0.75 GiB/s a device)
            assert band_tips and all("#2: save, step 200" in t for t in band_tips), band_tips
            assert "/ckpt/step1<i>" in band_tips[0]  # the recording's path, shown as text

            # the timeline → the table: clicking a band goes to its row
            bb = sorted(boxes.values(), key=lambda bb: bb["y"])[0]
            page.mouse.click(bb["x"] + bb["width"] * 0.45, bb["y"] + bb["height"] * 0.5)
            page.wait_for_function("location.hash === '#ckpt-2'", timeout=5_000)
            assert page.evaluate("document.querySelector('tr:target').id") == "ckpt-2"

            # the whole run again, for a person to look at
            page.evaluate("ckprofTimeline.x.setv({start: 0, end: 30})")
            shot = tmp_path / "timeline.png"
            page.screenshot(path=str(shot))
            print(f"screenshot: {shot}")
        finally:
            browser.close()
    elapsed = time.monotonic() - t0
    print(f"interactive timeline in chromium: {elapsed:.1f} s")
    assert errors == [], errors
    assert [c for c in console if c.startswith(("error", "warning"))] == [], console
    assert requests == [url], requests  # the file itself, nothing else: Bokeh's JavaScript is inline


def hour_recording(path) -> str:
    """An hour at 10 Hz: two NVMe devices, a GPU, a checkpoint every 10 minutes, a mark."""
    rng = np.random.default_rng(0)
    rb = RecordingBuilder(duration_s=3600, interval_s=0.1)
    spans = [(a, a + 60) for a in range(300, 3600, 600)]

    act = bursts(spans, 1.0)

    for dev in ("nvme0n1", "nvme1n1"):
        rb.block(
            dev,
            lambda t: act(t) * 800 * MiB * (1 + 0.2 * rng.random(t.shape)) + 5 * MiB * rng.random(t.shape),
            queue=lambda t: act(t) * 16 * rng.random(t.shape),
        )
    rb.host(lambda t: act(t) * 100 * MiB)
    rb.series(
        "gpu",
        GPU_SCHEMA,
        gpu="0",
        energy_mj=lambda t: t * 3e5,
        power_w=lambda t: 300 + 50 * rng.random(t.shape),
        util_gpu_pct=lambda t: np.where(act(t) > 0, 0, 97),
        temp_c=lambda t: 55 + 10 * np.sin(t / 300),
        clocks_event_reasons=0,
    )
    rb.series(
        "nvme",
        NVME_SCHEMA,
        device="nvme0",
        temp_c=lambda t: 45 + 10 * act(t) + rng.random(t.shape),
        critical_warning=0,
        thm_temp1_trans_count=0,
        thm_temp1_total_time=0,
        power_w=lambda t: 4 + 5 * act(t),
    )
    for i, (a, b) in enumerate(spans):
        rb.checkpoint(a, b, int(1.6 * 800 * MiB * (b - a)), step=1000 * (i + 1), path=f"/ckpt/step{i}")
    rb.event("mark", 1234.5, text="epoch 1 done")
    return rb.finish(path)


def _shapes(o):
    """Lengths of the arrays in a Bokeh JSON item (each trace's points)."""
    if isinstance(o, dict):
        if o.get("type") == "ndarray":
            yield int(np.prod(o["shape"]))
        else:
            for v in o.values():
                yield from _shapes(v)
    elif isinstance(o, (list, tuple)):
        for v in o:
            yield from _shapes(v)


@pytest.mark.slow
def test_an_hour_at_10_hz_stays_under_5_mb(tmp_path):
    import ckprof
    from ckprof.analysis import analyze
    from ckprof.report import interactive

    rec = hour_recording(tmp_path / "hour")
    html = tmp_path / "hour.html"
    report(rec, "-o", html)
    size = html.stat().st_size
    static = tmp_path / "static.html"
    report(rec, "-o", static, "--static")
    print(
        f"HTML report of an hour at 10 Hz: {size / 1e6:.2f} MB interactive, {static.stat().st_size / 1e6:.2f} MB --static"
    )
    assert size < 5e6
    item = interactive.timeline_item(analyze(ckprof.load(rec)))
    shapes = list(_shapes(item))
    assert shapes and max(shapes) <= interactive.MAX_POINTS  # thinned for display: 36,000 samples a trace
    assert max(shapes) > 1000  # …yet not to a handful
