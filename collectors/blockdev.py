"""Block-device collector: /proc/diskstats counters and /sys/block/<dev>/inflight gauges.

Stores what the kernel says: the cumulative counters of iostats.rst as counters, and the two
in-flight gauges. Rates (bytes/s, IOPS, await, aqu-sz, %util) are derived when a recording is
read (ckprof.recording.rates). One read of /proc/diskstats serves every device; where it is unreadable,
/sys/block/<dev>/stat is read per device instead.

Under the recorder a sample is only the reads: /proc/diskstats' text and each device's inflight
text are kept as read (`read_raw`), and a flush turns a batch of them into columns at once
(`table`). `sample()` is the per-sample path (parse, one dict a row) for callers outside the
recorder; a test holds the two to the same rows.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import NATIVE_NULL, FileReader, Probe, RawCollector
from .diskstats import FIELDS, parse_diskstats, parse_inflight, parse_stat_values, parse_sys_block_stat

_UNITS = {
    "read_ios": "ios",
    "read_merges": "ios",
    "read_sectors": "sectors(512B)",
    "read_ticks_ms": "ms",
    "write_ios": "ios",
    "write_merges": "ios",
    "write_sectors": "sectors(512B)",
    "write_ticks_ms": "ms",
    "in_flight": "ios",
    "io_ticks_ms": "ms",
    "time_in_queue_ms": "ms",
    "discard_ios": "ios",
    "discard_merges": "ios",
    "discard_sectors": "sectors(512B)",
    "discard_ticks_ms": "ms",
    "flush_ios": "ios",
    "flush_ticks_ms": "ms",
}

SCHEMA = pa.schema(
    [T_NS, col("device", pa.string(), "", "label")]
    + [col(f, pa.int64(), _UNITS[f], "gauge" if f == "in_flight" else "counter", doc="/proc/diskstats") for f in FIELDS]
    + [
        col("inflight_read", pa.int64(), "ios", doc="/sys/block/<dev>/inflight (0 when in_flight is 0)"),
        col("inflight_write", pa.int64(), "ios", doc="/sys/block/<dev>/inflight (0 when in_flight is 0)"),
    ]
)

QUEUE_ATTRS = (
    "nr_requests",
    "rotational",
    "logical_block_size",
    "physical_block_size",
    "scheduler",
    "max_sectors_kb",
    "iostats",
)


_MODERN = 3 + len(FIELDS)  # "major minor name" and the 17 counters of 5.5+ (later kernels append more)
_IN_FLIGHT = 3 + FIELDS.index("in_flight")  # its token in a /proc/diskstats line
IDLE_INFLIGHT = b"0 0\n"  # /sys/block/<dev>/inflight of a device with nothing in flight


def queue_dir(sys_root: str, dev: str) -> str:
    """/sys/class/block/<dev>/queue; a partition has none: its disk's."""
    node = os.path.join(sys_root, "class", "block", dev)
    q = os.path.join(node, "queue")
    if not os.path.isdir(q):
        q = os.path.join(os.path.dirname(os.path.realpath(node)), "queue")
    return q


def iostats_kept(sys_root: str, dev: str) -> bool:
    """False where the kernel keeps no statistics for the device (queue/iostats = 0: its counters
    never move, Documentation/ABI/stable/sysfs-block); True where it does or the file is not there."""
    try:
        with open(os.path.join(queue_dir(sys_root, dev), "iostats")) as f:
            return f.read().strip() != "0"
    except OSError:
        return True


