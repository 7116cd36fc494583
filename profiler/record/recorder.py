"""The recorder loop: one clock, one thread per collector, one flusher.

Each collector runs on its own thread at its own period against absolute deadlines
(start + k·period), so a slow source (a subprocess per nvme-cli call) never delays a fast one and
the interval does not drift. A tick that is already past when the previous sample returns is
skipped and counted, not queued. A collector that raises is noted once and keeps being tried.
"""

from __future__ import annotations

import threading
import time
import traceback

from ckprof.collectors.base import Collector, label_columns, schema_units
from ckprof.recording.writer import RecordingWriter

from .clock import MonotonicClock


class CollectorStats:
    def __init__(self):
        self.samples = 0
        self.skipped_ticks = 0
        self.errors = 0
        self.first_error: str | None = None
        self.cpu_s = 0.0  # CPU time of this collector's thread: what recording it costs
        self.first_rows: dict = {}  # label values (e.g. ("nvme0n1",)) → first row
        self.last_rows: dict = {}  # … → latest row, and the one before it (live rates)
        self.prev_rows: dict = {}


class Recorder:
    def __init__(
        self, writer: RecordingWriter, collectors: list[Collector], clock=None, flush_s: float = 5.0, files=None
    ):
        self.writer = writer
        self.files = files  # a FileTracker (ckprof.record.filetracker), or None
        self.collectors = collectors
        self.clock = clock or MonotonicClock()
        self.flush_s = flush_s
        self.stats = {c.name: CollectorStats() for c in collectors}
        self._labels = {c.name: label_columns(c.schema) for c in collectors}
        self.flush_cpu_s = 0.0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        for c in collectors:
            writer.add_collector(c.name, c.schema)

    def collectors_meta(self, probes: dict | None = None) -> dict:
        out = {}
        for c in self.collectors:
            st = self.stats[c.name]
            out[c.name] = {
                "period_s": c.period_s,
                "probe": (probes or {}).get(c.name, {}),
                "describe": c.describe(),
                "columns": schema_units(c.schema),
                "samples": st.samples,
                "skipped_ticks": st.skipped_ticks,
                "errors": st.errors,
                "first_error": st.first_error,
                "cpu_s": round(st.cpu_s, 4),
            }
        return out

    def sample_once(self, c: Collector) -> None:
        """Take one sample of `c` now and hand it to the writer (also used by tests, with a FakeClock)."""
        st = self.stats[c.name]
        t_ns = self.clock.now_ns()
        try:
            rows = c.sample(t_ns)
        except Exception as e:  # noqa: BLE001 - a collector must never stop the recording
            st.errors += 1
            if st.first_error is None:
                st.first_error = f"{type(e).__name__}: {e}"
                self.writer.event(
                    {
                        "t_ns": t_ns,
                        "event": "collector_error",
                        "collector": c.name,
                        "error": st.first_error,
                        "where": traceback.format_exc(limit=2).splitlines()[-1],
                    }
                )
            return
        for ev in c.events():
            self.writer.event({"t_ns": t_ns, "collector": c.name, "source": "collector", **ev})
        st.samples += 1
        labels = self._labels[c.name]
        for r in rows:
            key = tuple(r.get(lb) for lb in labels)
            st.first_rows.setdefault(key, r)
            if key in st.last_rows:
                st.prev_rows[key] = st.last_rows[key]
            st.last_rows[key] = r
        self.writer.append(c.name, rows)

    def _run(self, c: Collector) -> None:
        period_ns = int(c.period_s * 1e9)
        st = self.stats[c.name]
        st.cpu_s -= time.thread_time()
        start = self.clock.now_ns()
        k = 0
        while not self._stop.is_set():
            self.sample_once(c)
            k += 1
            deadline = start + k * period_ns
            now = self.clock.now_ns()
            if now > deadline:  # we overran one or more ticks: skip them, do not bunch up
                missed = (now - deadline) // period_ns + 1
                st.skipped_ticks += missed
                k += missed
                deadline = start + k * period_ns
            if not self.clock.sleep_until_ns(deadline, self._stop):
                break
        st.cpu_s += time.thread_time()

    def _flusher(self) -> None:
        self.flush_cpu_s -= time.thread_time()
        while not self._stop.wait(self.flush_s):
            self.writer.flush()
        self.flush_cpu_s += time.thread_time()

    def start(self) -> None:
        for c in self.collectors:
            t = threading.Thread(target=self._run, args=(c,), name=f"ckprof-{c.name}", daemon=True)
            t.start()
            self._threads.append(t)
        if self.files is not None:
            self.files.start()
        t = threading.Thread(target=self._flusher, name="ckprof-flush", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        """Stop sampling, take one last sample of each collector so the end is covered, flush."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        for c in self.collectors:
            self.sample_once(c)
        if self.files is not None:
            self.files.stop()
        self.writer.flush()
        for c in self.collectors:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
