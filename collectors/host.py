"""Host collectors: CPU time, memory, dirty and writeback pages; the wrapped process tree's I/O.

Dirty and Writeback come from /proc/meminfo (Documentation/filesystems/proc.rst): bytes of
checkpoint data still in the page cache, and bytes being written back now. CPU time comes from
psutil (/proc/stat); the process tree's I/O from psutil's io_counters (/proc/<pid>/io).
"""

from __future__ import annotations

import os
import re

import psutil
import pyarrow as pa

from .base import T_NS, Collector, FileReader, Probe, RawCollector, col

HOST_SCHEMA = pa.schema(
    [
        T_NS,
        col("cpu_user_s", pa.float64(), "s", "counter", doc="all CPUs, /proc/stat"),
        col("cpu_system_s", pa.float64(), "s", "counter"),
        col("cpu_iowait_s", pa.float64(), "s", "counter"),
        col("cpu_idle_s", pa.float64(), "s", "counter"),
        col("cpu_total_s", pa.float64(), "s", "counter", doc="sum of all CPU time fields"),
        col("mem_total_bytes", pa.int64(), "B", doc="/proc/meminfo MemTotal"),
        col("mem_available_bytes", pa.int64(), "B", doc="/proc/meminfo MemAvailable"),
        col("dirty_bytes", pa.int64(), "B", doc="/proc/meminfo Dirty: waiting to be written"),
        col("writeback_bytes", pa.int64(), "B", doc="/proc/meminfo Writeback: being written now"),
    ]
)

_MEMINFO_KEYS = {
    "MemTotal": "mem_total_bytes",
    "MemAvailable": "mem_available_bytes",
    "Dirty": "dirty_bytes",
    "Writeback": "writeback_bytes",
}


def parse_meminfo(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in _MEMINFO_KEYS:
            fields = rest.split()
            mult = 1024 if len(fields) > 1 and fields[1] == "kB" else 1
            out[_MEMINFO_KEYS[key]] = int(fields[0]) * mult
    return out


_MEMINFO_RE = re.compile(rb"^(MemTotal|MemAvailable|Dirty|Writeback):[ \t]*(\d+)(?:[ \t]+(\S+))?", re.M)


class HostCollector(RawCollector):
    """Under the recorder a sample keeps /proc/stat's first line and /proc/meminfo's text as read;
    a flush converts them exactly as psutil.cpu_times() and parse_meminfo() would (`sample()`, the
    per-sample path, still calls them; a test holds the two to the same rows)."""

    name = "host"
    schema = HOST_SCHEMA

    def __init__(self, period_s: float = 0.1, proc_root: str = "/proc"):
        super().__init__()
        self.period_s = period_s
        self._meminfo = os.path.join(proc_root, "meminfo")
        self._stat_reader = FileReader(os.path.join(proc_root, "stat"), 65536)
        self._meminfo_reader = FileReader(self._meminfo, 16384)
        self._cpu_fields = psutil.cpu_times()._fields  # what psutil reads of the "cpu" line, in order

    def read_raw(self) -> tuple[bytes, bytes]:
        st = self._stat_reader.read()
        return st[: st.find(b"\n")], self._meminfo_reader.read()

    def close(self) -> None:
        self._stat_reader.close()
        self._meminfo_reader.close()

    def table(self, ts: list[int], raws: list) -> pa.Table:
        from psutil._pslinux import CLOCK_TICKS

        names, n = self._cpu_fields, len(self._cpu_fields)
        get = {k: names.index(k) for k in ("nice", "irq", "softirq", "iowait") if k in names}
        cols = {f.name: [] for f in HOST_SCHEMA}
        for t_ns, (cpu_line, meminfo) in zip(ts, raws):
            v = [float(x) / CLOCK_TICKS for x in cpu_line.split()[1 : n + 1]]  # psutil's arithmetic
            cols["t_ns"].append(t_ns)
            cols["cpu_user_s"].append(v[0] + (v[get["nice"]] if "nice" in get else 0.0))
            cols["cpu_system_s"].append(
                v[2] + (v[get["irq"]] if "irq" in get else 0.0) + (v[get["softirq"]] if "softirq" in get else 0.0)
            )
            cols["cpu_iowait_s"].append(v[get["iowait"]] if "iowait" in get else 0.0)
            cols["cpu_idle_s"].append(v[3])
            cols["cpu_total_s"].append(sum(v))
            mem = {
                _MEMINFO_KEYS[k.decode()]: int(x) * (1024 if u == b"kB" else 1)
                for k, x, u in _MEMINFO_RE.findall(meminfo)
            }
            for c in _MEMINFO_KEYS.values():
                cols[c].append(mem.get(c))
        return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in HOST_SCHEMA], schema=HOST_SCHEMA)

    def probe(self) -> Probe:
        if not os.access(self._meminfo, os.R_OK):
            return Probe(False, f"cannot read {self._meminfo}", "mount /proc")
        return Probe(True, f"CPU, memory, Dirty/Writeback ({psutil.cpu_count()} CPUs)")

    def describe(self) -> dict:
        return {"cpu_count": psutil.cpu_count()}

    def sample(self, t_ns: int) -> list[dict]:
        ct = psutil.cpu_times()
        row = {
            "t_ns": t_ns,
            "cpu_user_s": ct.user + getattr(ct, "nice", 0.0),
            "cpu_system_s": ct.system + getattr(ct, "irq", 0.0) + getattr(ct, "softirq", 0.0),
            "cpu_iowait_s": getattr(ct, "iowait", 0.0),
            "cpu_idle_s": ct.idle,
            "cpu_total_s": sum(ct),
        }
        # steal/guest are included in sum(ct); guest is also counted in user by the kernel,
        # which psutil already subtracts on Linux.
        with open(self._meminfo) as f:
            row.update(parse_meminfo(f.read()))
        return [row]


