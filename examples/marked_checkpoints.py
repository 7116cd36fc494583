"""A training loop that marks its checkpoints with ckprof's one-line API.

Run it under ckprof to see each checkpoint as a window in the recording:

    ckprof record --path /tmp/ckpt -- python examples/marked_checkpoints.py --dir /tmp/ckpt

Without ckprof the markers cost nothing and the script runs the same.
"""

import argparse
import os
import time

import ckprof


def train_step(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    x = 0
    while time.monotonic() < deadline:  # stands in for forward/backward
        x += 1


def save_checkpoint(directory: str, step: int, size_bytes: int) -> str:
    path = os.path.join(directory, f"step{step:06d}.bin")
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(size_bytes >> 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())  # a checkpoint is only safe once it is on the device
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="checkpoints", help="where checkpoints go")
    ap.add_argument("--steps", type=int, default=3, help="checkpoints to write")
    ap.add_argument("--size-mib", type=int, default=32, help="MiB per checkpoint")
    ap.add_argument("--compute-s", type=float, default=0.5, help="seconds of 'training' between checkpoints")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    for step in range(1, args.steps + 1):
        train_step(args.compute_s)
        with ckprof.checkpoint(step=step, path=args.dir, bytes=args.size_mib << 20):
            path = save_checkpoint(args.dir, step, args.size_mib << 20)
        ckprof.mark(f"saved {path}")
        print(f"step {step}: saved {args.size_mib} MiB to {path}")


if __name__ == "__main__":
    main()
