"""The frameworks tier's runner and checks (tests/frameworks/test_frameworks.py says what they
check): a script of tests/frameworks/ recorded by `ckprof record` on ext4 over a loop device, its
JSON report, and the acceptance checks on every figure (saves, restores)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

import ckprof
from support.checks import checker
from support.command import ckprof_cmd

HERE = Path(__file__).resolve().parents[1] / "frameworks"  # the scripts
MiB = 2**20
INTERVAL = "0.1"  # seconds
MIN_COVER = 0.95
# The window ends at the stamp the checkpoint_end line carries, taken just before that line's
# write(2) (the patch's _emit): the write, and the return to the script's own clock read, are after
# it by design. A restore of a 15 ms load was once 94.1 % covered in CI with the end 0.89 ms before
# the script's and no wait for a CPU (what the thread did then is not known: appends here stalled
# ≤ 0.10 ms in a trial). So a miss of up to this much is allowed beside the 5 %.
END_LINE_NS = 1_000_000


def min_cover(wall_ns: int, waited_ns: int) -> float:
    """The least share of a save or restore of `wall_ns` its window must cover: MIN_COVER, less
    what its thread waited for a CPU (no window can hold a wait after its end stamp) and
    END_LINE_NS, each as a share of the wall time."""
    return MIN_COVER - (waited_ns + END_LINE_NS) / max(1, wall_ns)


MAX_LEAD_S = 0.5
INSTALL = "pip install -e '.[frameworks]' torch==2.13.0 (.ci/run does)"


def with_savelog(script: str) -> str:
    """A child script's text that can `from savelog import waited_ns` (tests/frameworks/savelog.py:
    the one reader of a thread's wait for a CPU that the coverage checks allow for)."""
    return f"import sys; sys.path.insert(0, {str(HERE)!r})\n" + script


def need(*modules):
    for m in modules:
        pytest.importorskip(m, reason=f"{m} is not installed: {INSTALL}")


class Run:
    """One script recorded and reported: the recording, the JSON report, what the script measured."""

    def __init__(self, rec, rep: dict, saves: dict, device: str):
        self.rec, self.rep, self.saves, self.device = rec, rep, saves, device


def record_script(loop_ext4, tmp_path, script: str, *args, name: str, launcher=None, record_opts=()) -> Run:
    lp, mnt = loop_ext4
    saves_json, out, rep_json = tmp_path / f"{name}.saves.json", tmp_path / f"rec-{name}", tmp_path / f"{name}.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    cmd = [*(launcher or [sys.executable]), str(HERE / script), str(saves_json), "--dir", str(mnt / name), *args]
    # then sync(1) from another program, inside the recording: what the saves left dirty reaches
    # the device while it is recorded (so device bytes have something to count), and a checkpoint
    # deleted while dirty is never written, however durable the machine-wide picture looks after it
    cmd = ["sh", "-c", '"$@"; rc=$?; sync; sleep 0.3; exit $rc', "sh", *cmd]
    t0 = time.monotonic()
    r = ckprof_cmd(
        "record",
        "-q",
        *record_opts,
        "--interval",
        INTERVAL,
        "-o",
        str(out),
        "--path",
        str(mnt),
        "--",
        *cmd,
        env=env,
        timeout=280,
    )
    assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    print(f"\n{script} {' '.join(args)}: recorded in {time.monotonic() - t0:.1f} s")
    r = ckprof_cmd("report", str(out), "--format", "json", "-o", str(rep_json))
    assert r.returncode == 0, r.stderr
    return Run(ckprof.load(str(out)), json.loads(rep_json.read_text()), json.loads(saves_json.read_text()), lp.name)


def _anchor_ns(run: Run) -> int:
    """The monotonic ns that a report's 0 s stands for: meta.json's start.monotonic_ns. Checked on
    a known event: every marked checkpoint starts exactly at one of the recording's
    checkpoint_start events (a grouped one at its earliest part's)."""
    anchor = int(run.rec.meta["start"]["monotonic_ns"])
    ev = run.rec.events
    starts = ev.loc[ev["event"] == "checkpoint_start", "t_ns"].astype("int64").tolist() if not ev.empty else []
    for c in run.rep["checkpoints"]:
        if c["source"] != "inferred" and starts:
            t = anchor + c["start_s"] * 1e9
            assert min(abs(t - s) for s in starts) < 2_000, (c["id"], c["start_s"], "start_s is not from the anchor")
    return anchor


