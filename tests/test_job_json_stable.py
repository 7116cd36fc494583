"""The job report's JSON, kept: a few built job recordings' `analyze_job` report compared with what
the code gave when the files under tests/data/job_golden/ were made (their README says when).

This is what proves a refactor of the job report (analysis/jobs.py, its model, its renderers)
kept the JSON: same keys, same values. The Markdown of the job's own sections (before the first
host's) is kept too, so the renderer's output is held as well.

Run-dependent values dropped before comparing: the job's directory (a temporary path, written as
"<job>" wherever it appears in a string) and `ckprof_version`. Floats compare to 1e-9 relative
(a numpy or platform change in the last bits is not a change of the report). The `fields` table
may gain entries (a figure's unit and provenance newly stated); the entries it had must stay.

To rewrite the files after a change meant to alter the report (say why in the commit):
    CKPROF_REGEN_JOB_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_job_json_stable.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

import ckprof
from ckprof.analysis.jobs import analyze_job
from ckprof.report import job_render
from ckprof.testing import job_dir, job_host, on

GOLDEN = Path(__file__).resolve().parent / "data" / "job_golden"
REGEN = os.environ.get("CKPROF_REGEN_JOB_GOLDEN") == "1"
MiB = 2**20


def two_nodes(path):
    """Node a: step 1 from 3 to 5 s on one device; node b 0.5 s later on the wall clock, two ranks,
    three devices (nvme1n1 the slowest carrying one, sda a trickle under 10 % of the bytes), a load
    of step 1 after, on b only; b's clock not known to be synchronised (a job problem)."""
    a = job_host(0.0, [(1, 0, 3, 5, 200 * MiB)], {"nvme0n1": on(3, 5, 100 * MiB)})
    b = job_host(
        0.5,
        [(1, 2, 3, 5.5, 150 * MiB), (1, 3, 3, 6, 150 * MiB)],
        {"nvme0n1": on(3, 6, 100 * MiB), "nvme1n1": on(3, 6, 50 * MiB), "sda": lambda t: 0 * t + 1 * MiB},
        synchronised=False,
    )
    b.checkpoint(7, 8, 100 * MiB, kind="load", step=1, rank=2)
    return job_dir(path, {"a": a, "b": b})


def overlapping_saves(path):
    """Host a: step 1 from 2 to 5 s, step 2 (async) from 4 to 6 s; host b: step 1 only, and a
    step 2 never ended (still saving at the end); host c: no device samples, no GPU."""
    a = job_host(0.0, [(1, 0, 2, 5, 100 * MiB), (2, 0, 4, 6, 100 * MiB)], {"nvme0n1": on(2, 6, 100 * MiB)})
    b = job_host(0.0, [(1, 1, 3, 4, 100 * MiB), (2, 1, 8, None, 50 * MiB)], {"nvme0n1": on(3, 4, 100 * MiB)})
    c = job_host(0.1, [(1, 2, 3, 4.5, 10 * MiB)], {}, gpu_w=0)
    return job_dir(path, {"a": a, "b": b, "c": c})


def device_gone(path):
    """sda on host b goes away at 2 s, before its part of step 1: its device figures unknown."""

    def one(shift_s, gone_at_s):
        rb = job_host(shift_s, [(1, 0, 3, 5, 100 * MiB)], {})
        until = gone_at_s if gone_at_s is not None else 99.0
        rb.block("sda", lambda t: ((t > 3) & (t <= 5) & (t <= until)) * 50.0 * MiB)
        if gone_at_s is not None:
            rb.event("device_remove", gone_at_s, device="sda", disk=None, subsystem="block", uevent={})
        return rb

    return job_dir(path, {"a": one(0.0, None), "b": one(0.2, 2.0)})


def hosts_left_out_and_idle(path):
    """Unnumbered (inferred-style) windows matched by order; a host that died before its meta.json;
    a host recorded but never checkpointing."""
    x = job_host(0.0, [(None, 0, 2, 3, 50 * MiB), (None, 0, 6, 7, 50 * MiB)], {"vda": on(2, 7, 60 * MiB)})
    y = job_host(0.3, [(None, 1, 2, 3.5, 50 * MiB), (None, 1, 6, 6.5, 50 * MiB)], {"vda": on(2, 7, 60 * MiB)})
    idle = job_host(0.2, [], {"vda": lambda t: 0 * t})
    job = job_dir(path, {"x": x, "y": y, "idle": idle})
    (job / "host=dead" / "samples").mkdir(parents=True)
    return job


JOBS = {f.__name__: f for f in (two_nodes, overlapping_saves, device_gone, hosts_left_out_and_idle)}


def _normalise(o, job: str):
    if isinstance(o, dict):
        return {k: _normalise(v, job) for k, v in o.items() if k != "ckprof_version"}
    if isinstance(o, list):
        return [_normalise(v, job) for v in o]
    if isinstance(o, str):
        return o.replace(job, "<job>")
    return o


def _same(got, want, where="$"):
    """The first difference between two JSON values, as 'path: got vs want', or None."""
    if isinstance(want, float) or isinstance(got, float):
        if isinstance(got, (int, float)) and isinstance(want, (int, float)) and not isinstance(got, bool):
            if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
                return None
        return f"{where}: {got!r} vs {want!r}"
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):  # key order is no part of JSON (RFC 8259 section 4: unordered)
            return f"{where}: keys {sorted(set(got) ^ set(want))} gained or lost"
        return next((d for k in want if (d := _same(got[k], want[k], f"{where}.{k}"))), None)
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return f"{where}: {len(got)} items vs {len(want)}"
        return next((d for i, (g, w) in enumerate(zip(got, want)) if (d := _same(g, w, f"{where}[{i}]"))), None)
    return None if got == want and type(got) is type(want) else f"{where}: {got!r} vs {want!r}"


def _job_sections(md: str) -> str:
    """The job's own Markdown sections: up to the first host's report."""
    return md.split("\n## Host ", 1)[0]


@pytest.mark.parametrize("name", sorted(JOBS))
def test_job_report_json_is_unchanged(tmp_path, name):
    path = JOBS[name](tmp_path / "job")
    report = analyze_job(ckprof.load(str(path)), keep_analyses=0, engine="serial").report
    got = _normalise(json.loads(job_render.to_json(report)), str(path))
    md = _job_sections(job_render.to_markdown(report)).replace(str(path), "<job>")
    json_file, md_file = GOLDEN / f"{name}.json", GOLDEN / f"{name}.md"
    if REGEN:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        json_file.write_text(json.dumps(got, indent=1, sort_keys=False) + "\n")
        md_file.write_text(md)
    want = json.loads(json_file.read_text())
    # `fields` (unit and provenance of each figure) may gain entries (now made from the model:
    # analysis/job_model.py); every entry it had stays as it was
    got_fields, want_fields = got.pop("fields"), want.pop("fields")
    changed = {k: (got_fields.get(k), v) for k, v in want_fields.items() if got_fields.get(k) != v}
    assert not changed, f"{name}: fields entries changed or gone: {changed}"
    diff = _same(got, want)
    assert diff is None, f"{name}: the job report's JSON changed at {diff} (regenerate: see this file's docstring)"
    assert md == md_file.read_text(), f"{name}: the job sections' Markdown changed"
