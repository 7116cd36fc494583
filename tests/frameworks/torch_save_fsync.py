"""A plain training loop that saves with torch.save(sd, path) and then fsyncs the file (open, fsync,
close): the timed save includes the fsync. --retention: no fsync, and after each save the
checkpoint from two saves ago is deleted, most likely still dirty in the page cache.

    python torch_save_fsync.py SAVES_JSON --dir DIR [--saves 6] [--retention]
"""

import argparse
import os
import time

import torch
from savelog import SaveLog, evict, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("saves_json")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--saves", type=int, default=6)
    ap.add_argument("--steps-per-save", type=int, default=3)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--retention", action="store_true", help="no fsync; delete the save from two saves ago")
    ap.add_argument("--restore", action="store_true", help="then load the newest save back, cold (torch.load)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    log = SaveLog(a.saves_json, script="torch_save_fsync" + (" --retention" if a.retention else ""))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, a.width))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, a.width)
    written = []
    for i in range(1, a.saves + 1):
        for _ in range(a.steps_per_save):  # "compute"
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        time.sleep(0.3)
        step = i * a.steps_per_save
        path = os.path.join(a.dir, f"ckpt-{step:05d}.pt")
        sd = {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}
        with log.timed(path):
            torch.save(sd, path)
            if not a.retention:
                fd = os.open(path, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
        written.append(path)
        if a.retention and len(written) > 2:
            log.delete(written[-3])
    time.sleep(0.3)
    if a.restore:
        evict(written[-1])
        time.sleep(0.3)
        with log.loading(written[-1]):
            sd = torch.load(written[-1])
        model.load_state_dict(sd["model"])
        time.sleep(0.3)
    log.write()
    print(summary(log))


if __name__ == "__main__":
    main()
