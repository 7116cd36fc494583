"""A lightning.pytorch Trainer.fit on CPU whose checkpoints are written by Lightning's
AsyncCheckpointIO (plugins=[AsyncCheckpointIO()]): ModelCheckpoint saves every N training steps;
the call clones the state on the loop's thread and hands the write to a background thread.

The script logs its own truth, one JSON line per fact, times from time.monotonic_ns()
(CLOCK_MONOTONIC, the clock ckprof records with). Nothing here imports ckprof:

  {"ev": "step", "step", "start_ns", "end_ns"}       every training batch (Callback hooks)
  {"ev": "save_call", "path", "start_ns", "return_ns"}   trainer.save_checkpoint, the call the loop waited on
  {"ev": "write", "path", "start_ns", "end_ns", "bytes"}  the background write (the wrapped
      CheckpointIO's save_checkpoint, in AsyncCheckpointIO's thread: its end is the future's completion)
  {"ev": "write_failed", "path", "start_ns", "end_ns", "error"}  that write, raising

    python lightning_async.py TRUTH_JSONL --dir DIR [--saves 3] [--every 15] [--width 1536]
"""

import argparse
import json
import os
import time

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import AsyncCheckpointIO


class Mlp(pl.LightningModule):
    def __init__(self, width):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width))

    def training_step(self, batch, _):
        (x,) = batch
        return (self.net(x) - x).square().mean()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-4)


class Truth(Callback):
    """Step times, and the background write timed around the CheckpointIO that AsyncCheckpointIO wraps."""

    def __init__(self, out):
        self.out, self.t0, self.n = out, None, 0

    def fact(self, **fact):
        self.out.write(json.dumps(fact) + "\n")
        self.out.flush()

    def on_train_start(self, trainer, pl_module):
        async_io = trainer.strategy.checkpoint_io
        assert isinstance(async_io, AsyncCheckpointIO), type(async_io)
        inner = async_io.checkpoint_io  # TorchCheckpointIO: its save runs in the plugin's thread
        write = inner.save_checkpoint

        def timed_write(checkpoint, path, *args, **kwargs):
            t0 = time.monotonic_ns()
            try:
                write(checkpoint, path, *args, **kwargs)
            except BaseException as e:
                end_ns = time.monotonic_ns()
                self.fact(ev="write_failed", path=os.fspath(path), start_ns=t0, end_ns=end_ns, error=repr(e))
                raise
            self.fact(
                ev="write", path=os.fspath(path), start_ns=t0, end_ns=time.monotonic_ns(), bytes=os.path.getsize(path)
            )

        inner.save_checkpoint = timed_write  # an instance attribute: ckprof patches the classes, not this

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.t0 = time.monotonic_ns()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.n += 1
        self.fact(ev="step", step=self.n, start_ns=self.t0, end_ns=time.monotonic_ns())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--saves", type=int, default=3)
    ap.add_argument("--every", type=int, default=15)
    ap.add_argument("--width", type=int, default=1536)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    steps = a.saves * a.every + 5  # a few steps after the last save: its write overlaps them
    data = torch.utils.data.TensorDataset(torch.randn(8 * steps, a.width))
    out = open(a.truth, "w")
    truth = Truth(out)
    ckpt = ModelCheckpoint(dirpath=a.dir, every_n_train_steps=a.every, save_top_k=-1, save_last=False)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        max_epochs=1,
        callbacks=[ckpt, truth],
        plugins=[AsyncCheckpointIO()],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=a.dir,
    )
    save = trainer.save_checkpoint

    def timed_save(filepath, *args, **kwargs):
        t0 = time.monotonic_ns()
        save(filepath, *args, **kwargs)
        truth.fact(ev="save_call", path=os.fspath(filepath), start_ns=t0, return_ns=time.monotonic_ns())

    trainer.save_checkpoint = timed_save
    trainer.fit(Mlp(a.width), torch.utils.data.DataLoader(data, batch_size=8, num_workers=0))
    time.sleep(0.2)
    out.close()


if __name__ == "__main__":
    main()
