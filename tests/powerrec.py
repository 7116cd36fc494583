"""Build small recordings for the power tests through the real RecordingWriter."""
from __future__ import annotations

import pyarrow as pa

from ckprof.collectors.base import schema_units
from ckprof.recording.writer import RecordingWriter

WALL0_NS = 1_795_000_000_000_000_000  # 2026-11-18T…Z: the recording's wall-clock anchor
MONO0_NS = 5_000_000_000              # its monotonic start


def make_recording(path, series: dict, end_s: float = 10.0, provenance: dict | None = None) -> str:
    """`series`: {collector: (pyarrow schema, rows)}; rows carry t_ns (monotonic)."""
    w = RecordingWriter(str(path))
    w.create({"start": {"wall_ns": WALL0_NS, "monotonic_ns": MONO0_NS, "uncertainty_ns": 0}})
    meta = {}
    for name, (schema, rows) in series.items():
        w.add_collector(name, schema)
        w.append(name, rows)
        meta[name] = {"columns": schema_units(schema)}
    w.finish(end={"wall_ns": WALL0_NS + int(end_s * 1e9), "monotonic_ns": MONO0_NS + int(end_s * 1e9)},
             collectors=meta)
    return str(path)


def t(seconds: float) -> int:
    """Seconds after the recording's start → monotonic ns."""
    return MONO0_NS + round(seconds * 1e9)


POWER_SCHEMA = pa.schema([pa.field("t_ns", pa.int64()),
                          pa.field("power_w", pa.float64(), metadata={"unit": "W", "kind": "gauge",
                                                                        "provenance": "measured"})])
