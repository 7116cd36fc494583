"""A Hugging Face transformers Trainer run on a tiny GPT-2 built from a config (no hub access), a
synthetic dataset, save_strategy="steps" with 6 saves and save_total_limit=2 (the Trainer's
retention deletes old checkpoint-N folders inside _save_checkpoint).

Each save is timed around Trainer._save_checkpoint (what the user waits for: model, optimizer,
scheduler, RNG state, trainer state, and the retention). The folders the retention removes are
noted, with their still-dirty bytes, just before they go.

    python hf_trainer.py SAVES_JSON --dir DIR [--saves 6] [--restore]

--restore: then a new Trainer resumes from the newest checkpoint (its files evicted from the page
cache first), its resume's pieces (model, optimizer and scheduler, scaler, RNG state) timed, the
load being the first piece's start → the last one's end.
"""

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
import transformers
import transformers.trainer as hf_trainer_mod
from savelog import SaveLog, evict, pending_bytes, summary, waited_ns
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

VOCAB, SEQ = 512, 32


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("saves_json")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--saves", type=int, default=6)
    ap.add_argument("--save-steps", type=int, default=2)
    ap.add_argument(
        "--restore", action="store_true", help="then resume_from_checkpoint the newest checkpoint, cold, for 2 steps"
    )
    a = ap.parse_args()
    log = SaveLog(a.saves_json, script=f"hf_trainer (transformers {transformers.__version__})")

    # the retention: transformers.trainer calls rotate_checkpoints(output_dir, save_total_limit, ...)
    # at the end of _save_checkpoint; note what it is about to remove, and how dirty it still is
    rotate = hf_trainer_mod.rotate_checkpoints

    def noting_rotate(output_dir, *args, **kwargs):
        before = {os.path.join(output_dir, d) for d in os.listdir(output_dir) if d.startswith("checkpoint-")}
        pending = {d: pending_bytes(d) for d in before}
        rotate(output_dir, *args, **kwargs)
        for d in sorted(before):
            if not os.path.exists(d):
                log.deleted.append(d)
                log.pending_at_delete[d] = pending[d]

    hf_trainer_mod.rotate_checkpoints = noting_rotate

    class TimedTrainer(Trainer):
        def _save_checkpoint(self, model, trial):
            w0, t0 = waited_ns(), time.monotonic_ns()
            super()._save_checkpoint(model, trial)
            t1 = time.monotonic_ns()
            ckpt = os.path.join(self.args.output_dir, f"checkpoint-{self.state.global_step}")
            log.add(t0, t1, ckpt, waited_ns=waited_ns() - w0)

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=128, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    args = TrainingArguments(
        output_dir=a.dir,
        max_steps=a.saves * a.save_steps,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        save_strategy="steps",
        save_steps=a.save_steps,
        save_total_limit=2,
        report_to=[],
        logging_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = TimedTrainer(model=model, args=args, train_dataset=Synthetic(8 * a.saves * a.save_steps))
    trainer.train()
    time.sleep(0.3)
    if a.restore:
        newest = os.path.join(a.dir, f"checkpoint-{trainer.state.global_step}")
        evict(newest)
        time.sleep(0.3)
        parts = []

        class ResumeTrainer(Trainer):
            """Times each piece of the resume: model, optimizer and scheduler, scaler, RNG state."""

        for name in ("_load_from_checkpoint", "_load_optimizer_and_scheduler", "_load_scaler", "_load_rng_state"):

            def timed(self, *args, _name=name, **kwargs):
                w0, t0 = waited_ns(), time.monotonic_ns()
                out = getattr(Trainer, _name)(self, *args, **kwargs)
                t1 = time.monotonic_ns()
                parts.append((t0, t1, waited_ns() - w0))
                return out

            setattr(ResumeTrainer, name, timed)
        args.max_steps += 2
        args.save_strategy = "no"
        resumed = ResumeTrainer(model=GPT2LMHeadModel(cfg), args=args, train_dataset=Synthetic(8 * args.max_steps))
        resumed.train(resume_from_checkpoint=newest)
        log.loads.append(
            {
                "start_ns": min(p[0] for p in parts),
                "end_ns": max(p[1] for p in parts),
                "rank": 0,
                "path": newest,
                "waited_ns": sum(p[2] for p in parts),
            }
        )
        time.sleep(0.3)
    log.write()
    print(summary(log))


if __name__ == "__main__":
    main()
