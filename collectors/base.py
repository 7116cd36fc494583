"""The collector shape (design.md): probe(), sample(t_ns), close(), its own period.

A collector knows nothing about checkpoints or recordings. It declares its columns once, as a
pyarrow schema whose field metadata carry the unit, whether the value is a cumulative counter or
a gauge, and its provenance (measured | estimated | derived), so every figure downstream can say
what it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Probe:
    """Whether a collector can run here; if not, why (`detail`) and how to fix it (`hint`)."""

    ok: bool
    detail: str
    hint: str | None = None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "detail": self.detail, "hint": self.hint}


def col(
    name: str, type_: pa.DataType, unit: str, kind: str = "gauge", provenance: str = "measured", doc: str = ""
) -> pa.Field:
    """One column: `kind` is 'counter' (cumulative, rates derived on read), 'gauge', 'label' (names an
    entity: device, gpu, zone) or 'time' (a timestamp other than t_ns, e.g. an imported trace's own)."""
    return pa.field(
        name, type_, nullable=True, metadata={"unit": unit, "kind": kind, "provenance": provenance, "doc": doc}
    )


T_NS = col("t_ns", pa.int64(), "ns", "label", doc="CLOCK_MONOTONIC of the reading")


def read_text(path: str) -> str | None:
    """A small sysfs/procfs file's text, stripped; None when it cannot be read (gone, no access)."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def label_columns(schema: pa.Schema) -> list[str]:
    """The columns that say which entity a row is about (device, gpu, zone), t_ns aside."""
    return [f.name for f in schema if f.name != "t_ns" and f.metadata and f.metadata.get(b"kind") == b"label"]


def schema_units(schema: pa.Schema) -> dict:
    """{column: {unit, kind, provenance, doc}} for meta.json and docs."""
    out = {}
    for f in schema:
        md = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
        out[f.name] = md
    return out


class Collector:
    """Base for collectors. Subclasses set `name`, `schema`, `period_s`; override the methods."""

    name: str = "collector"
    schema: pa.Schema = pa.schema([T_NS])
    period_s: float = 1.0

    def probe(self) -> Probe:
        return Probe(True, "ok")

    def describe(self) -> dict:
        """Static facts stored once in meta.json (devices, queue attributes, tables)."""
        return {}

    def sample(self, t_ns: int) -> list[dict]:
        raise NotImplementedError

    def events(self) -> list[dict]:
        """Events seen since the last call (a GPU lost mid-run); the recorder writes them to
        events.jsonl with `t_ns` (the sample's, unless given), `collector` and source 'collector'."""
        return []

    def close(self) -> None:
        pass
