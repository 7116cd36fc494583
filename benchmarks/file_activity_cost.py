"""What the file-activity source (record/fileactivity.py: fanotify + the proc connector) costs the
recorder, printed for a person to read (never asserted).

`ckprof record --path DIR -- CMD` is run with the source on (its C reader, record/fanreader.c),
on with the Python reader forced (CKPROF_FILE_ACTIVITY_READER=python) and off
(CKPROF_FILE_ACTIVITY=off), in alternating order, for three commands:

  * idle: `sleep D`;
  * files: a Python loop creating, writing and closing small files under DIR at a steady rate
    (each file is three kernel events: FAN_CREATE, FAN_MODIFY, FAN_CLOSE_WRITE), ~10,000 events/s
    by default, in a new directory every second: the worst case, nothing for the kernel to merge;
  * writes: ~10,000 write(2) calls a second spread over 8 open files (a save streaming its shards):
    each a FAN_MODIFY, merged by the kernel while unread.

The generators say the rate they reached (a loaded machine may not reach the one asked for). With
--loop-ext4 the commands write to a new ext4 on a loop device whose image is in RAM (/dev/shm): a
real block device, page cache and writeback (the recorder's work a file is the same), where the
files generator reaches 10,000 events/s run after run on this VM; on the root file system it reached
3,000-10,000, and figures at different rates do not compare.

The recorder's CPU is meta.json's `recorder_cpu_s.process` (time.process_time() of the ckprof
process at the recording's end: all its threads, not the command's); the extra CPU is on − off,
per second of recording, in % of one core. The source's own thread (meta.json
`file_activity.cpu_s`) and the file tracker's (`file_tracker.cpu_s`, with the look that ran) are printed too, per second of the command's run (the load; also per second
of the recording, whose start and end are idle for it), with how many kernel events it read (after the kernel's
merging) and how many were the recorded tree's: it is the precise figure, the process's on − off is
within what start-up varies by (±1.5 % of a core at 10 s here). The budget's figure (issue 21: the
recorder's extra CPU while the load runs) is the steady state: the whole recorder process's CPU
(/proc/PID/stat, every thread) over the middle 60 % of the command's run, on − off, printed per
run and as medians; it leaves out start-up and the recording's end (the end's last looks at up to
filetracker.WRITTEN_MAX waiting files are a one-off, in `process`). The two readers are compared as a
ratio (Python ÷ C) of the source thread's CPU. Needs root (fanotify, CAP_SYS_ADMIN).

With --replay N, the two readers' own work is timed apart from the wake-ups and the machine's
load: N new small files (a steady rate, --rate / 3 files a second, into 3 existing directories) are
written once under the Python reader, whose buffers are kept; then the same buffers are fed to each
reader in turn (ckprof.record.fanreplay), --rounds times, each reader's thread CPU a file printed,
and the ratio Python ÷ C.

With --reader-only, the source alone runs in this process (FileActivity, a real group, the real
proc connector; the C reader with its read cycle in C, the C reader called from the Python loop
(CKPROF_FILE_ACTIVITY_CYCLE=python: the code before fr_cycle) and the Python reader, in turn,
--rounds each) while GEN writes new
small files for --seconds: its thread's CPU per second of the command and the files a second it
saw, without the rest of the recorder competing for the two cores (under `ckprof record` the
generator often falls short of the rate asked on this VM, and per-file figures at different rates
do not compare).

With --baseline-python PY (an interpreter whose `ckprof` is another version, e.g. another
checkout's virtual env), each round also records with the source on under PY, in alternating
order: the code before a change and after it, measured in the same run.

In --replay and --reader-only the source hands each batch's watched paths to a sink that keeps
nothing, as it hands them to the file tracker under `ckprof record` (that work is the source's).

With --tracker-route N, the file tracker's own CPU to learn of N written files (batches of --batch
entries, as the source writes them at ~3,300 files a second), by each route, alternating --rounds
times, no look made: parsing the `file_activity` lines back from events.jsonl (a tracker handed
nothing) and being handed the paths in-process (FileTracker.written_sink, under `ckprof record`).

    sudo python benchmarks/file_activity_cost.py [--seconds 20] [--rate 10000] [--rounds 2]
        [--baseline-python OTHER/.venv/bin/python] [--no-python-reader] [--loop-ext4] [--replay 6000] [--reader-only]
        [--tracker-route 39600 [--batch 330]]
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

GEN = r"""
import os, sys, time
root, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
files_per_s = rate / 3  # create + modify + close_write per file
t0 = time.monotonic()
n = 0
payload = b"x" * 512
while (now := time.monotonic()) - t0 < seconds:
    d = os.path.join(root, f"step_{int(now - t0)}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{n}"), "wb") as f:
        f.write(payload)
    n += 1
    ahead = t0 + n / files_per_s - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
