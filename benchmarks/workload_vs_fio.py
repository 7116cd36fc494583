#!/usr/bin/env python3
"""`ckprof workload` against fio writing the same pattern on the same loop device, alternating.

Printed, not asserted (a person reads it). For each mode (O_DIRECT, buffered) and round, fio runs
one job per rank (the rank's bytes, the same block size, psync, end_fsync=1, no fallocate) and
`ckprof workload` writes one checkpoint of the same total with the same ranks and chunk size; the
order alternates between rounds. Each side's time is its slowest job/rank (fio's job_runtime
includes end_fsync). The ratio is ckprof's save GiB/s over fio's; the issue's targets are
≥ 0.95 with O_DIRECT and ≥ 0.90 buffered. Then MLPerf's small layout (2 ranks × a 20.5 MB and a
122.7 MB file, buffered, 4 saves 1 s apart; `--small-only` runs just this). Then peak RSS per rank (getrusage, reported by the
ranks) against the shard size, including one rank writing a 2 GiB shard.

Needs root (losetup, mkfs.ext4, mount) and fio. Usage:
    sudo .venv/bin/python benchmarks/workload_vs_fio.py [--rounds 3] [--total-size 512MiB] [--ranks 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import ckprof
from ckprof.units import fmt_bytes, parse_size
from ckprof.workloads.options import ModelOptions

GIB = 2**30


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def loop_fs(base: str, size: int):
    img, mnt = os.path.join(base, "disk.img"), os.path.join(base, "mnt")
    os.makedirs(mnt)
    # Written through, not sparse: the first write to a hole of the backing file allocates it
    # (~0.5 GiB/s here against ~2.3 GiB/s into written blocks), so whichever side landed on
    # never-written blocks lost: fio's first round, and every other save of a workload that keeps
    # the last checkpoint while it writes the next (ext4 puts the new files on fresh blocks).
    sh("dd", "if=/dev/zero", f"of={img}", "bs=16M", f"count={-(-size // (16 << 20))}", "conv=fsync")
    dev = sh("losetup", "-f", "--show", "--direct-io=on", img).stdout.strip()
    try:
        sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
        sh("mount", dev, mnt)
    except BaseException:
        sh("losetup", "-d", dev)
        raise
    return dev, mnt


def loop_fs_gone(base: str, dev: str | None) -> None:
    """Undo loop_fs (what of it was made) and remove `base`."""
    if dev:
        subprocess.run(["umount", os.path.join(base, "mnt")], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


def fio_run(mnt: str, rank_bytes: list[int], chunk: int, direct: bool) -> float:
    d = os.path.join(mnt, "fio")
    os.makedirs(d)
    job = [
        f"[global]\ndirectory={d}\nrw=write\nbs={chunk}\nioengine=psync\nend_fsync=1\nfallocate=none\n"
        f"direct={int(direct)}\n"
    ]
    job += [f"[rank{r}]\nsize={b}\n" for r, b in enumerate(rank_bytes)]
    path = os.path.join(mnt, "job.fio")
    with open(path, "w") as f:
        f.write("".join(job))
    out = json.loads(sh("fio", "--output-format=json", path).stdout)
    shutil.rmtree(d)
    os.unlink(path)
    sh("sync")
    seconds = max(j["job_runtime"] for j in out["jobs"]) / 1000
    total = sum(j["write"]["io_bytes"] for j in out["jobs"])
    return total / GIB / seconds


def ckprof_run(mnt: str, base: str, args: list[str], every: bool = False):
    target, rec = os.path.join(mnt, "ck"), os.path.join(base, "rec")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CKPROF_")}
    sh(sys.executable, "-m", "ckprof.cli", "workload", *args, "--target", target, "-o", rec, "--force", env=env)
    res = ckprof.load(rec).meta["workload"]["results"]["checkpoints"]
    shutil.rmtree(target)
    sh("sync")
    return res if every else res[-1]


SMALL_TOTAL = "273MiB"  # llama3-8b's layout at 2 ranks scaled to MLPerf's small run: 20.5 + 122.7 MB a rank
SMALL_SAVES = 4


def small_layout(mnt: str, base: str, rounds: int) -> None:
    """MLPerf's small layout: 2 ranks × (a 20.5 MB model file + a 122.7 MB optimizer file),
    buffered, fsync per file, SMALL_SAVES saves 1 s apart; each save's GiB/s against fio writing
    the same bytes per rank (buffered, end_fsync) as often, 1 s apart, alternating; save k against
    fio's k-th write, the median over saves and rounds."""
    plan = ModelOptions(preset="llama3-8b", ranks=2, total_bytes=parse_size(SMALL_TOTAL)).plan()
    rank_bytes = [r.nbytes for r in plan.ranks]
    files = ", ".join(fmt_bytes(f.nbytes) for f in plan.ranks[0].files)
    print(f"\nMLPerf small layout, buffered: 2 ranks, files per rank {files}; {SMALL_SAVES} saves 1 s apart")
    print(f"round  {'fio GiB/s (each write)':28s}  {'ckprof GiB/s (each save)':28s}  median ratio")
    ratios = []
    for i in range(rounds):
        order = ("fio", "ckprof") if i % 2 == 0 else ("ckprof", "fio")
        got: dict = {}
        for who in order:
            if who == "fio":  # the same pattern: SMALL_SAVES writes 1 s apart (this VM's disk throttles bursts)
                got["fio"] = []
                for k in range(SMALL_SAVES):
                    time.sleep(1.0 if k else 0.0)
                    got["fio"].append(fio_run(mnt, rank_bytes, 4 << 20, False))
            else:
                args = ["--preset", "llama3-8b", "--total-size", SMALL_TOTAL, "--ranks", "2",
                        "--count", str(SMALL_SAVES), "--interval", "1s", "--keep", "1"]  # fmt: skip
                got["ckprof"] = [c["gib_per_s"] for c in ckprof_run(mnt, base, args, every=True)]
        r = [c / f for c, f in zip(got["ckprof"], got["fio"])]  # save k against fio's k-th write
        ratios += r
        fio = " ".join(f"{f:.3f}" for f in got["fio"])
        saves = " ".join(f"{c:.3f}" for c in got["ckprof"])
        print(f"{i + 1:5d}  {fio:28s}  {saves:28s}  {statistics.median(r):.2f}")
    print(f"small layout: median ratio {statistics.median(ratios):.2f} over {len(ratios)} saves (target ≥ 0.95)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--total-size", default="512MiB")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--chunk-size", default="4MiB")
    ap.add_argument("--small-only", action="store_true", help="only MLPerf's small layout")
    a = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("fio") is None:
        sys.exit("needs root and fio")
    total, chunk = parse_size(a.total_size), parse_size(a.chunk_size)
    plan = ModelOptions(preset="llama3-8b", ranks=a.ranks, total_bytes=total).plan()
    rank_bytes = [r.nbytes for r in plan.ranks]
    common = [
        "--preset",
        "llama3-8b",
        "--total-size",
        a.total_size,
        "--ranks",
        str(a.ranks),
        "--chunk-size",
        a.chunk_size,
    ]
    base = tempfile.mkdtemp(prefix="ckprof-bench-")
    dev = None
    try:
        dev, mnt = loop_fs(base, max(3 * GIB, 3 * total))
        print(
            f"loop device {dev} (--direct-io=on, ext4), {a.ranks} ranks, {fmt_bytes(plan.nbytes)} per "
            f"checkpoint, chunk/bs {fmt_bytes(chunk)}"
        )
        for mode, flag, target in () if a.small_only else (("O_DIRECT", ["--direct"], 0.95), ("buffered", [], 0.90)):
            ratios = []
            print(f"\n{mode}: round  fio GiB/s  ckprof GiB/s  ratio")
            for i in range(a.rounds):
                order = ("fio", "ckprof") if i % 2 == 0 else ("ckprof", "fio")
                got = {}
                for who in order:
                    if who == "fio":
                        got["fio"] = fio_run(mnt, rank_bytes, chunk, mode == "O_DIRECT")
                    else:
                        got["ckprof"] = ckprof_run(mnt, base, common + flag)["gib_per_s"]
                ratios.append(got["ckprof"] / got["fio"])
                print(f"{'':10s}{i + 1:5d}  {got['fio']:9.3f}  {got['ckprof']:12.3f}  {ratios[-1]:5.2f}")
            print(f"{mode}: median ratio {statistics.median(ratios):.2f} (target ≥ {target})")
        small_layout(mnt, base, a.rounds)
        if a.small_only:
            return
        print("\npeak RSS per rank (measured by the ranks, getrusage ru_maxrss):")
        for args in (common, ["--preset", "llama3-8b", "--total-size", "2GiB", "--ranks", "1"]):
            res = ckprof_run(mnt, base, args)
            shard = max(r["bytes"] for r in res["ranks"])
            rss = max(r["max_rss_bytes"] for r in res["ranks"])
            print(
                f"  {' '.join(args[2:])}: shard {fmt_bytes(shard)}, peak RSS {fmt_bytes(rss)} "
                f"({rss / shard:.1%} of the shard)"
            )
    finally:
        loop_fs_gone(base, dev)


if __name__ == "__main__":
    main()
