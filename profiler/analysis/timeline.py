"""The recording's series at one analysis resolution, read once, one device at a time.

A day's recording of 32 devices at 10 Hz is ~28 million block rows; reading it whole as
float64 would take gigabytes. Each device is read alone (a pyarrow filter on `device`, only the
columns the analysis uses), turned into rates (ckprof.recording.rates, iostat's formulas) at the
analysis resolution, and kept; the sum over devices goes on a common time grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ckprof.recording import binning as B
from ckprof.recording import columns as S
from ckprof.recording.rates import BLOCK_COUNTERS, block_rates
from ckprof.recording.reader import read_part

from .meta import Meta

BATCH_ROWS = 1 << 20
NEEDED = [c for c in BLOCK_COUNTERS if not c.startswith(("discard", "flush"))]

MAX_BINS = 100_000  # finer than this, a day's recording would not fit the memory target


def rows_in(t1: np.ndarray, t0: np.ndarray, a_ns: float, b_ns: float) -> tuple[int, int]:
    """[i, j) of the rows whose interval (t0, t1] overlaps [a, b] (at least the row covering a):
    the rule every figure over a window follows (the counters are read once per interval, so an
    interval's movement cannot be placed inside it)."""
    i = int(np.searchsorted(t1, a_ns, side="right"))
    j = int(np.searchsorted(t0, b_ns, side="left"))
    if j <= i:
        i = min(i, len(t1) - 1)
        j = i + 1
    return max(i, 0), j


@dataclass(frozen=True)
class DeviceRates:
    """One block device's figures per sampling interval (t_ns − dt_s, t_ns], iostat's formulas
    (recording/rates.block_rates) at the analysis resolution: the interval's end (monotonic ns) and
    length (s), the bytes written and read in it and their rates (B/s), the mean queue length
    (aqu-sz, requests), the utilisation (%), the requests in flight (the interval's mean and
    maximum; None where the recording has none). NaN: not known for that interval."""

    t_ns: np.ndarray
    dt_s: np.ndarray
    write_bytes: np.ndarray
    read_bytes: np.ndarray
    write_bytes_per_s: np.ndarray
    read_bytes_per_s: np.ndarray
    aqu_sz: np.ndarray
    util_pct: np.ndarray
    in_flight: np.ndarray | None = None
    in_flight_max: np.ndarray | None = None

    @classmethod
    def of(cls, df: pd.DataFrame) -> DeviceRates:
        """From block_rates' table, read once."""
        cols = {c: df[c].to_numpy() for c in df.columns if c in _RATE_FIELDS}
        return cls(**cols)

    def __len__(self) -> int:
        return len(self.t_ns)

    @property
    def empty(self) -> bool:
        return len(self.t_ns) == 0

    @property
    def t0_ns(self) -> np.ndarray:
        """Each interval's start (monotonic ns)."""
        return self.t_ns - self.dt_s * 1e9

    def window(self, a_ns: float, b_ns: float) -> DeviceRates:
        """The intervals that overlap [a, b] (at least the one covering a): rows_in's rule."""
        i, j = rows_in(self.t_ns, self.t0_ns, a_ns, b_ns)
        return DeviceRates(
            **{f: None if (v := getattr(self, f)) is None else v[i:j] for f in _RATE_FIELDS}  # type: ignore[arg-type]
        )


_RATE_FIELDS = tuple(DeviceRates.__dataclass_fields__)


@dataclass(frozen=True)
class Total:
    """The recorded devices' block I/O summed on the analysis grid, one entry a bin: the bin's end
    (`t_ns`, monotonic ns), the bytes written and read in it (B) and their rates (B/s)."""

    t_ns: np.ndarray
    write_bytes: np.ndarray
    read_bytes: np.ndarray
    write_bytes_per_s: np.ndarray
    read_bytes_per_s: np.ndarray

    def __len__(self) -> int:
        return len(self.t_ns)

    @property
    def empty(self) -> bool:
        return len(self.t_ns) == 0


@dataclass(frozen=True)
class DirtyPages:
    """The host's Dirty + Writeback pages (/proc/meminfo, Documentation/filesystems/proc.rst) at
    each host sample: `t_ns` (monotonic ns), `dirty_wb_bytes` (B)."""

    t_ns: np.ndarray
    dirty_wb_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.t_ns)