def _paths(c: dict) -> set[str]:
    return {c["path"], *(p["path"] for p in c.get("parts") or [])} - {None}


def check_figures(
    run: Run, expect_saves: int | None = None, durable_check: bool = True, lead_from_prep: bool = False
) -> list[str]:
    """Print every figure; return the acceptance checks that failed (empty: all hold).
    `lead_from_prep`: a window's lead is measured from the save's folder creation where the script
    made it before the timed call (`prep_ns`): with no call known (--no-patch), a save's window
    starts at its first file creation (docs/analysis.md, file-level saves), not at the call."""
    anchor = _anchor_ns(run)
    rep, saves = run.rep, run.saves["saves"]
    cps = [c for c in rep["checkpoints"] if c["kind"] == "save" and c["ok"] is not False]
    win = [
        (anchor + c["start_s"] * 1e9, anchor + (c["app_end_s"] if c["app_end_s"] is not None else 0) * 1e9) for c in cps
    ]
    failed: list[str] = []
    check = checker(failed)

    print(f"== {run.saves['script']}: {len(saves)} timed saves, run.wall_s {rep['run']['wall_s']:.1f} s")
    for n, c in enumerate(cps):
        print(
            f"  checkpoint {n}: {c['api']} {c['path']} start {c['start_s']:.3f} s app_end {c['app_end_s']} s "
            f"parts {len(c['parts'] or [])} bytes_app {c['bytes_app']} bytes_device {c['bytes_device']} "
            f"(device/app {c['device_to_app_ratio']}) durable {c['durable']} durable_end {c['durable_end_s']} s"
        )
    if expect_saves is not None:
        check(
            "script saved as configured", len(saves) == expect_saves, f"{len(saves)} timed saves, {expect_saves} asked"
        )

    # one checkpoint per save: ranks of one save share its path
    n_saves = len({s["path"] for s in saves})
    check("one checkpoint per save", len(cps) == n_saves, f"{len(cps)} save checkpoints for {n_saves} saves")

    # coverage: the best single window for each measured save
    covering: dict[int, int] = {}
    covers, leads = [], []
    for i, s in enumerate(saves):
        a, b = s["start_ns"], s["end_ns"]
        best, k = 0.0, None
        for j, (wa, wb) in enumerate(win):
            f = max(0.0, min(b, wb) - max(a, wa)) / max(1, b - a)
            if f > best:
                best, k = f, j
        if lead_from_prep:
            a = min([a] + [x["prep_ns"] for x in saves if x["path"] == s["path"] and x.get("prep_ns") is not None])
        lead = None if k is None else (a - win[k][0]) / 1e9
        covers.append(best)
        leads.append(lead)
        if k is not None:
            covering[i] = k
        edges = (
            ""
            if k is None
            else f" (window {(win[k][0] - a) / 1e6:+.2f} ms at its start, {(win[k][1] - b) / 1e6:+.2f} ms at its end)"
        )
        print(
            f"  save {i} rank {s['rank']} {s['path']}: {(b - a) / 1e6:.1f} ms, covered {100 * best:.1f} % by checkpoint "
            f"{k}, window starts {'-' if lead is None else f'{lead:.3f}'} s before it{edges}"
        )
    # A save the script says its thread waited for a CPU in (waited_ns: HF's) may be missed, beyond
    # 5 %, by no more than that wait. The window ends at the stamp taken just before its
    # checkpoint_end line is written; under load the script then waits for a CPU before its own
    # clock read (the write wakes the recorder's threads): 6-19 ms at a load average of ~8 on 2
    # cores, where a 107 ms HF save was covered 94.0 %. No window can hold that wait.
    allowed = [min_cover(s["end_ns"] - s["start_ns"], s.get("waited_ns", 0)) for s in saves]
    short = [c - a for c, a in zip(covers, allowed)]
    worst = min(covers) if covers else 0.0
    check(
        "each save covered ≥ 95 % by one window (less what its thread waited for a CPU, where said, and 1 ms)",
        all(x >= 0 for x in short),
        f"worst {100 * worst:.1f} %; waited {[round(s.get('waited_ns', 0) / 1e6, 1) for s in saves]} ms",
    )
    bad_lead = [x for x in leads if x is None or x > MAX_LEAD_S]
    max_lead = max((x for x in leads if x is not None), default=None)
    check(
        "window starts ≤ 0.5 s before the save",
        not bad_lead,
        f"largest lead {max_lead} s; {len(bad_lead)} too early or none",
    )

    # durability of checkpoints deleted while dirty
    if durable_check:
        pend = run.saves["pending_at_delete"]
        dirty = {p for p in run.saves["deleted"] if pend.get(p)}
        print(f"  deleted: {len(run.saves['deleted'])}, still dirty when deleted: {len(dirty)} ({pend})")
        wrong = []
        for p in sorted(dirty):
            ks = {covering[i] for i, s in enumerate(saves) if s["path"] == p and i in covering}
            ks |= {j for j, c in enumerate(cps) if p in _paths(c)}
            for j in ks:
                print(f"    {p}: checkpoint {j} durable {cps[j]['durable']} — {cps[j]['durable_basis']}")
                if cps[j]["durable"] is True:
                    wrong.append(p)
        check("no checkpoint deleted while dirty is durable", not wrong, f"{len(wrong)} reported durable: {wrong}")

    # device bytes counted once
    b = run.rec.block()
    dev_written = float(b.loc[b["device"] == run.device, "write_bytes"].sum()) if not b.empty else 0.0
    cp_dev = sum(c["bytes_device"] or 0 for c in rep["checkpoints"] if c["kind"] == "save")
    ratio = cp_dev / dev_written if dev_written else (0.0 if cp_dev == 0 else float("inf"))
    check(
        "Σ bytes_device ≤ 1.05 × device written",
        cp_dev <= 1.05 * dev_written,
        f"{cp_dev / MiB:.2f} MiB / {dev_written / MiB:.2f} MiB = {ratio:.3f}",
    )

    # the app's bytes
    files = sum(run.saves["files"].values())
    app = rep["run"]["bytes_app_total"] or 0
    check(
        "bytes_app_total within ±1 % of the files written",
        files > 0 and abs(app - files) <= 0.01 * files,
        f"{app / MiB:.3f} MiB / {files / MiB:.3f} MiB = {app / files if files else float('nan'):.4f}",
    )
    return failed


