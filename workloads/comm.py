"""How ranks meet: one collective, allgather, which also serves as the barrier.

- Started by `ckprof workload` itself: ranks are processes it spawned; each has a pipe to the
  launcher, which relays an allgather once every rank has sent its part (HubComm).
- Started by a launcher (torchrun sets RANK/WORLD_SIZE; mpirun OMPI_COMM_WORLD_*; srun
  SLURM_PROCID/SLURM_NTASKS; MPICH/PMIx PMI_RANK/PMI_SIZE): the process is one rank and ranks
  meet through torch.distributed (gloo) or mpi4py, whichever fits and is installed.
"""

from __future__ import annotations

import os
import socket

from ckprof.errors import CkprofError, UsageError


class Aborted(Exception):
    """Another rank failed; this one stops."""


class Comm:
    rank = 0
    size = 1
    local_rank = 0
    kind = "single"

    def allgather(self, obj) -> list:
        return [obj]

    def barrier(self) -> None:
        self.allgather(None)

    def close(self) -> None:
        pass


class HubComm(Comm):
    """A rank spawned by the local launcher: messages go through its pipe to the launcher."""

    kind = "local processes"

    def __init__(self, conn, rank: int, size: int):
        self.conn, self.rank, self.size, self.local_rank = conn, rank, size, rank

    def allgather(self, obj) -> list:
        self.conn.send(("gather", self.rank, obj))
        try:
            tag, payload = self.conn.recv()
        except EOFError:
            raise Aborted("the launcher went away") from None
        if tag == "abort":
            raise Aborted(payload)
        return payload

    def send(self, tag: str, payload) -> None:
        self.conn.send((tag, self.rank, payload))


class TorchComm(Comm):
    kind = "torch.distributed (gloo)"

    def __init__(self):
        import torch.distributed as dist

        self.dist = dist
        if not dist.is_initialized():
            dist.init_process_group("gloo")
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))

    def allgather(self, obj) -> list:
        out = [None] * self.size
        self.dist.all_gather_object(out, obj)
        return out

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


class MpiComm(Comm):
    kind = "MPI (mpi4py)"

    def __init__(self):
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank = local.Get_rank()

    def allgather(self, obj) -> list:
        return self.comm.allgather(obj)


def launcher_env(env=None) -> str | None:
    """Which launcher started this process, from its environment (None: none did)."""
    env = os.environ if env is None else env
    if "RANK" in env and "WORLD_SIZE" in env:
        return "torchrun"
    if "OMPI_COMM_WORLD_RANK" in env:
        return "mpirun"
    if "PMI_RANK" in env or "PMIX_RANK" in env:
        return "mpi"
    if "SLURM_PROCID" in env and int(env.get("SLURM_NTASKS", "1")) > 1:
        return "srun"
    return None


def launcher_world(env=None) -> int | None:
    env = os.environ if env is None else env
    for var in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"):
        if env.get(var, "").isdigit():
            return int(env[var])
    return None


def launcher_rank(env=None) -> int:
    """This process's rank under the launcher that started it (launcher_env), else 0."""
    env = os.environ if env is None else env
    if launcher_env(env):
        for var in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"):
            if env.get(var, "").isdigit():
                return int(env[var])
    return 0


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def from_launcher(which: str) -> Comm:
    """torch.distributed for torchrun (it sets MASTER_ADDR/PORT); mpi4py for MPI and srun, with
    torch.distributed as a fall-back where the launcher gave it a rendezvous address."""
    if which == "torchrun":
        if not _have("torch"):
            raise UsageError("started by torchrun but torch is not installed", hint="pip install 'ckprof[torch]'")
        return TorchComm()
    if _have("mpi4py"):
        return MpiComm()
    if _have("torch") and "MASTER_ADDR" in os.environ:
        os.environ.setdefault("RANK", os.environ.get("SLURM_PROCID", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
        os.environ.setdefault("WORLD_SIZE", str(launcher_world()))
        return TorchComm()
    raise CkprofError(
        f"started by {which} on {socket.gethostname()}, but neither mpi4py nor torch.distributed can connect the ranks",
        hint="pip install mpi4py (or torch, and set MASTER_ADDR/MASTER_PORT)",
    )
