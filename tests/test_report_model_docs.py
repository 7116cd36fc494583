"""The report's documentation is made from its model (analysis/model.py), and is current: the
"Every figure" table in docs/report-format.md, the JSON Schema docs/report-schema.json, and the
`fields` every report carries. The golden reports validate against the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckprof.analysis import model_docs
from ckprof.analysis.fields import FIELDS
from ckprof.analysis.model import Checkpoint, Report

DOCS = Path(__file__).resolve().parent.parent / "docs"
GOLDEN = Path(__file__).resolve().parent / "data" / "report_golden"
REGEN = "python -m ckprof.analysis.model_docs --write"


def test_the_docs_table_is_the_models():
    doc = (DOCS / "report-format.md").read_text()
    assert model_docs.BEGIN in doc and model_docs.END in doc
    assert model_docs.with_table(doc) == doc, f"docs/report-format.md's figure table is stale: {REGEN}"
    for path, f in FIELDS.items():
        assert f"| `{path}` | {f['unit'].replace('|', '/')} | {f['provenance']} |" in doc


def test_the_schema_file_is_the_models():
    on_disk = json.loads((DOCS / "report-schema.json").read_text())
    assert on_disk == model_docs.report_schema(), f"docs/report-schema.json is stale: {REGEN}"


def test_every_figure_has_unit_and_provenance_in_fields():
    assert FIELDS["checkpoints[].bytes_device"]["provenance"] == "derived"
    assert FIELDS["checkpoints[].devices.*.peak_in_flight"] == {"unit": "requests", "provenance": "measured"}
    assert FIELDS["checkpoints[].energy.*.energy_j"] == {"unit": "J", "provenance": "per entry"}
    assert all(f["unit"] and f["provenance"] for f in FIELDS.values())
    assert "checkpoints[].id" not in FIELDS  # no figure: no unit


@pytest.mark.parametrize("golden", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_golden_reports_validate_and_a_wrong_one_does_not(golden):
    jsonschema = pytest.importorskip("jsonschema")
    v = jsonschema.Draft202012Validator(model_docs.report_schema())
    rep = json.loads(golden.read_text())
    assert not list(v.iter_errors(rep))
    assert Report.from_jsonable(rep).to_jsonable() == rep  # the model reads its JSON back whole
    if rep["checkpoints"]:
        bad = json.loads(golden.read_text())
        bad["checkpoints"][0]["bytes_app"] = "12 MiB"
        bad["checkpoints"][0]["surprise"] = 1
        msgs = [e.message for e in v.iter_errors(bad)]
        assert any("12 MiB" in m for m in msgs) and any("surprise" in m for m in msgs)
        with pytest.raises(KeyError, match="surprise"):
            Checkpoint.from_jsonable(bad["checkpoints"][0])
