"""A job's clocks lined up: each host measures its wall clock's offset from the reference host's
(node rank 0) at record start and end, over a tiny UDP exchange — as NTP does, without a server.

The reference host (`ckprof record --job-dir DIR` with node rank 0, else the first host to claim it)
answers on an ephemeral UDP port and writes where, in `DIR/.clock-reference.json` (the job
directory is shared by every node). Every other host sends ROUNDS requests stamped with its wall
time t0; the reference stamps its own wall time t1 on receipt; the host reads t2 on return:

    offset = t1 − (t0 + t2) / 2        error ≤ (t2 − t0) / 2 (half the round trip)

and keeps the round with the shortest round trip (RFC 5905's clock filter, simplified). The
offsets go into meta.json `job.clock_offset`; ckprof.recording.timebase adds them to every wall
time, so a job's hosts share the reference's clock. Nothing here can stop a recording: a host that
cannot reach the reference records why, and its clock is left as it is (and said so).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time

from .clock import wall_ns

REFERENCE_FILE = ".clock-reference.json"
ROUNDS = 16
WAIT_FOR_REFERENCE_S = 10.0
REPLY_TIMEOUT_S = 0.5
_MAGIC = b"ckprof-clock1"


class ReferenceServer:
    """Answers clock requests until closed: request = magic + t0 (8 bytes); reply = request + t1."""

    def __init__(self, job_dir: str, host: str):
        self.job_dir = job_dir
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="ckprof-clock-ref", daemon=True)
        self._thread.start()
        info = {"host": host, "hostname": socket.gethostname(), "port": self.port, "pid": os.getpid()}
        tmp = os.path.join(job_dir, f"{REFERENCE_FILE}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(info, f)
        os.replace(tmp, os.path.join(job_dir, REFERENCE_FILE))

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(64)
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            t1 = wall_ns()
            if data.startswith(_MAGIC) and len(data) == len(_MAGIC) + 8:
                try:
                    self.sock.sendto(data + struct.pack("<q", t1), addr)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()
        try:  # say it is gone, so a host measuring at its end does not wait for answers
            path = os.path.join(self.job_dir, REFERENCE_FILE)
            with open(path) as f:
                info = json.load(f)
            if info.get("pid") == os.getpid():
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "w") as f:
                    json.dump({**info, "closed": True}, f)
                os.replace(tmp, path)
        except (OSError, ValueError):
            pass


def _reference(job_dir: str, wait_s: float) -> dict | None:
    path = os.path.join(job_dir, REFERENCE_FILE)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)


def measure(job_dir: str, wait_s: float = WAIT_FOR_REFERENCE_S, rounds: int = ROUNDS) -> dict:
    """This host's wall-clock offset from the reference: {offset_ns, rtt_ns, reference, at_wall_ns}
    or {error}. Adding offset_ns to this host's wall times puts them on the reference's clock."""
    ref = _reference(job_dir, wait_s)
    if ref is None:
        return {
            "error": f"no reference host answered: {REFERENCE_FILE} did not appear in the job directory in {wait_s:g} s"
        }
    if ref.get("closed"):
        return {"error": f"the reference host {ref.get('host')} had finished recording", "reference": ref.get("host")}
    try:
        addr = socket.getaddrinfo(ref["hostname"], ref["port"], socket.AF_INET, socket.SOCK_DGRAM)[0][4]
    except (OSError, KeyError) as e:
        return {
            "error": f"cannot resolve the reference host {ref.get('hostname')!r}: {e}",
            "reference": ref.get("host"),
        }
    best, silent = None, 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(REPLY_TIMEOUT_S)
        for _ in range(rounds):
            t0 = wall_ns()
            try:
                s.sendto(_MAGIC + struct.pack("<q", t0), addr)
                data, _ = s.recvfrom(64)
            except OSError:
                silent += 1
                if silent >= 2 and best is None:  # nobody there: do not hold the recording up
                    break
                continue
            t2 = wall_ns()
            if len(data) != len(_MAGIC) + 16 or struct.unpack("<q", data[len(_MAGIC) : len(_MAGIC) + 8])[0] != t0:
                continue
            t1 = struct.unpack("<q", data[-8:])[0]
            rtt = t2 - t0
            if best is None or rtt < best[1]:
                best = (t1 - (t0 + t2) // 2, rtt, t2)
    if best is None:
        return {
            "error": f"the reference host {ref.get('host')} did not answer on UDP port {ref['port']}",
            "reference": ref.get("host"),
        }
    return {"offset_ns": int(best[0]), "rtt_ns": int(best[1]), "reference": ref.get("host"), "at_wall_ns": int(best[2])}


class JobClock:
    """What `ckprof record --job-dir` does about clocks: serve as the reference (node rank 0, or the
    first host to claim it), or measure this host's offset at start and end."""

    def __init__(self, job_dir: str, host: str, node_rank: int | None):
        self.job_dir, self.host = job_dir, host
        self.server: ReferenceServer | None = None
        self.start: dict | None = None
        is_ref = node_rank == 0
        if node_rank is None:  # no launcher said which node is first: the first host to claim it
            try:
                fd = os.open(os.path.join(job_dir, REFERENCE_FILE + ".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.close(fd)
                is_ref = True
            except OSError:
                is_ref = False
        self._thread: threading.Thread | None = None
        if is_ref:
            try:
                self.server = ReferenceServer(job_dir, host)
            except OSError as e:
                self.start = {"error": f"cannot serve as the clock reference: {e}"}
        else:  # in the background: the command starts at once, whenever the reference comes up

            def first():
                self.start = measure(job_dir)

            self._thread = threading.Thread(target=first, name="ckprof-clock", daemon=True)
            self._thread.start()

    def meta(self) -> dict:
        if self.server is not None:
            return {"role": "reference", "port": self.server.port}
        return {"role": "measured", "start": self.start}

    def finish(self) -> dict:
        """At record end: the reference stops answering; others measure once more (the reference
        may be gone by then: said, and the start offset is used alone)."""
        if self.server is not None:
            self.server.close()
            return self.meta()
        if self._thread is not None:
            self._thread.join(timeout=WAIT_FOR_REFERENCE_S + 5)
        end = measure(self.job_dir, wait_s=0.0, rounds=8)
        return {"role": "measured", "start": self.start, "end": end}
