"""/proc/diskstats and /sys/block/<dev>/stat, in every layout the kernel has printed.

Field meanings: Documentation/admin-guide/iostats.rst and Documentation/block/stat.rst.
After "major minor name" a line holds, by kernel version:
   4 fields  2.6.0–2.6.24 partitions: reads, sectors read, writes, sectors written
  11 fields  2.6+  disks (and partitions since 2.6.25)
  15 fields  4.18+ adds discards (ios, merges, sectors, ticks)
  17 fields  5.5+  adds flushes (ios, ticks); later kernels may append more, ignored
Linux 2.4 printed the same 11 counters in /proc/partitions, after "major minor #blocks name"
(15 fields in all). /sys/block/<dev>/stat has the 11/15/17 counters with no name.
Sectors are always 512 bytes, whatever the device's block size (iostats.rst): ckprof.recording.schema.SECTOR_BYTES.
"""

from __future__ import annotations

FIELDS = (
    "read_ios",
    "read_merges",
    "read_sectors",
    "read_ticks_ms",
    "write_ios",
    "write_merges",
    "write_sectors",
    "write_ticks_ms",
    "in_flight",
    "io_ticks_ms",
    "time_in_queue_ms",
    "discard_ios",
    "discard_merges",
    "discard_sectors",
    "discard_ticks_ms",
    "flush_ios",
    "flush_ticks_ms",
)
_OLD_PARTITION = ("read_ios", "read_sectors", "write_ios", "write_sectors")


def parse_stat_values(values: list[int]) -> dict:
    """Map the counters of one device (11, 15, 17 or more; or the old 4) to FIELDS."""
    out = dict.fromkeys(FIELDS)
    if len(values) == 4:
        out.update(zip(_OLD_PARTITION, values))
    elif len(values) >= 11:
        out.update(zip(FIELDS, values[: len(FIELDS)]))
    else:
        raise ValueError(f"unexpected number of block stat fields: {len(values)}")
    return out


def parse_diskstats(text: str, only: set[str] | None = None) -> dict[str, dict]:
    """Parse /proc/diskstats (or 2.4's /proc/partitions) text into {name: {field: value}}.

    `only` limits the result (and the parsing work) to these device names.
    """
    out: dict[str, dict] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 7 or not parts[0].isdigit():
            continue  # blank line or /proc/partitions' header
        if len(parts) == 15 and parts[2].isdigit():
            # Linux 2.4 /proc/partitions: major minor #blocks name + 11 counters
            name, values = parts[3], parts[4:]
        else:
            name, values = parts[2], parts[3:]
        if only is not None and name not in only:
            continue
        try:
            out[name] = parse_stat_values([int(v) for v in values])
        except ValueError:
            continue
    return out


def parse_sys_block_stat(text: str) -> dict:
    """Parse /sys/block/<dev>/stat (counters only, no name)."""
    return parse_stat_values([int(v) for v in text.split()])


def parse_inflight(text: str) -> tuple[int, int]:
    """/sys/block/<dev>/inflight: 'reads writes' now in flight (Documentation/ABI/stable/sysfs-block)."""
    r, w = text.split()[:2]
    return int(r), int(w)