print(f"{3 * n / (time.monotonic() - t0):.0f}", flush=True)
"""

# a save streaming into a few large files: write(2) calls, each a FAN_MODIFY the kernel may merge
WRITES = r"""
import os, sys, time
root, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
fds = [os.open(os.path.join(root, f"shard_{i}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC) for i in range(8)]
t0 = time.monotonic()
n = 0
payload = b"x" * 4096
while time.monotonic() - t0 < seconds:
    os.write(fds[n % 8], payload)
    n += 1
    if n % 8 == 0 and os.fstat(fds[0]).st_size > 64 << 20:
        for fd in fds:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, 0)
    ahead = t0 + n / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
print(f"{n / (time.monotonic() - t0):.0f}", flush=True)
"""


def _process_cpu_s(pid: int) -> float:
    """utime + stime of a whole process, all its threads (proc(5) /proc/PID/stat fields 14, 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _command_started(pid: int, limit_s: float = 60.0) -> None:
    """Wait until the recorder has spawned its command (a child process of its own)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                if f.read().split():
                    return
        except OSError:
            return
        time.sleep(0.05)


def record(root: str, out: str, cmd: list[str], on, python: str = sys.executable, seconds: float = 0.0):
    """Record `cmd`; (meta.json, what the command printed, the recorder's steady CPU): the whole
    recorder process's CPU (every thread) per second over the middle 60 % of the command's run,
    its start-up and its end left out, in a fraction of a core (None when too short to tell)."""
    env = dict(os.environ)
    env.pop("CKPROF_FILE_ACTIVITY_READER", None)
    if not on:
        env["CKPROF_FILE_ACTIVITY"] = "off"
    elif on == "python":
        env["CKPROF_FILE_ACTIVITY_READER"] = "python"
    p = subprocess.Popen(
        [python, "-m", "ckprof", "record", "-q", "--force", "-o", out, "--path", root, "--", *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    steady = None
    if seconds >= 5:
        _command_started(p.pid)
        time.sleep(0.2 * seconds)
        c0, t0 = _process_cpu_s(p.pid), time.monotonic()
        time.sleep(0.6 * seconds)
        steady = (_process_cpu_s(p.pid) - c0) / (time.monotonic() - t0)
    stdout, stderr = p.communicate()
    if p.returncode != 0:
        sys.exit(f"ckprof record failed ({p.returncode}): {stderr[-2000:]}")
    with open(os.path.join(out, "meta.json")) as f:
        return json.load(f), stdout.strip(), steady


REPLAY_GEN = r"""
import os, sys, time
root, rate, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
sys.stdin.readline()  # the reader knows this process: go
t0 = time.monotonic()
for i in range(n):
    with open(os.path.join(root, f"step_{i % 3}", f"f{i}"), "wb") as f:
        f.write(b"x" * 512)
    ahead = t0 + (i + 1) / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
"""


def _discard(batch) -> None:
    """A file tracker's sink that keeps nothing: the source's side of the hand-off only."""


def _pct(fraction: float | None) -> str:
    return "n/a (too short)" if fraction is None else f"{100 * fraction:.3f} %"


def tracker_route(tmp: str, files: int, batch: int, rounds: int) -> None:
    """The file tracker's CPU to learn of written files, by each route (module doc)."""
    from ckprof.record import filetracker
    from ckprof.record.clock import MonotonicClock
    from ckprof.recording.writer import RecordingWriter

    filetracker.WRITTEN_MAX = 1 << 62  # every file kept waiting: the route's whole work, no bound
    files = -(-files // batch) * batch

    def run(route: str) -> float:
        writer = RecordingWriter(tempfile.mkdtemp(dir=tmp))
        writer.create({})
        t = filetracker.FileTracker(writer, MonotonicClock(), period_s=0.1)
        t._add_written = lambda every_file: None  # no first looks: the route's own work
        sink = t.written_sink() if route == "in-process" else None
        cpu_s = 0.0
        for k in range(0, files, batch):
            entries = [
                {"path": f"/ckpt/step_{i // 3300}/f{i}", "start_ns": 10**15 + i, "start_from": "btime",
                 "end_ns": 10**15 + 5 * 10**5 + i, "ops": ["create", "modify", "close_write"], "writers": [12345],
                 "size_bytes": 512, "kernel_events": 1}
                for i in range(k, k + batch)
            ]  # fmt: skip
            line = {"t_ns": 10**15 + k, "event": "file_activity", "source": "fanotify", "files": entries}
            if sink is not None:  # as the source does: hand, then write the line
                sink(filetracker.WrittenBatch.of(filetracker.watched_paths(entries)))
            writer.event_json(json.dumps(line, separators=(",", ":")).encode())
            c0 = time.thread_time()
            t.tick()
            cpu_s += time.thread_time() - c0
        t._events.close()
        assert t._written_n == files, (route, t._written_n)
        return cpu_s

    took: dict[str, list[float]] = {"events.jsonl": [], "in-process": []}
    for k in range(rounds):
        for route in list(took) if k % 2 == 0 else list(took)[::-1]:
            took[route].append(run(route))
            print(f"tracker-route round {k + 1} {route}: {1e6 * took[route][-1] / files:.2f} µs a written file")
    m = {r: statistics.median(v) / files for r, v in took.items()}
    print(
        f"== tracker-route ({files} files in batches of {batch}, load average {os.getloadavg()[0]:.1f}): "
        + "; ".join(
            f"{r} {1e6 * v:.2f} µs a file ({100 * v * 3333:.2f} % of a core at 3,333 files/s)" for r, v in m.items()
        )
    )


def replay(tmp: str, files: int, rate: float, rounds: int) -> None:
    """The readers' CPU a file on the same captured events (module doc)."""
    from ckprof.record import fanreader, fanreplay

    why = fanreader.why_not()
    if why is not None:
        sys.exit(f"the C reader cannot run here: {why}")
    root = os.path.join(tmp, "replay")
    for i in range(3):
        os.makedirs(os.path.join(root, f"step_{i}"))
    gen = os.path.join(tmp, "replay_gen.py")
    with open(gen, "w") as f:
        f.write(REPLAY_GEN)
    buffers, tree = fanreplay.capture(root, [sys.executable, gen, root, str(rate / 3), str(files)])
    offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
    print(
        f"replay: {files} new files at {rate / 3:.0f}/s, {len(buffers)} reads, {sum(len(b) for b, _ in buffers)} bytes"
    )
    per_file = {"python": [], "c": []}
    for k in range(rounds):
        for reader in ("python", "c") if k % 2 == 0 else ("c", "python"):
            _ev, fa, cpu_s = fanreplay.replay(
                root, buffers, tree, reader, offset_ns, writer=fanreplay.EncodingWriter(), written_to=_discard
            )
            per_file[reader].append(1e6 * cpu_s / max(fa.files, 1))
            print(f"replay round {k + 1} {reader}: {per_file[reader][-1]:.2f} µs of CPU a file ({fa.files} files)")
    py_m, c_m = statistics.median(per_file["python"]), statistics.median(per_file["c"])
    print(f"== replay: Python reader {py_m:.2f} µs a file, C reader {c_m:.2f} µs; Python ÷ C {py_m / c_m:.2f}×")


def reader_only(tmp: str, gen: str, rate: float, seconds: float, rounds: int) -> None:
    """The source's thread alone, with each reader, on the same generator (module doc)."""
    from ckprof.record import fanreader, fileactivity
    from ckprof.record.clock import MonotonicClock
    from ckprof.record.fanreplay import EncodingWriter
    from ckprof.record.fileactivity import FileActivity

    # the C reader with its read cycle in C; the C reader called from the Python loop (the code
    # before fr_cycle); the Python reader
    envs = {
        "c": {},
        "c, Python cycle": {fileactivity.CYCLE_ENV: "python"},
        "python": {fanreader.ENV: "python"},
    }
    cpu: dict[str, list[float]] = {r: [] for r in envs}
    files: dict[str, list[float]] = {r: [] for r in envs}
    for k in range(rounds):
        for reader in list(envs) if k % 2 == 0 else list(envs)[::-1]:
            root = os.path.join(tmp, "reader_only")
            os.makedirs(root)
            os.environ.update(envs[reader])
            try:
                fa = FileActivity(EncodingWriter(), MonotonicClock(), [root], written_to=_discard).start()
            finally:
                for name in envs[reader]:
                    os.environ.pop(name, None)
            p = subprocess.Popen(
                [sys.executable, gen, root, str(rate), str(seconds)], stdout=subprocess.PIPE, text=True
            )
            fa.set_root(p.pid)
            said = p.communicate()[0].strip()
            meta = fa.stop()
            shutil.rmtree(root)
            cpu[reader].append(100 * meta["cpu_s"] / seconds)
            files[reader].append(meta["files"] / seconds)
            print(
                f"reader-only round {k + 1} {reader} ({meta['reader']}): {cpu[reader][-1]:.3f} % of a core, "
                f"{files[reader][-1]:.0f} files/s (generator offered {said} events/s), load average "
                f"{os.getloadavg()[0]:.1f}"
            )
    print(
        "== reader-only: "
        + "; ".join(
            f"{r} {statistics.median(cpu[r]):.3f} % of a core at {statistics.median(files[r]):.0f} files/s"
            for r in envs
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=10000.0, help="kernel file events per second offered")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline-python", help="also record with the source on under this interpreter's ckprof")
    ap.add_argument(
        "--no-python-reader", action="store_true", help="leave out the runs with the Python reader forced (shorter)"
    )
    ap.add_argument(
        "--loop-ext4",
        action="store_true",
        help="write the commands' files to a new ext4 on a loop device backed by RAM (/dev/shm): on this VM the "
        "generator reaches its rate there, where on the root file system it reaches 3,000-10,000 events/s",
    )
    ap.add_argument("--cases", nargs="+", default=["idle", "files", "writes"], choices=["idle", "files", "writes"])
    ap.add_argument("--replay", type=int, metavar="FILES", help="time the two readers on the same captured events")
    ap.add_argument("--reader-only", action="store_true", help="time the source alone in this process, each reader")
    ap.add_argument("--tracker-route", type=int, metavar="FILES", help="time the file tracker's two routes")
    ap.add_argument("--batch", type=int, default=330, help="entries a file_activity batch (--tracker-route)")
    a = ap.parse_args()
    if os.geteuid() != 0 and not a.tracker_route:  # the tracker alone needs no fanotify
        sys.exit("needs root: fanotify needs CAP_SYS_ADMIN")
    tmp = tempfile.mkdtemp(prefix="ckprof-fa-bench-")
    try:
        if a.tracker_route:
            tracker_route(tmp, a.tracker_route, a.batch, a.rounds)
            return
        if a.replay:
            replay(tmp, a.replay, a.rate, a.rounds)
            return
        if a.reader_only:
            gen = os.path.join(tmp, "gen.py")
            with open(gen, "w") as f:
                f.write(GEN)
            reader_only(tmp, gen, a.rate, a.seconds, a.rounds)
            return
        gen, writes = os.path.join(tmp, "gen.py"), os.path.join(tmp, "writes.py")
        for path, text in ((gen, GEN), (writes, WRITES)):
            with open(path, "w") as f:
                f.write(text)
        cases = {
            "idle": lambda root: ["sleep", str(a.seconds)],
            "files": lambda root: [sys.executable, gen, root, str(a.rate), str(a.seconds)],
            "writes": lambda root: [sys.executable, writes, root, str(a.rate), str(a.seconds)],
        }
        data = tmp
        if a.loop_ext4:
            data = os.path.join(tmp, "mnt")
            loop = _mount_loop_ext4(data)
            print(f"the commands write to an ext4 on {loop} (its image in /dev/shm), mounted at {data}")
        for case in a.cases:
            cmd = cases[case]
            cpu = {True: [], False: [], "python": [], "baseline": []}
            steady: dict = {True: [], False: [], "python": [], "baseline": []}  # the middle 60 %, all threads
            thread = {True: [], "python": [], "baseline": []}  # the source thread's own CPU, % of a core
            tracker = {True: [], "python": [], "baseline": []}  # the file tracker thread's (meta.json file_tracker)
            files = {True: [], "python": [], "baseline": []}  # file bursts a second
            # µs of CPU of the source and tracker threads per file burst: comparable across runs,
            # whatever rate the generator reached (it varies from run to run on this VM)
            per_file = {True: [], "python": [], "baseline": []}
            runs = [(True, sys.executable), (False, sys.executable)]
            if not a.no_python_reader:
                runs.append(("python", sys.executable))
            if a.baseline_python:
                runs.append(("baseline", a.baseline_python))
            for k in range(a.rounds):
                for on, python in runs if k % 2 == 0 else runs[::-1]:
                    root = os.path.join(data, "ckpt")
                    os.makedirs(root, exist_ok=True)
                    meta, said, steady_cpu = record(
                        root, os.path.join(tmp, "rec"), cmd(root), True if on == "baseline" else on, python, a.seconds
                    )
                    steady[on].append(steady_cpu)
                    shutil.rmtree(root)
                    span = (meta["end"]["monotonic_ns"] - meta["start"]["monotonic_ns"]) / 1e9
                    cpu[on].append(meta["recorder_cpu_s"]["process"] / span)
                    fa = meta.get("file_activity") or {}
                    extra = f", generator offered {said} events/s" if said else ""
                    if on:
                        # the load is the command's a.seconds, not the recorder's start and end: the
                        # thread's CPU per second of the command (and per second of recording, printed)
                        thread[on].append(100 * fa.get("cpu_s", 0) / a.seconds)
                        files[on].append((fa.get("files") or 0) / a.seconds)
                        ft = meta.get("file_tracker") or {}
                        tracker[on].append(100 * (ft.get("cpu_s") or 0) / a.seconds)
                        if fa.get("files"):
                            per_file[on].append(1e6 * (fa.get("cpu_s", 0) + (ft.get("cpu_s") or 0)) / fa["files"])
                        label = {True: "on, C reader", "python": "on, Python reader"}.get(on, "baseline on")
                        unread = ""  # a ckprof with the source's size budget counts what it left out
                        if "sizes_not_read" in fa:
                            unread = f" ({fa['sizes_not_read']} sizes not read: fileactivity.SIZES_PER_S)"
                        print(
                            f"{case} round {k + 1} {label}: process {100 * cpu[on][-1]:.3f} % of a core "
                            f"({_pct(steady_cpu)} in the steady middle of the run); "
                            f"source thread {thread[on][-1]:.3f} % over the command's {a.seconds:g} s "
                            f"({100 * fa.get('cpu_s', 0) / span:.3f} % over the recording's {span:.1f} s), "
                            f"{files[on][-1]:.0f} files/s; read {fa.get('events_read')} "
                            f"kernel events ({fa.get('events_in_c', 0)} taken in C), {fa.get('events_in_tree')} the "
                            f"tree's, {fa.get('files')} file bursts{unread}; reader {fa.get('reader')!r}; file tracker "
                            f"thread {tracker[on][-1]:.3f} % over the command ({ft.get('files')} files looked at, "
                            f"{ft.get('looks_spared', 'no')} turns spared, {ft.get('written_not_watched')} "
                            f"written files not watched, {ft.get('activity_look_cpu_s', '?')} s of CPU in the looks "
                            f"at them (filetracker.ACTIVITY_CPU_SHARE, after its first burst), "
                            f"look {ft.get('look', 'python')!r}); load average {os.getloadavg()[0]:.1f}{extra}"
                        )
                    else:
                        print(
                            f"{case} round {k + 1} off: process {100 * cpu[on][-1]:.3f} % of a core "
                            f"({_pct(steady_cpu)} in the steady middle of the run){extra}"
                        )
            on_m, off_m = statistics.median(cpu[True]), statistics.median(cpu[False])
            print(
                f"== {case}: extra CPU with the source {100 * (on_m - off_m):+.3f} % of a core "
                f"(medians: on {100 * on_m:.3f} %, off {100 * off_m:.3f} %; ratio {on_m / off_m:.2f}×)"
            )
            if None not in steady[True] + steady[False]:
                s_on, s_off = statistics.median(steady[True]), statistics.median(steady[False])
                print(
                    f"   steady state (the middle 60 % of the command, every thread of the recorder): extra CPU "
                    f"{100 * (s_on - s_off):+.3f} % of a core (medians: on {100 * s_on:.3f} %, off {100 * s_off:.3f} %)"
                )
            c_m = statistics.median(thread[True])
            said = f"   source thread: C reader median {c_m:.3f} % of a core at {statistics.median(files[True]):.0f} files/s"
            if thread["python"]:
                py_m = statistics.median(thread["python"])
                said += (
                    f"; Python reader {py_m:.3f} % at {statistics.median(files['python']):.0f} files/s; "
                    f"Python ÷ C {py_m / c_m if c_m else float('nan'):.2f}×"
                )
            print(said)
            if per_file[True]:
                # per file, with the rate each was reached at: a tick's fixed cost is spread over more
                # files at a higher rate, so these are not one figure to scale linearly
                each = ", ".join(f"{us:.1f} µs at {n:.0f} files/s" for us, n in zip(per_file[True], files[True]))
                print(
                    f"   per file (C reader): source + tracker threads' CPU a file burst over the whole recording "
                    f"(its start, the first SIZES_AT_ONCE sizes and the end's last looks at up to WRITTEN_MAX "
                    f"waiting files included): {each}. The budget, 2 % of a core at 10,000 events/s (3,333 new "
                    f"files a second), is 6.0 µs a file for the whole recorder in the steady state (above)"
                )
            if cpu["python"]:
                py_m = statistics.median(cpu["python"])
                print(f"   process with the Python reader: extra CPU {100 * (py_m - off_m):+.3f} % of a core")
            if cpu["baseline"]:
                base_m = statistics.median(cpu["baseline"])
                base_steady = ""
                if None not in steady["baseline"] + steady[False]:
                    s_base = statistics.median(steady["baseline"]) - statistics.median(steady[False])
                    base_steady = f" ({100 * s_base:+.3f} % in the steady state; this code's is above)"
                print(
                    f"   baseline ({a.baseline_python}): extra CPU {100 * (base_m - off_m):+.3f} % of a core{base_steady}, "
                    f"source thread median {statistics.median(thread['baseline']):.3f} %, file tracker thread "
                    f"median {statistics.median(tracker['baseline']):.3f} % (this code's: "
                    f"{statistics.median(tracker[True]):.3f} %)"
                )
            print()
    finally:
        if a.loop_ext4:
            _unmount_loop_ext4(os.path.join(tmp, "mnt"))
        shutil.rmtree(tmp, ignore_errors=True)


LOOP_IMAGE_BYTES = 3 << 30
LOOP_INODES = 1_500_000  # a 60 s flood at 3,333 files a second is 200,000 files: ext4's default ratio gives 196,608


def _mount_loop_ext4(mnt: str) -> str:
    """A new ext4 (mkfs.ext4 -N LOOP_INODES) on a loop device over a sparse image in /dev/shm,
    mounted at `mnt`: a real block device, page cache and writeback, without the root disk's
    contention. The loop device's name; exits with a one-line reason where one step fails (no
    mkfs.ext4 or losetup, no free loop device), leaving no loop device behind."""
    fd, image = tempfile.mkstemp(prefix="ckprof-fa-bench-", suffix=".img", dir="/dev/shm")
    os.close(fd)
    os.truncate(image, LOOP_IMAGE_BYTES)
    dev = None
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", "-N", str(LOOP_INODES), image], check=True, capture_output=True)
        loop = subprocess.run(["losetup", "-f", "--show", image], check=True, capture_output=True, text=True)
        dev = loop.stdout.strip()
        os.makedirs(mnt)
        subprocess.run(["mount", dev, mnt], check=True, capture_output=True)
        return dev
    except (OSError, subprocess.CalledProcessError) as e:
        if dev:
            subprocess.run(["losetup", "-d", dev], check=False)
        said = (getattr(e, "stderr", b"") or b"").decode(errors="replace").strip().splitlines()
        sys.exit(f"--loop-ext4: {said[-1] if said else e} (it needs root, mkfs.ext4, losetup and a free loop device)")
    finally:
        os.unlink(image)  # the loop device holds it; it goes with the device


def _unmount_loop_ext4(mnt: str) -> None:
    if not os.path.ismount(mnt):
        return
    dev = subprocess.run(["findmnt", "-n", "-o", "SOURCE", mnt], capture_output=True, text=True).stdout.strip()
    subprocess.run(["umount", mnt], check=False)
    if dev:
        subprocess.run(["losetup", "-d", dev], check=False)


if __name__ == "__main__":
    main()
