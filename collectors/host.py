"""Host collectors: CPU time, memory, dirty and writeback pages; the wrapped process tree's I/O.

Dirty and Writeback come from /proc/meminfo (Documentation/filesystems/proc.rst): bytes of
checkpoint data still in the page cache, and bytes being written back now. CPU time comes from
psutil (/proc/stat); the process tree's I/O from /proc/<pid>/io, the tree from /proc/<pid>/stat.
"""

from __future__ import annotations

import os
import re

import numpy as np
import psutil
import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import NATIVE_NULL, Collector, FileReader, Probe, RawCollector

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


_NATIVE_CPU_FIELDS = 10  # colsampler.c's CPU_FIELDS: the "cpu" line's times a row has room for
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
        self._stat_path = os.path.join(proc_root, "stat")
        self._stat_reader = FileReader(self._stat_path, 65536)
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

    def native_paths(self) -> tuple[str, str, int]:
        """What the native sampler reads for this collector: /proc/stat (its "cpu" line),
        /proc/meminfo, and how many of the cpu line's times psutil reads here."""
        return self._stat_path, self._meminfo, len(self._cpu_fields)

    def table_of_rows(self, rows: np.ndarray) -> pa.Table:
        """The native sampler's rows (t_ns, the "cpu" line's times in clock ticks, MemTotal,
        MemAvailable, Dirty, Writeback in bytes; NATIVE_NULL where absent) as this collector's
        table, with table()'s arithmetic (psutil's float(ticks) / CLOCK_TICKS, summed in the
        same order), so both paths give the same floats."""
        from psutil._pslinux import CLOCK_TICKS

        names, n = self._cpu_fields, len(self._cpu_fields)
        v = [rows[:, 1 + j].astype(np.float64) / CLOCK_TICKS for j in range(n)]
        zero = np.zeros(len(rows))
        at = {k: v[names.index(k)] if k in names else zero for k in ("nice", "irq", "softirq", "iowait")}
        total = v[0]
        for x in v[1:]:
            total = total + x
        cols = {
            "t_ns": rows[:, 0],
            "cpu_user_s": v[0] + at["nice"],
            "cpu_system_s": v[2] + at["irq"] + at["softirq"],
            "cpu_iowait_s": at["iowait"],
            "cpu_idle_s": v[3],
            "cpu_total_s": total,
        }
        for j, c in enumerate(_MEMINFO_KEYS.values()):
            cols[c] = rows[:, 1 + _NATIVE_CPU_FIELDS + j]
        arrays = []
        for f in HOST_SCHEMA:
            a = cols[f.name]
            arrays.append(pa.array(a, f.type, mask=a == NATIVE_NULL) if a.dtype == np.int64 else pa.array(a, f.type))
        return pa.Table.from_arrays(arrays, schema=HOST_SCHEMA)

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

# /proc/<pid>/io's keys → our columns (Documentation/filesystems/proc.rst, "/proc/<pid>/io")
_IO_FIELDS = (
    ("read_bytes", b"read_bytes"),
    ("write_bytes", b"write_bytes"),
    ("read_chars", b"rchar"),
    ("write_chars", b"wchar"),
    ("read_syscalls", b"syscr"),
    ("write_syscalls", b"syscw"),
)
_IO_KEYS = {k: f for f, k in _IO_FIELDS}
# colsampler.c's IO_NAMES order (rchar, wchar, syscr, syscw, read_bytes, write_bytes) as our columns
_NATIVE_IO_ORDER = ("read_chars", "write_chars", "read_syscalls", "write_syscalls", "read_bytes", "write_bytes")


def read_stat(proc_root: str, pid: int) -> tuple[int, int]:
    """(ppid, starttime in clock ticks) from /proc/<pid>/stat (proc(5): fields 4 and 22; the
    command, field 2, is in parentheses and may hold spaces and ')' — split after the last ')')."""
    with open(f"{proc_root}/{pid}/stat", "rb") as f:
        data = f.read()
    rest = data[data.rindex(b")") + 2 :].split()
    return int(rest[1]), int(rest[19])


def read_io(proc_root: str, pid: int) -> dict:
    with open(f"{proc_root}/{pid}/io", "rb") as f:
        data = f.read()
    out = {}
    for line in data.splitlines():
        k, _, v = line.partition(b":")
        if k in _IO_KEYS:
            out[_IO_KEYS[k]] = int(v)
    if len(out) != len(_IO_FIELDS):
        raise OSError(f"{proc_root}/{pid}/io: unexpected contents")
    return out


