"""The recorder loop: one clock, sampling threads on absolute deadlines, one flusher.

Collectors run at their own period against absolute deadlines (start + k·period), so the
interval does not drift. A tick that is already past when the previous sample returns is skipped
and counted, not queued. A collector that raises is noted once and keeps being tried.

Collectors whose sample is only a read (`columnar`: block, host) share one thread per period.
Where the native sampler is built (colsampler.c, ckprof.record.native) that thread is a C one:
it reads and parses the counters into int64 rows and Python only takes them at flush. Otherwise
a Python thread reads each in turn and keeps the raw text, and the flusher converts it in bulk
(RawCollector.take). Every other collector keeps a thread of its own, so a slow source (a
subprocess per nvme-cli call, the process-tree walk) never delays a fast one.
"""

from __future__ import annotations

import os
import select
import threading
import time
import traceback

from ckprof.collectors.base import Collector
from ckprof.recording.schema import label_columns, schema_units
from ckprof.recording.writer import RecordingWriter

from . import native
from .clock import MonotonicClock


class CollectorStats:
    def __init__(self, collector: Collector | None = None, labels: list[str] | None = None, raw=None):
        self.samples = 0
        self.skipped_ticks = 0
        self.errors = 0
        self.first_error: str | None = None
        self.cpu_s = 0.0  # CPU time of this collector's sampling: what recording it costs
        self.cpu_counted_to: str | None = None  # natively sampled: the collector its thread's CPU is counted to
        # label values (e.g. ("nvme0n1",)) → first row, latest row, and the one before it (live
        # rates). A columnar collector keeps its first and last two readings raw; they become rows
        # only when asked for (the end's summary line, a Prometheus scrape).
        self._raw = raw or (collector if getattr(collector, "columnar", False) else None)
        self._labels = labels or []
        self._first_rows: dict = {}
        self._last_rows: dict = {}
        self._prev_rows: dict = {}

    def _keyed(self, reading) -> dict:
        return {tuple(r.get(lb) for lb in self._labels): r for r in self._raw.rows_of(reading)}

    @property
    def first_rows(self) -> dict:
        return self._keyed(self._raw.first) if self._raw else self._first_rows

    @property
    def last_rows(self) -> dict:
        return self._keyed(self._raw.last) if self._raw else self._last_rows

    @property
    def prev_rows(self) -> dict:
        return self._keyed(self._raw.prev) if self._raw else self._prev_rows

    def last_two_rows(self) -> tuple[dict, dict]:
        """(last_rows, prev_rows) of the same moment: asked apart, a reading arriving in between
        made both the same reading, and the live endpoint's rates (bandwidth, queue depth) vanished."""
        if self._raw:
            prev, last = self._raw.latest()
            return self._keyed(last), self._keyed(prev)
        return dict(self._last_rows), dict(self._prev_rows)


