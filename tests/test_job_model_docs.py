"""The job report's documentation is made from its model (analysis/job_model_docs.py): the "Every
job figure" table in docs/report-format.md and docs/job-report-schema.json are current, a job's
report validates against that schema, and every number the model holds says its unit."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest

from ckprof.analysis import job_model, job_model_docs

DOCS = Path(__file__).resolve().parents[1] / "docs"
GOLDEN = Path(__file__).resolve().parent / "data" / "job_golden"
REGEN = "python -m ckprof.analysis.job_model_docs --write"


def test_the_docs_are_the_models():
    doc = (DOCS / "report-format.md").read_text()
    assert job_model_docs.with_table(doc) == doc, f"docs/report-format.md's job figure table is stale: {REGEN}"
    on_disk = json.loads((DOCS / job_model_docs.SCHEMA_FILE).read_text())
    assert on_disk == job_model_docs.job_report_schema(), f"docs/{job_model_docs.SCHEMA_FILE} is stale: {REGEN}"


def test_every_number_in_the_job_model_has_a_unit():
    """A float field (a figure) without unit and provenance is a figure nobody can read."""
    missing = []
    for cls in vars(job_model).values():
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == job_model.__name__):
            continue
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if "float" in str(hints[f.name]) and "unit" not in f.metadata:
                missing.append(f"{cls.__name__}.{f.name}")
    assert not missing, missing


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.json")))
def test_a_jobs_report_validates_against_the_schema(name):
    jsonschema = pytest.importorskip("jsonschema")
    rep = json.loads((GOLDEN / f"{name}.json").read_text())
    rep["ckprof_version"] = "test"  # the golden files leave it out (run-dependent)
    for host in rep["hosts"].values():
        host["ckprof_version"] = "test"
    v = jsonschema.Draft202012Validator(job_model_docs.job_report_schema())
    errors = [f"{list(e.path)}: {e.message[:200]}" for e in v.iter_errors(rep)]
    assert not errors, errors[:5]
