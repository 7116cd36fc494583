"""ckprof.testing's recording builder: what it writes is the real format, read back by ckprof.load.
Rows and chunks of columns (the benchmarks' way, a part a chunk) land in the same collector."""

from __future__ import annotations

import os

import numpy as np

import ckprof
from ckprof.testing import BLOCK_SCHEMA, START_NS, RecordingBuilder, S, job_dir


def _chunk(k: int, n: int = 10) -> dict:
    return {"t_ns": START_NS + (np.arange(n) + n * k) * S, "device": ["sda"] * n, "write_sectors": np.arange(n)}


def test_chunks_of_columns_are_parts_of_their_own_and_the_other_columns_null(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=5).collector("block", BLOCK_SCHEMA)
    for k in range(3):
        rb.table("block", _chunk(k)).write_parts()  # on disk now: memory holds one chunk
        assert len(os.listdir(tmp_path / "rec" / "samples" / "block")) == k + 1
    rec = ckprof.load(rb.checkpoint(1, 2, 10).finish())
    assert sorted(os.listdir(tmp_path / "rec" / "samples" / "block")) == [
        "part-000000-000000.parquet",
        "part-000001-000001.parquet",
        "part-000002-000002.parquet",
    ]
    assert rec.meta["status"] == "complete"
    assert rec.meta["end"]["monotonic_ns"] == START_NS + 29 * S  # the last chunk's last row, past duration_s
    df = rec.samples("block")
    assert len(df) == 30 and df["read_sectors"].isna().all()  # not given: null, not 0


def test_rows_after_chunks_are_numbered_after_them_and_merged_as_a_recorder_ends(tmp_path):
    rb = RecordingBuilder(duration_s=2).collector("block", BLOCK_SCHEMA)
    rb.table("block", _chunk(0)).block("sdb", lambda t: t * 0 + 1e6)
    rec = ckprof.load(rb.finish(tmp_path / "rec"))
    assert os.listdir(tmp_path / "rec" / "samples" / "block") == ["part-000000-000001.parquet"]
    assert sorted(rec.samples("block")["device"].unique()) == ["sda", "sdb"]


def test_a_builder_writes_its_recording_again_at_another_path(tmp_path):
    rb = RecordingBuilder(duration_s=1).block("sda", lambda t: t * 0)
    job = job_dir(tmp_path / "job", {"a": rb})
    again = rb.finish(tmp_path / "again")
    assert ckprof.load(str(job / "host=a")).samples("block").equals(ckprof.load(again).samples("block"))
