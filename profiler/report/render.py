"""Renderers of one analysed recording: Markdown and self-contained HTML (its JSON: ckprof.jsonsafe.to_json).

HTML: every string taken from a recording (command lines, paths, device names, notes) goes
through ckprof.escape.html (controls and bidi characters made visible, then html.escape); figures are inline base64 PNGs,
and the interactive timeline (report/interactive.py) carries Bokeh's JavaScript inline, so the file needs nothing else.
"""

from __future__ import annotations

import base64

from ckprof import escape as E
from ckprof.analysis.model import Report
from ckprof.analysis.provenance import lines as provenance_lines

from . import tables as T

MAX_DEVICE_ROWS = 400  # per-device rows in HTML/Markdown; JSON and `ckprof export` have them all
MAX_RANK_PHASE_ROWS = 64  # per-rank phase rows (a save of thousands of ranks); the JSON has them all


def _cut(rows: list, most: int, all_of_them: str) -> tuple[list, str | None]:
    """At most `most` rows, and a line saying so (and where the rest are) when some were cut."""
    if len(rows) <= most:
        return rows, None
    return rows[:most], f"first {most} of {len(rows)} rows; all of them: {all_of_them}"


def _device_rows(rep: Report) -> tuple[list, str | None]:
    return _cut(T.device_rows(rep), MAX_DEVICE_ROWS, "ckprof report --format json, or ckprof export --format csv")


def _rank_phase_rows(rep: Report) -> tuple[list, str | None]:
    return _cut(
        T.rank_phase_rows(rep), MAX_RANK_PHASE_ROWS, "ckprof report --format json (checkpoints[].parts[].phases)"
    )


def md_cell(s) -> str:
    return E.md(s)


def md_table(headers, rows) -> list[str]:
    out = ["| " + " | ".join(md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    return out


def to_markdown(rep: Report | dict) -> str:
    """rep: the report model, or its JSON form (a host's report read back from a job's JSON)."""
    rep = Report.from_jsonable(rep)
    L = [
        f"# ckprof report: {md_cell(rep.recording.path)}",
        "",
        "Units are in each header; [m] measured, [d] derived, [e] estimated.",
        "",
        "## Summary",
        "",
    ]
    L += md_table(["what", "value", "provenance"], T.summary_rows(rep))
    L += ["", "## Checkpoints", ""]
    if rep.checkpoints:
        L += md_table(T.CHECKPOINT_HEADERS, T.checkpoint_rows(rep))
        pr = T.part_rows(rep)
        if pr:
            L += ["", "### Parts of each checkpoint (ranks, files)", ""] + md_table(T.PART_HEADERS, pr)
        rr = T.restore_rows(rep)
        if rr:
            L += ["", "### Restores: storage or page cache?", ""] + md_table(T.RESTORE_HEADERS, rr)
        sr = T.ssd_rows(rep)
        if sr:
            L += ["", "### SSD efficiency (per checkpoint and SSD)", ""] + md_table(T.SSD_HEADERS, sr)
        ar, line = T.async_rows(rep), T.async_line(rep)
        if ar:
            L += ["", "### Async phases (saves with a background write)", ""] + md_table(T.ASYNC_HEADERS, ar)
            L += ["", "#### Each phase", ""] + md_table(*T.phase_table(rep))
            rp, cut = _rank_phase_rows(rep)
            if rp:
                L += ["", "#### Each rank's phases", ""] + md_table(T.RANK_PHASE_HEADERS, rp)
                L += ["", f"({cut})"] if cut else []
        if line:
            L += ["", f"- {md_cell(line)}"]
        rr = T.remote_rows(rep)
        if rr:
            L += ["", "### Remote targets (NFS, S3, FUSE, network interfaces)", ""] + md_table(T.REMOTE_HEADERS, rr)
        dr, cut = _device_rows(rep)
        if dr:
            L += ["", "### Per device", ""] + md_table(T.DEVICE_HEADERS, dr) + (["", f"({cut})"] if cut else [])
    else:
        L.append("No checkpoint windows: no markers, and no write bursts above the baseline.")
    if rep.advice:
        L += ["", "## What would help (each from a measured figure)", ""]
        L += [f"- {md_cell(a.text)}" for a in rep.advice]
    ar = T.audit_rows(rep)
    if ar and rep.audit is not None:
        L += ["", f"## Rules: {md_cell(rep.audit.rules)} (pass, fail or unknown, from what was recorded)", ""]
        L += md_table(T.AUDIT_HEADERS, ar)
        fr = T.audit_file_rows(rep)
        if fr:
            L += ["", "### fsync: each checkpoint file", ""] + md_table(T.AUDIT_FILE_HEADERS, fr)
    L += ["", "## Throttling", ""] + [f"- {md_cell(x)}" for x in T.throttle_lines(rep)]
    L += ["", "## Notes: what could not be measured, and why", ""]
    L += [f"- {md_cell(n.text)}" for n in rep.notes] or ["- none"]
    L += ["", "## Provenance: what it was made with", ""]
    L += [f"- {md_cell(x)}" for x in provenance_lines(rep.recording.provenance)]
    return "\n".join(L) + "\n"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px;word-break:break-all} h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0} td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#f3f3f3;text-align:left} td.bad{color:#b00020;font-weight:600} .small{color:#666;font-size:12px}
