"""A training loop that checkpoints with torch.distributed.checkpoint, sync or async, and logs its own truth.

Run it under ckprof (nothing in it mentions ckprof):

    ckprof record --path /tmp/ckpt -o run1 -- \
        python examples/train_async_checkpoint.py --dir /tmp/ckpt --mode async --truth /tmp/truth.jsonl

--mode sync saves with dcp.save; --mode async with dcp.async_save (state staged to host memory inside
the call, written by a background thread); --mode async-staged with dcp.async_save and DCP's
DefaultStager (pinned-memory staging that itself runs in the background: the call returns at once,
and the save has a staging and an upload completion). Single process, no process group (no_dist).

--truth FILE gets one JSON line per fact, times from CLOCK_MONOTONIC in ns (the clock ckprof records
with), so a recording's phases and step figures can be checked against what the program saw:
  {"ev": "step", "step": i, "start_ns", "end_ns", "opt_ns"}  every training step (end_ns GPU synchronised;
      opt_ns when the optimizer's step returned to its hooks: its own post-hook, which torch runs
      before any global one, so the instant a profiler's global hook reads, with no GIL wait between)
  {"ev": "save_call", "step", "start_ns", "return_ns", "state_cuda_bytes"}   the call the loop waited
      on; state_cuda_bytes: the bytes of GPU memory the state holds, counted from the model (its
      parameters, and AdamW's two moments of each: 3 × the parameters' bytes; its step counters
      are on the CPU), what staging copies to host memory
  {"ev": "staged", "step", "done_ns"}                       async-staged: the staging future completed
  {"ev": "save_done", "step", "done_ns", "bytes"}           the save's future completed; bytes on disk
Completion times are taken by polling the futures after every step and at the end, so each is late by
at most one step.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed.checkpoint as dcp
import torch.nn as nn


def now_ns() -> int:
    return time.monotonic_ns()


def tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="where each checkpoint's folder is written")
    ap.add_argument("--mode", choices=["sync", "async", "async-staged"], default="async")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    ap.add_argument("--width", type=int, default=1024, help="hidden width of the MLP (state grows as width²)")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--every", type=int, default=30, help="save every N steps")
    ap.add_argument("--truth", help="JSON-lines file for the program's own timings (CLOCK_MONOTONIC ns)")
    a = ap.parse_args(argv)

    dev = torch.device(
        "cuda" if a.device == "auto" and torch.cuda.is_available() else ("cpu" if a.device == "auto" else a.device)
    )
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    w = a.width
    model = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 1)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    stepped = [0]
    opt.register_step_post_hook(lambda o, args, kwargs: stepped.__setitem__(0, now_ns()))
    x, y = torch.randn(a.batch, w, device=dev), torch.randn(a.batch, 1, device=dev)
    os.makedirs(a.dir, exist_ok=True)
    truth = open(a.truth, "a") if a.truth else None

    def log(**fact) -> None:
        if truth:
            truth.write(json.dumps(fact) + "\n")
            truth.flush()

    stager = None
    if a.mode == "async-staged":
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

        gpu = dev.type == "cuda"  # pinned memory and non-blocking copies need an accelerator
        stager = DefaultStager(
            StagingOptions(use_pinned_memory=gpu, use_shared_memory=False, use_non_blocking_copy=gpu)
        )
    pending: list[dict] = []  # saves whose futures have not completed

    def state_cuda_bytes() -> int:
        """The program's own count of its state on the GPU: parameters + AdamW's exp_avg and exp_avg_sq."""
        params = sum(p.numel() * p.element_size() for p in model.parameters() if p.is_cuda)
        moments = sum(
            t.numel() * t.element_size()
            for st in opt.state.values()
            for k, t in st.items()
            if k in ("exp_avg", "exp_avg_sq") and t.is_cuda
        )
        return params + moments

    def poll(final: bool = False) -> None:
        for p in list(pending):
            if p.get("staging") is not None and "staged_ns" not in p and (final or p["staging"].done()):
                p["staging"].result()
                p["staged_ns"] = now_ns()
                log(ev="staged", step=p["step"], done_ns=p["staged_ns"])
            if final or p["upload"].done():
                p["upload"].result()
                log(ev="save_done", step=p["step"], done_ns=now_ns(), bytes=tree_bytes(p["path"]))
                pending.remove(p)

    for step in range(1, a.steps + 1):
        t0 = now_ns()
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        sync()
        log(ev="step", step=step, start_ns=t0, end_ns=now_ns(), opt_ns=stepped[0])
        poll()
        if step % a.every:
            continue
        path = os.path.join(a.dir, f"step{step:05d}")
        state = {"model": model.state_dict(), "optim": opt.state_dict()}
        c0 = now_ns()
        if a.mode == "sync":
            dcp.save(state, checkpoint_id=path, no_dist=True)
            c1 = now_ns()
            log(ev="save_call", step=step, start_ns=c0, return_ns=c1)
            log(ev="save_done", step=step, done_ns=c1, bytes=tree_bytes(path))
            continue
        if pending:  # one save in flight at a time, as DCP's own examples do
            poll(final=True)
        kw = {"async_stager": stager} if stager is not None else {}
        result = dcp.async_save(state, checkpoint_id=path, no_dist=True, **kw)
        c1 = now_ns()
        log(ev="save_call", step=step, start_ns=c0, return_ns=c1, state_cuda_bytes=state_cuda_bytes())
        staging = getattr(result, "staging_completion", None)
        upload = getattr(result, "upload_completion", result)
        pending.append({"step": step, "path": path, "staging": staging, "upload": upload})
    poll(final=True)
    if stager is not None:
        stager.close()
    if truth:
        truth.close()


if __name__ == "__main__":
    main()
