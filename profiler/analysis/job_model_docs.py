"""The job report's documentation, made from its model (analysis/job_model.py) so it cannot drift:
the "Every job figure" table of docs/report-format.md and the JSON Schema docs/job-report-schema.json
(a host's report inside it: the host report's schema, analysis/model_docs.py, less its `fields`).

    python -m ckprof.analysis.job_model_docs --write     # rewrite both in the repository
    python -m ckprof.analysis.job_model_docs             # print the table
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

from . import model_docs
from .job_model import JobReport, job_fields
from .model_base import json_schema

BEGIN = "<!-- every-job-figure: begin (made by python -m ckprof.analysis.job_model_docs --write; do not edit) -->"
END = "<!-- every-job-figure: end -->"
DOCS = model_docs.DOCS
SCHEMA_FILE = "job-report-schema.json"


def fields_table() -> str:
    """Markdown: one row per figure of the job's part of the report, its path, unit and provenance."""
    return model_docs.table_of(job_fields())


def job_report_schema() -> dict:
    """The JSON Schema of `ckprof report JOBDIR --format json`."""
    s = json_schema(JobReport)
    s["title"] = "ckprof-report (a job)"
    host = copy.deepcopy(model_docs.report_schema())
    for key in ("$schema", "title"):
        host.pop(key, None)
    host["properties"].pop("fields", None)
    host["required"] = [k for k in host["required"] if k != "fields"]
    s["properties"]["hosts"] = {**s["properties"]["hosts"], "additionalProperties": host}
    return s


def with_table(doc: str) -> str:
    """docs/report-format.md with its generated job section replaced by the current table."""
    return model_docs.replace_section(doc, BEGIN, END, fields_table())


def write(docs: Path = DOCS) -> list[Path]:
    md = docs / "report-format.md"
    md.write_text(with_table(md.read_text()))
    schema = docs / SCHEMA_FILE
    schema.write_text(json.dumps(job_report_schema(), indent=2, ensure_ascii=False) + "\n")
    return [md, schema]


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        for p in write():
            print(f"wrote {p}")
    else:
        sys.stdout.write(fields_table())
