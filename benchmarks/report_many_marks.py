"""Benchmark: the HTML report of a recording with many ckprof.mark() events, against the same
recording without them (issue 22, item 5: within 2x).

    python benchmarks/report_many_marks.py                  # 100,000 marks, a 1-hour recording at 10 Hz
    python benchmarks/report_many_marks.py --marks 20000 --minutes 10

Generates one recording (two block devices, a GPU, a checkpoint every 10 minutes), copies it and
appends the marks to the copy's events.jsonl, then times `ckprof report` (interactive HTML, the
default) and `ckprof report --static` on both, each in its own process, and prints the wall
times and their ratio. Nothing is asserted: timings on a shared machine are noisy, so a person
reads the figures (tests/faults/test_report_faults_more.py holds the structure: what is drawn
does not grow with the marks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from ckprof.testing import GPU_SCHEMA, RecordingBuilder, bursts

MiB = 2**20


def make_recording(path: str, minutes: float) -> str:
    rng = np.random.default_rng(0)
    duration_s = minutes * 60
    rb = RecordingBuilder(duration_s=duration_s, interval_s=0.1)
    spans = [(a, a + 60) for a in np.arange(120, duration_s - 60, 600)]

    busy = bursts(spans, 1.0)

    for dev in ("nvme0n1", "nvme1n1"):
        rb.block(dev, lambda t: busy(t) * 800 * MiB * (1 + 0.2 * rng.random(t.shape)), queue=lambda t: busy(t) * 8)
    rb.series(
        "gpu",
        GPU_SCHEMA,
        gpu="0",
        energy_mj=lambda t: t * 3e5,
        power_w=lambda t: 300 + 50 * rng.random(t.shape),
        util_gpu_pct=lambda t: np.where(busy(t) > 0, 0, 97),
        temp_c=60.0,
        clocks_event_reasons=0,
    )
    for i, (a, b) in enumerate(spans):
        rb.checkpoint(float(a), float(b), int(800 * MiB * (b - a)), step=1000 * (i + 1))
    return rb.finish(path)


def add_marks(path: str, n: int) -> None:
    """n mark events spread over the recording, as ckprof.mark() writes them (one line each)."""
    meta = json.load(open(os.path.join(path, "meta.json")))
    start, end = meta["start"]["monotonic_ns"], meta["end"]["monotonic_ns"]
    times = np.linspace(start, end - 1, n).astype(np.int64)
    with open(os.path.join(path, "events.jsonl"), "a") as f:
        f.writelines(
            json.dumps({"t_ns": int(t), "event": "mark", "text": f"step {i}", "pid": 1}) + "\n"
            for i, t in enumerate(times)
        )


def timed_report(rec: str, out: str, *flags: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "ckprof", "report", rec, "-o", out, *flags], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"ckprof report failed: {r.stderr.strip()}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--marks", type=int, default=100_000)
    ap.add_argument("--minutes", type=float, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        plain = make_recording(os.path.join(tmp, "plain"), args.minutes)
        marked = os.path.join(tmp, "marked")
        shutil.copytree(plain, marked)
        add_marks(marked, args.marks)
        print(f"generated a {args.minutes:g}-minute recording in {time.perf_counter() - t0:.1f} s")
        for label, flags in (("HTML (interactive)", ()), ("HTML --static", ("--static",))):
            without = timed_report(plain, os.path.join(tmp, "plain.html"), *flags)
            with_marks = timed_report(marked, os.path.join(tmp, "marked.html"), *flags)
            size = os.path.getsize(os.path.join(tmp, "marked.html")) / 1e6
            print(
                f"{label}: without marks {without:.2f} s, with {args.marks:,} marks {with_marks:.2f} s "
                f"(ratio {with_marks / without:.2f}x; target <= 2x); report {size:.1f} MB"
            )


if __name__ == "__main__":
    main()
