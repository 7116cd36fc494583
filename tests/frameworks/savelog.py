"""What a framework script measures about its own saves, written to saves.json for the tests.

Imported by the scripts in this folder (each runs as `python SCRIPT.py SAVES_JSON ...`, so this
folder is on sys.path). Nothing here imports ckprof: a script runs the same with or without
`ckprof record` around it.

saves.json:
    {"saves": [{"start_ns", "end_ns", "rank", "path", "bytes"}, ...],   # one per save call, per rank
     "files": {path: bytes},          # every file the saves wrote (its size right after its save)
     "deleted": [path, ...],          # checkpoints the script's (or framework's) retention removed
     "pending_at_delete": {path: bytes or null},   # dirty + writeback bytes when it was removed
     "loads": [{"start_ns", "end_ns", "rank", "path"}, ...],  # --restore: cold loads of the newest save
     "script": name}
Times are time.monotonic_ns(): CLOCK_MONOTONIC, the clock ckprof stamps its samples and events on.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import shutil
import time


def files_under(path) -> dict[str, int]:
    """{file: size} for a file, or for every file under a directory."""
    path = str(path)
    if os.path.isfile(path):
        return {path: os.path.getsize(path)}
    out = {}
    for d, _, fs in os.walk(path):
        for f in fs:
            p = os.path.join(d, f)
            out[p] = os.path.getsize(p)
    return out


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]


def pending_bytes(path) -> int | None:
    """Dirty + under-writeback bytes of a file or a directory's files (cachestat(2), Linux ≥ 6.5);
    None where the kernel cannot say."""
    if platform.machine() not in ("x86_64", "aarch64", "riscv64", "loongarch64"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    total = 0
    for p in files_under(path):
        fd = os.open(p, os.O_RDONLY)
        try:
            st, rng = _Stat(), _Range(0, 0)
            if libc.syscall(451, fd, ctypes.byref(rng), ctypes.byref(st), 0) != 0:
                return None
            total += (st.dirty + st.writeback) * os.sysconf("SC_PAGE_SIZE")
        finally:
            os.close(fd)
    return total


def evict(path) -> None:
    """Drop a checkpoint's files from the page cache (fdatasync, then posix_fadvise DONTNEED), so
    the restore after it reads the device — what `ckprof evict` does, without importing ckprof."""
    for p in files_under(path):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def waited_ns() -> int:
    """This thread's time so far waiting for a CPU (run_delay, /proc/thread-self/schedstat,
    Documentation/scheduler/sched-stats.rst); 0 where the kernel keeps none."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


class SaveLog:
    def __init__(self, out: str, rank: int = 0, script: str = ""):
        self.out, self.rank, self.script = out, rank, script
        self.saves: list[dict] = []
        self.files: dict[str, int] = {}
        self.deleted: list[str] = []
        self.pending_at_delete: dict[str, int | None] = {}
        self.loads: list[dict] = []

    def add(
        self,
        start_ns: int,
        end_ns: int,
        path,
        files: dict[str, int] | None = None,
        prep_ns: int | None = None,
        waited_ns: int | None = None,
    ):
        """One save that ran from start_ns to end_ns and wrote `files` (default: all under path);
        `prep_ns`: when the script made the save's folder before the timed call (Megatron's
        training.save_checkpoint does), the save's first file creation as the kernel sees it;
        `waited_ns`: how long the saving thread waited for a CPU in that time (waited_ns())."""
        files = files_under(path) if files is None else files
        self.files.update(files)
        save = {
            "start_ns": start_ns,
            "end_ns": end_ns,
            "rank": self.rank,
            "path": str(path),
            "bytes": sum(files.values()),
        }
        if prep_ns is not None:
            save["prep_ns"] = prep_ns
        if waited_ns is not None:
            save["waited_ns"] = waited_ns
        self.saves.append(save)

    @contextlib.contextmanager
    def timed(self, path):
        """One save of `path`, timed, with how long this thread waited for a CPU meanwhile."""
        w0, t0 = waited_ns(), time.monotonic_ns()
        yield
        t1 = time.monotonic_ns()
        self.add(t0, t1, path, waited_ns=waited_ns() - w0)

    @contextlib.contextmanager
    def loading(self, path):
        """One restore of `path`, timed (a cold one when evict() ran before), with how long this
        thread waited for a CPU meanwhile."""
        w0, t0 = waited_ns(), time.monotonic_ns()
        yield
        t1 = time.monotonic_ns()
        load = {"start_ns": t0, "end_ns": t1, "rank": self.rank, "path": str(path), "waited_ns": waited_ns() - w0}
        self.loads.append(load)

    def deleting(self, path):
        """Remember that `path` is about to be removed, and how much of it is still not on the disk."""
        self.pending_at_delete[str(path)] = pending_bytes(path)
        self.deleted.append(str(path))

    def delete(self, path):
        self.deleting(path)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)

    def as_dict(self) -> dict:
        return {
            "script": self.script,
            "saves": self.saves,
            "files": self.files,
            "deleted": self.deleted,
            "pending_at_delete": self.pending_at_delete,
            "loads": self.loads,
        }

    def write(self, out: str | None = None):
        with open(out or self.out, "w") as f:
            json.dump(self.as_dict(), f, indent=1)


def merge(out: str, parts: list[str], script: str):
    """Rank files → one saves.json (saves ordered by start)."""
    log = SaveLog(out, script=script)
    for p in parts:
        with open(p) as f:
            d = json.load(f)
        log.saves += d["saves"]
        log.files.update(d["files"])
        log.deleted += d["deleted"]
        log.pending_at_delete.update(d["pending_at_delete"])
        log.loads += d.get("loads", [])
    log.loads.sort(key=lambda s: (s["start_ns"], s["rank"]))
    log.saves.sort(key=lambda s: (s["start_ns"], s["rank"]))
    log.write()
    return log


def summary(log: SaveLog) -> str:
    d = [(s["end_ns"] - s["start_ns"]) / 1e6 for s in log.saves]
    return (
        f"{log.script}: {len(log.saves)} saves, {sum(log.files.values())} bytes in {len(log.files)} files, "
        f"{len(log.deleted)} deleted; save ms: " + " ".join(f"{x:.1f}" for x in d)
    )


# -- ranks on gloo (dcp_ranks.py, megatron_save.py) ------------------------------------------------


def run_ranks(worker, a, world: int) -> None:
    """worker(rank, a, world) on every rank: under torchrun this process is one rank (the rendezvous
    is in the environment); otherwise `world` ranks are spawned here, on 127.0.0.1. The worker
    joins the gloo process group itself when it is not joined yet."""
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if "RANK" in os.environ:
        dist.init_process_group("gloo")
        worker(dist.get_rank(), a, dist.get_world_size())
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        mp.start_processes(worker, args=(a, world), nprocs=world, join=True, start_method="spawn")


def end_ranks(log: SaveLog, saves_json: str, rank: int, world: int) -> None:
    """Every rank's log written; rank 0 merges them into saves_json and prints the summary; then the
    process group is left."""
    import torch.distributed as dist

    log.write()
    dist.barrier()
    if rank == 0:
        print(summary(merge(saves_json, [f"{saves_json}.rank{r}" for r in range(world)], log.script)))
        for r in range(world):
            os.unlink(f"{saves_json}.rank{r}")
    dist.barrier()
    dist.destroy_process_group()
