"""The whole `ckprof record` process's CPU cost, printed for a person (never asserted).

For 10 and 100 Hz with 10 block devices (the machine's disks topped up with loop devices over
64 MiB files; needs root for those), `ckprof record -- sleep 40` and `-- sleep 4` are run and
the process's CPU time is taken from wait4(2)'s rusage once it has exited, so start-up, every
flush, the last sample and the final merge and meta.json are all in it (its child `sleep` costs
~0). The steady cost is (CPU(40) − CPU(4)) / 36 s: start-up and the fixed part of the end cancel.
That difference is noisy at 10 Hz (start-up alone is ~1.4 s of CPU and varies by a few tenths), so
the long run is also read a second way: its CPU from WARM_S after launch (/proc/<pid>/stat) to its
exit (wait4), over those seconds — start-up left out, every flush and the whole end left in.

Peers, in the same run, reading the same files at the same rate (/proc/diskstats, /proc/stat,
/proc/meminfo: the loop devices are idle, so no inflight file; files kept open, pread, absolute deadlines):
benchmarks/floor/sampler_floor.c (compiled here with cc: what reading the counters costs at all)
and benchmarks/floor/python_floor.py (the least a Python sampler can do: keep each reading). The
recorder's figures are printed as ratios to both. Also printed: CPU by thread in ms per second of recording (meta.json: each collector thread's,
the flusher's, the file tracker's) and how late each block sample was against its schedule
(p50/p99/max, the final off-schedule sample at stop() left out).

    sudo python benchmarks/recorder_process_cpu.py [--rounds N] [--samplers native python]
                                                   [--python PY] [--json OUT] [--compare BEFORE.json]

`--rounds` repeats each measurement and prints the median (one pair of runs moves by ~0.03 % of
a core here); `--samplers native python` measures the C sampler and the Python one
(CKPROF_SAMPLER=python) alternately in the same run. `--python` runs another checkout's ckprof
(e.g. a worktree of main with its own venv), so before and after are measured by the same code;
`--compare` prints after/before ratios.
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
import pyarrow.parquet as pq

LOOPS: list[str] = []


def make_devices(tmp: str, n: int) -> list[str]:
    """n devices to record: loop devices over sparse 64 MiB files (as tests/conftest.py makes them)."""
    devs = []
    while os.geteuid() == 0 and len(devs) < n:
        img = os.path.join(tmp, f"d{len(devs)}.img")
        subprocess.run(["truncate", "-s", "64M", img], check=True)
        dev = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True, text=True)
        LOOPS.append(dev.stdout.strip())
        devs.append(os.path.basename(LOOPS[-1]))
    return devs


WARM_S = 5.0  # after launch: start-up (imports, probes, the first flush) is over by then
HERE = os.path.dirname(os.path.abspath(__file__))


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process (/proc/<pid>/stat fields 14 and 15, in clock ticks; proc(5))."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def record(
    py: str, devices: list[str], interval: str, seconds: float, out: str, sampler: str = "native"
) -> tuple[float, float | None]:
    """(CPU seconds, user + system, of one `ckprof record -- sleep SECONDS` from start to exit;
    its CPU seconds per second from WARM_S after launch to exit, or None for a run shorter than that)."""
    dev_args = [a for d in devices for a in ("--device", d)]
    argv = [py, "-m", "ckprof", "record", "-q", *dev_args, "--interval", interval, "-o", out, "--force"]
    env = dict(os.environ, **({"CKPROF_SAMPLER": "python"} if sampler == "python" else {}))
    p = subprocess.Popen([*argv, "--", "sleep", str(seconds)], env=env)
    warm = None
    if seconds > 2 * WARM_S:
        time.sleep(WARM_S)
        warm = (time.monotonic(), _proc_cpu_s(p.pid))
    _, status, ru = os.wait4(p.pid, 0)
    t1 = time.monotonic()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"ckprof record exited {p.returncode}")
    total = ru.ru_utime + ru.ru_stime
    steady = (total - warm[1]) / (t1 - warm[0]) if warm else None
    return total, steady


def floor_files(devices: list[str]) -> list[str]:
    """What the recorder's block and host collectors read each tick with these (idle) devices: an
    idle device's /sys/block/<dev>/inflight is not read (its /proc/diskstats in_flight is 0)."""
    del devices
    return ["/proc/diskstats", "/proc/stat", "/proc/meminfo"]


