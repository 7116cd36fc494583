"""Synthetic recordings with known answers, written with the real RecordingWriter.

Block counters are built from a write-rate function (bytes/s over time), so the bytes in any
window are known exactly; power, energy counters, temperatures and throttle signals use the
column declarations a collector would (collectors/base.py `col`), with names of the GPU, RAPL
and NVMe collectors (energy_mj, energy_uj, power_w, temp_c, thm_temp1_trans_count, ...).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ckprof.collectors.base import T_NS, col, schema_units
from ckprof.collectors.blockdev import SCHEMA as BLOCK_SCHEMA
from ckprof.collectors.host import HOST_SCHEMA
from ckprof.recording.writer import RecordingWriter

START_NS = 5_000_000_000_000
WALL_NS = 1_790_000_000_000_000_000

GPU_SCHEMA = pa.schema([
    T_NS, col("gpu", pa.string(), "", "label"),
    col("energy_mj", pa.int64(), "mJ", "counter", doc="nvmlDeviceGetTotalEnergyConsumption"),
    col("power_w", pa.float64(), "W", doc="nvmlDeviceGetPowerUsage / 1000"),
    col("util_gpu_pct", pa.float64(), "%", doc="nvmlDeviceGetUtilizationRates.gpu"),
    col("temp_c", pa.float64(), "C"),
    col("clocks_event_reasons", pa.int64(), "bitmask", doc="nvmlDeviceGetCurrentClocksEventReasons"),
])
POWER_SCHEMA = pa.schema([T_NS, col("device", pa.string(), "", "label"), col("power_w", pa.float64(), "W")])
RAPL_SCHEMA = pa.schema([T_NS, col("domain", pa.string(), "", "label"),
                         col("energy_uj", pa.int64(), "uJ", "counter")])
NVME_SCHEMA = pa.schema([
    T_NS, col("device", pa.string(), "", "label"),
    col("temp_c", pa.float64(), "C"), col("critical_warning", pa.int64(), "bitmask"),
    col("thm_temp1_trans_count", pa.int64(), "events", "counter"),
    col("thm_temp1_total_time", pa.int64(), "s", "counter"),
    col("power_w", pa.float64(), "W", provenance="estimated", doc="power state table"),
])


class Synth:
    def __init__(self, path, duration_s: float = 10.0, interval_s: float = 0.1, command=None):
        self.path = str(path)
        self.duration_s = duration_s
        self.interval_s = interval_s
        self.t_s = np.round(np.arange(0, duration_s + interval_s / 2, interval_s), 9)
        self.t_ns = START_NS + (self.t_s * 1e9).astype(np.int64)
        self.tables: dict[str, tuple[pa.Schema, list[dict]]] = {}
        self.events: list[dict] = []
        self.command = command or ["python", "train.py"]

    def _add(self, name, schema, rows):
        self.tables.setdefault(name, (schema, []))[1].extend(rows)

    def block(self, device: str, write_bps, queue=lambda t: 0.0):
        """Cumulative counters whose per-interval deltas follow write_bps(t) (bytes/s, vectorised)."""
        rate = np.broadcast_to(np.asarray(write_bps(self.t_s), dtype=float), self.t_s.shape)
        sectors = np.concatenate([[0], np.cumsum(rate[1:] * np.diff(self.t_s) / 512)]).round().astype(np.int64)
        q = np.broadcast_to(np.asarray(queue(self.t_s), dtype=float), self.t_s.shape)
        tiq = np.concatenate([[0], np.cumsum(q[1:] * np.diff(self.t_s) * 1000)]).round().astype(np.int64)
        busy = np.concatenate([[0], np.cumsum((rate[1:] > 0) * np.diff(self.t_s) * 1000)]).astype(np.int64)
        rows = []
        for i, t in enumerate(self.t_ns):
            r = {f.name: 0 for f in BLOCK_SCHEMA if f.name not in ("t_ns", "device")}
            r.update(t_ns=int(t), device=device, write_sectors=int(sectors[i]), write_ios=int(sectors[i] // 256),
                     time_in_queue_ms=int(tiq[i]), io_ticks_ms=int(busy[i]), in_flight=int(round(q[i])))
            rows.append(r)
        self._add("block", BLOCK_SCHEMA, rows)

    def host(self, dirty_bytes=lambda t: 0.0):
        d = np.broadcast_to(np.asarray(dirty_bytes(self.t_s), dtype=float), self.t_s.shape)
        rows = [{"t_ns": int(t), "cpu_user_s": i * 0.01, "cpu_system_s": i * 0.01, "cpu_iowait_s": 0.0,
                 "cpu_idle_s": i * 0.1, "cpu_total_s": i * 0.12, "mem_total_bytes": 8 << 30,
                 "mem_available_bytes": 4 << 30, "dirty_bytes": int(d[i]), "writeback_bytes": 0}
                for i, t in enumerate(self.t_ns)]
        self._add("host", HOST_SCHEMA, rows)

    def series(self, name, schema, label_col, label, **fns):
        """Rows of any collector: each keyword is column → function of t_s (vectorised)."""
        vals = {c: np.broadcast_to(np.asarray(f(self.t_s)), self.t_s.shape) for c, f in fns.items()}
        rows = []
        for i, t in enumerate(self.t_ns):
            r = {"t_ns": int(t)}
            if label_col:
                r[label_col] = label
            for c, v in vals.items():
                x = v[i]
                r[c] = int(x) if pa.types.is_integer(schema.field(c).type) else float(x)
            rows.append(r)
        self._add(name, schema, rows)

    def checkpoint(self, start_s, end_s, nbytes=None, kind="save", step=None, path=None, source="api", **extra):
        cid = f"synth:{len(self.events)}"
        s = {"t_ns": START_NS + int(start_s * 1e9), "event": "checkpoint_start", "id": cid, "kind": kind,
             "source": source, "pid": 1, "rank": 0}
        if nbytes is not None:
            s["bytes"] = nbytes
        if step is not None:
            s["step"] = step
        if path is not None:
            s["path"] = path
        self.events.append(s)
        if end_s is not None:
            e = dict(s, t_ns=START_NS + int(end_s * 1e9), event="checkpoint_end", ok=True, **extra)
            self.events.append(e)
        return cid

    def write(self, status="complete", meta_extra=None, describe=None):
        w = RecordingWriter(self.path)
        w.create({"ckprof_version": "test", "host": {"hostname": "synth"}, "command": self.command,
                  "start": {"monotonic_ns": START_NS, "wall_ns": WALL_NS}, "interval_s": self.interval_s,
                  "notes": [], **(meta_extra or {})})
        colls = {}
        for name, (schema, rows) in self.tables.items():
            w.add_collector(name, schema)
            w.append(name, rows)
            colls[name] = {"period_s": self.interval_s, "columns": schema_units(schema),
                           "describe": (describe or {}).get(name, {})}
        w.write_meta(collectors=colls)
        for e in sorted(self.events, key=lambda e: e["t_ns"]):
            w.event(e)
        end = {"monotonic_ns": int(self.t_ns[-1]), "wall_ns": WALL_NS + int(self.t_ns[-1] - START_NS)}
        if status == "complete":
            w.finish(end=end)
        else:
            w.flush()
        return self.path
