"""Megatron-core dist_checkpointing with 2 ranks on gloo (CPU): a tiny tensor-parallel-like layout
(each weight split along dim 0 between the ranks, as megatron's column-parallel layers are), 3
training steps, each followed by dist_checkpointing.save(..., async_sharded_save=True) with the
default torch_dist strategy, scheduled on an AsyncCallsQueue and finalized (blocking) at once.

That is Megatron's async save as its training loop runs it: the rank forks a writer process
(TemporalAsyncCaller), which forks one process per write bucket (FileSystemWriterAsync,
thread_count=2 per rank), each torch.save-ing its tensors one by one into its __<rank>_<i>.distcp
and fsyncing it; rank 0 writes common.pt, then the .metadata and metadata.json at finalization.
No process that writes .distcp bytes ever runs a patched call.

Each rank times its own saves (time.monotonic_ns(): CLOCK_MONOTONIC, ckprof's clock) from the
save() call to the end of the finalization; rank 0 merges the ranks' logs into SAVES_JSON.

    python megatron_save.py SAVES_JSON --dir DIR                 # spawns 2 processes itself
    torchrun --nproc-per-node 2 megatron_save.py SAVES_JSON --dir DIR
"""

import argparse
import os
import time
import warnings

import torch
import torch.distributed as dist
from savelog import SaveLog, end_ranks, files_under, run_ranks

WORLD = 2

# CPU-only torch: megatron's async save calls torch.cuda.synchronize() before it forks its writer
# (async_utils.TemporalAsyncCaller) and after staging tensors to host (preload_tensors), and puts
# its finalization all_reduce's int on torch.cuda.current_device(). With no CUDA there is nothing
# to wait for and gloo reduces CPU tensors: a shim for this test only, not part of what is measured.
torch.cuda.synchronize = lambda *a, **k: None
torch.cuda.current_device = lambda: "cpu"

warnings.filterwarnings("ignore", message=".*Transformer Engine and Apex are not installed.*")


def rank_files(ckpt_dir: str, rank: int) -> dict[str, int]:
    """The files this rank's save wrote: its __<rank>_*.distcp, and for rank 0 the rest (common.pt,
    .metadata, metadata.json)."""
    out = {}
    for p, n in files_under(ckpt_dir).items():
        name = os.path.basename(p)
        if name.startswith(f"__{rank}_") or (rank == 0 and not name.startswith("__")):
            out[p] = n
    return out


def sharded_state_dict(weights: dict, step: int, rank: int, world: int) -> dict:
    from megatron.core.dist_checkpointing import ShardedTensor

    sd = {k: ShardedTensor.from_rank_offsets(k, w.detach(), (0, rank, world), replica_id=0) for k, w in weights.items()}
    sd["step"] = step  # common (not sharded): rank 0 writes it to common.pt
    return sd


def worker(rank: int, a, world: int):
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing.strategies.async_utils import AsyncCallsQueue
    from megatron.core.dist_checkpointing.strategies.torch import TorchDistSaveShardedStrategy

    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=rank, world_size=world)
    log = SaveLog(f"{a.saves_json}.rank{rank}", rank=rank, script="megatron_save")
    torch.manual_seed(rank)
    # this rank's shard of each layer: rows [rank·w/2, (rank+1)·w/2) of a w × w weight
    weights = {f"layer{i}.weight": torch.randn(a.width // world, a.width, requires_grad=True) for i in range(a.layers)}
    opt = torch.optim.SGD(list(weights.values()), lr=1e-3)
    x = torch.randn(16, a.width)
    queue = AsyncCallsQueue()
    for step in range(1, a.steps + 1):
        opt.zero_grad()
        h = x
        for w in weights.values():
            h = torch.relu(h @ w.T) @ w  # a shard's forward and back to full width
        h.square().mean().backward()
        opt.step()
        time.sleep(0.3)
        path = os.path.join(a.dir, f"iter_{step:07d}")
        # as Megatron's training.save_checkpoint does: rank 0 makes the iteration's folder
        # (ensure_directory_exists), the ranks meet, then each calls dist_checkpointing.save
        prep_ns = None
        if rank == 0:
            prep_ns = time.monotonic_ns()
            os.makedirs(path, exist_ok=True)
        dist.barrier()  # save() lists the directory on rank 0; every rank writes into it
        t0 = time.monotonic_ns()
        req = dist_checkpointing.save(
            sharded_state_dict(weights, step, rank, world),
            path,
            sharded_strategy=TorchDistSaveShardedStrategy("torch_dist", 1),
            async_sharded_save=True,
        )
        queue.schedule_async_request(req)
        queue.maybe_finalize_async_calls(blocking=True)
        t1 = time.monotonic_ns()
        dist.barrier()  # every rank's files are in place before this rank lists its own
        log.add(t0, t1, path, rank_files(path, rank), prep_ns=prep_ns)
    queue.close()
    time.sleep(0.3)
    end_ranks(log, a.saves_json, rank, world)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("saves_json")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=6)
    a = ap.parse_args()
    a.saves_json = os.path.abspath(a.saves_json)
    os.makedirs(a.dir, exist_ok=True)
    run_ranks(worker, a, WORLD)


if __name__ == "__main__":
    main()
