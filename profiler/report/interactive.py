"""The HTML report's interactive timeline (Bokeh, its JavaScript inlined: the file needs no network).

It draws what plots.timeline_panels and plots.checkpoint_bands return — the same series, units
and provenance as the PNG timeline — on one shared, zoomable time axis: one panel per quantity,
checkpoint windows as bands (dark: the save call; light: until durable), ckprof.mark() events
as dotted lines (one glyph per panel; binned past plots.MAX_MARK_LINES, a line above says so). Hovering a line gives its value with unit and provenance (and, where the
display was thinned, the bucket's min and max); hovering a band names its checkpoint. Clicking
a band goes to its row in the checkpoint table; a row's "#" link zooms the timeline to it.

Size: every trace is thinned to MAX_POINTS buckets (plots.envelope) and sent as float32, so a
long recording stays small (an hour at 10 Hz: tests/test_report_interactive.py prints the size).
Strings from the recording reach the page only inside the JSON document, with <, > and &
written as \\u escapes, and Bokeh draws them as text, never as HTML.
"""

from __future__ import annotations

import json
import re

import numpy as np

from ckprof import escape as E

from . import plots as P

MAX_POINTS = 2000
PANEL_HEIGHT = 190
X_RANGE = "ckprof-x"  # the models the page's script finds by name
BANDS = "ckprof-checkpoints"
PHASES = "ckprof-phases"  # the async saves' phase bars (one glyph)
STEPS = "ckprof-steps"  # the training steps' ticks, or per-second bars (one glyph)
LANES_HEIGHT = 150
DIV_ID = "ckprof-timeline"
DATA_ID = "ckprof-timeline-data"

# ours, constant: the page's only script besides Bokeh's (no recording data in it)
LINK_JS = """
(function () {
  Bokeh.logger.set_level('warn');  // no info lines in the console (Bokeh.set_log_level logs one)
  var item = JSON.parse(document.getElementById('%(data)s').textContent);
  Bokeh.embed.embed_item(item, '%(div)s').then(function () {
    var doc = Bokeh.documents[Bokeh.documents.length - 1];
    var xr = doc.get_model_by_name('%(x)s'), bands = doc.get_model_by_name('%(bands)s');
    function zoom(n) {
      var d = bands.data, i = Array.prototype.indexOf.call(d.n, n);
      if (i < 0) return false;
      var a = d.x0[i], b = Math.max(d.x1[i], d.durable_s[i] || d.x1[i]);
      var pad = Math.max((b - a) * 0.5, 0.5);
      xr.setv({start: Math.max(a - pad, xr.bounds ? xr.bounds[0] : -Infinity),
               end: Math.min(b + pad, xr.bounds ? xr.bounds[1] : Infinity)});
      bands.selected.indices = [i];
      document.getElementById('timeline').scrollIntoView();
      return true;
    }
    // one listener for every row's link, also those parsed after this ran (the table comes later)
    document.addEventListener('click', function (ev) {
      var a = ev.target.closest && ev.target.closest('a.ckpt-link');
      if (a && zoom(Number(a.dataset.ckpt))) ev.preventDefault();
    });
    window.ckprofTimeline = {doc: doc, x: xr, bands: bands, zoom: zoom,
                             phases: doc.get_model_by_name('%(phases)s'), steps: doc.get_model_by_name('%(steps)s')};
    document.body.setAttribute('data-timeline-ready', '1');
  });
})();
""" % {"data": DATA_ID, "div": DIV_ID, "x": X_RANGE, "bands": BANDS, "phases": PHASES, "steps": STEPS}

# a band clicked: its row in the checkpoint table (tr id='ckpt-N')
TAP_JS = "const i = src.selected.indices[0]; if (i !== undefined) { window.location.hash = 'ckpt-' + src.data.n[i]; }"

