"""1 s roll-ups: a job host's block-device rates at 1 s resolution, written when its recording closes.

`Recording.block(1.0)` of a closed job host reads `rollup.block_1s.parquet` (a few hundred kB for an
hour of 10 devices) instead of every 10 Hz sample; `Job.block(1.0)` does so for every host, and
DuckDB or Dask read a whole job's with one query (README). The roll-up is made by the same call
that the reader makes without it (`block_rates(samples, 1.0, start)`, ckprof.recording.rates), so
the frames are the same (a test compares them). It is used only while its stamp
(ckprof.recording.stamp: the ckprof code, the recording's files) still matches; the raw samples stay.
"""

from __future__ import annotations

import json
import os
from typing import Protocol

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .rates import block_rates
from .stamp import ROLLUP_PREFIX, stale, stamp
from .timebase import Timebase


class HostRecording(Protocol):
    """What the roll-up reads of a recording (ckprof.recording.reader.Recording, which reads the
    roll-up back: a protocol, so this module does not import it)."""

    @property
    def path(self) -> str: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def timebase(self) -> Timebase: ...
    def samples(self, collector: str, columns: list[str] | None = None) -> pd.DataFrame: ...


RESOLUTION_S = 1.0
BLOCK_FILE = f"{ROLLUP_PREFIX}block_1s.parquet"
_STAMP_KEY = b"ckprof.stamp"


def block_1s(rec: HostRecording) -> pd.DataFrame:
    """The block rates at 1 s from the samples: what the roll-up holds."""
    return block_rates(rec.samples("block"), resample_s=RESOLUTION_S, t0_ns=rec.start_ns)


def write(rec: HostRecording) -> str | None:
    """Write the closed recording's block roll-up (atomically); its path, or None with no block samples."""
    doc = stamp(rec.path)  # before: making the roll-up only reads
    df = block_1s(rec)
    if df.empty:
        return None
    # the wall clock beside each bin's monotonic end (the host's own anchor and, in a job, its
    # measured offset: ckprof.recording.timebase), so a query over a job's roll-ups lines hosts up
    wall = df.assign(t_wall_ns=rec.timebase.to_wall_ns(df["t_ns"]).round().astype("int64"))
    table = pa.Table.from_pandas(wall, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _STAMP_KEY: json.dumps(doc).encode()})
    out = os.path.join(rec.path, BLOCK_FILE)
    pq.write_table(table, out + ".tmp")
    os.replace(out + ".tmp", out)
    return out


def read_block(rec: HostRecording) -> pd.DataFrame | None:
    """The roll-up's frame when it is there and current, else None (then the caller uses the samples)."""
    p = os.path.join(rec.path, BLOCK_FILE)
    if not os.path.exists(p):
        return None
    try:
        doc = json.loads((pq.read_schema(p).metadata or {}).get(_STAMP_KEY, b"{}"))
        if stale(rec.path, doc):
            return None
        frame: pd.DataFrame = pq.read_table(p).to_pandas()  # pyarrow is untyped (Any)
        return frame.drop(columns=["t_wall_ns"], errors="ignore")  # a Job adds its own
    except (OSError, ValueError, pa.ArrowException):
        return None  # a damaged roll-up: the samples say the same
