"""A lightning.pytorch Trainer.fit on CPU with a tiny LightningModule; ModelCheckpoint saves every
N training steps with save_top_k=-1 (keeps all), 6 saves in all.

Each save is timed around the whole trainer.save_checkpoint call that ModelCheckpoint makes (the
state dict, torch.save into memory, the write through fsspec): the script wraps the trainer
instance's save_checkpoint.

    python lightning_fit.py SAVES_JSON --dir DIR [--saves 6] [--restore]

--restore: then a new Trainer fits from ckpt_path= the newest checkpoint (evicted from the page
cache first), the load timed around its checkpoint connector's resume_start.
"""

import argparse
import os
import time

import lightning
import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from savelog import SaveLog, evict, summary, waited_ns

WIDTH = 1024  # 24 MB checkpoints: a load of ~50 ms, so one scheduling hiccup of the 2-core CI host is not 5 % of it


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH))

    def training_step(self, batch, _):
        (x,) = batch
        return (self.net(x) - x).square().mean()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("saves_json")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--saves", type=int, default=6)
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--restore", action="store_true", help="then fit(ckpt_path=the newest), cold, for 2 more steps")
    a = ap.parse_args()
    log = SaveLog(a.saves_json, script=f"lightning_fit (lightning {lightning.__version__})")
    torch.manual_seed(0)
    steps = a.saves * a.every
    data = torch.utils.data.TensorDataset(torch.randn(16 * steps, WIDTH))
    ckpt = ModelCheckpoint(dirpath=a.dir, every_n_train_steps=a.every, save_top_k=-1, save_last=False)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        max_epochs=1,
        callbacks=[ckpt],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=a.dir,
    )
    save = trainer.save_checkpoint

    def timed_save(filepath, *args, **kwargs):
        w0, t0 = waited_ns(), time.monotonic_ns()
        save(filepath, *args, **kwargs)
        t1 = time.monotonic_ns()
        log.add(t0, t1, os.fspath(filepath), waited_ns=waited_ns() - w0)

    trainer.save_checkpoint = timed_save
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=16, num_workers=0))
    time.sleep(0.3)
    if a.restore:
        newest = log.saves[-1]["path"]
        evict(newest)
        time.sleep(0.3)
        again = pl.Trainer(
            accelerator="cpu",
            devices=1,
            max_steps=steps + 2,
            max_epochs=2,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            default_root_dir=a.dir,
        )
        conn = again._checkpoint_connector
        resume = conn.resume_start  # the load of ckpt_path= (strategy.load_checkpoint)

        def timed_resume(checkpoint_path=None, *args, **kwargs):
            w0, t0 = waited_ns(), time.monotonic_ns()
            out = resume(checkpoint_path, *args, **kwargs)
            t1 = time.monotonic_ns()
            if checkpoint_path:
                log.loads.append(
                    {
                        "start_ns": t0,
                        "end_ns": t1,
                        "rank": 0,
                        "path": str(checkpoint_path),
                        "waited_ns": waited_ns() - w0,
                    }
                )
            return out

        conn.resume_start = timed_resume
        again.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=16, num_workers=0), ckpt_path=newest)
        time.sleep(0.3)
    log.write()
    print(summary(log))


if __name__ == "__main__":
    main()
