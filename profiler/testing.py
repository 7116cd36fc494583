"""Synthetic recordings with known answers, for every test that needs one.

Written through the project's own RecordingWriter, with column declarations made by
`col` (recording/schema.py), so what lands on disk is the real format (meta.json, events.jsonl,
samples/<collector>/part-*.parquet). One host:

    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)      # a 0.1 s grid from 0 to 10 s
    rb.block("sda", lambda t: np.where(t > 2, 50 * MiB, 0))     # bytes/s → cumulative counters
    rb.series("gpu", GPU_SCHEMA, gpu="0", power_w=200, util_gpu_pct=lambda t: 90 - t)
    rb.rows("nvme", [{"t_s": 1.0, "device": "nvme0", "temp_c": 41.0}], NVME_SCHEMA)
    rb.checkpoint(2, 3, 50 * MiB, step=10)
    rec = ckprof.load(rb.finish())

A job of many hosts, each a recording in JOB/host=<name>/ as `ckprof record --job-dir` lays it out:

    job_dir(tmp_path / "job", {"a": RecordingBuilder(), "b": RecordingBuilder(wall_ns=WALL_NS + S // 2)})
    job_dir(tmp_path / "job", {"a": job_host(0.0, [(1, 0, 3, 5, 200 * MiB)], {"nvme0n1": on(3, 5, 100 * MiB)})})

A large recording (the benchmarks': a day at 10 Hz) is given as columns, a chunk at a time, each
chunk one Parquet part; write_parts() puts the chunks given so far on disk, so memory holds one:

    rb = RecordingBuilder(path, duration_s=86_400, interval_s=0.1).collector("block", BLOCK_SCHEMA)
    for hour in range(24):
        rb.table("block", {"t_ns": ..., "device": ..., "write_sectors": ...}).write_parts()
    rb.checkpoint(600, 660, 2**30).finish()

Times are seconds after the recording's start (`t_s`) unless a key says `t_ns` (monotonic ns).
Nothing is written before write_parts() or finish(): a builder can be filled, then given a path by
job_dir(). Tests and benchmarks build every synthetic recording here, and nothing in ckprof imports
this module.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ckprof.collectors.blockdev import SCHEMA as BLOCK_SCHEMA
from ckprof.collectors.host import HOST_SCHEMA
from ckprof.recording.format import parse_part_name, part_name
from ckprof.recording.job import host_dir
from ckprof.recording.schema import T_NS, col, schema_units
from ckprof.recording.writer import RecordingWriter

S = 1_000_000_000  # ns in a second
START_NS = 5_000 * S  # the recordings' monotonic start: not 0, so offsets show
WALL_NS = 1_790_000_000_000_000_000  # its wall-clock anchor (2026-09-21T…Z)


def t(seconds: float, start_ns: int = START_NS) -> int:
    """Seconds after a recording's start → its monotonic ns."""
    return start_ns + round(float(seconds) * S)


# Collector schemas cut down to the columns the analysis reads, with the real collectors'
# column names and units (GPU/NVML, RAPL, NVMe SMART, a power meter).
GPU_SCHEMA = pa.schema(
    [
        T_NS,
        col("gpu", pa.string(), "", "label"),
        col("energy_mj", pa.int64(), "mJ", "counter", doc="nvmlDeviceGetTotalEnergyConsumption"),
        col("power_w", pa.float64(), "W", doc="nvmlDeviceGetPowerUsage / 1000"),
        col("util_gpu_pct", pa.float64(), "%", doc="nvmlDeviceGetUtilizationRates.gpu"),
        col("temp_c", pa.float64(), "C"),
        col("clocks_event_reasons", pa.int64(), "bitmask", doc="nvmlDeviceGetCurrentClocksEventReasons"),
    ]
)
POWER_SCHEMA = pa.schema([T_NS, col("device", pa.string(), "", "label"), col("power_w", pa.float64(), "W")])
RAPL_SCHEMA = pa.schema([T_NS, col("domain", pa.string(), "", "label"), col("energy_uj", pa.int64(), "uJ", "counter")])
NVME_SCHEMA = pa.schema(
    [
        T_NS,
        col("device", pa.string(), "", "label"),
        col("temp_c", pa.float64(), "C"),
        col("critical_warning", pa.int64(), "bitmask"),
        col("thm_temp1_trans_count", pa.int64(), "events", "counter"),
        col("thm_temp1_total_time", pa.int64(), "s", "counter"),
        col("power_w", pa.float64(), "W", provenance="estimated", doc="power state table"),
    ]
)


