"""`ckprof workload` started by torchrun, mpirun or srun: this process is one rank.

Rank 0 checks the target and picks the run's id, seed and first step; every rank learns them in
the first allgather (a refusal there stops every rank with the same message). Local rank 0 of
each host records that host (into -o DIR, or DIR/host=<name> when the job spans hosts) and marks
the checkpoint windows in its recording. Rank 0 prints the summary.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from dataclasses import replace

from ckprof.errors import CkprofError, UsageError
from ckprof.record import markers

from . import store
from .comm import from_launcher
from .preflight import preflight
from .rank import Setup, node_key, run_load, run_rank
from .recorded import events_env, recorded_path, recording
from .rules import say_flagged
from .summary import render


def run(plan, cfg, which: str) -> int:

    comm = from_launcher(which)
    try:
        if cfg.count and plan.nranks != comm.size:
            raise UsageError(
                f"{which} started {comm.size} ranks but the plan has {plan.nranks}",
                hint=f"pass --ranks {comm.size} (or start {plan.nranks} processes)",
            )
        proposal = None
        if comm.rank == 0:
            try:
                if cfg.count:
                    target = preflight(plan, cfg)
                    proposal = Setup(
                        f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}",
                        secrets.randbits(62),
                        store.open_store(target).next_step(),
                    )
                else:
                    proposal = Setup("load", 0, 0)
            except CkprofError as e:
                proposal = e.one_line()
        setup = comm.allgather(proposal)[0]
        if isinstance(setup, str):
            raise CkprofError(setup)
        if cfg.count:
            say_flagged(cfg.rule_checks)  # the run goes ahead: the rules it does not keep, said by rank 0
        hosts = {h for h in comm.allgather(socket.gethostname())}
        if cfg.recording.output and len(hosts) > 1:
            host_dir = os.path.join(cfg.recording.output, f"host={socket.gethostname()}")
            cfg.recording = replace(cfg.recording, output=host_dir)
        records = cfg.record and comm.local_rank == 0 and not markers.active()
        cfg_rec = cfg if records else _no_record(cfg)
        with recording(cfg_rec, recorded_path(cfg.target), list(sys.argv)) as (out_dir, info):
            # every rank's events (an s3:// target's requests are each process's own) go into its
            # host's recording: the one local rank 0 makes, found by the host's key
            key = node_key()
            made = [o for k, lr, o in comm.allgather((key, comm.local_rank, out_dir)) if k == key and lr == 0 and o]
            if made:
                os.environ.update(events_env(made[0]))
            else:
                os.environ.setdefault(markers.ENV_SOURCE, "workload")
            if cfg.count:
                results = run_rank(plan, cfg, comm, setup)
            else:
                load = run_load(cfg.target, cfg, comm, setup)
                results = {"load": load} if comm.rank == 0 else None
            if info is not None:
                info["workload"] = {
                    "plan": plan.to_dict(),
                    "config": cfg.to_dict(),
                    "results": results,
                    "rank": comm.rank,
                    "world": comm.size,
                    "launcher": which,
                    "rules": cfg.rule_checks,  # MLPerf Storage's rules (ckprof.workloads.rules.summary)
                }
        if comm.rank == 0:
            render(results, plan, cfg, out_dir)
            load = results.get("load")
            if load and not load["verified"]:
                raise CkprofError(f"load of {load['path']} failed: " + "; ".join(load["errors"]))
        return 0
    finally:
        comm.close()


def _no_record(cfg):
    return replace(cfg, record=False)
