"""torch.distributed.checkpoint async_save on 2 gloo ranks (CPU), with training steps running while
the background write persists: each rank trains an MLP (gradients all-reduced, as DDP does), and
every N steps calls dcp.async_save of its model and optimizer state, then goes on training while the
write runs in DCP's thread, which takes CPU from the steps beside it.

Each rank logs its own truth (TRUTH.rank<r>.jsonl, one JSON line per fact, times from
time.monotonic_ns(): CLOCK_MONOTONIC, the clock ckprof records with). Nothing here imports ckprof:
  {"ev": "step", "rank", "step", "start_ns", "end_ns", "opt_ns"}  every training step; opt_ns when
      the optimizer's step finished (its own post-hook, which torch runs before any global one)
  {"ev": "save_call", "rank", "step", "path", "start_ns", "return_ns"}   the call the loop waited on
  {"ev": "save_done", "rank", "step", "done_ns"}                the future completed (its done-callback)

    python dcp_async_steps.py TRUTH --dir DIR [--steps 100] [--every 30] [--width 512] [--batch 32] [--extra-mb 12]
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp

WORLD = 2


def worker(rank: int, a) -> None:
    os.environ["RANK"] = str(rank)  # as torchrun would set it: the rank of each event
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    out = open(f"{a.truth}.rank{rank}.jsonl", "w")

    def fact(**f):
        out.write(json.dumps({"rank": rank, **f}) + "\n")
        out.flush()

    w = a.width
    model = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.ReLU(), torch.nn.Linear(w, w))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    stepped = [0]
    opt.register_step_post_hook(lambda o, args, kwargs: stepped.__setitem__(0, time.monotonic_ns()))
    x = torch.randn(a.batch, w)
    # state that is saved but not trained (an EMA copy, a replay buffer), in many small tensors as a
    # large model's are: a longer write, same steps, and DCP's per-item Python work in its thread
    # takes the GIL from the loop beside it
    extra = {f"t{i}": torch.randn(2**13) for i in range(a.extra_mb * 2**5)}
    # the background write's collectives on a group of their own: on the default group they would
    # interleave with the training's all_reduce in another order on each rank, and hang
    ckpt_group = dist.new_group(backend="gloo")
    pending = None
    for step in range(1, a.steps + 1):
        t0 = time.monotonic_ns()
        opt.zero_grad()
        (model(x) - x).square().mean().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= WORLD
        opt.step()
        fact(ev="step", step=step, start_ns=t0, end_ns=time.monotonic_ns(), opt_ns=stepped[0])
        if step % a.every:
            continue
        if pending is not None:  # one save in flight at a time
            pending.result()
        path = os.path.join(a.dir, f"step-{step}")
        # each rank's own replica under its own keys: each rank writes its own __<rank>_0.distcp
        sd = {f"rank{rank}": {"model": model.state_dict(), "optim": opt.state_dict(), "extra": extra}}
        c0 = time.monotonic_ns()
        pending = dcp.async_save(sd, checkpoint_id=path, process_group=ckpt_group)
        fact(ev="save_call", step=step, path=path, start_ns=c0, return_ns=time.monotonic_ns())
        pending.add_done_callback(lambda f, step=step: fact(ev="save_done", step=step, done_ns=time.monotonic_ns()))
    if pending is not None:
        pending.result()
    time.sleep(0.2)
    dist.barrier()
    dist.destroy_process_group()
    out.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--every", type=int, default=30)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--extra-mb", type=int, default=12, help="MiB of untrained state per rank")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    mp.start_processes(worker, args=(a,), nprocs=WORLD, join=True, start_method="spawn")


if __name__ == "__main__":
    main()