def floors(devices: list[str], hz: int, seconds: float, tmp: str) -> dict:
    """CPU per second of the C and the Python floor samplers (None where cc is missing)."""
    out = {}
    c_bin = os.path.join(tmp, "sampler_floor")
    if not os.path.exists(c_bin) and shutil.which("cc"):
        subprocess.run(["cc", "-O2", "-o", c_bin, os.path.join(HERE, "floor", "sampler_floor.c")], check=True)
    runs = {
        "c": [c_bin] if os.path.exists(c_bin) else None,
        "python": [sys.executable, os.path.join(HERE, "floor", "python_floor.py")],
    }
    for name, argv in runs.items():
        if argv is None:
            out[name] = None
            continue
        r = subprocess.run(
            [*argv, str(hz), str(seconds), *floor_files(devices)], check=True, capture_output=True, text=True
        )
        cpu, covered = map(float, r.stdout.split())
        out[name] = cpu / covered
    return out


def block_t_ns(out: str) -> np.ndarray:
    """The block collector's sample times (one per sample, whatever the number of devices)."""
    d = os.path.join(out, "samples", "block")
    parts = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".parquet"))
    t = np.concatenate([pq.read_table(p, columns=["t_ns"])["t_ns"].to_numpy() for p in parts])
    return np.unique(t)


def lateness_ms(t: np.ndarray, interval_s: float) -> np.ndarray:
    t = t[:-1]  # the final sample at stop() is off-schedule by design
    period = interval_s * 1e9
    sched = t[0] + np.round((t - t[0]) / period) * period
    return (t - sched) / 1e6


def measure(
    py: str, devices: list[str], hz: int, long_s: float, short_s: float, floor_s: float, tmp: str, sampler: str
) -> dict:
    interval = f"{1000 // hz}ms"
    out = os.path.join(tmp, f"rec{hz}")
    cpu_short, _ = record(py, devices, interval, short_s, out, sampler)
    cpu_long, steady = record(py, devices, interval, long_s, out, sampler)
    floor = floors(devices, hz, floor_s, tmp)
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    wall = (meta["end"]["monotonic_ns"] - meta["start"]["monotonic_ns"]) / 1e9
    threads = {}
    for k, v in meta["collectors"].items():  # a native thread's CPU is counted to its first collector
        shared = [n for n, c in meta["collectors"].items() if c.get("cpu_counted_to") == k]
        if v.get("cpu_counted_to") not in (None, k):
            continue
        threads["+".join(shared) + " (C thread)" if shared else k] = v["cpu_s"]
    threads["flush"] = meta["recorder_cpu_s"]["flush"]
    if meta.get("file_tracker"):
        threads["files"] = meta["file_tracker"]["cpu_s"]
    late = lateness_ms(block_t_ns(out), 1 / hz)
    return {
        "hz": hz,
        "sampler": sampler,
        "ran": {k: v.get("sampler") for k, v in meta["collectors"].items() if v.get("sampler")},
        "devices": len(devices),
        "process_pct": max(cpu_long - cpu_short, 0) / (long_s - short_s) * 100,
        "steady_pct": steady * 100 if steady is not None else None,
        "floor_c_pct": floor["c"] * 100 if floor["c"] is not None else None,
        "floor_python_pct": floor["python"] * 100,
        "cpu_long_s": cpu_long,
        "cpu_short_s": cpu_short,
        "thread_ms_per_s": {k: v / wall * 1000 for k, v in threads.items()},
        "late_p50_ms": float(np.percentile(late, 50)),
        "late_p99_ms": float(np.percentile(late, 99)),
        "late_max_ms": float(late.max()),
        "samples": int(len(late)),
    }


