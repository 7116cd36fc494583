"""`ckprof compare` builds typed rows (report/compare.py's MetricRow, compare_saves' SaveFigureRow and
PlaceFigure) that its Markdown reads by attribute, and writes them as the ckprof-compare JSON: the
keys in their documented order, a place as {name, bytes, seconds, gib_per_s}."""

from __future__ import annotations

import json

import pytest
from support.command import ckprof_cmd
from test_report_remote import _fuse_rows, _net_rows, _nfs_rows, _s3

import ckprof
from ckprof.analysis.analyze import analyze
from ckprof.collectors.fuse import FUSE_SCHEMA
from ckprof.collectors.net import NET_SCHEMA
from ckprof.collectors.nfs import NFS_OPS_SCHEMA
from ckprof.report.compare import Comparison, MetricRow, compare
from ckprof.report.compare_saves import PlaceFigure, SaveFigureRow
from ckprof.testing import RecordingBuilder

MiB, GiB = 2**20, 2**30


def _remote(path):
    rb = RecordingBuilder(path, duration_s=10)
    rb.rows("nfs", _nfs_rows(), NFS_OPS_SCHEMA).rows("net", _net_rows(), NET_SCHEMA)
    rb.rows("fuse", _fuse_rows(), FUSE_SCHEMA)
    rb.checkpoint(2, 4, GiB, step=1)
    for i in range(3):  # parts back at 2.6, 3.1 and 3.6 s, inside the save's window (2, 4]
        _s3(rb, 2.6 + i / 2, "UploadPart", 0.1, bytes=100 * MiB)
    return rb.finish()


def _disk(path):
    rb = RecordingBuilder(path, duration_s=10)
    rb.block("sda", lambda t: (t > 2) * (t <= 4) * 100 * MiB)
    rb.checkpoint(2, 4, 200 * MiB, step=1)
    rb.checkpoint(6, 7, MiB, step=2)
    return rb.finish()


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    return _remote(d / "remote"), _disk(d / "disk")


def test_rows_are_typed_and_places_say_where_the_bytes_went(recs):
    reports = [analyze(ckprof.load(r)).report for r in recs]
    cmp = compare(reports)
    assert isinstance(cmp, Comparison) and cmp.recordings == list(recs)
    assert all(isinstance(m, MetricRow) for m in cmp.metrics)
    (n,) = [m for m in cmp.metrics if m.metric == "checkpoints"]
    assert n.values == [1, 2] and n.ratio_to_first == [1.0, 2.0] and n.why == [None, None]
    assert all(isinstance(r, SaveFigureRow) for r in cmp.saves)
    (s3,) = [r for r in cmp.saves if r.save == 1 and r.figure == "where the bytes went: S3 endpoints"]
    (place,) = s3.values[0]
    assert isinstance(place, PlaceFigure) and place.bytes == 300 * MiB and place.name == "http://127.0.0.1:9000"
    assert s3.values[1] is None and s3.why[1] == "no S3 request in this save's window"  # the disk run
    (two,) = [r for r in cmp.saves if r.save == 2 and r.figure == "bytes (the save's files)"]
    assert two.values == [None, MiB] and two.why == ["the recording has 1 save(s)", None]


def test_the_json_keeps_its_keys_and_their_order(recs):
    r = ckprof_cmd("compare", *recs, "--format", "json", in_process=True)
    assert r.exit_code == 0, r.output
    cmp = json.loads(r.stdout)
    assert list(cmp) == ["schema", "schema_version", "recordings", "metrics", "saves", "provenance_differences"]
    assert (cmp["schema"], cmp["schema_version"]) == ("ckprof-compare", 2)
    assert list(cmp["metrics"][0]) == ["metric", "unit", "provenance", "values", "why", "ratio_to_first"]
    assert list(cmp["saves"][0]) == ["save", "figure", "unit", "provenance", "values", "why"]
    (nfs,) = [s for s in cmp["saves"] if s["figure"] == "where the bytes went: NFS mounts"]
    assert list(nfs["values"][0][0]) == ["name", "bytes", "seconds", "gib_per_s"]
    assert nfs["values"][0][0]["bytes"] == GiB
    md = ckprof_cmd("compare", *recs, in_process=True).stdout
    assert "| 1 | where the bytes went: S3 endpoints [B, s, GiB/s per place, " in md
    assert "http://127.0.0.1:9000: 300.00 MiB in 2.00 s, 0.146 GiB/s" in md