@dataclass
class Timeline:
    start_ns: int
    end_ns: int
    res_s: float
    devices: dict[str, DeviceRates] = field(default_factory=dict)  # per device: block rates
    total: Total | None = None  # the devices' sum on the grid
    dirty: DirtyPages | None = None
    columns: list = field(default_factory=list)  # series.Column of every collector
    busy: pd.DataFrame | None = None  # t_ns, device, io_ticks_ms: the block counters' busy time, binned
    bin_ns: int = 0  # series are reduced to this resolution as they are read (0: as sampled)

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def _column(batch, cols: list[str], name: str) -> np.ndarray:
    """One column of a record batch read with `cols`, as an array."""
    return batch.column(cols.index(name)).to_numpy(zero_copy_only=False)


def _block_by_device(rec, resample_s: float | None, t0_ns: int) -> dict[str, pd.DataFrame]:
    """Raw block readings per device, read a batch at a time and, when the analysis resolution is
    coarser than the sampling, reduced to one reading per bin as they come (binning.py), so
    memory follows the bins, not the rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pieces: dict[str, list[tuple[np.ndarray, dict]]] = {}
    res_ns = int(resample_s * 1e9) if resample_s else 0
    for part in rec.parts("block"):
        try:
            if part.endswith(".parquet"):
                f = pq.ParquetFile(part)
                names = f.schema_arrow.names
            else:  # a killed recorder's open stream (format.py): small, read whole
                whole = read_part(part)
                if whole is None:
                    continue  # cut before its schema: no rows
                names = whole.schema.names
            # the counters rates.block_rates needs (discard/flush ones are not used by the report)
            cols = [c for c in ("t_ns", "device", *NEEDED, "in_flight") if c in names]
            batches = (
                f.iter_batches(batch_size=BATCH_ROWS, columns=cols)
                if part.endswith(".parquet")
                else whole.select(cols).to_batches(BATCH_ROWS)
            )
            for batch in batches:
                enc = pc.dictionary_encode(batch.column(cols.index("device")))
                codes = enc.indices.to_numpy(zero_copy_only=False)
                devs = enc.dictionary.to_pylist()
                t_all = _column(batch, cols, "t_ns")
                counters = {c: _column(batch, cols, c) for c in NEEDED if c in cols}
                flight = _column(batch, cols, "in_flight") if "in_flight" in cols else None
                for dev, idx in zip(devs, B.split_codes(codes, len(devs))):
                    spec = {c: (a[idx], "last") for c, a in counters.items()}
                    if flight is not None:  # the requests in flight: the bin's mean and maximum
                        spec |= {"in_flight": (flight[idx], "mean"), "in_flight_max": (flight[idx], "max")}
                    pieces.setdefault(str(dev), []).append(B.bin_reduce(t_all[idx], spec, t0_ns, res_ns))
        except (OSError, pa.ArrowException) as e:
            rec.problems.append(f"{part}: unreadable part skipped ({e})")
    out = {}
    for dev, ps in sorted(pieces.items()):
        t = np.concatenate([p[0] for p in ps])
        data = {c: np.concatenate([p[1][c] for p in ps]) for c in ps[0][1]}
        # bins split across batches: once more (the in-flight mean of a split bin is approximate)
        aggs = {c: ("mean" if c == "in_flight" else "max" if c == "in_flight_max" else "last") for c in data}
        t, data = B.bin_reduce(t, {c: (a, aggs[c]) for c, a in data.items()}, t0_ns, res_ns)
        if not res_ns and np.any(np.diff(t) < 0):
            o = np.argsort(t, kind="stable")
            t, data = t[o], {c: a[o] for c, a in data.items()}
        out[dev] = pd.DataFrame({"t_ns": t, **data, "device": dev})
    return out


def recording_end_ns(rec) -> int:
    """The recording's end: meta's end anchor, else the last event or sample seen."""
    if rec.end_ns:
        return rec.end_ns
    last = rec.start_ns
    ev = rec.events
    if not ev.empty and "t_ns" in ev:
        last = max(last, int(ev["t_ns"].max()))
    for c in rec.collectors:
        df = rec.samples(c, columns=[])
        if not df.empty:
            last = max(last, int(df["t_ns"].max()))
    return last


def sampling_interval_s(rec) -> float:
    """The sampling period the recording asked for (meta.json `interval_s`, s); 0.1 where it says none."""
    return float(Meta.from_meta(rec.meta).interval_s or 0.1)


def analysis_resolution(interval_s: float, duration_s: float) -> float:
    """The timeline's bin (s): the sampling period, coarser where the recording would pass MAX_BINS."""
    return max(interval_s, duration_s / MAX_BINS)


