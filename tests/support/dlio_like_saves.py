"""A script: saves the way DLIO's PyTorchCheckpointing.save_state does (open the file, torch.save
into the file object, then `if fsync: os.fsync(f.fileno())`, dlio_benchmark/checkpointing/
pytorch_checkpointing.py), a few files a checkpoint, then optionally loads the newest back.

    python dlio_like_saves.py DIR [--saves 2] [--files 2] [--fsync | --fsync-first] [--load cold|warm]
                                  [--sleep-before-load S] [HYDRA_OVERRIDES ...]

Arguments it does not know (e.g. ++workload.checkpoint.fsync=True, as DLIO takes them) are kept
on its command line for the recording and otherwise ignored.
"""

import argparse
import os
import time

import torch


def evict(path):
    """Drop a file from the page cache (fdatasync, then posix_fadvise DONTNEED): a cold load."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--saves", type=int, default=2)
    ap.add_argument("--files", type=int, default=2)
    ap.add_argument("--fsync", action="store_true", help="fsync every file (DLIO with its key fixed)")
    ap.add_argument("--fsync-first", action="store_true", help="fsync only the first file of each save")
    ap.add_argument("--load", choices=["cold", "warm"])
    ap.add_argument("--sleep-before-load", type=float, default=0.3)
    a, _ = ap.parse_known_args()
    state = {"w": torch.randn(1024, 1024)}  # 4 MiB a file
    newest = []
    for i in range(a.saves):
        folder = os.path.join(a.dir, f"global_step{i + 1}")
        os.makedirs(folder, exist_ok=True)
        newest = []
        for r in range(a.files):
            name = os.path.join(folder, f"model_states-{r}.pt")
            with open(name, "wb") as f:
                torch.save(state, f)
                if a.fsync or (a.fsync_first and r == 0):
                    os.fsync(f.fileno())
            newest.append(name)
        time.sleep(1.2)  # a quiet gap: the next save is a save of its own
    if a.load:
        if a.load == "cold":
            for name in newest:
                evict(name)
        time.sleep(a.sleep_before_load)
        for name in newest:
            torch.load(name)
        time.sleep(0.3)


if __name__ == "__main__":
    main()
