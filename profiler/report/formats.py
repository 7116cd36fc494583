"""The one format dispatch of `ckprof report`: a renderer per report kind and format, looked up by
name. Every renderer has one shape, `(analysed, RenderOptions) -> str`: it is given what the
analysis returned (an Analysis for one recording, a JobAnalysis for a job directory) and makes
everything it draws from it (plots included), so the command only analyses, renders and writes.

    text = formats.render(an, "html", RenderOptions(static=True))
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from ckprof.analysis.jobs import JobAnalysis
from ckprof.analysis.model_base import to_json

from . import job_render

FORMATS = ("html", "md", "json")


@dataclass(frozen=True)
class RenderOptions:
    static: bool = False  # HTML without JavaScript: the timeline as a picture only


Renderer = Callable[[object, RenderOptions], str]


def _host_html(an, opts: RenderOptions) -> str:
    from . import interactive, plots, render

    timeline = None if opts.static else interactive.timeline_html(an)
    return render.to_html(an.report, plots.all_plots(an), timeline)


def _host_markdown(an, opts: RenderOptions) -> str:
    from . import render

    return render.to_markdown(an.report)


HOST_RENDERERS: dict[str, Renderer] = {
    "json": lambda an, opts: to_json(an.report),
    "md": _host_markdown,
    "html": _host_html,
}

RENDERERS: dict[str, dict[str, Renderer]] = {"host": HOST_RENDERERS, "job": job_render.RENDERERS}


def kind_of(analysed) -> str:
    return "job" if isinstance(analysed, JobAnalysis) else "host"


def render(analysed, fmt: str, opts: RenderOptions = RenderOptions()) -> str:
    """The report in `fmt` (one of FORMATS), whatever was analysed."""
    return RENDERERS[kind_of(analysed)][fmt](analysed, opts)


def default_output(path: str, fmt: str) -> str | None:
    """Where a report goes without -o: HTML beside the command as NAME.report.html, the rest to stdout."""
    return f"{os.path.basename(os.path.abspath(path))}.report.html" if fmt == "html" else None
