"""Ranks as local processes: spawn them, relay their allgathers, stop them all when one dies.

Each rank is a `multiprocessing` process (spawn: no fork of a process with recorder threads)
with one pipe to this launcher; an allgather is relayed once every rank has sent its part. A
rank that dies (a signal, an exception it reports, a non-zero exit) stops the others
(SIGTERM, then SIGKILL after 5 s) and the run fails naming that rank and why. Ranks ask the
kernel to kill them when the launcher dies (prctl PR_SET_PDEATHSIG), so none is orphaned.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

from ckprof.errors import CkprofError

from .comm import Aborted, HubComm
from .rank import Progress, Setup, run_load, run_rank


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this rank when the launcher dies (prctl(2) PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)


def rank_entry(conn, rank, size, plan, cfg, setup, env, slot, parent_pid) -> None:
    """A spawned rank process. A terminal's Ctrl-C reaches the whole process group: a rank leaves
    it to the launcher, which stops every rank and removes what they had not published."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)
    os.environ.update(env)
    comm = HubComm(conn, rank, size)
    try:
        if cfg.count == 0:  # `ckprof workload load`
            out = {"load": run_load(cfg.target, cfg, comm, setup, Progress(rank, slot))}
        else:
            out = run_rank(plan, cfg, comm, setup, Progress(rank, slot))
        if rank == 0:
            comm.send("done", out)
    except Aborted:
        os._exit(2)
    except BaseException as e:  # noqa: BLE001 - reported to the launcher, which names this rank
        try:
            comm.send("error", f"{type(e).__name__}: {e}")
        finally:
            os._exit(1)


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class RankFailure(CkprofError):
    pass


class _light_main:  # noqa: N801  (a context manager used as `with _light_main():`)
    """Spawn a rank without re-running the launcher's __main__ in it.

    multiprocessing's spawn start method imports the parent's __main__ in every child (the `ckprof`
    script: ckprof.cli, and through it pandas and pyarrow, ~85 MiB a rank) before it runs the
    target (multiprocessing/spawn.py get_preparation_data: `init_main_from_name` / `_from_path`).
    A rank needs only ckprof.workloads: while it starts, __main__ is an empty module with neither
    __spec__ nor __file__, so the child imports nothing of it."""

    def __enter__(self):
        import types

        self.saved = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        return self

    def __exit__(self, *exc):
        sys.modules["__main__"] = self.saved
        return False


def spawn_ranks(n: int, plan, cfg, setup: Setup, env: dict, total_bytes: int) -> dict:
    """Start n rank processes, relay their allgathers, watch them die; return rank 0's results."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")
    procs, conns, slots = [], [], []
    result = None
    failure = None
    bar = None
    try:  # from the first spawn on: whatever is raised (a signal's Interrupted too) stops every rank
        # ranks start with SIGINT blocked (the mask survives exec): a Ctrl-C while they import is
        # the launcher's alone, and rank_entry then ignores it for good
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for r in range(n):
                parent, child = ctx.Pipe()
                slot = ctx.Value("q", 0, lock=False)
                p = ctx.Process(
                    target=rank_entry,
                    name=f"ckprof-rank-{r}",
                    daemon=True,
                    args=(child, r, n, plan, cfg, setup, env, slot, os.getpid()),
                )
                with _light_main():
                    p.start()
                procs.append(p)
                child.close()
                conns.append(parent)
                slots.append(slot)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C held meanwhile is raised here
        rank_of = {id(c): i for i, c in enumerate(conns)}
        live_conns = set(range(n))
        pending: dict[int, object] = {}
        errors: dict[int, str] = {}
        bar = _progress_bar(total_bytes)
        while failure is None and (any(p.exitcode is None for p in procs) or live_conns):
            ready = wait(
                [conns[i] for i in live_conns] + [p.sentinel for p in procs if p.exitcode is None], timeout=0.1
            )
            for obj in ready:
                if id(obj) not in rank_of:
                    continue
                r = rank_of[id(obj)]
                try:
                    tag, _, payload = obj.recv()
                except (EOFError, OSError):
                    live_conns.discard(r)
                    continue
                if tag == "gather":
                    pending[r] = payload
                    if len(pending) == n:
                        everyone = [pending[i] for i in range(n)]
                        pending = {}
                        for c in conns:
                            try:
                                c.send(("all", everyone))
                            except (BrokenPipeError, OSError):
                                pass
                elif tag == "error":
                    errors[r] = payload
                elif tag == "done":
                    result = payload
            for r, p in enumerate(procs):
                if p.exitcode not in (None, 0) and failure is None:
                    while conns[r].poll(0):  # the rank's last words, if it had any
                        try:
                            tag, _, payload = conns[r].recv()
                        except (EOFError, OSError):
                            break
                        if tag == "error":
                            errors[r] = payload
                    why = errors.get(r) or _exit_reason(p.exitcode)
                    failure = f"rank {r} failed: {why}" if r in errors else f"rank {r} {why}"
            if failure is not None:
                break
            if bar is not None:
                bar.update(sum(s.value for s in slots))
        if failure is None and result is None:
            failure = "rank 0 ended without results"
    finally:
        if bar is not None:
            bar.close()
        for p in procs:
            if p.exitcode is None:
                p.terminate()
        deadline = time.monotonic() + 5
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.exitcode is None:
                p.kill()
                p.join()
    if failure is not None:
        raise RankFailure(failure + "; the others were stopped and nothing of that checkpoint was published")
    return result


class _Bar:
    def __init__(self, total: int):
        from rich.progress import BarColumn, DownloadColumn, TransferSpeedColumn
        from rich.progress import Progress as RichProgress

        self.p = RichProgress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            transient=True,
        )
        self.p.start()
        self.task = self.p.add_task("writing", total=total)

    def update(self, done: int) -> None:
        self.p.update(self.task, completed=done)

    def close(self) -> None:
        self.p.stop()


def _progress_bar(total: int):
    return _Bar(total) if sys.stderr.isatty() and total > 0 else None