PROC_SCHEMA = pa.schema(
    [
        T_NS,
        col("nprocs", pa.int64(), "processes", doc="live processes in the wrapped tree"),
        col("read_bytes", pa.int64(), "B", "counter", doc="/proc/<pid>/io read_bytes: from the device"),
        col("write_bytes", pa.int64(), "B", "counter", doc="/proc/<pid>/io write_bytes: to the page cache/device"),
        col("read_chars", pa.int64(), "B", "counter", doc="/proc/<pid>/io rchar: read() syscalls"),
        col("write_chars", pa.int64(), "B", "counter", doc="/proc/<pid>/io wchar: write() syscalls"),
        col("read_syscalls", pa.int64(), "calls", "counter", doc="/proc/<pid>/io syscr"),
        col("write_syscalls", pa.int64(), "calls", "counter", doc="/proc/<pid>/io syscw"),
    ]
)

_IO_FIELDS = (
    ("read_bytes", "read_bytes"),
    ("write_bytes", "write_bytes"),
    ("read_chars", "read_chars"),
    ("write_chars", "write_chars"),
    ("read_syscalls", "read_count"),
    ("write_syscalls", "write_count"),
)


class ProcTreeCollector(Collector):
    """I/O of the wrapped command and all its descendants, as they come and go.

    When a process is reaped, the kernel adds its I/O counts to its parent's (kernel/exit.c,
    wait_task_zombie → task_io_accounting_add), so a child that left while its parent is in the
    tree is already counted by the parent. Only a process that left without a parent in the tree
    (re-parented, or the root itself) has its last-seen counts kept here, so totals never go back.
    """

    name = "proc"
    schema = PROC_SCHEMA

    def __init__(self, root_pid: int | None = None, period_s: float = 0.1):
        self.root_pid = root_pid
        self.period_s = period_s
        self._last: dict[tuple[int, float], tuple[int, dict]] = {}  # (pid, ctime) → (ppid, io)
        self._gone = {f: 0 for f, _ in _IO_FIELDS}  # last-seen I/O of processes that left

    def probe(self) -> Probe:
        try:
            psutil.Process().io_counters()
        except (psutil.AccessDenied, AttributeError) as e:
            return Probe(False, f"cannot read /proc/<pid>/io: {e}", "run as the same user as the command")
        return Probe(True, "I/O of the wrapped process tree")

    def sample(self, t_ns: int) -> list[dict]:
        if self.root_pid is None:
            return []
        try:
            root = psutil.Process(self.root_pid)
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            procs = []
        seen: dict[tuple[int, float], tuple[int, dict]] = {}
        for p in procs:
            try:
                with p.oneshot():
                    key = (p.pid, p.create_time())
                    io = p.io_counters()
                    seen[key] = (p.ppid(), {f: getattr(io, a) for f, a in _IO_FIELDS})
            except psutil.Error:
                continue
        live_pids = {k[0] for k in seen}
        for key, (ppid, io) in self._last.items():
            if key not in seen and ppid not in live_pids:
                for f in self._gone:
                    self._gone[f] += io[f]
        self._last = seen
        row = {"t_ns": t_ns, "nprocs": len(seen), **self._gone}
        for _, io in seen.values():
            for f in self._gone:
                row[f] += io[f]
        return [row]
