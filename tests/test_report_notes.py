"""Every note of a host report carries a code (analysis/findings.py): tests and programs match codes
and figures, not English. On the golden recordings (tests/support/golden.py) each note's
code, subject and place; the JSON keeps the notes' text alone, in the same order."""

from __future__ import annotations

import pytest
from support.golden import CASES

import ckprof
from ckprof.analysis import analyze
from ckprof.analysis import findings as F

WANT = {
    "device_gone": [
        ("energy_not_measured", None),
        ("temperature_not_measured", None),
        ("device_gone", "sdb"),
        ("device_unknown", "synth:5"),
        ("device_unknown", "synth:7"),
        ("no_end_marker", "synth:7"),
        ("windows_overlap", None),
    ],
    "durability": [
        ("energy_not_measured", None),
        ("temperature_not_measured", None),
        ("not_durable_at_return", "synth:1"),
        ("not_durable_at_return", "synth:4"),
        ("deleted_before_durable", "synth:7"),
        ("not_durable_at_return", "synth:7"),
        ("device_unknown", "synth:13"),
        ("device_unknown", "synth:15"),
        ("windows_overlap", None),
    ],
    "empty": [("no_block_samples", None), ("energy_not_measured", None), ("temperature_not_measured", None)],
    "energy_range": [
        ("temperature_not_measured", None),
        ("energy_range", "synth:0"),
        ("energy_range", "synth:2"),
        ("failed", "synth:fail"),
        ("energy_range", "synth:fail"),
    ],
    "file_saves": [("energy_not_measured", None), ("temperature_not_measured", None), ("blocking_unknown", None)],
    "inferred": [("windows_inferred", None), ("temperature_not_measured", None), ("blocking_unknown", None)],
    "markers": [("workload_seconds", None), ("not_a_storage_read", "synth:4")],
    "ranks_throttle": [],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_note_has_its_code_and_subject(tmp_path, case):
    rb, args = CASES[case](tmp_path / "rec")
    kw = {"gpus": 16384} if "--gpus" in args else {"mtbf_s": 3 * 3600.0} if "--mtbf" in args else {}
    an = analyze(ckprof.load(rb.finish()), **kw)
    got = [(n.code, n.subject) for n in an.model.notes]
    assert got == WANT[case], [n.text for n in an.model.notes]
    assert an.report["notes"] == [n.text for n in an.model.notes]  # the JSON: the words, in order
    assert all(n.code for n in an.model.notes)


def test_what_the_reader_could_not_read_comes_first_once(tmp_path):
    rb, _ = CASES["markers"](tmp_path / "rec")
    rec = ckprof.load(rb.finish())
    rec.problems.extend(["events.jsonl line 7: not an event (skipped)", "events.jsonl line 7: not an event (skipped)"])
    notes = analyze(rec).model.notes
    assert [(n.code, n.text) for n in notes[:1]] == [("unreadable", "events.jsonl line 7: not an event (skipped)")]
    assert [n.code for n in notes].count("unreadable") == 1


def test_no_checkpoint_time_when_a_scale_was_asked_for_and_nothing_was_measured(tmp_path):
    rb, _ = CASES["empty"](tmp_path / "rec")
    notes = analyze(ckprof.load(rb.finish()), gpus=1024).model.notes
    assert notes[-1].code == "no_checkpoint_time"


def test_every_code_is_in_the_findings_table():
    documented = {line.split("|")[1].strip() for line in F.__doc__.splitlines() if line.startswith("| ")}
    used = {c for codes in WANT.values() for c, _ in codes} | {"unreadable", "no_checkpoint_time"}
    assert used <= documented