PALETTE = [  # Tableau 10, as matplotlib's default cycle, so the two timelines' colours agree
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]
BAND_COLOUR = "#ff7f0e"


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _safe_json(obj) -> str:
    """JSON for a <script type="application/json"> element: nothing in it can close the element."""
    return (
        json.dumps(obj, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )


def _bands_source(rows, ColumnDataSource):
    bands = P.checkpoint_bands(rows)
    nan = float("nan")

    def step(b):
        s = b.row.step
        return "—" if s is None else str(s)

    main = ColumnDataSource(
        {
            "n": [b.n for b in bands],
            "x0": _f32([b.start_s for b in bands]),
            "x1": _f32([b.end_s for b in bands]),
            "durable_s": _f32([nan if b.durable_end_s is None else b.durable_end_s for b in bands]),
            "kind": [str(b.row.kind) for b in bands],
            "step": [step(b) for b in bands],
            "path": [str(b.row.path or "—") for b in bands],
            "call_s": _f32([b.end_s - b.start_s for b in bands]),
        },
        name=BANDS,
    )
    tail = [b for b in bands if b.durable_end_s is not None]
    durable = ColumnDataSource(
        {
            "n": [b.n for b in tail],
            "x0": _f32([b.end_s for b in tail]),
            "x1": _f32([b.durable_end_s for b in tail]),
            "kind": [str(b.row.kind) for b in tail],
            "step": [step(b) for b in tail],
        }
    )
    return main, durable


def _text(v, fmt: str, none: str) -> str:
    return none if v is None else fmt.format(v)


def _lanes_figure(lanes: P.PhaseLanes, xr, band_src, durable_src):
    """The "phases and steps" panel: each phase a bar in its lane (one quad glyph for all, hover:
    start, end, seconds, bytes, GiB/s, measured/derived), the steps as ticks above (one segment glyph)."""
    from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, Range1d
    from bokeh.models.annotations import Title
    from bokeh.plotting import figure

    lane = {name: k for k, name in enumerate(P.PhaseLanes.LANES)}
    bars = lanes.bars
    phase_src = ColumnDataSource(
        {
            "n": [b.n for b in bars],
            "name": [b.name for b in bars],
            "left": _f32([b.start_s for b in bars]),
            "right": _f32([b.end_s for b in bars]),
            "bottom": _f32([lane[b.name] - 0.35 for b in bars]),
            "top": _f32([lane[b.name] + 0.35 for b in bars]),
            "colour": [P.PHASE_COLOURS.get(b.name, "#7f7f7f") for b in bars],
            "seconds": [_text(b.duration_s, "{:.3f} s", "unknown") for b in bars],
            "bytes": [_text(b.bytes, "{:,.0f} B", "n/a (the phase moves no bytes of its own)") for b in bars],
            "gib_per_s": [_text(b.gib_per_s, "{:.3f} GiB/s", "n/a") for b in bars],
            "provenance": [b.provenance for b in bars],
            "basis": [b.basis for b in bars],
            "gpu_idle": [b.gpu_idle for b in bars],
            "d2h": [b.d2h for b in bars],
        },
        name=PHASES,
    )
    t = lanes.ticks
    top = lane["steps"]
    h = 0.7 * (t.count / max(int(t.count.max()), 1)) if t.bin_s and t.total else np.full(len(t.x_s), 0.7)
    x = t.x_s + (t.bin_s / 2 if t.bin_s else 0.0)
    step_src = ColumnDataSource(
        {
            "x": _f32(x),
            "y0": _f32(np.full(len(x), top - 0.35)),
            "y1": _f32(top - 0.35 + h),
            "count": t.count.astype(np.int32),
        },
        name=STEPS,
    )
    title = Title(text=P.PhaseLanes.TITLE + "".join(f" — {n}" for n in lanes.notes), text_font_size="11px")
    fig = figure(
        x_range=xr,
        y_range=Range1d(start=-0.6, end=len(P.PhaseLanes.LANES) - 0.4),
        height=LANES_HEIGHT + 30,
        sizing_mode="stretch_width",
        title=title,
        tools="xpan,xbox_zoom,xwheel_zoom,reset,save",
        active_drag="xbox_zoom",
        x_axis_label="time since recording start (s)",
    )
    fig.min_border_left = 60
    fig.yaxis.ticker = FixedTicker(ticks=list(range(len(P.PhaseLanes.LANES))))
    fig.yaxis.major_label_overrides = {k: name for name, k in lane.items()}
    fig.yaxis.major_label_text_font_size = "9px"
    fig.ygrid.visible = False
    fig.vstrip(x0="x0", x1="x1", source=band_src, fill_color=BAND_COLOUR, fill_alpha=0.12, line_alpha=0)
    fig.vstrip(x0="x0", x1="x1", source=durable_src, fill_color=BAND_COLOUR, fill_alpha=0.05, line_alpha=0)
    r_phase = fig.quad(
        left="left", right="right", bottom="bottom", top="top", source=phase_src, fill_color="colour", line_alpha=0
    )
    r_step = fig.segment(x0="x", y0="y0", x1="x", y1="y1", source=step_src, line_color="#444444", line_width=1)
    fig.add_tools(
        HoverTool(
            renderers=[r_phase],
            tooltips=[
                ("phase", "#@n @name (@provenance)"),
                ("time", "@left{0.000} s → @right{0.000} s"),
                ("seconds", "@seconds"),
                ("bytes", "@bytes"),
                ("rate", "@gib_per_s"),
                ("basis", "@basis"),
                *([("GPU idle", "@gpu_idle")] if any(b.gpu_idle != "—" for b in bars) else []),
                *([("device → host", "@d2h")] if any(b.d2h != "—" for b in bars) else []),
            ],
            description="async save phases",
        )
    )
    tip = (
        [("steps ended", f"@count in @x{{0.0}} s ± {t.bin_s / 2:g} s")]
        if t.bin_s
        else [("training step", "ended at @x{0.000} s")]
    )
    fig.add_tools(HoverTool(renderers=[r_step], tooltips=tip, description="training steps"))
    return fig


def timeline_item(an, max_devices: int = 8, max_points: int = MAX_POINTS) -> dict | None:
    """The timeline as a Bokeh JSON item (bokeh.embed.json_item), or None without any series."""
    from bokeh.embed import json_item
    from bokeh.layouts import gridplot
    from bokeh.models import (
        ColumnDataSource,
        CustomJS,
        HoverTool,
        Legend,
        Range1d,
        TapTool,
    )
    from bokeh.plotting import figure

    panels = P.timeline_panels(an, max_devices)
    if not panels:
        return None
    tl = an.timeline
    end = max(tl.duration_s, 1e-3)
    xr = Range1d(0, end, bounds=(0, end), name=X_RANGE)
    band_src, durable_src = _bands_source(an.model.checkpoints, ColumnDataSource)
    marks = P.mark_lines(P.PlotData.of(an).marks, tl.duration_s)  # at most P.MAX_MARK_LINES, for every panel
    mark_src = ColumnDataSource({"x": _f32(marks.x_s), "text": marks.text, "count": marks.count})
    lanes = P.phase_lanes(an)  # async phases and training steps: a panel of their own, last
    figs = []
    for k, p in enumerate(panels):
        last = k == len(panels) - 1 and lanes is None
        fig = figure(
            x_range=xr,
            height=PANEL_HEIGHT + (30 if last else 0),
            sizing_mode="stretch_width",
            title=p.title,
            tools="xpan,xbox_zoom,xwheel_zoom,reset,save",
            active_drag="xbox_zoom",
            x_axis_label="time since recording start (s)" if last else None,
            y_axis_label=p.unit,
        )
        fig.title.text_font_size = "11px"
        if p.key == "gpu":  # a share of time: the whole scale, so 0 % looks like 0 %
            fig.y_range = Range1d(0, 100, bounds=(0, 100))
        fig.min_border_left = 60
        # checkpoint bands first, under the lines
        r_band = fig.vstrip(x0="x0", x1="x1", source=band_src, fill_color=BAND_COLOUR, fill_alpha=0.28, line_alpha=0)
        r_band.selection_glyph = r_band.glyph.clone(fill_alpha=0.45)
        r_band.nonselection_glyph = r_band.glyph.clone()
        r_tail = fig.vstrip(x0="x0", x1="x1", source=durable_src, fill_color=BAND_COLOUR, fill_alpha=0.11, line_alpha=0)
        r_mark = fig.vspan(x="x", source=mark_src, line_color="#555555", line_dash="dotted", line_width=1)
        items, lines = [], []
        reduced, ci = False, -1
        for tr in p.traces:
            x, lo, mean, hi, per = P.envelope(tr.x_s, tr.y, max_points)
            reduced |= per > 1
            src = ColumnDataSource(
                {
                    "x": _f32(x),
                    "y": _f32(mean),
                    "lo": _f32(lo),
                    "hi": _f32(hi),
                }
            )
            if tr.style != "read":  # a device's read line keeps its write line's colour
                ci += 1
            colour = "#000000" if tr.style == "total" else PALETTE[ci % len(PALETTE)]
            dash = "dashed" if tr.style == "read" or (tr.style == "total" and tr.label.endswith(" read")) else "solid"
            rs = []
            if per > 1:  # the bucket's min–max, under its mean
                rs.append(fig.varea(x="x", y1="lo", y2="hi", source=src, fill_color=colour, fill_alpha=0.15))
            line = fig.line(
                "x",
                "y",
                source=src,
                line_color=colour,
                line_dash=dash,
                line_width=1.6 if tr.style == "total" else 1.1,
                name=f"{tr.label} ({tr.provenance})",  # the hover's $name: once per trace, not per point
            )
            rs.append(line)
            lines.append(line)
            items.append((tr.label, rs))
        value = f"@y{{0.000}} {p.unit}"
        tips = [("series", "$name"), ("time", "$x{0.00} s"), (p.quantity, value)]
        if reduced:
            tips[2] = (p.quantity, f"{value} (mean of the samples here)")
            tips.append(("min – max", f"@lo{{0.000}} – @hi{{0.000}} {p.unit}"))
        fig.add_tools(HoverTool(renderers=lines, tooltips=tips, mode="vline", description="series values"))
        fig.add_tools(
            HoverTool(
                renderers=[r_band],
                tooltips=[
                    ("checkpoint", "#@n: @kind, step @step"),
                    ("path", "@path"),
                    ("save call", "@x0{0.00} s → @x1{0.00} s (@call_s{0.000} s)"),
                ],
                description="checkpoint windows",
            )
        )
        fig.add_tools(
            HoverTool(
                renderers=[r_tail],
                tooltips=[("checkpoint", "#@n: until durable"), ("", "@x0{0.00} s → @x1{0.00} s")],
                description="until durable",
            )
        )
        fig.add_tools(
            HoverTool(
                renderers=[r_mark],
                tooltips=[("mark", "@text"), ("time", "@x{0.00} s")],
                description="ckprof.mark() events",
            )
        )
        fig.add_tools(
            TapTool(renderers=[r_band], mode="replace", callback=CustomJS(args={"src": band_src}, code=TAP_JS))
        )
        legend = Legend(items=items, click_policy="hide", label_text_font_size="10px", spacing=0, padding=4)
        fig.add_layout(legend, "right")
        fig.yaxis.axis_label_text_font_size = "11px"
        figs.append(fig)
    if lanes is not None:  # under the last panel, on the same time axis
        figs.append(_lanes_figure(lanes, xr, band_src, durable_src))
    grid = gridplot([[f] for f in figs], merge_tools=True, toolbar_location="right", sizing_mode="stretch_width")
    return json_item(grid, DIV_ID)


def bokeh_js() -> str:
    """Bokeh's own JavaScript, inline (<script>…</script>): the one bundle the timeline uses. Not
    Bokeh's set_log_level snippet, which logs to the console: LINK_JS sets the level quietly."""
    from bokeh.resources import Resources

    raw = [js for js in Resources(mode="inline", components=["bokeh"]).js_raw if "set_log_level(" not in js[-200:]]
    js = re.sub(r"</(script)", r"<\\/\1", "\n".join(raw), flags=re.IGNORECASE)  # cannot end its element
    return f"<script>\n{js}\n</script>"


def timeline_html(an, max_devices: int = 8, max_points: int = MAX_POINTS) -> str | None:
    """The timeline's HTML fragment: its div, Bokeh's JavaScript, the data, the link script."""
    item = timeline_item(an, max_devices, max_points)
    if item is None:
        return None
    note = P.mark_lines(P.PlotData.of(an).marks, an.timeline.duration_s).note
    lanes = P.phase_lanes(an)
    steps = [] if lanes is None else lanes.notes
    return "\n".join(
        ([f"<p class='small' id='timeline-marks'>{E.html(note)} (hover a line: how many)</p>"] if note else [])
        + [f"<p class='small' id='timeline-steps'>{E.html(x)}</p>" for x in steps]
        + [
            f"<div id='{DIV_ID}' class='timeline'></div>",
            bokeh_js(),
            f"<script type='application/json' id='{DATA_ID}'>{_safe_json(item)}</script>",
            f"<script>{LINK_JS}</script>",
        ]
    )
