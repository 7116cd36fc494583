"""The NaN rule and the report's JSON, below every layer (docs/architecture.md, "Layers").

A figure that is NaN or infinite is not a figure: it is null in every report, summary and export.
JSON has no NaN or Infinity (RFC 8259 section 6), and a reader must never see one as a number.
"""

from __future__ import annotations

import json
import math


def json_float(x) -> float | None:
    """A figure as a JSON-safe float: None, NaN and ±inf → None."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def json_value(v):
    """Any value from a table cell: None and NaN/inf floats → None, everything else as it is."""
    return None if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))) else v


def plain(o):
    """A report (dicts, lists, numpy scalars) with NaN/inf → None and keys as strings, for json.dumps."""
    if isinstance(o, float):
        return None if (math.isnan(o) or math.isinf(o)) else o
    if isinstance(o, dict):
        return {str(k): plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [plain(v) for v in o]
    if hasattr(o, "item"):  # numpy scalars
        return plain(o.item())
    return o


def to_json(rep: dict) -> str:
    """The report as standard JSON text (the stable schema, docs/report-format.md)."""
    return json.dumps(plain(rep), indent=2, default=str) + "\n"