def _schema(columns) -> pa.Schema:
    """A pyarrow schema, or a list of `col(...)` fields (t_ns put first when left out)."""
    if isinstance(columns, pa.Schema):
        return columns
    fields = list(columns)
    return pa.schema(fields if fields and fields[0].name == "t_ns" else [T_NS, *fields])


def _columns_table(columns, schema: pa.Schema) -> pa.Table:
    """Columns (a dict of arrays, or a table) as a table of `schema`: the columns not given are
    null, as a collector leaves a reading it did not get."""
    if isinstance(columns, pa.Table):
        columns = {name: columns.column(name) for name in columns.column_names}
    n = len(next(iter(columns.values())))
    return pa.table(
        {f.name: columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schema}, schema=schema
    )


def _value(type_: pa.DataType, x):
    if x is None:
        return None
    if pa.types.is_integer(type_):
        return int(x)
    if pa.types.is_floating(type_):
        return float(x)
    if pa.types.is_boolean(type_):
        return bool(x)
    return x


class RecordingBuilder:
    """One host's recording. `duration_s` is where it ends (or its last row, if later);
    `interval_s` is the grid that block(), host() and series() sample on (rows() take any times)."""

    def __init__(
        self,
        path=None,
        *,
        start_ns: int = START_NS,
        wall_ns: int = WALL_NS,
        duration_s: float = 10.0,
        interval_s: float = 0.1,
        command=("python", "train.py"),
        hostname: str = "synth",
        meta: dict | None = None,
    ):
        self.path = None if path is None else str(path)
        self.start_ns, self.wall_ns = start_ns, wall_ns
        self.duration_s, self.interval_s = duration_s, interval_s
        self.meta = {"command": list(command), "host": {"hostname": hostname}, **(meta or {})}
        self.t_s = np.round(np.arange(0, duration_s + interval_s / 2, interval_s), 9)
        self.collectors: dict[str, dict] = {}  # name → {"schema", "rows", "tables", "describe", ...}
        self.events: list[dict] = []
        self._writer: RecordingWriter | None = None  # made by the first write_parts()

    def ns(self, seconds: float) -> int:
        """Seconds after this recording's start → monotonic ns."""
        return t(seconds, self.start_ns)

    # -- samples ------------------------------------------------------------------------------
    def collector(
        self, name: str, columns=None, describe: dict | None = None, period_s: float | None = None
    ) -> "RecordingBuilder":
        """Declare a collector: its schema (or `col` fields), what meta.json describes of it and
        its period (the builder's interval unless given). Declared once; later calls add to
        `describe`."""
        if name not in self.collectors:
            if columns is None:
                raise ValueError(f"collector {name!r}: give its columns (a schema or col() fields)")
            self.collectors[name] = {
                "schema": _schema(columns),
                "rows": [],
                "tables": [],  # chunks of columns not yet written, one Parquet part each
                "describe": {},
                "period_s": self.interval_s,
                "parts": 0,  # chunks already written
                "last_t_ns": None,  # their last reading
            }
        self.collectors[name]["describe"].update(describe or {})
        if period_s is not None:
            self.collectors[name]["period_s"] = period_s
        return self

    def rows(self, name: str, rows, columns=None) -> "RecordingBuilder":
        """Append rows (dicts) to a collector; each has `t_s` (seconds) or `t_ns` (monotonic)."""
        self.collector(name, columns)
        for r in rows:
            r = dict(r)
            if "t_s" in r:
                r["t_ns"] = self.ns(r.pop("t_s"))
            self.collectors[name]["rows"].append(r)
        return self

    def table(self, name: str, columns, schema=None) -> "RecordingBuilder":
        """Append a chunk of columns (a dict of arrays or a table, `t_ns` in monotonic ns; the
        schema's other columns null) to a collector: one Parquet part of its own, as a recorder's
        flush writes it. For recordings too large to give row by row."""
        c = self.collector(name, schema).collectors[name]
        c["tables"].append(_columns_table(columns, c["schema"]))
        return self

    def series(self, name: str, columns=None, **values) -> "RecordingBuilder":
        """A row at every grid point: each keyword is a column, given as a constant or as a
        function of the grid's seconds (numpy, vectorised)."""
        schema = self.collector(name, columns).collectors[name]["schema"]
        cols = {
            c: np.broadcast_to(np.asarray(v(self.t_s) if callable(v) else v, dtype=object), self.t_s.shape)
            for c, v in values.items()
        }
        return self.rows(
            name,
            [
                {"t_s": s, **{c: _value(schema.field(c).type, v[i]) for c, v in cols.items()}}
                for i, s in enumerate(self.t_s)
            ],
        )

    def block(self, device: str, write_bps, queue=lambda t: 0.0) -> "RecordingBuilder":
        """A block device's cumulative counters whose per-interval deltas follow write_bps(t)
        (bytes/s); queue(t) is the requests in flight (time_in_queue, in_flight)."""
        dt = np.diff(self.t_s)
        rate = np.broadcast_to(np.asarray(write_bps(self.t_s), dtype=float), self.t_s.shape)
        q = np.broadcast_to(np.asarray(queue(self.t_s), dtype=float), self.t_s.shape)
        sectors = np.concatenate([[0], np.cumsum(rate[1:] * dt / 512)]).round().astype(np.int64)
        tiq = np.concatenate([[0], np.cumsum(q[1:] * dt * 1000)]).round().astype(np.int64)
        busy = np.concatenate([[0], np.cumsum((rate[1:] > 0) * dt * 1000)]).astype(np.int64)
        zero = {f.name: 0 for f in BLOCK_SCHEMA if f.name not in ("t_ns", "device")}
        return self.rows(
            "block",
            [
                {
                    **zero,
                    "t_s": s,
                    "device": device,
                    "write_sectors": int(sectors[i]),
                    "write_ios": int(sectors[i] // 256),
                    "time_in_queue_ms": int(tiq[i]),
                    "io_ticks_ms": int(busy[i]),
                    "in_flight": int(round(q[i])),
                }
                for i, s in enumerate(self.t_s)
            ],
            BLOCK_SCHEMA,
        )

    def host(self, dirty_bytes=lambda t: 0.0) -> "RecordingBuilder":
        """/proc/stat and /proc/meminfo as the host collector writes them; dirty_bytes(t) in B."""
        d = np.broadcast_to(np.asarray(dirty_bytes(self.t_s), dtype=float), self.t_s.shape)
        return self.rows(
            "host",
            [
                {
                    "t_s": s,
                    "cpu_user_s": i * 0.01,
                    "cpu_system_s": i * 0.01,
                    "cpu_iowait_s": 0.0,
                    "cpu_idle_s": i * 0.1,
                    "cpu_total_s": i * 0.12,
                    "mem_total_bytes": 8 << 30,
                    "mem_available_bytes": 4 << 30,
                    "dirty_bytes": int(d[i]),
                    "writeback_bytes": 0,
                }
                for i, s in enumerate(self.t_s)
            ],
            HOST_SCHEMA,
        )

    # -- events -------------------------------------------------------------------------------
    def event(self, event: str, t_s: float, **fields) -> "RecordingBuilder":
        """One line of events.jsonl, as ckprof.record.markers writes it."""
        self.events.append({"t_ns": self.ns(t_s), "event": event, **fields})
        return self

    def checkpoint(
        self,
        start_s: float,
        end_s: float | None,
        nbytes: int | None = None,
        *,
        kind: str = "save",
        step: int | None = None,
        path: str | None = None,
        rank: int = 0,
        source: str = "api",
        **end_fields,
    ) -> "RecordingBuilder":
        """A checkpoint window as `with ckprof.checkpoint(...)` marks it; end_s None: never ended."""
        self.last_checkpoint_id = f"synth:{len(self.events)}"  # what its events carry, for file_event()
        start = {"id": self.last_checkpoint_id, "kind": kind, "source": source, "pid": 1, "rank": rank}
        start.update({k: v for k, v in (("bytes", nbytes), ("step", step), ("path", path)) if v is not None})
        self.event("checkpoint_start", start_s, **start)
        if end_s is not None:
            self.event("checkpoint_end", end_s, **start, ok=True, **end_fields)
        return self

    def file_tracker(self, ok: bool = True, reason: str | None = None) -> "RecordingBuilder":
        """The recorder's file tracker at the start: watching (ok) or not, and why not."""
        return self.event("file_tracker", 0.0, source="recorder", ok=ok, reason=reason)

    def file_event(
        self, event: str, t_s: float, checkpoint_id: str, path: str, nbytes: int, first_pending_bytes: int = 0, **fields
    ) -> "RecordingBuilder":
        """One of the file tracker's events about a checkpoint's file (file_durable,
        file_deleted_before_durable, ...), its first poll at t_s with `first_pending_bytes` dirty."""
        return self.event(
            event,
            t_s,
            source="recorder",
            id=checkpoint_id,
            path=path,
            bytes=nbytes,
            first_poll_pending_bytes=first_pending_bytes,
            first_poll_ns=self.ns(t_s),
            **fields,
        )

    # -- on disk ------------------------------------------------------------------------------
    def _begun(self, path: str | os.PathLike[str] | None) -> RecordingWriter:
        """The writer of the recording at `path` (else the builder's own), begun (meta.json, status
        "recording") when it is new."""
        self.path = str(path) if path is not None else self.path
        if self.path is None:
            raise ValueError("write_parts(path): this builder was made without a path")
        if self._writer is None or self._writer.path != self.path:
            self._writer = RecordingWriter(self.path)
            self._writer.create(
                {
                    "ckprof_version": "test",
                    **self.meta,
                    "notes": self.meta.get("notes", []),
                    "start": {"monotonic_ns": self.start_ns, "wall_ns": self.wall_ns, "uncertainty_ns": 0},
                    "interval_s": self.interval_s,
                }
            )
        return self._writer

    def write_parts(self, path: str | os.PathLike[str] | None = None) -> RecordingBuilder:
        """Write the chunks of columns given so far (table()) as Parquet parts now, and let them
        go; the recording is begun (meta.json, status "recording") by the first call."""
        writer = self._begun(path)
        for name, c in self.collectors.items():
            folder = writer.collector_dir(name)
            os.makedirs(folder, exist_ok=True)
            for table in c["tables"]:  # numbered after the parts already there, as the writer does
                n = max([r[1] + 1 for r in map(parse_part_name, os.listdir(folder)) if r] or [0])
                pq.write_table(table, os.path.join(folder, part_name(n, n)), compression="zstd")
                c["parts"] += 1
                if table.num_rows:
                    last = pc.max(table.column("t_ns")).as_py()
                    c["last_t_ns"] = last if c["last_t_ns"] is None else max(c["last_t_ns"], last)
            c["tables"] = []
        return self

    def finish(self, path: str | os.PathLike[str] | None = None, complete: bool = True) -> str:
        """Write the recording (at `path`, else the builder's own) and return where it is.
        complete=False leaves it as a recorder killed mid-run leaves one: status "recording", no end."""
        self.write_parts(path)
        w = self._begun(path)  # the writer write_parts began
        described = {}
        for name, c in self.collectors.items():
            if c["rows"] or not c["parts"]:  # rows go after the parts written from columns, and
                w.add_collector(name, c["schema"])  # only these are merged (as a recorder's last flush)
                w.append(name, c["rows"])
            described[name] = {
                "period_s": c["period_s"],
                "columns": schema_units(c["schema"]),
                "describe": c["describe"],
            }
        for e in sorted(self.events, key=lambda e: e["t_ns"]):
            w.event(e)
        if complete:  # it ends at duration_s, or at its last row or event if later
            end_ns = max(
                [
                    self.ns(self.duration_s),
                    *(e["t_ns"] for e in self.events),
                    *(r["t_ns"] for c in self.collectors.values() for r in c["rows"]),
                    *(c["last_t_ns"] for c in self.collectors.values() if c["last_t_ns"] is not None),
                ]
            )
            w.finish(
                end={"monotonic_ns": end_ns, "wall_ns": self.wall_ns + end_ns - self.start_ns}, collectors=described
            )
        else:
            w.write_meta(collectors=described)
            w.flush()
        self._writer = None  # finished: a later finish() writes the recording anew
        return w.path


def on(start_s: float, end_s: float, value: float):
    """A function of the grid's seconds: `value` in (start_s, end_s], 0 elsewhere (a rate while
    a save writes, for block(), series())."""
    return lambda t: np.where((t > start_s) & (t <= end_s), value, 0.0)


def bursts(spans, value: float):
    """A function of the grid's seconds: `value` inside each (start_s, end_s] of `spans`, summed
    where they overlap, 0 elsewhere."""
    return lambda t: sum(np.where((t > a) & (t <= b), value, 0.0) for a, b in spans)


def job_host(
    wall_shift_s: float = 0.0,
    windows=(),
    devices: dict | None = None,
    *,
    gpu_w: float = 200.0,
    hostname: str = "synth",
    job_id: str = "77",
    synchronised: bool = True,
) -> RecordingBuilder:
    """One host of a job, 10 s long, as `ckprof record --job-dir` makes it: its wall clock
    `wall_shift_s` after WALL_NS, the job's id and its kernel clock sync (maxerror 10 µs, or 16 s
    when not synchronised); `windows`: (step, rank, start_s, end_s or None, bytes) checkpoints;
    `devices`: block device → bytes/s function; the host collector; a GPU at `gpu_w` W (0: none)."""
    maxerror_us = 10 if synchronised else 16_000_000
    rb = RecordingBuilder(
        duration_s=10,
        wall_ns=WALL_NS + int(wall_shift_s * 1e9),
        hostname=hostname,
        meta={
            "job": {"id": job_id, "clock_sync": {"kernel": {"synchronised": synchronised, "maxerror_us": maxerror_us}}}
        },
    )
    for dev, fn in (devices or {}).items():
        rb.block(dev, fn)
    rb.host()
    if gpu_w:
        rb.series(
            "gpu",
            GPU_SCHEMA,
            gpu="0",
            energy_mj=lambda t: t * gpu_w * 1e3,
            power_w=gpu_w,
            util_gpu_pct=50,
            temp_c=50,
            clocks_event_reasons=0,
        )
    for step, rank, a, b, n in windows:
        rb.checkpoint(a, b, n, step=step, rank=rank)
    return rb


def job_dir(path, hosts: dict[str, RecordingBuilder]) -> Path:
    """A job directory: each host's recording written in PATH/host=<name>/ (ckprof.recording.job's
    layout, refused there when a host's directory already holds a recording)."""
    for name, rb in hosts.items():
        rb.finish(host_dir(str(path), name))
    return Path(path)
