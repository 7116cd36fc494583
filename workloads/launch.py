"""Starting a workload run: checks, the recording around it, and the ranks.

Alone, `ckprof workload` spawns one process per rank and relays their collectives (comm.HubComm);
it records while they run (the block-device and host collectors of `ckprof record`, the
devices behind --target) and passes CKPROF_EVENTS to the ranks, so rank 0 marks each window.
A rank that dies stops the others; nothing of that checkpoint is published; the exit status is
1 and the message names the rank and why. Under torchrun, mpirun or srun, this process is one
rank (comm.from_launcher); local rank 0 of each host records that host.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import sys

from ckprof.errors import CkprofError, UsageError

from . import store
from .comm import launcher_env
from .distributed import run as run_distributed
from .local import spawn_ranks
from .model import Parallelism, Preset, Shape
from .plan import Plan
from .preflight import check_bucket, check_memory, preflight, reader_bytes
from .rank import Setup
from .recorded import end_open_windows, events_env, recorded_path, recording
from .rules import say_flagged
from .summary import render


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP reached the launcher: unwind (stop the ranks, remove this run's
    unpublished directories, finish the recording), then exit 128 + the signal's number, as a
    shell reports a command a signal ended (bash(1), EXIT STATUS)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.doing: str | None = None  # "starting", "saving" | "loading" (ranks started), "done" after
        self.removed: list[str] = []  # checkpoints whose unfinished directories were removed
        self.published: list[str] = []  # checkpoints this run published before the signal
        self.target: str | None = None

    def describe(self) -> str:
        """One line: what the signal interrupted and what became of it."""
        head = f"interrupted by {self}"
        if self.doing == "loading":
            return f"{head} while reading {self.target}: the readers were stopped; the checkpoint was not changed"
        if self.doing is None:  # where this process cannot say more (e.g. one rank under torchrun)
            return head
        if self.doing == "starting":
            return f"{head} before any rank started: nothing was written"
        if self.doing == "done":
            return f"{head} after the ranks had finished: the summary was cut short, the run's work was done"
        done = f"; this run published {', '.join(self.published)} before it" if self.published else ""
        if self.removed:
            what = "its objects deleted" if store.is_s3(self.target) else "the unfinished directory removed"
            return (
                f"{head} while writing {', '.join(self.removed)} in {self.target}: the ranks were stopped and "
                f"{what}; nothing partial was published{done}"
            )
        return f"{head}: the ranks were stopped; nothing partial was published{done}"


TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_interrupted(signum, _frame):
    # The first one decides; the unwinding it starts is bounded (ranks get SIGTERM, then SIGKILL
    # after 5 s) and a second Ctrl-C must not cut it short half-way (leaving a rank or a partial).
    for sig in TERMINATING:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def interruptible():
    """Turn the terminating signals into Interrupted in this (the launcher's) process."""
    for sig in TERMINATING:
        signal.signal(sig, _raise_interrupted)


def main(plan, cfg) -> int:
    """`ckprof workload` (saves, optional load). Returns the exit status."""
    which = launcher_env()
    if which:
        return run_distributed(plan, cfg, which)
    try:
        target = preflight(plan, cfg, local_ranks=plan.nranks)
        setup = Setup(
            run_id=f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}",
            seed=secrets.randbits(62),
            first_step=store.open_store(target).next_step(),
        )
        say_flagged(cfg.rule_checks)  # the run goes ahead: the rules it does not keep, said once
    except Interrupted as e:
        e.doing = "starting"
        raise
    total = plan.nbytes * cfg.count + (plan.nbytes if cfg.load else 0)
    return _run_local(plan, cfg, setup, target, total, plan.nranks)


