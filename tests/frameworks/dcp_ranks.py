"""torch.distributed.checkpoint with 2 ranks on gloo: 3 training steps, each followed by
dcp.save(state_dict, checkpoint_id=DIR/step-N) from every rank (--async: dcp.async_save(...) then
.result() at once). Each rank times its own saves; rank 0 merges the ranks' logs into SAVES_JSON.

    python dcp_ranks.py SAVES_JSON --dir DIR [--async]        # spawns 2 processes itself
    torchrun --nproc-per-node 2 dcp_ranks.py SAVES_JSON --dir DIR [--async]
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from savelog import SaveLog, end_ranks, evict, files_under, run_ranks

WORLD = 2


def rank_files(ckpt_dir: str, rank: int) -> dict[str, int]:
    """The files this rank wrote into a DCP directory: its __<rank>_*.distcp, and the .metadata
    for the coordinator (rank 0)."""
    out = {}
    for p, n in files_under(ckpt_dir).items():
        name = os.path.basename(p)
        if name.startswith(f"__{rank}_") or (rank == 0 and name == ".metadata"):
            out[p] = n
    return out


def worker(rank: int, a, world: int):
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=rank, world_size=world)
    log = SaveLog(f"{a.saves_json}.rank{rank}", rank=rank, script="dcp_ranks" + (" --async" if a.async_ else ""))
    torch.manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, a.width))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, a.width)
    for step in range(1, a.steps + 1):
        opt.zero_grad()
        model(x).square().mean().backward()
        for p in model.parameters():  # data parallel: gradients averaged over the ranks, as DDP does
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        time.sleep(0.3)
        # a data-parallel-like layout: each rank saves its own replica under its own keys, so each
        # rank writes its own __<rank>_0.distcp (no deduplication of identical keys across ranks)
        sd = {f"rank{rank}": model.state_dict(), "step": step}
        path = os.path.join(a.dir, f"step-{step}")
        t0 = time.monotonic_ns()
        if a.async_:
            dcp.async_save(sd, checkpoint_id=path).result()
        else:
            dcp.save(sd, checkpoint_id=path)
        t1 = time.monotonic_ns()
        dist.barrier()  # every rank's files are in place before this rank lists its own
        log.add(t0, t1, path, rank_files(path, rank))
    time.sleep(0.3)
    if a.restore:  # every rank loads its part of the newest step back, cold
        if rank == 0:
            evict(path)
        dist.barrier()
        time.sleep(0.3)
        sd = {f"rank{rank}": model.state_dict(), "step": 0}
        with log.loading(path):
            dcp.load(sd, checkpoint_id=path)
        model.load_state_dict(sd[f"rank{rank}"])
        dist.barrier()
        time.sleep(0.3)
    end_ranks(log, a.saves_json, rank, world)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("saves_json")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--async", dest="async_", action="store_true")
    ap.add_argument("--restore", action="store_true", help="then every rank dcp.load()s the newest step, cold")
    a = ap.parse_args()
    a.saves_json = os.path.abspath(a.saves_json)
    os.makedirs(a.dir, exist_ok=True)
    run_ranks(worker, a, WORLD)


if __name__ == "__main__":
    main()
