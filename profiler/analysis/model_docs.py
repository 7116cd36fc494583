"""The report model's documentation, made from the model (analysis/model.py) so it cannot drift:
the "Every figure" table of docs/report-format.md and the JSON Schema docs/report-schema.json.

    python -m ckprof.analysis.model_docs --write     # rewrite both in the repository
    python -m ckprof.analysis.model_docs             # print the table
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .fields import FIELDS
from .model import Report
from .model_base import json_schema

BEGIN = "<!-- every-figure: begin (made by python -m ckprof.analysis.model_docs --write; do not edit) -->"
END = "<!-- every-figure: end -->"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def table_of(fields: dict[str, dict[str, str]]) -> str:
    """Markdown: one row per figure of a field table (model_base.field_table), its path, unit and provenance."""
    rows = ["| field | unit | provenance |", "|---|---|---|"]
    rows += [f"| `{p}` | {f['unit'].replace('|', '/')} | {f['provenance']} |" for p, f in fields.items()]
    return "\n".join(rows) + "\n"


def fields_table() -> str:
    """The report's table (docs/report-format.md, "Every figure")."""
    return table_of(FIELDS)


def report_schema() -> dict:
    """The JSON Schema of `ckprof report --format json` (its `scale` is {} where not computed)."""
    s = json_schema(Report)
    s["title"] = "ckprof-report"
    scale = s["properties"]["scale"]
    s["properties"]["scale"] = {**scale, "anyOf": [*scale["anyOf"], {"type": "object", "maxProperties": 0}]}
    return s


def replace_section(doc: str, begin: str, end: str, table: str) -> str:
    """`doc` with what stands between the markers `begin` and `end` replaced by `table`."""
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}{end}{tail}"


def with_table(doc: str) -> str:
    """docs/report-format.md with its generated section replaced by the current table."""
    return replace_section(doc, BEGIN, END, fields_table())


def write(docs: Path = DOCS) -> list[Path]:
    md = docs / "report-format.md"
    md.write_text(with_table(md.read_text()))
    schema = docs / "report-schema.json"
    schema.write_text(json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n")
    return [md, schema]


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        for p in write():
            print(f"wrote {p}")
    else:
        sys.stdout.write(fields_table())