class BlockCollector(RawCollector):
    name = "block"
    schema = SCHEMA

    def __init__(self, devices: list[str], period_s: float = 0.1, proc_root: str = "/proc", sys_root: str = "/sys"):
        super().__init__()
        self.devices = list(devices)
        self.period_s = period_s
        self.proc_root = proc_root
        self.sys_root = sys_root
        self._diskstats = os.path.join(proc_root, "diskstats")
        self._use_proc = os.access(self._diskstats, os.R_OK)
        self._inflight = {d: os.path.join(sys_root, "class", "block", d, "inflight") for d in self.devices}
        self._wanted = set(self.devices)
        self._readers: dict[str, FileReader] = {}
        self._names = [d.encode() for d in self.devices]
        self._line_of: dict[bytes, int] = {}  # device → its line in /proc/diskstats (rebuilt when it moves)

    def _reader(self, path: str) -> FileReader:
        r = self._readers.get(path)
        if r is None:
            r = self._readers[path] = FileReader(path, 65536 if path == self._diskstats else 4096)
        return r

    def _pread(self, path: str) -> str:
        return self._reader(path).read().decode()

    def close(self) -> None:
        for r in self._readers.values():
            r.close()
        self._readers.clear()

    def _sysblock(self, dev: str, *parts: str) -> str:
        return os.path.join(self.sys_root, "class", "block", dev, *parts)

    def queue_attrs(self, dev: str) -> dict:
        out = {}
        for attr in QUEUE_ATTRS:
            try:
                with open(os.path.join(queue_dir(self.sys_root, dev), attr)) as f:
                    v = f.read().strip()
            except OSError:
                continue
            if attr == "scheduler":  # "mq-deadline [none]": the bracketed one is active
                active = [w.strip("[]") for w in v.split() if w.startswith("[")]
                out[attr] = active[0] if active else v
            else:
                out[attr] = int(v) if v.lstrip("-").isdigit() else v
        return out

    def probe(self) -> Probe:
        self._use_proc = os.access(self._diskstats, os.R_OK)
        if not self._use_proc and not all(os.path.exists(self._sysblock(d, "stat")) for d in self.devices):
            return Probe(
                False,
                f"cannot read {self._diskstats} nor /sys/block/*/stat",
                "mount /proc and /sys (in a container: --privileged or bind mounts)",
            )
        missing = [d for d in self.devices if not os.path.exists(self._sysblock(d))]
        if missing:
            return Probe(
                False,
                f"no such block device: {', '.join(missing)}",
                "see `ckprof doctor` or `lsblk` for the devices there are",
            )
        frozen = self.frozen_devices()
        if frozen:
            return Probe(
                True,
                f"{len(self.devices)} device(s); counters frozen on {', '.join(frozen)} (queue/iostats = 0)",
                "echo 1 > /sys/block/<dev>/queue/iostats",
            )
        return Probe(True, f"{len(self.devices)} device(s): {', '.join(self.devices) or 'none'}")

    def frozen_devices(self) -> list[str]:
        """Devices whose statistics the kernel does not keep (queue/iostats = 0): counters never move."""
        return [d for d in self.devices if not iostats_kept(self.sys_root, d)]

    def describe(self) -> dict:
        return {
            "devices": {d: {"queue": self.queue_attrs(d)} for d in self.devices},
            "frozen_devices": self.frozen_devices(),
            "source": "/proc/diskstats" if self._use_proc else "/sys/block/<dev>/stat",
        }

    def _read_stats(self) -> dict[str, dict]:
        if self._use_proc:
            return parse_diskstats(self._pread(self._diskstats), only=self._wanted)
        out = {}
        for d in self.devices:
            try:
                out[d] = parse_sys_block_stat(self._pread(self._sysblock(d, "stat")))
            except OSError:
                pass
        return out

    # -- the recorder's path: read now, convert at flush -------------------------------------
    def read_raw(self) -> tuple:
        """(/proc/diskstats bytes, or per device its /sys/block/<dev>/stat bytes or None; per device
        its inflight bytes or None): nothing parsed but each device's in_flight field.

        A device whose /proc/diskstats line says nothing is in flight (field 9, in_flight: the sum
        of the two counts /sys/block/<dev>/inflight splits, block/genhd.c) gets IDLE_INFLIGHT
        without reading its inflight file: both counts are 0 at that reading, and an idle device,
        most devices most of the time, costs one read a tick instead of two."""
        if self._use_proc:
            stats = self._reader(self._diskstats).read()
            idle = self._idle(stats)
            return stats, tuple(
                IDLE_INFLIGHT if idle[i] else self._try_read(self._inflight[d]) for i, d in enumerate(self.devices)
            )
        stats = tuple(self._try_read(self._sysblock(d, "stat")) for d in self.devices)
        return stats, tuple(self._try_read(self._inflight[d]) for d in self.devices)

    def _idle(self, stats: bytes) -> list[bool]:
        """Per device: whether its line in this /proc/diskstats reading has in_flight 0 (False where
        the line is not where it was: the inflight file is read, and the flush finds the lines again)."""
        lines = stats.split(b"\n")
        if not self._line_of:
            self._line_of = {p[2]: k for k, p in enumerate(ln.split(None, 3) for ln in lines) if len(p) >= 3}
        line_of, out = self._line_of, []
        for name in self._names:
            k = line_of.get(name)
            parts = lines[k].split(None, _IN_FLIGHT + 1) if k is not None and k < len(lines) else ()
            out.append(len(parts) > _IN_FLIGHT + 1 and parts[2] == name and parts[_IN_FLIGHT] == b"0")
        return out

    def _try_read(self, path: str) -> bytes | None:
        try:
            return self._reader(path).read()
        except OSError:
            return None

    def _rows_of_raw(self, stats) -> list[tuple[int, object]]:
        """One reading's rows: (device index, its 17 counters as bytes tokens, or a FIELDS dict)."""
        if not self._use_proc:
            out = []
            for i, text in enumerate(stats):
                if text is not None:
                    try:
                        out.append((i, parse_sys_block_stat(text.decode())))
                    except ValueError:
                        pass
            return out
        lines = stats.split(b"\n")
        for attempt in (0, 1):
            out, line_of = [], self._line_of
            for i, name in enumerate(self._names):
                k = line_of.get(name)
                parts = lines[k].split() if k is not None and k < len(lines) else ()
                if len(parts) < _MODERN or parts[2] != name or not parts[0].isdigit():
                    break
                out.append((i, parts[3:_MODERN]))
            else:
                return out
            if attempt == 0:  # the lines moved (a device came or went): find them again
                self._line_of = {p[2]: k for k, p in enumerate(ln.split() for ln in lines) if len(p) >= 3}
        # a device missing, or an older kernel's layout: the general parser
        parsed = parse_diskstats(stats.decode(), only=self._wanted)
        return [(i, parsed[d]) for i, d in enumerate(self.devices) if d in parsed]

    def _batch_counters(self, raws: list) -> np.ndarray | None:
        """Every reading's 17 counters for every device, (readings × devices, 17), when each
        reading of the batch has each device's line where it was and a layout of ≥ 17 counters:
        the lines are picked per reading, their "major minor name" cut off with one bounded split
        each, and the rest parsed at once. None otherwise (the general path handles that batch)."""
        line_of = self._line_of
        if not self._use_proc or not self.devices or any(n not in line_of for n in self._names):
            return None
        ks = [line_of[n] for n in self._names]
        picked: list[bytes] = []
        try:
            for stats, _ in raws:
                lines = stats.split(b"\n")
                picked += [lines[k] for k in ks]
        except IndexError:  # fewer lines than before: a device went away
            return None
        parts = [ln.split(None, 3) for ln in picked]
        if any(len(p) != 4 for p in parts) or [p[2] for p in parts] != self._names * len(raws):
            return None
        flat = _ints(b" ".join(p[3] for p in parts))
        per_line = len(flat) // len(picked)
        if per_line < len(FIELDS) or per_line * len(picked) != len(flat):
            return None  # an older layout (4, 11, 15 fields) or a line that does not parse
        return flat.reshape(len(picked), per_line)[:, : len(FIELDS)]

    def table(self, ts: list[int], raws: list) -> pa.Table:
        counters = self._batch_counters(raws) if raws else None
        if counters is not None:
            n_dev = len(self.devices)
            cols = {
                "t_ns": pa.array(np.repeat(np.asarray(ts, dtype=np.int64), n_dev), pa.int64()),
                "device": pa.array(self.devices * len(ts), pa.string()),
                **{f: pa.array(counters[:, j], pa.int64()) for j, f in enumerate(FIELDS)},
            }
            cols["inflight_read"], cols["inflight_write"] = _inflight_columns([t for _, infl in raws for t in infl])
            return pa.Table.from_arrays([cols[f.name] for f in SCHEMA], schema=SCHEMA)
        t_col, dev_idx, values, inflight = [], [], [], []
        for t_ns, (stats, infl) in zip(ts, raws):
            for i, v in self._rows_of_raw(stats):
                t_col.append(t_ns)
                dev_idx.append(i)
                values.append(v)
                inflight.append(infl[i])
        n = len(t_col)
        cols = {
            "t_ns": pa.array(t_col, pa.int64()),
            "device": pa.array([self.devices[i] for i in dev_idx], pa.string()),
        }
        counters = None
        if all(type(v) is list for v in values):
            flat = _ints(b" ".join(b" ".join(v) for v in values)) if n else []
            if len(flat) == n * len(FIELDS):
                counters = np.asarray(flat, dtype=np.int64).reshape(n, len(FIELDS))
        if counters is not None:
            for j, f in enumerate(FIELDS):
                cols[f] = pa.array(counters[:, j], pa.int64())
        else:
            dicts = [v if type(v) is dict else parse_stat_values([int(x) for x in v]) for v in values]
            for f in FIELDS:
                cols[f] = pa.array([d[f] for d in dicts], pa.int64())
        cols["inflight_read"], cols["inflight_write"] = _inflight_columns(inflight)
        return pa.Table.from_arrays([cols[f.name] for f in SCHEMA], schema=SCHEMA)

    # -- the native sampler's path (ckprof/record/colsampler.c) -------------------------------
    def native_ok(self) -> bool:
        """Whether the native sampler reads what this collector would: /proc/diskstats with every
        device's line in the 17-counter layout of 5.5+ (it parses nothing older)."""
        try:
            return self._use_proc and self._batch_counters([self.read_raw()]) is not None
        except OSError:
            return False

    def native_paths(self) -> tuple[str, list[str], list[str]]:
        """What the native sampler reads for this collector: /proc/diskstats, the devices, and
        each one's inflight file (read when its in_flight is not 0)."""
        return self._diskstats, list(self.devices), [self._inflight[d] for d in self.devices]

    def table_of_rows(self, rows: np.ndarray) -> pa.Table:
        """The native sampler's rows (t_ns, device index, the 17 counters, inflight read/write;
        NATIVE_NULL where an inflight file was unread) as this collector's table: the same rows
        `table()` makes of the same readings."""
        cols = {
            "t_ns": pa.array(rows[:, 0], pa.int64()),
            # numpy indexing: Arrow's Array.take would load pyarrow.compute into the recorder
            "device": pa.array(np.asarray(self.devices, dtype=object)[rows[:, 1]], pa.string()),
            **{f: pa.array(rows[:, 2 + j], pa.int64()) for j, f in enumerate(FIELDS)},
        }
        for j, name in enumerate(("inflight_read", "inflight_write")):
            v = rows[:, 2 + len(FIELDS) + j]
            cols[name] = pa.array(v, pa.int64(), mask=v == NATIVE_NULL)
        return pa.Table.from_arrays([cols[f.name] for f in SCHEMA], schema=SCHEMA)

    # -- the per-sample path ------------------------------------------------------------------
    def sample(self, t_ns: int) -> list[dict]:
        stats = self._read_stats()
        rows = []
        for dev in self.devices:
            st = stats.get(dev)
            if st is None:
                continue  # the device went away; it reappears in the rows when it comes back
            row = {"t_ns": t_ns, "device": dev, **st}
            try:
                text = (
                    IDLE_INFLIGHT.decode() if self._use_proc and st.get("in_flight") == 0 else None
                )  # read_raw's rule
                row["inflight_read"], row["inflight_write"] = parse_inflight(text or self._pread(self._inflight[dev]))
            except (OSError, ValueError):
                row["inflight_read"] = row["inflight_write"] = None
            rows.append(row)
        return rows


def _ints(blob: bytes) -> np.ndarray:
    """Whitespace-separated integers, parsed in C; shorter than expected where a token is not one
    (the caller then takes the general path)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.fromstring(blob, dtype=np.int64, sep=" ")
        except ValueError:  # numpy ≥ 2.3 raises where older ones warned and stopped
            return np.empty(0, np.int64)


def _inflight_columns(texts: list[bytes | None]) -> tuple[pa.Array, pa.Array]:
    """inflight_read, inflight_write from each row's /sys/block/<dev>/inflight text (None: unread),
    as parse_inflight reads one; in bulk when every text is two numbers."""
    if texts and all(t is not None for t in texts):
        flat = _ints(b" ".join(texts))
        if len(flat) == 2 * len(texts) and all(len(t.split()) == 2 for t in texts):
            return pa.array(flat[0::2], pa.int64()), pa.array(flat[1::2], pa.int64())
    r, w = [], []
    for t in texts:
        try:
            a, b = parse_inflight(t.decode())
        except (AttributeError, ValueError):
            a = b = None
        r.append(a)
        w.append(b)
    return pa.array(r, pa.int64()), pa.array(w, pa.int64())
