"""Reading a recording (format v1) on any machine: `ckprof.load(path)` → Recording (recording/load.py).

Nothing here touches hardware. A recording left by a killed recorder loads: parts are complete
files, a torn last line of events.jsonl is skipped, and each such gap is listed in `problems`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc  # noqa: F401  (pa.ipc: open streams)
import pyarrow.parquet as pq

from ckprof.errors import RecordingError

from . import rollup
from .format import (
    EVENTS,
    FORMAT_NAME,
    META,
    SAMPLES,
    SCHEMA_VERSION,
    event_problem,
    parse_part_name,
    parse_stream_name,
)
from .rates import block_rates, counter_rates
from .timebase import Timebase


def _live_parts(directory: str) -> list[str]:
    """Part files in order, leaving out any whose range another part covers (an unfinished merge),
    and an open stream (a killed recorder's last flushes) but where a part already holds them."""
    ranges, streams = [], []
    for fn in os.listdir(directory):
        r = parse_part_name(fn)
        if r:
            ranges.append((r[0], r[1], fn))
        elif (first := parse_stream_name(fn)) is not None:
            streams.append((first, first, fn))
    live = [
        p
        for p in ranges
        if not any(q is not p and q[0] <= p[0] and p[1] <= q[1] and (q[1] - q[0]) > (p[1] - p[0]) for q in ranges)
    ]
    live += [s for s in streams if not any(q[0] <= s[0] <= q[1] for q in ranges)]
    return [os.path.join(directory, fn) for _, _, fn in sorted(live)]


def read_part(path: str, columns: list[str] | None = None, strings_as_categories: bool = False) -> pa.Table | None:
    """One part's table (`columns` of it, those it has): a Parquet part, or an open stream's
    whole batches (a batch torn by a kill is left out; format.py); None for a stream cut before
    its schema was written (it holds no batch: the recorder was killed as it made it)."""
    if parse_stream_name(os.path.basename(path)) is None:
        if columns is None:
            return pq.read_table(path)
        schema = pq.read_schema(path)
        have = [c for c in columns if c in schema.names]
        strings = [c for c in have if strings_as_categories and pa.types.is_string(schema.field(c).type)]
        return pq.read_table(path, columns=have, read_dictionary=strings)
    batches = []
    with pa.OSFile(path) as f:
        try:
            reader = pa.ipc.open_stream(f)
        except (OSError, pa.ArrowInvalid):
            return None
        try:
            while True:
                batches.append(reader.read_next_batch())
        except StopIteration:
            pass
        except (OSError, pa.ArrowInvalid):
            pass  # the kill tore the last batch: the ones before it stand
        table = pa.Table.from_batches(batches, schema=reader.schema)
    if columns is not None:
        table = table.select([c for c in columns if c in table.schema.names])
        if strings_as_categories:
            for i, fld in enumerate(table.schema):
                if pa.types.is_string(fld.type):
                    table = table.set_column(i, fld.name, table.column(i).dictionary_encode())
    return table


class Recording:
    """One host's recording: meta, events and per-collector samples as DataFrames.

    A Job (ckprof.recording.job) of many hosts has the same methods and frames, with a `host`
    and a `t_wall_ns` column added; code that takes either iterates `.hosts`.
    """

    def __init__(self, path: str, meta: dict[str, Any]) -> None:
        self.path = path
        self.meta = meta
        self.problems: list[str] = []
        status = meta.get("status")
        if status == "truncated":
            self.problems.append(
                f"{os.path.join(path, META)}: the recording is truncated ({meta.get('truncated') or 'a write failed'}): "
                "samples after that are missing; the command itself ran on"
            )
        elif status != "complete":
            self.problems.append(
                f"{os.path.join(path, META)}: status is {status!r}: "
                "the recorder did not finish (killed?); the last seconds may be missing"
            )

    def __repr__(self) -> str:
        return f"<Recording {self.path} collectors={self.collectors}>"

    @property
    def host_name(self) -> str:
        return str((self.meta.get("host") or {}).get("hostname") or os.path.basename(self.path))

    @property
    def hosts(self) -> dict[str, "Recording"]:
        """{host name: recording}: this one alone (a Job has one per host)."""
        return {self.host_name: self}

    # -- time --------------------------------------------------------------------------------
    @cached_property
    def timebase(self) -> Timebase:
        return Timebase.from_meta(self.meta, os.path.join(self.path, META))

    @property
    def start_ns(self) -> int:
        return self.timebase.monotonic_ns

    @property
    def start_wall_ns(self) -> int:
        return self.timebase.wall_ns

    @property
    def end_ns(self) -> int | None:
        end = self.meta.get("end")
        return int(end["monotonic_ns"]) if end else None

    def to_wall(self, t_ns: Sequence[int] | np.ndarray | pd.Series) -> pd.Series:
        """Monotonic ns → UTC timestamps through the wall-clock anchor in meta.json."""
        return pd.to_datetime(self.timebase.to_wall_ns(pd.Series(t_ns)), unit="ns", utc=True)

    # -- contents ----------------------------------------------------------------------------
    @property
    def collectors(self) -> list[str]:
        d = os.path.join(self.path, SAMPLES)
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def units(self, collector: str) -> dict[str, Any]:
        columns: dict[str, Any] = self.meta.get("collectors", {}).get(collector, {}).get("columns", {})
        return columns

    @cached_property
    def events(self) -> pd.DataFrame:
        path = os.path.join(self.path, EVENTS)
        rows = []
        try:
            with open(path, "rb") as f:
                for i, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        self.problems.append(f"{path}:{i}: unreadable event line skipped")
                        continue
                    why = event_problem(ev)
                    if why:
                        self.problems.append(f"{path}:{i}: not an event ({why}): line skipped")
                        continue
                    rows.append(ev)
        except FileNotFoundError:
            self.problems.append(f"{path}: missing; no events")
        df = pd.DataFrame(rows)
        if not df.empty:
            df = df.sort_values("t_ns", kind="stable").reset_index(drop=True)
            df["t_s"] = (df["t_ns"] - self.start_ns) / 1e9
        return df

    def parts(self, collector: str) -> list[str]:
        """The collector's live part files, in order (for readers that go one part at a time)."""
        d = os.path.join(self.path, SAMPLES, collector)
        return _live_parts(d) if os.path.isdir(d) else []

    def samples(self, collector: str, columns: list[str] | None = None) -> pd.DataFrame:
        """Raw rows of one collector, in time order, with `t_s` seconds since the start.

        `columns` reads only those (and t_ns); label columns come back as pandas categoricals
        then, so a day of GPU rows does not cost a Python string per row.
        """
        d = os.path.join(self.path, SAMPLES, collector)
        if not os.path.isdir(d):
            return pd.DataFrame()
        if columns is not None and "t_ns" not in columns:
            columns = ["t_ns", *columns]
        tables = []
        for p in _live_parts(d):
            try:
                table = read_part(p, columns, strings_as_categories=columns is not None)
                if table is not None:
                    tables.append(table)
            except (OSError, pa.ArrowException) as e:
                self.problems.append(f"{p}: unreadable part skipped ({e})")
        if not tables:
            return pd.DataFrame()
        df: pd.DataFrame = pa.concat_tables(tables, promote_options="default").to_pandas()  # pyarrow: Any
        df = df.sort_values("t_ns", kind="stable").reset_index(drop=True)
        df["t_s"] = (df["t_ns"] - self.start_ns) / 1e9
        return df

    def block(self, resample_s: float | None = None) -> pd.DataFrame:
        """Per-device rates (bytes/s, IOPS, await, aqu-sz, %util, in-flight); see ckprof.recording.rates.
        At 1 s, a closed job host's current roll-up stands for its samples (ckprof.recording.rollup)."""
        df = rollup.read_block(self) if resample_s == rollup.RESOLUTION_S else None
        if df is None:
            df = block_rates(self.samples("block"), resample_s=resample_s, t0_ns=self.start_ns)
        if not df.empty:
            df["t_s"] = (df["t_ns"] - self.start_ns) / 1e9
        return df

    def host(self) -> pd.DataFrame:
        """CPU utilisation (%), memory, Dirty and Writeback bytes per interval."""
        raw = self.samples("host")
        if raw.empty:
            return raw
        cpu = ["cpu_user_s", "cpu_system_s", "cpu_iowait_s", "cpu_idle_s", "cpu_total_s"]
        r = counter_rates(raw, cpu)
        if r.empty:
            return r
        tot = r["cpu_total_s_delta"].where(r["cpu_total_s_delta"] > 0)
        out = pd.DataFrame({"t_ns": r["t_ns"], "dt_s": r["dt_s"]})
        for c in ("user", "system", "iowait", "idle"):
            out[f"cpu_{c}_pct"] = r[f"cpu_{c}_s_delta"] / tot * 100
        gauges = raw.iloc[1:].reset_index(drop=True)
        for c in ("mem_total_bytes", "mem_available_bytes", "dirty_bytes", "writeback_bytes"):
            out[c] = gauges[c].to_numpy()
        out["t_s"] = (out["t_ns"] - self.start_ns) / 1e9
        return out

    def proc(self) -> pd.DataFrame:
        """The wrapped process tree's I/O: deltas and rates per interval."""
        raw = self.samples("proc")
        if raw.empty:
            return raw
        out = counter_rates(
            raw, ["read_bytes", "write_bytes", "read_chars", "write_chars", "read_syscalls", "write_syscalls"]
        )
        if out.empty:
            return out
        out["nprocs"] = raw["nprocs"].iloc[1:].to_numpy()
        out["t_s"] = (out["t_ns"] - self.start_ns) / 1e9
        return out

    def checkpoints(self) -> pd.DataFrame:
        """Marked windows: one row per checkpoint_start, joined with its checkpoint_end."""
        ev = self.events
        if ev.empty or "event" not in ev or not (ev["event"] == "checkpoint_start").any():
            return pd.DataFrame(columns=["id", "kind", "start_ns", "end_ns", "step", "rank", "pid"])
        starts = ev[ev["event"] == "checkpoint_start"]
        ends = ev[ev["event"] == "checkpoint_end"].set_index("id")
        rows = []
        for _, s in starts.iterrows():
            e = ends.loc[s["id"]] if s["id"] in ends.index else None
            end_bytes = None if e is None else e.get("bytes")
            if end_bytes is None or pd.isna(end_bytes):
                end_bytes = s.get("bytes")
            rows.append(
                {
                    "id": s["id"],
                    "kind": s.get("kind"),
                    "source": s.get("source"),
                    "step": s.get("step"),
                    "rank": s.get("rank"),
                    "pid": s.get("pid"),
                    "host": s.get("host"),
                    "path": s.get("path"),
                    "start_ns": s["t_ns"],
                    "end_ns": None if e is None else e["t_ns"],
                    "bytes": end_bytes,
                    "ok": None if e is None else e.get("ok"),
                    "error": None if e is None else e.get("error"),
                    # a load's files already in the page cache as it started (cachestat(2))
                    "cached_bytes_at_start": s.get("cached_bytes_at_start"),
                    "file_bytes_at_start": s.get("file_bytes_at_start"),
                }
            )
        df = pd.DataFrame(rows)
        df["start_s"] = (df["start_ns"] - self.start_ns) / 1e9
        df["end_s"] = (df["end_ns"].astype(float) - self.start_ns) / 1e9
        return df


def read_meta(path: str) -> dict[str, Any]:
    meta_path = os.path.join(path, META)
    if not os.path.isdir(path):
        raise RecordingError(f"{path}: not a directory; a recording is a directory with {META}")
    if not os.path.exists(meta_path):
        raise RecordingError(f"{path}: not a ckprof recording (no {META})")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except ValueError as e:
        raise RecordingError(f"{meta_path}: unreadable JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise RecordingError(f"{meta_path}: not a ckprof recording (format is not {FORMAT_NAME!r})")
    version = meta.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RecordingError(
            f"{meta_path}: schema version {version} is newer than this ckprof reads ({SCHEMA_VERSION})",
            hint="upgrade ckprof: pip install -U ckprof",
        )
    return meta
