"""One workload, two targets (tests/test_compare_targets.py records it under `ckprof record` twice):

    python compare_targets_save.py TARGET COUNT OUT_JSON

TARGET is a directory (torch.save to TARGET/ckpt-N.pt, then fsync) or an s3:// prefix
(torch.save into fsspec.open("s3://…/ckpt-N.pt", "wb"): s3fs, whose close uploads the last part;
endpoint and credentials from the environment: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...). The
same 24 MiB state dict each time, COUNT saves 0.5 s apart; each timed on CLOCK_MONOTONIC and listed
in OUT_JSON ({"saves": [{"start_ns", "end_ns", "path"}]}). Nothing here imports ckprof."""

from __future__ import annotations

import json
import os
import sys
import time

MiB = 2**20


def main() -> None:
    target, count, out_json = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    import torch

    remote = target.startswith("s3://")
    if remote:
        import fsspec

        opts = {"client_kwargs": {"endpoint_url": os.environ["AWS_ENDPOINT_URL"], "region_name": "us-east-1"}}
    saves = []
    for n in range(count):
        g = torch.Generator().manual_seed(n)
        sd = {f"w{i}": torch.randn(6 * MiB // 4, generator=g) for i in range(4)}  # 24 MiB of float32
        path = f"{target.rstrip('/')}/ckpt-{n}.pt"
        t0 = time.monotonic_ns()
        if remote:
            with fsspec.open(path, "wb", default_block_size=5 * MiB, **opts) as f:
                torch.save(sd, f)
        else:
            torch.save(sd, path)
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        saves.append({"start_ns": t0, "end_ns": time.monotonic_ns(), "path": path})
        time.sleep(0.5)  # training between saves
    with open(out_json, "w") as f:
        json.dump({"saves": saves}, f)


if __name__ == "__main__":
    main()