.scroll{overflow-x:auto} img{max-width:100%;border:1px solid #eee;margin:6px 0}
.timeline{width:100%;min-height:200px} tr:target td{background:#ffe9b3} details summary{cursor:pointer;color:#444;font-size:13px}
"""


def html_text(s) -> str:
    return E.html(s)


def html_table(headers, rows, bad_col=None, linked: bool = False) -> str:
    """linked: the checkpoint table beside an interactive timeline — row N is `tr id='ckpt-N'` and
    its first cell a link that zooms the timeline to checkpoint N (interactive.LINK_JS)."""
    out = ["<div class='scroll'><table><tr>" + "".join(f"<th>{html_text(h)}</th>" for h in headers) + "</tr>"]
    for n, r in enumerate(rows, 1):
        cells = []
        for i, c in enumerate(r):
            cls = (
                " class='bad'"
                if (bad_col is not None and i == bad_col and str(c).startswith(("NO", "FAILED", "did not")))
                else ""
            )
            text = html_text(c)
            if linked and i == 0:
                text = f"<a class='ckpt-link' href='#timeline' data-ckpt='{n}' title='show on the timeline'>{text}</a>"
            cells.append(f"<td{cls}>{text}</td>")
        out.append((f"<tr id='ckpt-{n}'>" if linked else "<tr>") + "".join(cells) + "</tr>")
    out.append("</table></div>")
    return "\n".join(out)


def img_tag(name: str, png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f"<img id='plot-{html_text(name)}' alt='{html_text(alt)}' src='data:image/png;base64,{data}'>"


def html_head(title: str, rep: Report | dict) -> list[str]:
    """rep: the host report, or a job report's versions as a dict (report/job_render.py)."""
    versions = rep if isinstance(rep, Report) else Report(**rep)
    return [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>ckprof report: {html_text(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>ckprof report: {html_text(title)}</h1>",
        f"<p class='small'>ckprof {html_text(versions.ckprof_version)}, report schema {html_text(versions.schema_version)}. "
        "Units are in each header; [m] measured, [d] derived, [e] estimated.</p>",
    ]


def to_html(rep: Report | dict, plots: dict[str, bytes], timeline: str | None = None) -> str:
    """timeline: the interactive timeline's fragment (interactive.timeline_html), or None: the PNG only."""
    rep = Report.from_jsonable(rep)
    parts = html_head(rep.recording.path, rep) + html_body(rep, plots, timeline)
    parts.append("</body></html>\n")
    return "\n".join(parts)


TIMELINE_HELP = (
    "Drag across a panel to zoom in on that time, use the toolbar's wheel zoom or pan, and reset to see "
    "it all; hover a line for its value (unit, and measured/derived/estimated), a band for its checkpoint. "
    "Click a legend entry to hide that series, a band to go to its row in the checkpoint table, and a "
    "row's # to zoom here to it. Bands: dark while the save ran, light until its data was durable; "
    "dotted lines: ckprof.mark() events. Long series are shown as each stretch's mean, shaded from its "
    "min to its max."
)


def html_body(rep: Report | dict, plots: dict[str, bytes], timeline: str | None = None) -> list[str]:
    """One recording's sections, Summary to Notes (a job's report puts one per host: its JSON form)."""
    rep = Report.from_jsonable(rep)
    parts = ["<h2>Summary</h2>", html_table(["what", "value", "provenance"], T.summary_rows(rep))]
    alt = "timeline of bandwidth, queue depth, temperature, power and GPU idle with checkpoint windows shaded"
    if timeline is not None:
        parts += ["<h2 id='timeline'>Timeline</h2>", f"<p class='small'>{html_text(TIMELINE_HELP)}</p>", timeline]
        if "timeline" in plots:
            parts.append(
                "<details><summary>the same timeline as a picture (for print, or without JavaScript)</summary>"
                + img_tag("timeline", plots["timeline"], alt)
                + "</details>"
            )
    elif "timeline" in plots:
        parts += ["<h2 id='timeline'>Timeline</h2>", img_tag("timeline", plots["timeline"], alt)]
    parts.append("<h2>Checkpoints</h2>")
    if rep.checkpoints:
        parts.append(html_table(T.CHECKPOINT_HEADERS, T.checkpoint_rows(rep), bad_col=8, linked=timeline is not None))
        pr = T.part_rows(rep)
        if pr:
            parts += ["<h3>Parts of each checkpoint (ranks, files)</h3>", html_table(T.PART_HEADERS, pr, bad_col=9)]
        rr = T.restore_rows(rep)
        if rr:
            parts += ["<h3>Restores: storage or page cache?</h3>", html_table(T.RESTORE_HEADERS, rr, bad_col=8)]
        sr = T.ssd_rows(rep)
        if sr:
            parts += ["<h3>SSD efficiency (per checkpoint and SSD)</h3>", html_table(T.SSD_HEADERS, sr)]
        ar, line = T.async_rows(rep), T.async_line(rep)
        if ar:
            parts += ["<h3>Async phases (saves with a background write)</h3>", html_table(T.ASYNC_HEADERS, ar)]
            parts += [
                "<details id='async-phase-rows'><summary>each phase: start, end, bytes, rate, measured or derived"
                "</summary>" + html_table(*T.phase_table(rep)) + "</details>"
            ]
            rp, cut = _rank_phase_rows(rep)
            if rp:
                parts += [
                    "<details id='rank-phase-rows'><summary>each rank's phases: blocked, staging, persist, bytes, "
                    "rate, measured or derived</summary>"
                    + html_table(T.RANK_PHASE_HEADERS, rp)
                    + (f"<p class='small'>{html_text(cut)}</p>" if cut else "")
                    + "</details>"
                ]
        if line:
            parts.append(f"<p id='async-effect'>{html_text(line)}</p>")
        rr = T.remote_rows(rep)
        if rr:
            parts += ["<h3>Remote targets (NFS, S3, FUSE, network interfaces)</h3>", html_table(T.REMOTE_HEADERS, rr)]
        if "checkpoints" in plots:
            parts.append(img_tag("checkpoints", plots["checkpoints"], "duration and energy per checkpoint"))
        dr, cut = _device_rows(rep)
        if dr:
            parts += ["<h3>Per device</h3>", html_table(T.DEVICE_HEADERS, dr)]
            if cut:
                parts.append(f"<p class='small'>{html_text(cut)}</p>")
    else:
        parts.append("<p>No checkpoint windows: no markers, and no write bursts above the baseline.</p>")
    if rep.advice:
        parts.append(
            "<h2>What would help (each from a measured figure)</h2><ul id='advice'>"
            + "".join(f"<li>{html_text(a.text)}</li>" for a in rep.advice)
            + "</ul>"
        )
    ar = T.audit_rows(rep)
    if ar and rep.audit is not None:
        parts += [
            f"<h2 id='rules'>Rules: {html_text(rep.audit.rules)} (pass, fail or unknown, from what was recorded)</h2>",
            html_table(T.AUDIT_HEADERS, ar, bad_col=1),
        ]
        fr = T.audit_file_rows(rep)
        if fr:
            parts.append(
                "<details id='rules-fsync-files'><summary>fsync: each checkpoint file at its save's end</summary>"
                + html_table(T.AUDIT_FILE_HEADERS, fr)
                + "</details>"
            )
    parts.append(
        "<h2>Throttling</h2><ul>" + "".join(f"<li>{html_text(x)}</li>" for x in T.throttle_lines(rep)) + "</ul>"
    )
    if "temp_vs_bandwidth" in plots:
        parts.append(img_tag("temp_vs_bandwidth", plots["temp_vs_bandwidth"], "temperature vs write bandwidth"))
    parts.append(
        "<h2>Notes: what could not be measured, and why</h2><ul>"
        + ("".join(f"<li>{html_text(n.text)}</li>" for n in rep.notes) or "<li>none</li>")
        + "</ul>"
    )
    parts.append(
        "<h2 id='provenance'>Provenance: what it was made with</h2><ul>"
        + "".join(f"<li>{html_text(x)}</li>" for x in provenance_lines(rep.recording.provenance))
        + "</ul>"
    )
    return parts