class Recorder:
    def __init__(
        self, writer: RecordingWriter, collectors: list[Collector], clock=None, flush_s: float = 5.0, files=None
    ):
        self.writer = writer
        self.files = files  # a FileTracker (ckprof.record.filetracker), or None
        self.collectors = collectors
        self.clock = clock or MonotonicClock()
        self.flush_s = flush_s
        self._labels = {c.name: label_columns(c.schema) for c in collectors}
        self.flush_cpu_s = 0.0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)  # wakes the threads waiting on a descriptor
        self.samplers: dict[str, str] = {}  # a columnar or tree collector → "native" or "python: why"
        self._natives: list[native.NativeSampler] = []
        feeds = self._native_feeds() if isinstance(self.clock, MonotonicClock) else {}
        self.stats = {c.name: CollectorStats(c, self._labels[c.name], feeds.get(c.name)) for c in collectors}
        for c in collectors:
            take = feeds[c.name].take if c.name in feeds else (c.take if c.columnar else None)
            writer.add_collector(c.name, c.schema, take=take)

    def _native_feeds(self) -> dict[str, native.Feed]:
        """A native sampler (not started yet) for the block and host collectors, which share a
        period, and the process tree where its period is a whole number of theirs (one thread,
        one wake-up a tick); {collector: its feed}. The rest stay on Python threads, and say why."""
        for c in self.collectors:
            if c.columnar:
                self.samplers[c.name] = "python: no native sampler for this collector"
        cs = {c.name: c for c in self.collectors if c.name in ("block", "host", "proc") and hasattr(c, "table_of_rows")}
        why = native.why_not()
        block = cs.get("block")
        if block is not None and why is None and not block.native_ok():
            self.samplers["block"] = "python: /proc/diskstats unreadable or older than 5.5's 17 counters"
            block = None
        base = block or cs.get("host") or cs.get("proc")
        if base is None:
            return {}
        host = cs.get("host") if cs.get("host") is not None and cs["host"].period_s == base.period_s else None
        proc, every = cs.get("proc"), 1
        if proc is not None:
            every = round(proc.period_s / base.period_s)
            if every < 1 or abs(every * base.period_s - proc.period_s) > 1e-9:
                self.samplers["proc"] = "python: its period is not a whole number of the block sampler's"
                proc = None
        for c in (block, host, proc):
            if c is not None and why is not None:
                self.samplers[c.name] = f"python: {why}"
        if why is not None or (block, host, proc) == (None, None, None):
            return {}
        try:
            ns = native.NativeSampler(base.period_s, block=block, host=host, proc=proc, proc_every=every)
        except (OSError, MemoryError) as e:
            for c in (block, host, proc):
                if c is not None:
                    self.samplers[c.name] = f"python: {e}"
            return {}
        self._natives.append(ns)
        for name in ns.feeds:
            self.samplers[name] = "native"
        return dict(ns.feeds)

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
                **({"sampler": self.samplers[c.name]} if c.name in self.samplers else {}),
                **({"cpu_counted_to": st.cpu_counted_to} if st.cpu_counted_to else {}),
            }
        return out

    def sample_once(self, c: Collector) -> None:
        """Take one sample of `c` now and hand it to the writer (also used by tests, with a FakeClock)."""
        st = self.stats[c.name]
        t_ns = self.clock.now_ns()
        try:
            if c.columnar:
                c.read(t_ns)  # kept raw; converted at flush
                rows = None
            else:
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
        if rows is None:
            return
        labels = self._labels[c.name]
        for r in rows:
            key = tuple(r.get(lb) for lb in labels)
            st._first_rows.setdefault(key, r)
            if key in st._last_rows:
                st._prev_rows[key] = st._last_rows[key]
            st._last_rows[key] = r
        self.writer.append(c.name, rows)

    def _waits_on_fd(self, cs: tuple[Collector, ...]) -> int | None:
        """The descriptor a lone collector's samples wait for (uevents), under the real clock."""
        fileno = getattr(cs[0], "fileno", None) if len(cs) == 1 else None
        return fileno() if fileno is not None and isinstance(self.clock, MonotonicClock) else None

    def _run_on_fd(self, c: Collector, fd: int) -> None:
        """Sample `c` whenever `fd` is readable: no wake-up while nothing happens."""
        thread_cpu = -time.thread_time()
        while not self._stop.is_set():
            ready, _, _ = select.select([fd, self._wake_r], [], [])
            if self._wake_r in ready:
                break
            self.sample_once(c)
        self.stats[c.name].cpu_s += thread_cpu + time.thread_time()

    def _run(self, *cs: Collector) -> None:
        """Sample `cs` (one collector, or columnar ones of one period) each tick, in turn."""
        fd = self._waits_on_fd(cs)
        if fd is not None:
            return self._run_on_fd(cs[0], fd)
        period_ns = int(cs[0].period_s * 1e9)
        stats = [self.stats[c.name] for c in cs]
        thread_cpu = -time.thread_time()
        start = self.clock.now_ns()
        k = 0
        while not self._stop.is_set():
            if len(cs) == 1:
                self.sample_once(cs[0])
            else:  # each collector's own CPU time, for meta.json; the thread's wake-ups go to the first
                for c, st in zip(cs, stats):
                    t0 = time.thread_time()
                    self.sample_once(c)
                    st.cpu_s += time.thread_time() - t0
            k += 1
            deadline = start + k * period_ns
            now = self.clock.now_ns()
            if now > deadline:  # we overran one or more ticks: skip them, do not bunch up
                missed = (now - deadline) // period_ns + 1
                for st in stats:
                    st.skipped_ticks += missed
                k += missed
                deadline = start + k * period_ns
            if not self.clock.sleep_until_ns(deadline, self._stop):
                break
        thread_cpu += time.thread_time()
        stats[0].cpu_s += thread_cpu - sum(st.cpu_s for st in stats)

    def _flusher(self) -> None:
        self.flush_cpu_s -= time.thread_time()
        while not self._stop.wait(self.flush_s):
            self.writer.flush()
            self._native_stats()
        self.flush_cpu_s += time.thread_time()

    def _native_stats(self) -> None:
        """Each natively sampled collector's counts into its stats; its first error as an event."""
        for ns in self._natives:
            counted_to = next(iter(ns.feeds))  # the thread's CPU, not split: see colsampler.c's tick()
            for name, feed in ns.feeds.items():
                n, st = ns.counts(feed.section), self.stats[name]
                st.samples, st.errors, st.skipped_ticks = n["samples"], n["errors"], n["skipped_ticks"]
                st.cpu_s = n["thread_cpu_s"] if name == counted_to else 0.0
                st.cpu_counted_to = counted_to
                if n["errors"] and st.first_error is None:
                    st.first_error = native.first_error(n["first_errno"])
                    self.writer.event(
                        {
                            "t_ns": self.clock.now_ns(),
                            "event": "collector_error",
                            "collector": name,
                            "error": st.first_error,
                            "where": "native sampler (colsampler.c)",
                        }
                    )

    def groups(self) -> list[tuple[Collector, ...]]:
        """The sampling threads: columnar collectors of one period together, every other alone."""
        shared: dict[float, list[Collector]] = {}
        out: list[tuple[Collector, ...]] = []
        for c in self.collectors:
            if self.samplers.get(c.name) == "native":
                continue  # sampled by a native thread
            if c.columnar:
                if c.period_s not in shared:
                    shared[c.period_s] = []
                    out.append(shared[c.period_s])  # type: ignore[arg-type]
                shared[c.period_s].append(c)
            else:
                out.append((c,))
        return [tuple(g) for g in out]

    def start(self) -> None:
        for ns in self._natives:
            ns.start()
        for g in self.groups():
            name = "ckprof-" + "+".join(c.name for c in g)
            t = threading.Thread(target=self._run, args=g, name=name, daemon=True)
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
        os.write(self._wake_w, b"x")
        for ns in self._natives:
            ns.stop()
        for t in self._threads:
            t.join(timeout=30)
        for ns in self._natives:
            ns.tick()
        for c in self.collectors:
            if self.samplers.get(c.name) != "native":
                self.sample_once(c)
        if self.files is not None:
            self.files.stop()
        self.writer.flush()
        self._native_stats()
        for ns in self._natives:
            ns.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        for c in self.collectors:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
