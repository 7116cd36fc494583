"""A host's summary.json is checked by its head (host_summary.SummaryHead) before its part is
trusted: a summary without its part says so, and the host is analysed from its samples."""

from __future__ import annotations

import json

from ckprof.analysis import host_summary
from ckprof.testing import RecordingBuilder


def _summarised(tmp_path) -> str:
    rb = RecordingBuilder(tmp_path / "rec", duration_s=6)
    rb.block("sda", lambda t: 0.0)
    rb.checkpoint(2, 4, 2**30, step=1)
    path = str(rb.finish())
    host_summary.write(path)
    return path


def _rewrite(path: str, change) -> None:
    p = f"{path}/{host_summary.SUMMARY_FILE}"
    with open(p) as f:
        doc = json.load(f)
    change(doc)
    with open(p, "w") as f:
        json.dump(doc, f)


def test_a_current_summary_is_read(tmp_path):
    part, why = host_summary.read(_summarised(tmp_path), {})
    assert why is None and part is not None and part.figures


def test_a_summary_without_its_part_is_damaged_and_says_what_it_lacks(tmp_path):
    path = _summarised(tmp_path)
    _rewrite(path, lambda d: d.pop("part"))
    assert host_summary.read(path, {}) == (None, "damaged (no part)")
    _rewrite(path, lambda d: d.update(part=[1, 2]))  # not an object
    assert host_summary.read(path, {}) == (None, "damaged (no part)")


def test_a_summary_of_another_schema_or_options_is_not_used(tmp_path):
    path = _summarised(tmp_path)
    _rewrite(path, lambda d: d.update(options="x"))
    assert host_summary.read(path, {}) == (None, "made with other options")
    _rewrite(path, lambda d: d.update(schema=7))
    assert host_summary.read(path, {}) == (None, "not a ckprof host summary")