class ProcTreeCollector(Collector):
    """I/O of the wrapped command and all its descendants, as they come and go.

    When a process is reaped, the kernel adds its I/O counts to its parent's (kernel/exit.c,
    wait_task_zombie → task_io_accounting_add), so a child that exited while its parent is in the
    tree is already counted by the parent. A process that left the tree still alive (re-parented)
    or exited without a parent in the tree (the root itself) has its last-seen counts kept here,
    so totals never go back.

    The tree is kept from sample to sample rather than rebuilt from every process's ppid (what
    psutil's children(recursive=True) does: one /proc/<pid>/stat read per process on the machine
    per sample): each sample lists /proc, reads stat only for the tree's members and the pids
    that appeared since the last sample, and follows the current ppids from the root. A process
    outside the tree cannot become part of it (only re-parenting to a subreaper inside the tree
    could, and that is not followed).
    """

    name = "proc"
    schema = PROC_SCHEMA

    def __init__(self, root_pid: int | None = None, period_s: float = 0.1, proc_root: str = "/proc"):
        self.on_root = None  # called with the root pid when it is set (the native sampler's)
        self.before_tree = None  # called before tree_pids() answers (the native sampler's fold)
        self.root_pid = root_pid
        self.period_s = period_s
        self.proc_root = proc_root
        self._last: dict[tuple[int, int], tuple[int, dict]] = {}  # (pid, starttime) → (ppid, io)
        self._gone = {f: 0 for f, _ in _IO_FIELDS}  # last-seen I/O of processes that left
        self._listed: set[int] = set()  # the pids /proc listed last time
        self._tree: set[int] = set()  # the tree's pids last time

    def probe(self) -> Probe:
        try:
            read_io(self.proc_root, os.getpid())
        except OSError as e:
            return Probe(False, f"cannot read /proc/<pid>/io: {e}", "run as the same user as the command")
        return Probe(True, "I/O of the wrapped process tree")

    def _members(self) -> tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
        """(the tree now: pid → (ppid, starttime) of the root and its descendants by current ppid,
        every pid whose stat was read: the tree's last members among them, alive or not)."""
        listed = {int(n) for n in os.listdir(self.proc_root) if n.isdigit()}
        look = ((self._tree | {self.root_pid}) & listed) | (listed - self._listed)
        self._listed = listed
        stat: dict[int, tuple[int, int]] = {}
        for pid in look:
            try:
                stat[pid] = read_stat(self.proc_root, pid)
            except (OSError, ValueError, IndexError):
                continue  # gone since the listing
        if self.root_pid not in stat:
            return {}, stat
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stat.items():
            children.setdefault(ppid, []).append(pid)
        tree, todo = {}, [self.root_pid]
        while todo:
            pid = todo.pop()
            if pid in tree:
                continue
            tree[pid] = stat[pid]
            todo += children.get(pid, ())
        return tree, stat

    @property
    def root_pid(self) -> int | None:
        return self._root_pid

    @root_pid.setter
    def root_pid(self, pid: int | None) -> None:
        self._root_pid = pid
        if self.on_root is not None and pid is not None:
            self.on_root(pid)  # the native sampler follows the same root

    def tree_pids(self) -> set[int]:
        """The wrapped command's tree as the last sample saw it (empty before the first)."""
        if self.before_tree is not None:
            self.before_tree()  # natively sampled: fold the samples taken since first
        return set(self._tree)

    def sample(self, t_ns: int) -> list[dict]:
        if self.root_pid is None:
            return []
        try:
            members, stat = self._members()
        except OSError:
            members, stat = {}, {}
        io = {}
        for pid in members:
            try:
                io[pid] = read_io(self.proc_root, pid)
            except OSError:
                continue
        return [self.fold(t_ns, members, stat, io)]

    def fold(self, t_ns: int, members: dict, stat: dict, io: dict) -> dict:
        """One sample's row from what it read: `members` (the tree now, pid → (ppid, starttime)),
        `stat` (every pid whose stat was read, the tree's last members among them), `io` (each
        member's /proc/<pid>/io that could be read). Both samplers end here (the native one in
        `table_of_rows`): the rule for processes that left the tree is this one."""
        seen: dict[tuple[int, int], tuple[int, dict]] = {
            (pid, start): (ppid, io[pid]) for pid, (ppid, start) in members.items() if pid in io
        }
        self._tree = set(members)
        live_pids = {k[0] for k in seen}
        for (pid, start), (ppid, last_io) in self._last.items():
            if (pid, start) in seen:
                continue
            # it left the tree alive (re-parented: its parent exited), or it exited with no parent
            # in the tree to reap it: either way no member will ever hold its counts, keep them.
            # (Judged by its parent alone, a process whose parent exits at the sample — a zombie
            # still in the tree — would be dropped while it lives on under init.)
            alive = stat.get(pid, (None, None))[1] == start
            if alive or ppid not in live_pids:
                for f in self._gone:
                    self._gone[f] += last_io[f]
        self._last = seen
        row = {"t_ns": t_ns, "nprocs": len(seen), **self._gone}
        for _, member_io in seen.values():
            for f in self._gone:
                row[f] += member_io[f]
        return row

    def table_of_rows(self, rows: np.ndarray) -> pa.Table:
        """The native sampler's rows as this collector's table, folded tick by tick in order (the
        fold keeps state: each row is passed here once, oldest first). A tick is a row with pid -1, then one row per pid
        whose stat it read that is in the tree now (member 1) or was last time (member 0):
        t_ns, pid, starttime, ppid, member, and the member's rchar, wchar, syscr, syscw,
        read_bytes, write_bytes (NATIVE_NULL where unreadable)."""
        out = []
        starts = np.flatnonzero(rows[:, 1] == -1).tolist() + [len(rows)]
        for a, b in zip(starts, starts[1:]):
            members, stat, io = {}, {}, {}
            for _, pid, start, ppid, member, *counts in rows[a + 1 : b].tolist():
                stat[pid] = (ppid, start)
                if member:
                    members[pid] = (ppid, start)
                    if counts[0] != NATIVE_NULL:
                        io[pid] = dict(zip(_NATIVE_IO_ORDER, counts))
            out.append(self.fold(int(rows[a, 0]), members, stat, io))
        return pa.Table.from_pylist(out, schema=PROC_SCHEMA)
