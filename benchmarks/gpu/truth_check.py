"""Issue 21's "done when" on a lent GPU (run by device_checks.sh after its recordings): each recording
of examples/train_async_checkpoint.py against the program's own truth log (its --truth file, kept in
the recording as truth.jsonl). Per recording: checkpoints = saves; per save, the window's coverage of
the save's wall time (call start → save_done, the program's CLOCK_MONOTONIC), its app bytes against the
bytes the program found on disk (±1 %), durable_at_return for a sync save (DCP fsyncs its own files
inside the call), and which source found it (patch, or files with --no-patch). A window the file-activity
source found starts at the save's first file creation (issue 21: what precedes it, DCP's planning, is
not visible without a patch): it is judged by its end reaching the save's end and printed with its
coverage; a patched window must cover >= 95 % of the save.

    python3 benchmarks/gpu/truth_check.py /tmp/rec-sync /tmp/rec-files-sync ...
"""

import json
import sys

import ckprof
from ckprof.analysis import timeline
from ckprof.analysis.analyze import analyze
from ckprof.record.fileactivity import MERGE_S

bad = 0
for path in sys.argv[1:]:
    try:
        rec = ckprof.load(path)
        facts = [json.loads(line) for line in open(f"{path}/truth.jsonl")]
    except (OSError, ValueError) as e:
        print(f"{path}: no recording or truth ({e})")
        bad += 1
        continue
    origin = timeline.build(rec).start_ns
    fa = rec.meta.get("file_activity") or {}
    # a file's birth time is the file system's coarse-clock stamp: a tick at or before the creation
    # (fanotify.birth_time_tick_ns; a recording from before it was kept: HZ=250's 4 ms, said). A
    # window from files may start up to two ticks before the save: a tick, and the tick itself late
    # or the CLOCK_REALTIME conversion's error (5.25 and 6.0 ms were seen on the H200's VM, HZ=250)
    tick_ns = fa.get("birth_time_tick_ns")
    tick_s = (tick_ns or 4_000_000) / 1e9
    print(
        f"{path}: file activity: {fa.get('source')} (reader: {fa.get('reader')}); birth-time tick "
        f"{1000 * tick_s:g} ms{'' if tick_ns else ' (not recorded: HZ=250 taken)'}"
    )
    calls = {f["step"]: f for f in facts if f["ev"] == "save_call"}
    done = {f["step"]: f for f in facts if f["ev"] == "save_done"}
    step_ends = [f["end_ns"] for f in facts if f["ev"] == "step"]
    saves = [c for c in analyze(rec).report["checkpoints"] if c["kind"] == "save"]
    ok = len(saves) == len(calls)
    print(f"{path}: {len(saves)} checkpoint(s) for {len(calls)} save(s): {'PASS' if ok else 'FAIL'}")
    bad += not ok
    for step in sorted(calls):
        a = (calls[step]["start_ns"] - origin) / 1e9
        b = (done[step]["done_ns"] - origin) / 1e9 if step in done else None
        # the checkpoint whose window overlaps the save most (a save that never completed: from its call)
        # (a window that never ended, app_end_s null, is taken to the recording's end)
        end_of = {c["id"]: c["app_end_s"] if c["app_end_s"] is not None else float("inf") for c in saves}
        best = max(saves, key=lambda c: min(end_of[c["id"]], b or end_of[c["id"]]) - max(c["start_s"], a), default=None)
        if best is None:
            print(f"  step {step}: no checkpoint: FAIL")
            bad += 1
            continue
        if b is None:  # the program never saw this save complete: ckprof must not call it a good save
            good = best["ok"] is not True and best["durable"] is not True
            bad += not good
            print(
                f"  step {step}: no save_done in the program's truth; {best['id']} ({best['source']}) ok {best['ok']}, "
                f"durable {best['durable']}, error {best['error']!r}: {'PASS' if good else 'FAIL'}"
            )
            continue
        cover = max(0.0, min(end_of[best["id"]], b) - max(best["start_s"], a)) / max(b - a, 1e-9)
        want = done[step]["bytes"]
        got = best["bytes_app"]
        bytes_ok = got is not None and abs(got - want) <= 0.01 * want
        dur_ok = "async" in path or best["durable_at_return"] is True
        if best["source"] == "files":  # from the first file creation: its end must reach the save's
            # An async save's completion is seen when polled after a step: it came after the poll
            # before (the step before's end) and before done_ns; a sync save's done_ns is its return.
            lo = b
            if calls[step]["return_ns"] != done[step]["done_ns"]:
                lo = (sorted(e for e in step_ends if e < done[step]["done_ns"])[-2:][0] - origin) / 1e9
            # Its start is the first file's birth time (statx): up to two ticks early (above); its
            # end, the last event's read stamp: late by up to MERGE_S (the reader lets the kernel
            # merge events that long) and a wake-up.
            window_ok = best["start_s"] >= a - 2 * tick_s and lo - 0.005 <= end_of[best["id"]] <= b + MERGE_S + 0.01
        else:
            window_ok = cover >= 0.95
        good = window_ok and bytes_ok and dur_ok
        bad += not good
        print(
            f"  step {step}: {best['id']} ({best['source']}) covers {100 * cover:.1f} % of {b - a:.3f} s; "
            f"bytes_app {got} B vs {want} B on disk; durable_at_return {best['durable_at_return']} "
            f"({best['durable_where']}, {best['file_system']}); starts {best['start_s'] - a:+.4f} s, ends {best['app_end_s'] - b:+.4f} s from the save: {'PASS' if good else 'FAIL'}"
        )
print("truth check:", "PASS" if bad == 0 else f"FAIL ({bad})")