def median_of(rs: list[dict]) -> dict:
    """The median of each figure over rounds (thread figures too); the rest from the first."""
    out = dict(rs[0])
    for k, v in rs[0].items():
        if isinstance(v, float) and all(r.get(k) is not None for r in rs):
            out[k] = float(np.median([r[k] for r in rs]))
    out["thread_ms_per_s"] = {
        k: float(np.median([r["thread_ms_per_s"].get(k, 0.0) for r in rs])) for k in out["thread_ms_per_s"]
    }
    out["process_pct_each"] = [round(r["process_pct"], 3) for r in rs]
    return out


def show(r: dict, before: dict | None) -> None:
    def ratio(key: str) -> str:
        if not before or not before.get(key):
            return ""
        return f" (before {before[key]:.3f}, after/before {r[key] / before[key]:.2f})"

    print(
        f"{r['hz']:>3} Hz, {r['devices']} devices: process {r['process_pct']:.3f} % of a core{ratio('process_pct')}"
        + (f" (rounds: {', '.join(map(str, r['process_pct_each']))})" if len(r.get("process_pct_each", [])) > 1 else "")
        + f"  [CPU {r['cpu_long_s']:.3f} s over the long run, {r['cpu_short_s']:.3f} s over the short]"
    )
    if r.get("steady_pct") is not None:
        line = f"        after start-up, to exit: {r['steady_pct']:.3f} % of a core{ratio('steady_pct')}"
        for peer, key in (("C floor", "floor_c_pct"), ("Python floor", "floor_python_pct")):
            if r.get(key):
                line += f"; {peer} {r[key]:.3f} % (recorder/{peer} {r['steady_pct'] / r[key]:.2f}×)"
        print(line)
    print(
        f"        lateness p50 {r['late_p50_ms']:.3f} ms, p99 {r['late_p99_ms']:.3f} ms{ratio('late_p99_ms')}, "
        f"max {r['late_max_ms']:.3f} ms over {r['samples']} samples"
    )
    bt = (before or {}).get("thread_ms_per_s", {})
    parts = []
    for k, v in r["thread_ms_per_s"].items():
        b = bt.get(k)
        parts.append(f"{k} {v:.2f}" + (f" (was {b:.2f})" if b is not None else ""))
    for k in bt.keys() - r["thread_ms_per_s"].keys():
        parts.append(f"{k} gone (was {bt[k]:.2f})")
    print(f"        CPU by thread, ms/s: {', '.join(parts)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter whose ckprof is measured")
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--long", type=float, default=40)
    ap.add_argument("--short", type=float, default=4)
    ap.add_argument("--hz", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--floor", type=float, default=20, help="seconds each floor sampler runs")
    ap.add_argument("--rounds", type=int, default=1, help="repeat each measurement; medians are printed")
    ap.add_argument(
        "--samplers", nargs="+", choices=["native", "python"], default=["native"], help="which samplers to measure"
    )
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--compare", help="figures of an earlier run (--json) to print ratios against")
    args = ap.parse_args()
    before = {}
    if args.compare:
        with open(args.compare) as f:
            before = {r["hz"]: r for r in json.load(f)}
    tmp = tempfile.mkdtemp()
    results = []
    try:
        devices = make_devices(tmp, args.devices)
        if not devices:
            raise SystemExit("needs root to make loop devices")
        print(
            f"{args.python}: ckprof record -- sleep {args.long:g} minus sleep {args.short:g}, devices {' '.join(devices)}"
        )
        for hz in args.hz:
            runs: dict[str, list[dict]] = {s: [] for s in args.samplers}
            for _ in range(args.rounds):  # the samplers alternate, round by round
                for sampler in args.samplers:
                    runs[sampler].append(
                        measure(args.python, devices, hz, args.long, args.short, args.floor, tmp, sampler)
                    )
            for sampler, rs in runs.items():
                r = median_of(rs)
                results.append(r)
                print(f"[{sampler} sampler: {', '.join(f'{k} {v}' for k, v in r['ran'].items())}; median of {len(rs)}]")
                show(r, before.get(hz))
    finally:
        for dev in LOOPS:
            subprocess.run(["losetup", "-d", dev])
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
