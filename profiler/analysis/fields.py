"""Unit and provenance of every figure in the report (copied into each JSON report as `fields`),
made from the report model (analysis/model.py): each figure field's metadata says them.

measured: read from a counter or sensor; derived: computed from measured values by a stated
rule; estimated: from a model. Energy entries carry their own provenance (the worst of their
sources': an estimated NVMe power makes the SSD's joules estimated): "per entry".

The same table is in docs/report-format.md ("Every figure"), written by
`python -m ckprof.analysis.model_docs --write`; tests/test_report_model_docs.py checks it is current.
"""

from __future__ import annotations

from .model import Report
from .model_base import field_table

FIELDS: dict[str, dict[str, str]] = field_table(Report)


def unit_of(path: str) -> str:
    return FIELDS.get(path, {}).get("unit", "")


def provenance_of(path: str) -> str:
    return FIELDS.get(path, {}).get("provenance", "")
