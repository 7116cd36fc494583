"""DCP saves of a CUDA model recorded on a real NVIDIA H200 with `ckprof record --no-patch`
(tests/data/gpu/README.md): no framework call is timed, so only the file-activity source (fanotify,
no code in the writer; issue 21) can find the saves. Checked against the program's own truth log
(examples/train_async_checkpoint.py --truth): one checkpoint per save, its files' bytes exact, the
window from the save's first file to its last event, durable at its end (DCP fsyncs its files), the
writer named, and what no call timed (blocking) unknown, never the window's length.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ckprof
from ckprof.analysis import timeline
from ckprof.analysis.analyze import analyze
from ckprof.record.fileactivity import MERGE_S

DATA = Path(__file__).resolve().parent / "data" / "gpu"
# statx's btime is the file system's coarse clock: up to a jiffy (4 ms at HZ=250) before the fine one
COARSE_S = 0.005
WAKE_S = 0.01  # the reader's wake-up after its MERGE_S pause


def load(name: str):
    rec = ckprof.load(str(DATA / name))
    facts = [json.loads(line) for line in (DATA / f"{name}.truth.jsonl").read_text().splitlines()]
    origin = timeline.build(rec).start_ns

    def s(ns: int) -> float:
        return (ns - origin) / 1e9

    calls = {f["step"]: f for f in facts if f["ev"] == "save_call"}
    done = {f["step"]: f for f in facts if f["ev"] == "save_done"}
    steps = [f for f in facts if f["ev"] == "step"]
    rep = analyze(rec).report
    return rec, rep, calls, done, steps, s


@pytest.mark.parametrize("name", ["h200-files-sync", "h200-files-async"])
def test_each_save_is_one_checkpoint_of_its_files_bytes(name):
    rec, rep, calls, done, _, _ = load(name)
    assert rec.meta["file_activity"]["source"] == "fanotify"
    saves = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    assert [c["source"] for c in saves] == ["files"] * len(calls) == ["files"] * 4
    for c, step in zip(saves, sorted(calls)):
        assert c["path"].endswith(f"/step{step:05d}")
        assert c["bytes_app"] == done[step]["bytes"]  # what the program found on disk, to the byte
        assert c["durable"] is True and c["durable_at_return"] is True, c["durable_basis"]
        assert c["durable_where"] == "device" and c["file_system"] == "ext4"
        # one process wrote every byte (the async save's thread is the trainer's)
        (w,) = c["writers"]
        assert w["comm"] == "python3" and w["bytes"] == c["bytes_app"] and w["files"] == 2


def test_a_sync_save_s_window_is_its_files_first_birth_to_its_last_event():
    _, rep, calls, done, _, s = load("h200-files-sync")
    saves = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    for c, step in zip(saves, sorted(calls)):
        start, ret = s(calls[step]["start_ns"]), s(calls[step]["return_ns"])
        assert start - COARSE_S <= c["start_s"] < ret
        # the last close is stamped when read: after the return, late by the merge pause at most
        assert ret <= c["app_end_s"] <= ret + MERGE_S + WAKE_S, (step, c["app_end_s"] - ret)
    # after the first (DCP plans before it makes a file: 84 ms here), a window covers the call
    for c, step in list(zip(saves, sorted(calls)))[1:]:
        start, ret = s(calls[step]["start_ns"]), s(calls[step]["return_ns"])
        assert c["start_s"] <= start + 0.01


def test_an_async_save_s_window_starts_at_its_first_file_not_at_the_call():
    """The staging of the CUDA state (inside async_save's call) makes no file: a window from the file
    activity starts when the background write makes the first one and ends at its last event, between
    the poll before the program saw the save done and that poll (plus the merge pause)."""
    _, rep, calls, done, steps, s = load("h200-files-async")
    saves = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    ends = sorted(f["end_ns"] for f in steps)
    for c, step in zip(saves, sorted(calls)):
        ret = s(calls[step]["return_ns"])
        assert ret - COARSE_S <= c["start_s"] <= ret + 0.1, (step, c["start_s"] - ret)
        seen = done[step]["done_ns"]
        poll_before = s([e for e in ends if e < seen][-2])
        assert poll_before <= c["app_end_s"] <= s(seen) + MERGE_S + WAKE_S, step


@pytest.mark.parametrize("name", ["h200-files-sync", "h200-files-async"])
def test_what_no_call_timed_is_unknown_not_the_window(name):
    """The sync save held the loop for its whole window, the async one for its staging only: the
    files cannot tell the two apart, so neither gets a blocking time, and the run's blocked time,
    goodput and mean checkpoint are unknown with the note that says why."""
    _, rep, calls, _, _, s = load(name)
    saves = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    assert all(c["blocking_s"] is None for c in saves)
    run = rep["run"]
    assert run["blocked_s"] is None and run["goodput_estimate"] is None and run["mean_checkpoint_s"] is None
    (note,) = [n for n in rep["notes"] if "with no call timed" in n]
    assert note.startswith("4 save(s) found from their files")
    if name.endswith("async"):  # the duration the old rule called blocking was not the call
        for c, step in zip(saves, sorted(calls)):
            call_s = (calls[step]["return_ns"] - calls[step]["start_ns"]) / 1e9
            assert abs(c["duration_s"] - call_s) > 0.05, step


def test_compare_says_why_the_blocking_figures_are_missing():
    """`ckprof compare` of the two: the blocking figures are null with the reason, never a number."""
    from ckprof.report.compare import compare

    reports = [load(name)[1] for name in ("h200-files-sync", "h200-files-async")]
    rows = {m.metric: m for m in compare(reports).metrics}
    for metric in ("mean checkpoint time", "time blocked by checkpoints"):
        assert rows[metric].values == [None, None]
        assert rows[metric].why == ["a save no call timed (found from its files or device bursts)"] * 2
