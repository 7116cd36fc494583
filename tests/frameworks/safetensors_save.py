"""safetensors.torch.save_file of a small model's weights, 6 times, each into its own step folder.

python safetensors_save.py SAVES_JSON --dir DIR [--saves 6] [--restore]
"""

import argparse
import os
import time

import torch
from safetensors.torch import load_file, save_file
from savelog import SaveLog, evict, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("saves_json")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--saves", type=int, default=6)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--restore", action="store_true", help="then load the newest save back, cold (load_file)")
    a = ap.parse_args()
    log = SaveLog(a.saves_json, script="safetensors_save")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, a.width))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, a.width)
    for i in range(1, a.saves + 1):
        for _ in range(3):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        time.sleep(0.3)
        d = os.path.join(a.dir, f"step-{i:03d}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.safetensors")
        sd = {k: v.contiguous() for k, v in model.state_dict().items()}
        with log.timed(path):
            save_file(sd, path, metadata={"step": str(i)})
    time.sleep(0.3)
    if a.restore:
        evict(path)
        time.sleep(0.3)
        with log.loading(path):
            sd = load_file(path)
        model.load_state_dict(sd)
        time.sleep(0.3)
    log.write()
    print(summary(log))


if __name__ == "__main__":
    main()
