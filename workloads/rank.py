"""What every rank runs (SPMD): checkpoints and compute phases, then the optional load.

One checkpoint, as MLPerf Storage times it: all ranks meet at a barrier, each writes (and
fsyncs) its files, and the checkpoint ends when the last rank is done. Its time is the slowest
rank's: last end − first start; its throughput is all ranks' bytes over that time. Every rank's
own time and throughput are kept too. The rank that marks (rank 0 on each host) emits
checkpoint_start before the barrier that releases the writes and checkpoint_end after the
checkpoint is published, so the markers bracket every byte the ranks write.

--async: each rank stages its shard in memory (the time training is blocked), then writes it in
background threads while the next compute phase runs; the checkpoint is durable when every
rank's writes and fsyncs are done, and it is published then.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np

from ckprof.record import markers

from . import store
from .data import Pool, aligned_buffer, chunk_digest, chunk_key
from .shardio import ChecksumMismatch, FileJob, FileResult, ready_ring

GIB = 2**30

# Test-only fault injection: "rank=1,after=1048576,action=die|stall|raise", or
# "...,action=fill,path=FILE": another tenant fills the file system (FILE grows until write(2)
# says ENOSPC), then the rank goes on writing into the full file system.
FAULT_ENV = "CKPROF_WORKLOAD_FAULT"


@dataclass
class Setup:
    run_id: str
    seed: int
    first_step: int
    marks: bool = True  # emit markers on the marking ranks


class Progress:
    """Bytes done by this rank, shared with whoever draws the progress bar; fault hooks."""

    def __init__(self, rank: int, slot=None):
        self.rank, self.slot, self.done = rank, slot, 0
        self.lock = threading.Lock()
        self.fault = _parse_fault(os.environ.get(FAULT_ENV, ""), rank)

    def __call__(self, n: int) -> None:
        with self.lock:
            self.done += n
            if self.slot is not None:
                self.slot.value = self.done
            if self.fault and self.done >= self.fault[0]:
                fault, self.fault = self.fault, None  # once
                _trigger(fault[1], self.rank, fault[2])


def _parse_fault(text: str, rank: int):
    if not text:
        return None
    kv = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
    if int(kv.get("rank", -1)) != rank:
        return None
    return int(kv.get("after", 0)), kv.get("action", "die"), kv.get("path")


def _trigger(action: str, rank: int, path: str | None = None) -> None:
    import signal

    if action == "fill":
        _fill(path)
    elif action == "stall":
        time.sleep(3600)
    elif action == "raise":
        raise OSError(f"injected fault on rank {rank}")
    else:
        os.kill(os.getpid(), signal.SIGKILL)


def _fill(path: str) -> None:
    """Append zeros to `path` until its file system is full (write(2): ENOSPC)."""
    import errno

    zeros = bytes(2**20)
    with open(path, "ab", buffering=0) as f:
        while True:
            try:
                f.write(zeros)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                zeros = zeros[: len(zeros) // 2]  # the last blocks too
                if len(zeros) < 512:
                    return


_gpu_operand = None  # --compute gpu: this rank's CUDA context and operand, made once (prepare_compute)


def prepare_compute(kind: str) -> None:
    """Set up what the compute phase needs before the first checkpoint. For "gpu": the CUDA context
    (about 0.5 GiB of GPU memory and, with 8 ranks starting theirs at once on an H100, ~5 s) and the
    operand. Made inside the first phase, that set-up overran the phase by seconds with the GPU at
    0-3 % utilisation, and the next checkpoint waited for it at its barrier."""
    global _gpu_operand
    if kind == "gpu" and _gpu_operand is None:
        import torch

        _gpu_operand = torch.randn(2048, 2048, device="cuda")
        torch.cuda.synchronize()


def compute_phase(kind: str, seconds: float) -> None:
    """The training step between checkpoints: sleep, a CPU busy loop or a GPU busy loop."""
    if seconds <= 0:
        return
    prepare_compute(kind)
    deadline = time.monotonic() + seconds
    if kind == "cpu":
        x = 1.0
        while time.monotonic() < deadline:
            for _ in range(10000):
                x = x * 1.0000001 + 1e-9
    elif kind == "gpu":
        import torch

        a = _gpu_operand
        while time.monotonic() < deadline:
            a = torch.tanh(a @ a)
            torch.cuda.synchronize()
    else:
        time.sleep(seconds)


def _marking(comm) -> bool:
    return comm.local_rank == 0 and markers.active()


def node_key() -> str:
    """This rank's node: the launcher's node index (torchrun's GROUP_RANK, Slurm's SLURM_NODEID),
    else the host name."""
    return os.environ.get("GROUP_RANK") or os.environ.get("SLURM_NODEID") or socket.gethostname()


def node_ranks(comm) -> list[int]:
    """The global ranks on this rank's node (a collective call: every rank makes it).

    A node's marker (made by its local rank 0) declares the bytes of its own ranks, so a job's
    host recordings add up to the checkpoint's size. The node is told by the launcher's node
    index (torchrun's GROUP_RANK, Slurm's SLURM_NODEID) or, failing those, the host name.
    """
    keys = comm.allgather(node_key())
    return [r for r, k in enumerate(keys) if k == keys[comm.rank]]


class _Staged:
    """--async: one rank's shard made in memory (blocked time), written later in the background."""

    def __init__(self, jobs: list[FileJob], pool: Pool, seed: int, rank: int, step: int, chunk: int):
        self.jobs, self.chunk, self.bufs, self.digests = jobs, chunk, [], []
        for job in jobs:
            buf = aligned_buffer(job.nbytes)
            view = np.frombuffer(buf, dtype=np.uint64)
            ds = []
            for ci, off in enumerate(range(0, job.nbytes, chunk)):
                n = min(chunk, job.nbytes - off)
                pool.fill(view[off // 8 :], chunk_key(seed, rank, step, job.index, ci), n)
                ds.append(chunk_digest(memoryview(buf)[off : off + n]))
            self.bufs.append(buf)
            self.digests.append(ds)

    def write(self, st, threads: int, direct: bool, fsync: bool, on_bytes) -> list[FileResult]:
        out = st.write_staged(
            self.jobs,
            self.bufs,
            self.digests,
            chunk_bytes=self.chunk,
            threads=threads,
            direct=direct,
            fsync=fsync,
            on_bytes=on_bytes,
        )
        self.bufs = []
        return out


def run_rank(plan, cfg, comm, setup: Setup, progress: Progress | None = None) -> dict | None:
    """Every checkpoint (and the load) of one rank. Rank 0 returns the results; others None."""
    rank = comm.rank
    me = plan.ranks[rank]
    progress = progress or Progress(rank)
    pool = Pool(cfg.chunk_bytes, setup.seed ^ (rank * 0x9E3779B97F4A7C15 % 2**63))
    marks = setup.marks and _marking(comm)
    mine_on_node = node_ranks(comm)
    node_bytes = sum(plan.ranks[r].nbytes for r in mine_on_node if r < len(plan.ranks))
    st = store.open_store(cfg.target, cfg.threads)
    st.prepare(rank)  # an object store's client and its request events: before any save's clock
    results: list[dict] = []
    pending = None  # --async: (ckpt record, thread, box) of the checkpoint still being written
    if cfg.has_compute_phases:
        prepare_compute(cfg.compute)  # before the first barrier: not inside the first compute phase

    def jobs_for(directory: str) -> list[FileJob]:
        return [FileJob(st.shard(directory, f.name), f.name, f.nbytes, i) for i, f in enumerate(me.files)]

    def finish(rec: dict, mine: dict) -> None:
        everyone = comm.allgather(mine)
        if rank == 0:
            _summarise(rec, everyone, plan)
            files = [
                dict(name=f.name, rank=r["rank"], bytes=f.nbytes, xxh3=f.digest) for r in everyone for f in r["files"]
            ]
            st.publish(
                rec["partial"],
                rec["path"],
                {
                    "name": rec["name"],
                    "step": rec["step"],
                    "run_id": setup.run_id,
                    "ranks": plan.nranks,
                    "world": plan.world,
                    "chunk_bytes": cfg.chunk_bytes,
                    "bytes": rec["bytes"],
                    "files": files,
                    "plan": plan.to_dict(),
                    # wall clock once every rank's files were written and fsynced: a later
                    # `ckprof workload load` measures MLPerf's write-to-read gap from it (rules.py, 4.7.1)
                    "written_unix_ns": time.time_ns(),
                },
            )
            rec["removed"] = st.prune(cfg.keep)
        comm.barrier()  # published before any host marks the end
        if rec.get("marker") is not None:
            marker = rec.pop("marker")
            marker.end.update(st.published_fields(marker.bytes))
            marker.__exit__(None, None, None)
        rec.pop("partial", None)
        results.append(rec)

    ring = None  # made before the first save, reused by the rest
    for k in range(cfg.count):
        step = setup.first_step + k
        name = store.checkpoint_name(step)
        rec = {
            "step": step,
            "name": name,
            "path": st.location(name),
            "partial": st.staging(name, setup.run_id),
            "bytes": plan.nbytes,
            "files": plan.nfiles,
        }
        if k > 0:
            compute_phase(cfg.compute, cfg.interval_s)
        if pending is not None:  # the previous async checkpoint must be durable before the next
            _join(pending)
            pending = None
        if not cfg.async_:  # its buffers ready before the window and the clock: making data is not the save
            ring = ready_ring(
                pool, ring, seed=setup.seed, rank=rank, step=step, chunk_bytes=cfg.chunk_bytes, threads=cfg.threads
            )
        if rank == 0:
            st.make_staging(rec["partial"])
        if marks:
            rec["marker"] = markers.checkpoint(
                step=step, path=rec["path"], bytes=node_bytes, kind="save", name=name, rank=rank, source="workload"
            ).__enter__()
        comm.barrier()  # the checkpoint starts for everyone here
        t0 = time.monotonic_ns()
        jobs = jobs_for(rec["partial"])
        if not cfg.async_:
            files = st.write_files(
                jobs,
                pool,
                seed=setup.seed,
                rank=rank,
                step=step,
                chunk_bytes=cfg.chunk_bytes,
                threads=cfg.threads,
                direct=cfg.direct,
                fsync=cfg.fsync,
                on_bytes=progress,
                ring=ring,
            )
            t1 = time.monotonic_ns()
            finish(
                rec,
                {
                    "rank": rank,
                    "t0": t0,
                    "t1": t1,
                    "staged": t1,
                    "bytes": me.nbytes,
                    "files": files,
                    "max_rss_bytes": max_rss_bytes(),
                },
            )
            continue
        staged = _Staged(jobs, pool, setup.seed, rank, step, cfg.chunk_bytes)
        t_staged = time.monotonic_ns()
        box: dict = {}

        def background(staged=staged, box=box, t0=t0, t_staged=t_staged, rec=rec):
            # Written, fsynced, then published and marked from this thread: the main thread is in
            # its compute phase meanwhile and makes no collective call until it joins this one.
            try:
                files = staged.write(st, cfg.threads, cfg.direct, cfg.fsync, progress)
                finish(
                    rec,
                    {
                        "rank": rank,
                        "t0": t0,
                        "t1": time.monotonic_ns(),
                        "staged": t_staged,
                        "bytes": me.nbytes,
                        "files": files,
                        "max_rss_bytes": max_rss_bytes(),
                    },
                )
            except BaseException as e:  # noqa: BLE001
                box["error"] = e

        t = threading.Thread(target=background, name="ckprof-async-write", daemon=True)
        t.start()
        pending = (rec, t, box)
    if pending is not None:
        _join(pending)
    out = {"checkpoints": results}
    if cfg.load:
        out["load"] = run_load(results[-1]["path"], cfg, comm, setup, progress)
    return out if rank == 0 else None


def _join(pending) -> None:
    _, t, box = pending
    t.join()
    if "error" in box:
        raise box["error"]


def _summarise(rec: dict, everyone: list[dict], plan) -> None:
    t0 = min(r["t0"] for r in everyone)
    t1 = max(r["t1"] for r in everyone)
    rec["start_ns"], rec["end_ns"] = t0, t1
    rec["seconds"] = (t1 - t0) / 1e9
    rec["bytes"] = sum(r["bytes"] for r in everyone)
    rec["gib_per_s"] = rec["bytes"] / GIB / rec["seconds"] if rec["seconds"] > 0 else None
    rec["blocked_s"] = (max(r["staged"] for r in everyone) - t0) / 1e9
    rec["ranks"] = [
        {
            "rank": r["rank"],
            "seconds": (r["t1"] - r["t0"]) / 1e9,
            "bytes": r["bytes"],
            "max_rss_bytes": r.get("max_rss_bytes"),
            "gib_per_s": r["bytes"] / GIB / ((r["t1"] - r["t0"]) / 1e9) if r["t1"] > r["t0"] else None,
        }
        for r in everyone
    ]


def max_rss_bytes() -> int:
    """This rank's peak resident set so far, in bytes: VmHWM in /proc/self/status (proc(5)), the
    high-water mark of this process image. getrusage(2)'s ru_maxrss survives execve(2), so a rank
    started by fork+exec (multiprocessing's spawn) would report its launcher's size from before
    the exec; it is the fallback where /proc is not there."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def drop_caches() -> None:
    """sync, then echo 3 > /proc/sys/vm/drop_caches (Documentation/admin-guide/sysctl/vm.rst)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run_load(path: str, cfg, comm, setup: Setup, progress: Progress | None = None) -> dict | None:
    """All ranks read the checkpoint at `path` and verify every file; the slowest rank sets the time.
    A manifest rank r's files are read by rank r % size."""
    st = store.open_store(path, cfg.threads)
    st.prepare(comm.rank)
    manifest = st.read_manifest(path)
    rank, size = comm.rank, comm.size
    chunk = int(manifest["chunk_bytes"])
    mine = [
        FileJob(st.shard(path, f["name"]), f["name"], int(f["bytes"]), i, f["xxh3"])
        for i, f in enumerate(manifest["files"])
        if int(f["rank"]) % size == rank
    ]
    # before the window opens: what a cold restore needs (a file target's files evicted)
    method = st.before_read([j.path for j in mine], direct=cfg.direct, warm=getattr(cfg, "warm", False))
    if cfg.drop_caches:
        if comm.local_rank == 0:
            drop_caches()
        method += " + drop_caches"
    marker = None
    on_node = set(node_ranks(comm))
    node_bytes = sum(int(f["bytes"]) for f in manifest["files"] if int(f["rank"]) % size in on_node)
    if setup.marks and _marking(comm):
        marker = markers.checkpoint(
            step=manifest.get("step"),
            path=path,
            bytes=node_bytes,
            kind="load",
            name=manifest.get("name"),
            rank=rank,
            source="workload",
        ).__enter__()
    comm.barrier()
    t0 = time.monotonic_ns()
    error = None
    try:
        st.read_files(mine, chunk_bytes=chunk, threads=cfg.threads, direct=cfg.direct, on_bytes=progress, evict=False)
    except Exception as e:  # noqa: BLE001 - every rank reports; rank 0 decides
        error = str(e)
    t1 = time.monotonic_ns()
    everyone = comm.allgather(
        {
            "rank": rank,
            "t0": t0,
            "t1": t1,
            "bytes": sum(j.nbytes for j in mine),
            "files": len(mine),
            "error": error,
            "max_rss_bytes": max_rss_bytes(),
        }
    )
    errors = [f"rank {r['rank']}: {r['error']}" for r in everyone if r["error"]]
    if marker is not None:  # a load that did not verify ends its window failed, with why
        failed = ChecksumMismatch("; ".join(errors)) if errors else None
        marker.__exit__(type(failed) if failed else None, failed, None)
    if rank != 0:
        return None
    rec = {
        "path": path,
        "step": manifest.get("step"),
        "files": len(manifest["files"]),
        "cache_bypass": method,
        "errors": errors,
    }
    _summarise(rec, [dict(r, staged=r["t1"]) for r in everyone], None)
    rec["verified"] = not rec["errors"]
    return rec
