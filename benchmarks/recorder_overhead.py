"""Recorder overhead, printed for a person (never asserted; this machine is noisy).

1. CPU seconds the recorder spends per second of recording, at 10 Hz and 100 Hz, with every
   disk recorded (--device all; 10 devices on the reference machine). Peer: the same idle
   `sleep` without recording costs nothing, so the figure is the recorder's own.
   Target: ≤ 0.5 % of one core at 10 Hz.
2. p50/p99 of how late each block sample was against its schedule, from the recorded t_ns.
   Target: p99 ≤ 2 ms late at 10 Hz.
3. A write workload's throughput on the same loop device with and without recording,
   alternating, as a ratio (target ≥ 0.99). Needs root (loop device) and fio.

    sudo python benchmarks/recorder_overhead.py [--seconds 20] [--rounds 3]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import ckprof

CKPROF = [sys.executable, "-m", "ckprof"]


DEVICES: list[str] = []  # --device arguments; 10 devices when root can make loop devices


def make_devices(tmp: str, n: int = 10) -> list[str]:
    """Up to n devices to record: the machine's disks with a size, topped up with loop devices."""
    from ckprof.collectors.topology import Topology

    topo = Topology()
    devs = [d for d in topo.disks() if (topo._read(topo._cls(d, "size")) or "0") != "0"][:n]
    while os.geteuid() == 0 and len(devs) < n:
        img = os.path.join(tmp, f"d{len(devs)}.img")
        subprocess.run(["truncate", "-s", "64M", img], check=True)
        dev = subprocess.run(
            ["losetup", "-f", "--show", img], check=True, capture_output=True, text=True
        ).stdout.strip()
        LOOPS.append(dev)
        devs.append(os.path.basename(dev))
    return devs


LOOPS: list[str] = []


def cpu_of_record(seconds: float, interval: str, out: str) -> tuple[float, float]:
    """CPU seconds used by the recorder process itself (children excluded) and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # run the recorder; its child is `sleep`, whose CPU is ~0, so RUSAGE_CHILDREN ≈ recorder's
    dev_args = [a for d in DEVICES for a in ("--device", d)]
    subprocess.run(
        [*CKPROF, "record", "-q", *dev_args, "--interval", interval, "-o", out, "--force", "--", "sleep", str(seconds)],
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, seconds


def lateness_ms(out: str, interval_s: float) -> np.ndarray:
    rec = ckprof.load(out)
    b = rec.samples("block")
    t = np.sort(b.groupby("t_ns").size().index.to_numpy())
    t = t[:-1]  # the final sample at stop() is off-schedule by design
    sched = t[0] + np.round((t - t[0]) / (interval_s * 1e9)) * interval_s * 1e9
    return (t - sched) / 1e6


def startup_cpu(out: str) -> float:
    cpu, _ = cpu_of_record(0, "100ms", out)
    return cpu


def fio_ratio(seconds: float, rounds: int) -> None:
    if os.geteuid() != 0 or not shutil.which("fio"):
        print("3. throughput ratio: skipped (needs root for a loop device, and fio)")
        return
    tmp = tempfile.mkdtemp()
    img = os.path.join(tmp, "disk.img")
    subprocess.run(["truncate", "-s", "3G", img], check=True)
    dev = subprocess.run(
        ["losetup", "-f", "--show", "--direct-io=on", img], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        fio = [
            "fio",
            "--name=w",
            f"--filename={dev}",
            "--rw=write",
            "--bs=1M",
            "--iodepth=8",
            "--ioengine=libaio",
            "--direct=1",
            "--size=2G",
            f"--runtime={seconds}",
            "--time_based",
            "--output-format=json",
        ]
        bare, rec = [], []
        for _round in range(rounds):
            for recorded in (False, True):
                out = os.path.join(tmp, "fio.json")
                cmd = fio + [f"--output={out}"]
                if recorded:
                    cmd = [
                        *CKPROF,
                        "record",
                        "-q",
                        "--device",
                        os.path.basename(dev),
                        "-o",
                        os.path.join(tmp, "rec"),
                        "--force",
                        "--",
                    ] + cmd
                subprocess.run(cmd, check=True)
                bw = json.load(open(out))["jobs"][0]["write"]["bw_bytes"] / 2**30
                (rec if recorded else bare).append(bw)
        print(f"3. write throughput on {dev} (fio 1 MiB direct, {seconds:g} s × {rounds} alternating rounds):")
        print(f"   without recording: {np.median(bare):.3f} GiB/s (median; {', '.join(f'{x:.3f}' for x in bare)})")
        print(f"   with recording:    {np.median(rec):.3f} GiB/s (median; {', '.join(f'{x:.3f}' for x in rec)})")
        print(f"   ratio recorded/bare: {np.median(rec) / np.median(bare):.3f}   (target ≥ 0.99)")
    finally:
        subprocess.run(["losetup", "-d", dev])
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    try:
        DEVICES[:] = make_devices(tmp)
        out = os.path.join(tmp, "rec")
        base = startup_cpu(out)
        ndev = len(ckprof.load(out).samples("block")["device"].unique())
        print(
            f"devices recorded: {ndev} ({', '.join(DEVICES)}); start-up and shut-down cost {base:.3f} CPU s, subtracted below"
        )
        print("1./2. recorder cost and sampling punctuality:")
        for hz, interval in ((10, "100ms"), (100, "10ms")):
            cpu, wall = cpu_of_record(args.seconds, interval, out)
            per_s = max(cpu - base, 0) / wall
            late = lateness_ms(out, 1 / hz)
            meta = ckprof.load(out).meta
            threads = {k: v["cpu_s"] for k, v in meta["collectors"].items()}
            threads["flush"] = meta["recorder_cpu_s"]["flush"]
            breakdown = ", ".join(f"{k} {v / wall * 1000:.2f} ms/s" for k, v in threads.items())
            print(
                f"   {hz:>3} Hz: {per_s * 100:.3f} % of one core (CPU s per s of recording; target at 10 Hz ≤ 0.5 %); "
                f"lateness p50 {np.percentile(late, 50):.3f} ms, p99 {np.percentile(late, 99):.3f} ms, "
                f"max {late.max():.3f} ms over {len(late)} samples (target p99 ≤ 2 ms at 10 Hz)"
            )
            print(f"        CPU by thread (steady state, from meta.json): {breakdown}")
    finally:
        for dev in LOOPS:
            subprocess.run(["losetup", "-d", dev])
        shutil.rmtree(tmp, ignore_errors=True)
    fio_ratio(min(args.seconds, 10), args.rounds)


if __name__ == "__main__":
    main()
