"""Live metrics: `ckprof record --prometheus-port PORT` serves the latest samples to Prometheus.

Served with prometheus-client in the Prometheus text exposition format. Names follow Prometheus
conventions (base units in the name, `_total` for counters) and node_exporter's where they
overlap (node_disk_written_bytes_total → ckprof_disk_written_bytes_total, …). Every other
collector's numeric columns are exported by one rule from their unit suffix (temp_c →
_celsius, power_w → _watts, energy_mj → _joules_total, *_pct → _ratio), labelled by the
collector's label columns (device, gpu, zone), so a new collector needs no change here.
Nothing is computed at sample time: a scrape reads the recorder's latest rows.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

import pyarrow as pa
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ckprof.errors import UsageError
from ckprof.recording.counters import counter_delta
from ckprof.recording.schema import SECTOR_BYTES, label_columns

from .eventtail import EventTail

# column suffix → (metric suffix, scale to base unit)
_SUFFIXES = (
    ("_kb_per_s", "_bytes_per_second", 1000.0),
    ("_bytes_per_s", "_bytes_per_second", 1.0),
    ("_mj", "_joules", 1e-3),
    ("_uj", "_joules", 1e-6),
    ("_j", "_joules", 1.0),
    ("_c", "_celsius", 1.0),
    ("_w", "_watts", 1.0),
    ("_pct", "_ratio", 0.01),
    ("_mhz", "_hertz", 1e6),
    ("_ms", "_seconds", 1e-3),
    ("_s", "_seconds", 1.0),
    ("_bytes", "_bytes", 1.0),
)

# node_exporter's disk metrics (collector/diskstats_linux.go): column → (name, scale, help)
_DISK_COUNTERS = {
    "read_sectors": ("ckprof_disk_read_bytes_total", SECTOR_BYTES, "Bytes read from the device."),
    "write_sectors": ("ckprof_disk_written_bytes_total", SECTOR_BYTES, "Bytes written to the device."),
    "read_ios": ("ckprof_disk_reads_completed_total", 1, "Reads completed."),
    "write_ios": ("ckprof_disk_writes_completed_total", 1, "Writes completed."),
    "io_ticks_ms": ("ckprof_disk_io_time_seconds_total", 1e-3, "Seconds the device was busy."),
    "time_in_queue_ms": ("ckprof_disk_io_time_weighted_seconds_total", 1e-3, "Weighted seconds spent doing I/O."),
}


def metric_name(collector: str, column: str) -> tuple[str, float]:
    for suffix, unit, scale in _SUFFIXES:
        if column.endswith(suffix):
            return f"ckprof_{collector}_{column[: -len(suffix)]}{unit}", scale
    return f"ckprof_{collector}_{column}", 1.0


class OpenWindows:
    """Follows events.jsonl: which checkpoint windows are open now, and how many have closed."""

    def __init__(self, path: str):
        self.path = path
        self._tail = EventTail(path)
        self._open: dict[str, dict] = {}
        self.completed: dict[str, int] = {}
        self.last_duration_s: dict[str, float] = {}
        self._lock = threading.Lock()

    def poll(self) -> None:
        with self._lock:
            try:
                events = self._tail.new_events(containing=(b'"checkpoint_start"', b'"checkpoint_end"'))
            except OSError:
                return
            for ev in events:
                kind = ev.get("kind") or "save"
                if ev.get("event") == "checkpoint_start":
                    self._open[ev.get("id")] = ev
                elif ev.get("event") == "checkpoint_end":
                    start = self._open.pop(ev.get("id"), None)
                    self.completed[kind] = self.completed.get(kind, 0) + 1
                    if start:
                        self.last_duration_s[kind] = (ev["t_ns"] - start["t_ns"]) / 1e9

    def in_progress(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ev in self._open.values():
            k = ev.get("kind") or "save"
            out[k] = out.get(k, 0) + 1
        return out


class LiveCollector:
    """A prometheus-client custom collector over the recorder's latest rows.

    `recorder` is set once recording starts; a scrape before that serves no samples.
    """

    def __init__(self, events_path: str):
        self.recorder = None
        self.events = OpenWindows(events_path)

    def describe(self):
        return []  # no metrics registered up front: they depend on what the recorder has

    def collect(self):
        self.events.poll()
        yield from self._checkpoints()
        for c in self.recorder.collectors if self.recorder else []:
            st = self.recorder.stats[c.name]
            rows, prev = st.last_two_rows()  # one reading and the one before it, taken together
            if not rows:
                continue
            if c.name == "block":
                yield from self._block(rows, prev)
            else:
                yield from self._generic(c, rows)

    def _checkpoints(self):
        g = GaugeMetricFamily("ckprof_checkpoint_in_progress", "Checkpoint windows open now, by kind.", labels=["kind"])
        open_now = self.events.in_progress()
        for kind in sorted(set(open_now) | {"save", "load"}):
            g.add_metric([kind], open_now.get(kind, 0))
        yield g
        c = CounterMetricFamily("ckprof_checkpoints", "Checkpoint windows completed, by kind.", labels=["kind"])
        for kind, n in sorted(self.events.completed.items()):
            c.add_metric([kind], n)
        yield c
        d = GaugeMetricFamily(
            "ckprof_checkpoint_last_duration_seconds",
            "Duration of the last completed checkpoint window.",
            labels=["kind"],
        )
        for kind, s in sorted(self.events.last_duration_s.items()):
            d.add_metric([kind], s)
        yield d

    def _block(self, rows: dict, prev: dict):
        fams = {
            col: CounterMetricFamily(name[: -len("_total")], help_, labels=["device"])
            for col, (name, _, help_) in _DISK_COUNTERS.items()
        }
        io_now = GaugeMetricFamily("ckprof_disk_io_now", "I/Os in flight now.", labels=["device"])
        inflight = GaugeMetricFamily(
            "ckprof_disk_inflight_requests", "Requests in flight now (sysfs inflight).", labels=["device", "direction"]
        )
        bw = GaugeMetricFamily(
            "ckprof_disk_bytes_per_second", "Bandwidth over the last sample interval.", labels=["device", "direction"]
        )
        qd = GaugeMetricFamily(
            "ckprof_disk_queue_depth", "Average queue depth (iostat aqu-sz) over the last interval.", labels=["device"]
        )
        for (dev,), r in sorted(rows.items()):
            for col, (_, scale, _) in _DISK_COUNTERS.items():
                if r.get(col) is not None:
                    fams[col].add_metric([dev], r[col] * scale)
            if r.get("in_flight") is not None:
                io_now.add_metric([dev], r["in_flight"])
            for direction in ("read", "write"):
                if r.get(f"inflight_{direction}") is not None:
                    inflight.add_metric([dev, direction], r[f"inflight_{direction}"])
            p = prev.get((dev,))
            if p is not None and r["t_ns"] > p["t_ns"]:
                dt_s = (r["t_ns"] - p["t_ns"]) / 1e9
                for direction in ("read", "write"):
                    col = f"{direction}_sectors"
                    if r.get(col) is not None and p.get(col) is not None:
                        bw.add_metric([dev, direction], counter_delta(p[col], r[col]) * SECTOR_BYTES / dt_s)
                if r.get("time_in_queue_ms") is not None and p.get("time_in_queue_ms") is not None:
                    qd.add_metric([dev], counter_delta(p["time_in_queue_ms"], r["time_in_queue_ms"]) / (dt_s * 1000))
        yield from fams.values()
        yield from (io_now, inflight, bw, qd)

    def _generic(self, c, rows: dict):
        labels = label_columns(c.schema)
        for f in c.schema:
            kind = (f.metadata or {}).get(b"kind", b"gauge")
            numeric = pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)
            if f.name == "t_ns" or kind == b"label" or not numeric:
                continue
            name, scale = metric_name(c.name, f.name)
            doc = (f.metadata or {}).get(b"doc", b"").decode() or f.name
            fam = (
                CounterMetricFamily(name, doc, labels=labels)
                if kind == b"counter"
                else GaugeMetricFamily(name, doc, labels=labels)
            )
            for key, r in sorted(rows.items(), key=lambda kv: str(kv[0])):
                v = r.get(f.name)
                if v is not None:
                    fam.add_metric(["" if k is None else str(k) for k in key], float(v) * scale)
            yield fam


def _family(addr: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


# A scrape is one short request; Prometheus and a dashboard or two need a handful at once. Beyond
# this many open connections a new one is answered 503 and closed at once, so clients can never
# hold more than this many descriptors and threads of the recording process.
MAX_CONNECTIONS = 8
# Seconds one read or write of a connection may wait (socket.settimeout): a client that connects
# and sends nothing, or stops reading, gives its slot back after this.
CONNECTION_TIMEOUT_S = 5.0
# accept(2) failing for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM: accept(2))
# leaves the connection in the backlog, so the listening socket stays readable: without a pause
# serve_forever would retry at once, forever, at 100 % of a core.
ACCEPT_BACKOFF_S = 0.5
_ACCEPT_SHORTAGE = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
# The exporter's threads run this much nicer than the recorder, so a scrape storm yields the CPU
# to sampling (setpriority(2): on Linux a thread id names one thread).
EXPORTER_NICE = 10
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _nicer_thread() -> None:
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + EXPORTER_NICE))
    except OSError:  # not permitted (a seccomp profile): the bounds above still hold
        pass


class _Server(ThreadingMixIn, WSGIServer):
    """One thread per scrape, at most MAX_CONNECTIONS at once (the rest answered 503 and closed),
    each read and write bounded by CONNECTION_TIMEOUT_S; a listen backlog of SOMAXCONN
    (socketserver's default is 5: a burst of scrapers would be refused); IPv4 or IPv6 by the
    address. Whatever its clients do, the exporter holds a bounded number of descriptors and
    threads, never spins, and never writes to stderr."""

    daemon_threads = True
    request_queue_size = socket.SOMAXCONN

    def __init__(self, address, handler, family=socket.AF_INET):
        self.address_family = family
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, handler)

    def get_request(self):
        try:
            return super().get_request()
        except OSError as e:
            if e.errno in _ACCEPT_SHORTAGE:
                time.sleep(ACCEPT_BACKOFF_S)
            raise

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            try:  # tell a scraper why, without ever waiting on it
                request.send(_BUSY, socket.MSG_DONTWAIT)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)  # starts the connection's thread
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        _nicer_thread()
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address):
        """A client that timed out or hung up is not ckprof's error: no traceback on stderr."""


class _QuietHandler(WSGIRequestHandler):
    timeout = CONNECTION_TIMEOUT_S  # StreamRequestHandler.setup: settimeout on the connection

    def log_message(self, *args):  # no line on stderr per scrape
        pass


def url(addr: str, port: int) -> str:
    """http://HOST:PORT/metrics with an IPv6 address in brackets (RFC 3986 3.2.2)."""
    host = f"[{addr}]" if ":" in addr else addr
    return f"http://{host}:{port}/metrics"


def _serve_forever(server: _Server) -> None:
    _nicer_thread()
    server.serve_forever()


def serve(events_path: str, port: int, addr: str = "127.0.0.1") -> tuple[LiveCollector, int]:
    """Start the exporter thread; returns the collector (set its `recorder`) and the bound port.

    A port already in use is a UsageError, raised before anything is recorded.
    """
    live = LiveCollector(events_path)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(live)
    try:
        server = _Server((addr, port), _QuietHandler, family=_family(addr))
        server.set_app(make_wsgi_app(registry))
        threading.Thread(target=_serve_forever, args=(server,), name="ckprof-prometheus", daemon=True).start()
        return live, server.server_port
    except OSError as e:
        raise UsageError(
            f"cannot serve Prometheus metrics on {addr}:{port}: {e.strerror}",
            hint="choose another --prometheus-port (0 picks a free one)",
        ) from None
