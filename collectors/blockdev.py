"""Block-device collector: /proc/diskstats counters and /sys/block/<dev>/inflight gauges.

Stores what the kernel says: the cumulative counters of iostats.rst as counters, and the two
in-flight gauges. Rates (bytes/s, IOPS, await, aqu-sz, %util) are derived when a recording is
read (ckprof.recording.rates). One read of /proc/diskstats serves every device; where it is unreadable,
/sys/block/<dev>/stat is read per device instead.
"""

from __future__ import annotations

import os

import pyarrow as pa

from .base import T_NS, Collector, Probe, col
from .diskstats import FIELDS, parse_diskstats, parse_inflight, parse_sys_block_stat

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
        col("inflight_read", pa.int64(), "ios", doc="/sys/block/<dev>/inflight"),
        col("inflight_write", pa.int64(), "ios", doc="/sys/block/<dev>/inflight"),
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


class BlockCollector(Collector):
    name = "block"
    schema = SCHEMA

    def __init__(self, devices: list[str], period_s: float = 0.1, proc_root: str = "/proc", sys_root: str = "/sys"):
        self.devices = list(devices)
        self.period_s = period_s
        self.proc_root = proc_root
        self.sys_root = sys_root
        self._diskstats = os.path.join(proc_root, "diskstats")
        self._use_proc = os.access(self._diskstats, os.R_OK)
        self._inflight = {d: os.path.join(sys_root, "class", "block", d, "inflight") for d in self.devices}
        self._wanted = set(self.devices)
        self._fds: dict[str, int] = {}

    def _pread(self, path: str) -> str:
        """Read a /proc or sysfs file from offset 0 through a descriptor kept open.

        Both seq_file (/proc/diskstats) and sysfs attributes regenerate their text on a read at
        offset 0, so one pread(2) per sample replaces open+read+close: the sampling hot path.
        """
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.pread(fd, 1 << 20, 0).decode()
        except OSError:
            os.close(self._fds.pop(path))  # the device went away; reopen next time
            raise

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _sysblock(self, dev: str, *parts: str) -> str:
        return os.path.join(self.sys_root, "class", "block", dev, *parts)

    def _queue_dir(self, dev: str) -> str:
        q = self._sysblock(dev, "queue")
        if not os.path.isdir(q):  # a partition: its queue is its disk's
            q = os.path.join(os.path.dirname(os.path.realpath(self._sysblock(dev))), "queue")
        return q

    def queue_attrs(self, dev: str) -> dict:
        out = {}
        for attr in QUEUE_ATTRS:
            try:
                with open(os.path.join(self._queue_dir(dev), attr)) as f:
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
        return [d for d in self.devices if self.queue_attrs(d).get("iostats") == 0]

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

    def sample(self, t_ns: int) -> list[dict]:
        stats = self._read_stats()
        rows = []
        for dev in self.devices:
            st = stats.get(dev)
            if st is None:
                continue  # the device went away; it reappears in the rows when it comes back
            row = {"t_ns": t_ns, "device": dev, **st}
            try:
                row["inflight_read"], row["inflight_write"] = parse_inflight(self._pread(self._inflight[dev]))
            except (OSError, ValueError):
                row["inflight_read"] = row["inflight_write"] = None
            rows.append(row)
        return rows