def build(rec) -> Timeline:
    end_ns = recording_end_ns(rec)
    duration_s = max(0.0, (end_ns - rec.start_ns) / 1e9)
    interval = sampling_interval_s(rec)
    res_s = analysis_resolution(interval, duration_s)
    resample = None if res_s <= interval * 1.0001 else res_s
    tl = Timeline(rec.start_ns, end_ns, res_s, columns=S.columns(rec), bin_ns=int(resample * 1e9) if resample else 0)
    n_bins = int(np.ceil(max(duration_s, res_s) / res_s)) + 1
    res_ns = int(res_s * 1e9)
    w_bytes = np.zeros(n_bins)
    r_bytes = np.zeros(n_bins)
    busy = []
    used: tuple[int, int] | None = None  # the first and last bin any interval went to
    for dev, raw in _block_by_device(rec, resample, tl.start_ns).items():
        busy.append(raw[["t_ns", "device", "io_ticks_ms"]])
        df = block_rates(raw, resample_s=None, t0_ns=rec.start_ns)
        if df.empty:
            continue
        keep = [
            "t_ns",
            "dt_s",
            "write_bytes",
            "read_bytes",
            "write_bytes_per_s",
            "read_bytes_per_s",
            "aqu_sz",
            "util_pct",
        ] + [c for c in ("in_flight", "in_flight_max") if c in df]
        rates = DeviceRates.of(df[keep].reset_index(drop=True))
        tl.devices[dev] = rates
        # each interval goes to the bin holding its middle
        mid = rates.t_ns - rates.dt_s * 5e8
        b = np.clip((mid - rec.start_ns) // res_ns, 0, n_bins - 1).astype(np.int64)
        np.add.at(w_bytes, b, rates.write_bytes)
        np.add.at(r_bytes, b, rates.read_bytes)
        used = (min(used[0], int(b.min())), max(used[1], int(b.max()))) if used else (int(b.min()), int(b.max()))
    if busy:
        tl.busy = pd.concat(busy, ignore_index=True)
    if tl.devices:
        # every bin an interval went to: an interval's middle can lie a bin before its end's bin, so
        # bounds taken from the readings' times dropped a device's first interval (its bytes too)
        idx = np.arange(used[0], used[1] + 1)
        tl.total = Total(
            t_ns=rec.start_ns + (idx + 1) * res_ns,
            write_bytes=w_bytes[idx],
            read_bytes=r_bytes[idx],
            write_bytes_per_s=w_bytes[idx] / res_s,
            read_bytes_per_s=r_bytes[idx] / res_s,
        )
    if "host" in rec.collectors:
        h = rec.samples("host", columns=["dirty_bytes", "writeback_bytes"])
        if not h.empty and "dirty_bytes" in h:
            wb = h["writeback_bytes"] if "writeback_bytes" in h else 0
            tl.dirty = DirtyPages(h["t_ns"].to_numpy(), (h["dirty_bytes"] + wb).to_numpy(dtype=float))
    return tl
