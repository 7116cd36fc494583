"""The workload generator from Python: what model to checkpoint (ModelOptions) and how to run it
(ckprof.workloads.config.RunConfig), checked here so a bad value is a one-line UsageError from
Python as from the command line.

    from ckprof.workloads.options import ModelOptions, run
    from ckprof.workloads.config import RunConfig

    plan = ModelOptions(preset="llama3-8b", total_bytes=512 * 2**20).plan()
    run(ModelOptions(preset="llama3-8b", total_bytes=512 * 2**20),
        RunConfig(target="/mnt/ckpt", count=3, interval_s=2.0, load=True))   # → exit status
"""

from __future__ import annotations

from dataclasses import dataclass

from ckprof.errors import UsageError

from .config import RunConfig

DEFAULT_PRESET = "llama3-8b"
DEFAULT_VOCAB = 128256


def parse_count(text) -> int:
    """'8B', '70e9', '8030261248' (or an int) → a parameter count."""
    t = str(text).strip().lower().replace(",", "").replace("_", "")
    mult = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}.get(t[-1:], 1)
    try:
        n = int(float(t[:-1] if mult != 1 else t) * mult)
    except (ValueError, OverflowError):
        raise UsageError(f"bad parameter count {text!r}: use e.g. 8B, 70e9 or 8030261248") from None
    if n < 1:
        raise UsageError(f"--params must be at least 1 (got {text})")
    return n


@dataclass(frozen=True)
class ModelOptions:
    """A preset, a custom model of N parameters, or a custom shape; parallelism and sizing."""

    preset: str | None = None
    params: int | str | None = None  # a whole model of N parameters ('13B')
    hidden: int | None = None
    ffn: int | None = None
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    vocab: int | None = None
    tp: int | None = None
    pp: int | None = None
    zero: int | None = None
    ranks: int | None = None
    subset: bool = False
    scale: float | None = None
    total_bytes: int | None = None  # scale so one checkpoint is this many bytes

    def _shape_given(self) -> bool:
        return any(v is not None for v in (self.hidden, self.ffn, self.heads, self.kv_heads))

    def check(self) -> None:
        """Values no model can have: one line naming the flag (from Python as from the CLI)."""
        import math
        from numbers import Integral, Real

        counts = (
            ("--hidden", self.hidden),
            ("--ffn", self.ffn),
            ("--layers", self.layers),
            ("--heads", self.heads),
            ("--kv-heads", self.kv_heads),
            ("--vocab", self.vocab),
            ("--tp", self.tp),
            ("--pp", self.pp),
            ("--ranks", self.ranks),
        )
        for flag, v in (*counts, ("--zero", self.zero), ("--total-size", self.total_bytes)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, Integral)):
                raise UsageError(f"{flag} must be a whole number (got {v!r})")
        for flag, v in counts:
            if v is not None and v < 1:
                raise UsageError(f"{flag} must be at least 1 (got {v})")
        if self.zero is not None and self.zero not in (0, 1, 2, 3):
            raise UsageError(f"--zero must be a ZeRO stage 0, 1, 2 or 3 (got {self.zero})")
        if self.scale is not None:
            if isinstance(self.scale, bool) or not isinstance(self.scale, Real):
                raise UsageError(f"--scale must be a number (got {self.scale!r})")
            if not (math.isfinite(self.scale) and self.scale > 0):
                raise UsageError(f"--scale must be more than 0 and finite (got {self.scale})")
        if self.total_bytes is not None and self.total_bytes <= 0:
            raise UsageError(f"--total-size must be more than 0 (got {self.total_bytes} B)")

    def plan(self):
        """The workload's plan (ckprof.workloads.plan): every rank's files and bytes."""
        self.check()
        from .comm import launcher_env, launcher_world
        from .model import Parallelism, Preset, Shape, get_preset, with_overrides
        from .plan import make_plan

        ranks = self.ranks
        if ranks is None and launcher_env():
            ranks = launcher_world()  # under torchrun/mpirun/srun the launcher's world is the rank count
        par = Parallelism(tp=self.tp or 1, pp=self.pp or 1, dp=1, zero=3 if self.zero is None else self.zero)
        if self.params is not None:
            if self.preset or self._shape_given():
                raise UsageError("--params describes a whole model: give it without --preset or a shape")
            base = Preset("custom", Shape(layers=self.layers or 32, flat_params=parse_count(self.params)), par)
            if ranks is None and not self.subset:
                ranks = base.par.mp
        elif self._shape_given() and not self.preset:
            missing = [
                n
                for n, v in (
                    ("--hidden", self.hidden),
                    ("--ffn", self.ffn),
                    ("--layers", self.layers),
                    ("--heads", self.heads),
                )
                if v is None
            ]
            if missing:
                raise UsageError(f"a custom shape needs {', '.join(missing)} too (or start from a --preset)")
            base = Preset(
                "custom",
                Shape(
                    layers=self.layers,
                    hidden=self.hidden,
                    ffn=self.ffn,
                    heads=self.heads,
                    kv_heads=self.kv_heads or self.heads,
                    vocab=DEFAULT_VOCAB if self.vocab is None else self.vocab,
                ),
                par,
            )
            if ranks is None and not self.subset:
                ranks = base.par.mp
        else:
            base = with_overrides(
                get_preset(self.preset or DEFAULT_PRESET),
                layers=self.layers,
                hidden=self.hidden,
                ffn=self.ffn,
                heads=self.heads,
                kv_heads=self.kv_heads,
                vocab=self.vocab,
                tp=self.tp,
                pp=self.pp,
                zero=self.zero,
            )
            if ranks is None and not self.subset and (self.tp or self.pp):
                ranks = base.par.mp * base.par.dp
        return make_plan(base, ranks=ranks, subset=self.subset, scale=self.scale, total_bytes=self.total_bytes)


def check_run(cfg: RunConfig) -> None:
    """A run's settings, checked before any rank starts."""
    if not cfg.target:
        raise UsageError("no --target DIR: say where the checkpoints go (or use --dry-run)")
    for name, value, least in (("--count", cfg.count, 1), ("--threads", cfg.threads, 1), ("--keep", cfg.keep, 0)):
        if value < least:
            what = "0 (keep all) or more" if name == "--keep" else f"at least {least}"
            raise UsageError(f"{name} must be {what} (got {value})")


def check_rules(plan, cfg: RunConfig) -> list:
    """The run against MLPerf Storage's rules (cfg.rules): a violation is refused here, before any
    rank starts; the results go into cfg.rule_checks, which the summary writes as workload.rules
    and whose flagged rules are printed once the preflight passed (ckprof.workloads.rules)."""
    from . import rules

    checks = rules.check_save(plan, cfg)
    rules.enforce(checks)
    cfg.rule_checks = rules.summary(cfg.rules, checks)
    return checks


def run(model: ModelOptions, cfg: RunConfig) -> int:
    """Write the checkpoints (and read the newest back with cfg.load), recorded unless
    cfg.record is False; the exit status `ckprof workload` would give. Checked against
    MLPerf Storage's rules first (cfg.rules): a violation is refused, a flagged rule printed."""
    from .launch import main as run_main

    check_run(cfg)
    plan = model.plan()
    check_rules(plan, cfg)  # flagged rules are printed once nothing else refuses the run (launch.main)
    return run_main(plan, cfg)
