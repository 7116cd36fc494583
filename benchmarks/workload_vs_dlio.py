#!/usr/bin/env python3
"""`ckprof workload` against real DLIO saving the same checkpoints, both fsync'd, alternating rounds;
and `ckprof workload` against fio writing the same bytes (issue 26 item 4).

Printed, not asserted (a person reads it). The checkpoint is MLPerf Storage's llama3-8b layout
(llama3_8b.yaml: ZeRO-3, TP = PP = 1, fp16 model and fp32 optimizer states, one model and one
optimizer file per rank) with the model's dimensions scaled to this machine (--layers, --hidden,
--ffn, --heads, --kv-heads, --vocab: 802 MiB a checkpoint at 2 ranks by default). Each round, in
rotating order, on one ext4 over a direct-io loop device (workload_vs_fio.loop_fs):

- DLIO: the pinned dlio_benchmark (tests/frameworks/dlio_run.py: .ci/run installs it) with its fsync
  key fixed (the one-line fix on a copy put first on PYTHONPATH; as released it never fsyncs), run
  bare as a user runs it: `mpirun -np R dlio_benchmark`, --saves checkpoint writes 1 s apart. A
  save's time is DLIO's own timer (each rank's start_save_ckpt → end_save_ckpt, per_epoch_stats.json),
  first rank's start to last rank's end, its bytes the files it wrote;
- `ckprof workload` with the same shape, ranks and saves (--count, --interval 1s), recorded as a
  user runs it; a save's time is its own (barrier → the last rank's last fsync, meta.json's
  workload results);
- fio: one job per rank of the rank's bytes (psync, --chunk-size blocks, end_fsync=1), --saves
  times 1 s apart (workload_vs_fio.fio_run).

Each side's figure in a round is its median save GiB/s (GiB = 2^30 B); the ratios are the
workload's over DLIO's (target ≥ 2.0) and over fio's (target ≥ 0.95) in the same round; the
summary gives their median and range over rounds.

--profile then says where DLIO's save time goes: py-spy (in .venv) samples one DLIO run's ranks
(native frames, idle included) and prints the share of samples inside save_state by leaf frame; and
one rank's files are saved in this process the way DLIO's save_state does (torch.save into an open
file, then os.fsync), with torch's CRC32 off (torch.utils.serialization.config.save.compute_crc32),
and as one raw write of the same bytes, each then fsync'd, so the cost of each step is measured.

Needs root (losetup, mkfs.ext4, mount), fio, mpirun and DLIO. Usage:
    sudo .venv/bin/python benchmarks/workload_vs_dlio.py [--rounds 4] [--saves 3] [--ranks 2] [--profile]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "frameworks"))  # dlio_run: DLIO's YAML, its fsync fix, its timer

import dlio_run  # noqa: E402
from workload_vs_fio import GIB, ckprof_run, fio_run, loop_fs, loop_fs_gone, sh  # noqa: E402

from ckprof.units import fmt_bytes, parse_size  # noqa: E402
from ckprof.workloads.options import ModelOptions  # noqa: E402

SHAPE_FLAGS = ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab")
BETWEEN_S = 1.0


def dlio_env(fixed: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CKPROF_", "OMPI_", "PMIX_"))}
    env["PYTHONPATH"] = str(fixed)
    return env


def dlio_round(
    mnt: str, base: Path, env: dict, shape: dict, saves: int, ranks: int, prefix: tuple[str, ...] | list[str] = ()
):
    """One DLIO run of `saves` saves: [(GiB/s, bytes)] per save, by DLIO's own timer."""
    folder, conf, out = Path(mnt) / "dlio", base / "dlio-conf", base / f"dlio-out-{time.monotonic_ns()}"
    dlio_run.write_workload(conf, shape, folder, saves, BETWEEN_S, fsync=True)
    r = subprocess.run(
        [*prefix, *dlio_run.command(conf, out, ranks)], cwd=base, env=env, capture_output=True, text=True
    )
    if r.returncode != 0:
        sys.exit(f"DLIO failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    timed = dlio_run.timed_saves(out, ranks)
    dirs = sorted((d for d in folder.iterdir() if d.is_dir()), key=lambda d: int(d.name.rpartition("step")[2]))
    got = []
    for d, (a, b) in zip(dirs, timed, strict=True):
        nbytes = sum(f.stat().st_size for f in d.iterdir())
        got.append((nbytes / GIB / (b - a), nbytes))
    shutil.rmtree(folder)
    shutil.rmtree(out, ignore_errors=True)
    sh("sync")
    return got


def workload_args(shape: dict, a) -> list[str]:
    args = ["--preset", "llama3-8b", "--zero", "3", "--ranks", str(a.ranks), "--count", str(a.saves),
            "--interval", f"{BETWEEN_S:g}s", "--chunk-size", a.chunk_size, "--threads", str(a.threads)]  # fmt: skip
    for k in SHAPE_FLAGS:
        args += [f"--{k.replace('_', '-')}", str(shape[k])]
    return args


def fio_round(mnt: str, rank_bytes: list[int], chunk: int, saves: int) -> list[float]:
    got = []
    for k in range(saves):
        time.sleep(BETWEEN_S if k else 0.0)
        got.append(fio_run(mnt, rank_bytes, chunk, False))
    return got


def rounds(a, mnt: str, base: Path, env: dict, shape: dict, rank_bytes: list[int]) -> None:
    chunk = parse_size(a.chunk_size)
    sides = ["dlio", "ckprof", "fio"]
    print(
        f"\nround  order               {'DLIO GiB/s':>10s}  {'ckprof GiB/s':>12s}  {'fio GiB/s':>9s}  ckprof/DLIO  ckprof/fio"
    )
    vs_dlio, vs_fio, dlio_bytes = [], [], None
    for i in range(a.rounds):
        order = sides[i % 3 :] + sides[: i % 3]
        got: dict[str, list[float]] = {}
        for who in order:
            if who == "dlio":
                per_save = dlio_round(mnt, base, env, shape, a.saves, a.ranks)
                got["dlio"] = [g for g, _ in per_save]
                dlio_bytes = per_save[0][1]
            elif who == "ckprof":
                got["ckprof"] = [
                    c["gib_per_s"] for c in ckprof_run(mnt, str(base), workload_args(shape, a), every=True)
                ]
            else:
                got["fio"] = fio_round(mnt, rank_bytes, chunk, a.saves)
        med = {k: statistics.median(v) for k, v in got.items()}
        vs_dlio.append(med["ckprof"] / med["dlio"])
        vs_fio.append(med["ckprof"] / med["fio"])
        print(
            f"{i + 1:5d}  {'→'.join(order):18s}  {med['dlio']:10.3f}  {med['ckprof']:12.3f}  {med['fio']:9.3f}  "
            f"{vs_dlio[-1]:11.2f}  {vs_fio[-1]:10.2f}"
        )
        print(f"       each save: DLIO {_fmt(got['dlio'])}; ckprof {_fmt(got['ckprof'])}; fio {_fmt(got['fio'])}")
    print(f"\nDLIO wrote {fmt_bytes(dlio_bytes)} a checkpoint (torch.save's zip framing included), ckprof "
          f"{fmt_bytes(sum(rank_bytes))}, fio {fmt_bytes(sum(rank_bytes))}")  # fmt: skip
    print(f"ckprof/DLIO: median {statistics.median(vs_dlio):.2f} (range {min(vs_dlio):.2f}–{max(vs_dlio):.2f}, "
          f"{len(vs_dlio)} rounds; target ≥ 2.0)")  # fmt: skip
    print(f"ckprof/fio:  median {statistics.median(vs_fio):.2f} (range {min(vs_fio):.2f}–{max(vs_fio):.2f}, "
          f"{len(vs_fio)} rounds; target ≥ 0.95)")  # fmt: skip


def _fmt(xs: list[float]) -> str:
    return " ".join(f"{x:.3f}" for x in xs)


def py_spy_leaves(mnt: str, base: Path, env: dict, shape: dict, a) -> None:
    """One DLIO run under py-spy: each rank's samples inside save_state, by leaf frame."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        print("py-spy is not beside this Python: no sampled profile")
        return
    raw = base / "dlio-py-spy.txt"
    prefix = [str(spy), "record", "--subprocesses", "--native", "--idle", "--format", "raw", "-r", "100",
              "-o", str(raw), "--"]  # fmt: skip
    dlio_round(mnt, base, env, shape, a.saves, a.ranks, prefix=prefix)
    leaves: collections.Counter[str] = collections.Counter()
    within: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if "save_state" not in stack:
            continue
        frames = stack.split(";")
        total += int(n)
        leaves[frames[-1].split(" (")[0]] += int(n)
        for name, key in (("mz_crc32 (torch's zip writer: CRC32 of every record)", "mz_crc32"),
                          ("the Python file's write(2)", "ostream_write_func"), ("os.fsync", "os_fsync"),
                          ("pickling", "_pickle")):  # fmt: skip
            if any(key in f for f in frames):
                within[name] += int(n)
    print(f"\npy-spy, one DLIO run (--native --idle, 100 Hz): {total} samples inside save_state")
    for name, n in within.most_common():
        print(f"  {100 * n / max(1, total):5.1f} %  under {name}")
    print("  leaf frames:")
    for name, n in leaves.most_common(6):
        print(f"  {100 * n / max(1, total):5.1f} %  {name}")


def save_steps(mnt: str, rank_files: list[int], reps: int = 3) -> None:
    """One rank's two files saved here as DLIO's save_state does, then with torch's CRC32 off, then
    as one raw write each; every variant ends each file with os.fsync (median of `reps`)."""
    import torch
    from torch.utils.serialization import config as torch_config

    states = [{"0": torch.ones(n // 4, dtype=torch.float32)} for n in rank_files]  # DLIO's tensors, by bytes
    d = Path(mnt) / "steps"
    d.mkdir()

    def timed(write) -> float:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for k, st in enumerate(states):
                with open(d / f"f{k}", "wb") as f:
                    write(st, f)
                    os.fsync(f.fileno())
            times.append(time.perf_counter() - t0)
            for p in d.iterdir():
                p.unlink()
            sh("sync")
        return statistics.median(times)

    def save_no_crc(st, f):
        torch_config.save.compute_crc32 = False
        try:
            torch.save(st, f)
        finally:
            torch_config.save.compute_crc32 = True

    nbytes = sum(rank_files)
    rows = [
        ("torch.save into the open file + fsync (DLIO's save_state)", timed(torch.save)),
        ("the same, torch's CRC32 off", timed(save_no_crc)),
        ("one write(2) of the tensor's bytes + fsync", timed(lambda st, f: f.write(st["0"].numpy().data))),
    ]
    shutil.rmtree(d)
    print(f"\none rank's files ({fmt_bytes(nbytes)}) saved in this process, each fsync'd, median of {reps}:")
    for name, s in rows:
        print(f"  {s:7.3f} s  {nbytes / GIB / s:6.3f} GiB/s  {100 * s / rows[0][1]:5.1f} %  {name}")
    crc, framing = rows[0][1] - rows[1][1], rows[1][1] - rows[2][1]
    print(f"  CRC32: {crc:.3f} s ({100 * crc / rows[0][1]:.0f} % of DLIO's save); torch's framing beyond it: "
          f"{framing:.3f} s ({100 * framing / rows[0][1]:.0f} %)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--saves", type=int, default=3, help="checkpoints each side writes a round")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--chunk-size", default="4MiB", help="the workload's write(2) size and fio's bs")
    ap.add_argument("--threads", type=int, default=1, help="the workload's writer threads per rank")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--ffn", type=int, default=1792)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32064)
    ap.add_argument("--profile", action="store_true", help="then where DLIO's save time goes")
    a = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("fio") is None or shutil.which("mpirun") is None:
        sys.exit("needs root, fio and mpirun")
    pkg, why = dlio_run.package()
    if pkg is None:
        sys.exit(why)
    if not dlio_run.has_bug(pkg):
        sys.exit(f"{pkg}: {dlio_run.BUG_LINE!r} is not there once: revisit dlio_run.py's fix")
    shape = {k: getattr(a, k) for k in SHAPE_FLAGS}
    plan = ModelOptions(preset="llama3-8b", zero=3, ranks=a.ranks, **shape).plan()
    rank_bytes = [r.nbytes for r in plan.ranks]
    base = Path(tempfile.mkdtemp(prefix="ckprof-bench-dlio-"))
    dev = None
    try:
        env = dlio_env(dlio_run.fixed_copy(pkg, base / "dlio-fixed"))
        dev, mnt = loop_fs(str(base), max(3 * GIB, (a.saves + 2) * plan.nbytes))
        files = ", ".join(fmt_bytes(f.nbytes) for f in plan.ranks[0].files)
        print(
            f"loop device {dev} (--direct-io=on, ext4); llama3-8b layout scaled: {', '.join(f'{k} {v}' for k, v in shape.items())}; "
            f"{a.ranks} ranks × ({files}) = {fmt_bytes(plan.nbytes)} a checkpoint; {a.saves} saves {BETWEEN_S:g} s "
            f"apart a side a round; DLIO {pkg} with its fsync fixed"
        )
        rounds(a, mnt, base, env, shape, rank_bytes)
        if a.profile:
            py_spy_leaves(mnt, base, env, shape, a)
            save_steps(mnt, [f.nbytes for f in plan.ranks[0].files])
    finally:
        loop_fs_gone(str(base), dev)


if __name__ == "__main__":
    main()