def _run_local(plan, cfg, setup, path, total, nranks) -> int:
    results, error = None, None
    st = store.open_store(path)
    with recording(cfg, recorded_path(path), list(sys.argv)) as (out_dir, info):
        try:
            results = spawn_ranks(nranks, plan, cfg, setup, events_env(out_dir), total)
        except BaseException as e:
            if isinstance(e, Interrupted):
                error = f"interrupted by {e}"
            else:
                error = str(e) if isinstance(e, CkprofError) else f"{type(e).__name__}: {e}"
            if info is not None:
                info["error"] = error
                info["signal"] = e.signum if isinstance(e, Interrupted) else None
            end_open_windows(out_dir, error)
            removed = st.remove_partials(setup.run_id, setup.first_step) if cfg.count else []
            if isinstance(e, Interrupted):
                e.doing, e.target, e.removed = ("saving" if cfg.count else "loading"), path, removed
                e.published = (
                    [p.rsplit("/", 1)[-1] for s, p in st.complete_checkpoints() if s >= setup.first_step]
                    if cfg.count
                    else []
                )
            raise
        finally:
            if info is not None:
                info["workload"] = {
                    "plan": plan.to_dict() if plan else None,
                    "config": cfg.to_dict(),
                    "results": results,
                    "error": error,
                    "rules": cfg.rule_checks,  # MLPerf Storage's rules (ckprof.workloads.rules.summary)
                }
    try:
        render(results, plan, cfg, out_dir)
    except Interrupted as e:
        e.doing, e.target = "done", path
        raise
    load = results.get("load")
    if load and not load["verified"]:
        raise CkprofError(f"load of {load['path']} failed: " + "; ".join(load["errors"]))
    return 0


def load_main(checkpoint: str, ranks: int | None, cfg) -> int:
    """`ckprof workload load DIR`: read one published checkpoint with all ranks, verify it."""
    path = checkpoint.rstrip("/") if store.is_s3(checkpoint) else os.path.abspath(checkpoint)
    if ranks is not None and ranks < 1:
        raise UsageError(f"--ranks must be at least 1 (got {ranks})")
    if cfg.threads < 1:
        raise UsageError(f"--threads must be at least 1 (got {cfg.threads})")
    if store.is_s3(path):
        if cfg.drop_caches or cfg.direct:
            flag = "--drop-caches" if cfg.drop_caches else "--direct"
            raise UsageError(f"{flag} has no meaning for an s3:// checkpoint", hint="leave it out")
        check_bucket(path)
    manifest = store.open_store(path).read_manifest(path)
    n = ranks or int(manifest.get("ranks") or 1)
    if cfg.drop_caches and os.geteuid() != 0:
        raise UsageError("--drop-caches needs root (it writes /proc/sys/vm/drop_caches)")
    if not launcher_env():
        check_memory(n, reader_bytes(cfg.threads, manifest["chunk_bytes"]), hint="read with fewer processes: --ranks N")
    plan = _plan_from_manifest(manifest)
    plan.nranks = n  # the readers (the title says how many read it)
    cfg.count, cfg.target, cfg.fsync = 0, path, True
    _check_load_rules(manifest, cfg)
    setup = Setup(run_id="load", seed=0, first_step=0)
    if launcher_env():
        return run_distributed(plan, cfg, launcher_env())
    return _run_local(plan, cfg, setup, path, int(manifest.get("bytes") or 0), n)


def _check_load_rules(manifest: dict, cfg) -> None:
    """The read invocation against MLPerf Storage's rules (cfg.rules): its cache clearing and the gap
    since the checkpoint was written (ckprof.workloads.rules.check_load); flagged rules printed."""
    from . import rules

    checks = rules.check_load(manifest, cfg, cfg.invoked_unix_ns)
    cfg.rule_checks = rules.summary(cfg.rules, checks)
    rules.say_flagged(cfg.rule_checks)


def _plan_from_manifest(manifest: dict):
    """Enough of a plan for the summary of a load."""
    p = manifest.get("plan") or {}
    preset = Preset(p.get("preset", "checkpoint"), Shape(layers=1), Parallelism())
    plan = Plan(preset, int(manifest.get("world") or 1), [], float(p.get("scale", 1.0)), bool(p.get("subset")))
    plan.full_bytes = int(manifest.get("bytes") or 0)
    return _LoadPlan(plan, manifest)


class _LoadPlan:
    def __init__(self, plan, manifest):
        self._plan, self.nbytes, self.nfiles = plan, int(manifest.get("bytes") or 0), len(manifest["files"])
        self.nranks, self.preset = int(manifest.get("ranks") or 1), plan.preset

    def to_dict(self) -> dict:
        return {"preset": self.preset.name, "bytes": self.nbytes, "files": self.nfiles, "ranks": self.nranks}
