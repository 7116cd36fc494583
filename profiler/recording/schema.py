"""The schema vocabulary both sides of a recording share: a column declared once as a pyarrow field
whose metadata carry its unit, kind and provenance (docs/recording-format.md, meta.json and samples/).

A collector declares its columns with `col`; the recorder writes `schema_units` into meta.json and
every Parquet part; a reader (ours, DuckDB, pandas) knows what every number is from them alone. It
lives in recording/, below the collectors and the reader both (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import pyarrow as pa


def col(
    name: str, type_: pa.DataType, unit: str, kind: str = "gauge", provenance: str = "measured", doc: str = ""
) -> pa.Field:
    """One column: `kind` is 'counter' (cumulative, rates derived on read), 'gauge', 'label' (names an
    entity: device, gpu, zone) or 'time' (a timestamp other than t_ns, e.g. an imported trace's own)."""
    return pa.field(
        name, type_, nullable=True, metadata={"unit": unit, "kind": kind, "provenance": provenance, "doc": doc}
    )


T_NS = col("t_ns", pa.int64(), "ns", "label", doc="CLOCK_MONOTONIC of the reading")

# A sector in /proc/diskstats and /sys/block/<dev>/stat (the block columns' *_sectors) is 512 bytes,
# whatever the device's own block size (Documentation/admin-guide/iostats.rst).
SECTOR_BYTES = 512


def label_columns(schema: pa.Schema) -> list[str]:
    """The columns that say which entity a row is about (device, gpu, zone), t_ns aside."""
    return [f.name for f in schema if f.name != "t_ns" and f.metadata and f.metadata.get(b"kind") == b"label"]


def schema_units(schema: pa.Schema) -> dict[str, dict[str, str]]:
    """{column: {unit, kind, provenance, doc}} for meta.json and docs."""
    out: dict[str, dict[str, str]] = {}
    for f in schema:
        md = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
        out[f.name] = md
    return out
