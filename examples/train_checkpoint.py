"""A tiny real training loop that checkpoints: the starting point for profiling your own.

Run it under ckprof; nothing in it mentions ckprof, and each save still becomes a window
(ckprof injects a sitecustomize that wraps torch.save and torch.distributed.checkpoint):

    ckprof record --path /tmp/ckpt -o run1 -- python examples/train_checkpoint.py --dir /tmp/ckpt
    ckprof report run1

--saver torch saves with torch.save (one file per checkpoint), --saver dcp with
torch.distributed.checkpoint (a directory per checkpoint; single process, no process group
needed), --saver both alternates. --fsync makes each checkpoint durable before training goes
on. --device cuda (or auto) trains on a GPU, so the report's GPU idle seconds per save mean
something. To mark windows yourself instead: `with ckprof.checkpoint(step=step, path=p): save(...)`.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn as nn


def make_model(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))


def fsync_tree(path: str) -> None:
    """fsync every file under path (or path itself), then its directory: the data is on the device."""
    files = [path] if os.path.isfile(path) else [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def save(step: int, state: dict, directory: str, saver: str, fsync: bool) -> str:
    if saver == "torch":
        path = os.path.join(directory, f"step{step:05d}.pt")
        torch.save(state, path)
    else:
        import torch.distributed.checkpoint as dcp

        path = os.path.join(directory, f"step{step:05d}")
        dcp.save(state, checkpoint_id=path)
    if fsync:
        fsync_tree(path)
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="checkpoint directory")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--every", type=int, default=10, help="checkpoint every N steps")
    ap.add_argument("--width", type=int, default=512, help="hidden width (model size ~ 2·width² floats)")
    ap.add_argument("--saver", choices=["torch", "dcp", "both"], default="torch")
    ap.add_argument("--fsync", action="store_true")
    ap.add_argument(
        "--device", default="cpu", help="torch device to train on: cpu, cuda, or auto (cuda when there is one)"
    )
    ap.add_argument("--batch", type=int, default=256, help="rows per step")
    args = ap.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    os.makedirs(args.dir, exist_ok=True)
    torch.manual_seed(0)
    model = make_model(args.width).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(args.batch, args.width, device=device), torch.randn(args.batch, 1, device=device)
    n = 0
    for step in range(1, args.steps + 1):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step % args.every == 0:
            saver = args.saver if args.saver != "both" else ("torch" if n % 2 == 0 else "dcp")
            state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}
            path = save(step, state, args.dir, saver, args.fsync)
            n += 1
            print(f"step {step}: loss {loss.item():.4f}, saved {path} ({saver})", flush=True)


if __name__ == "__main__":
    main()