def check_restores(run: Run) -> list[str]:
    """One load checkpoint per restore (its files and ranks together), each covering ≥ 95 % of the
    restore the script timed (first rank's start → last rank's end), and cold: cachestat saw ≤ 10 %
    of it in the page cache as it started (the script evicted its files)."""
    anchor = _anchor_ns(run)
    loads = run.saves.get("loads") or []
    by_path: dict[str, list] = {}
    for x in loads:
        by_path.setdefault(x["path"], []).append(x)
    # each restore with the longest wait for a CPU any of its ranks' threads said (waited_ns): the
    # window ends at the stamp before its checkpoint_end line, and a wait after it no window holds
    restores = [
        (min(x["start_ns"] for x in v), max(x["end_ns"] for x in v), p, max(x.get("waited_ns", 0) for x in v))
        for p, v in by_path.items()
    ]
    cps = [c for c in run.rep["checkpoints"] if c["kind"] == "load" and c["ok"] is not False]
    failed: list[str] = []
    check = checker(failed)

    for c in cps:
        print(
            f"  load {c['api']} {c['path']}: {c['duration_s']:.3f} s, parts {len(c['parts'] or [])}, app "
            f"{(c['restore_bytes_app'] or 0) / MiB:.2f} MiB, device {(c['restore_bytes_device'] or 0) / MiB:.2f} MiB, "
            f"cache-served {c['cache_served_share']}, device share {c['device_read_share']}"
        )
    check(
        "one load checkpoint per restore",
        len(cps) == len(restores),
        f"{len(cps)} load checkpoints, {len(restores)} restores",
    )
    for a, b, p, waited in restores:
        best = max(
            (
                max(0.0, min(b, anchor + c["app_end_s"] * 1e9) - max(a, anchor + c["start_s"] * 1e9)) / max(1, b - a)
                for c in cps
                if c["app_end_s"] is not None
            ),
            default=0.0,
        )
        check(
            f"restore of {p} covered ≥ 95 % (less what its thread waited for a CPU, and 1 ms: END_LINE_NS)",
            best >= min_cover(b - a, waited),
            f"{100 * best:.1f} % of {(b - a) / 1e6:.1f} ms; waited {waited / 1e6:.1f} ms",
        )
    for c in cps:
        cs = c["cache_served_share"]
        check(f"restore {c['id']} cold (cachestat)", cs is not None and cs <= 0.10, f"cache-served {cs}")
    return failed
