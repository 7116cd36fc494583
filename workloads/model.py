"""Model shapes and the checkpoint each rank writes, sized exactly as MLPerf Storage v2.0 does.

The reference is DLIO (argonne-lcf/dlio_benchmark, branch mlperf_storage_v2.0,
dlio_benchmark/checkpointing/base_checkpointing.py) with the llama3 configs of mlcommons/storage
(configs/dlio/workload/llama3_*.yaml) and the rank counts of mlpstorage/config.py
(LLM_ALLOWED_VALUES). The rules, as DLIO applies them:

- parameters (get_num_parameters): embedding + lm_head (vocab·h each) + final norm (h) + per
  layer: 2 norms (h), QKV h·(h + 2·kv_dim) with kv_dim = (h // heads)·kv_heads, dense h·h, and a
  gated MLP 3·h·ffn. Integer arithmetic, floors included.
- rank layout: tp_rank = rank % TP, pp_rank = (rank // TP) % PP, dp_rank = rank // (TP·PP).
- layers (get_layer_index): indices 0 (embedding), 1..L (transformer), L+1 (lm_head), L+2
  (final norm); the L transformer layers are split over PP stages, the first stage also holds
  0 and the last L+1, L+2.
- model state (get_layer_parameters), fp16: per layer a list of tensors, divided by TP and, under
  ZeRO-3, by DP (floors applied one after the other, as DLIO does).
- optimizer state (get_optimization_groups), fp32: [n, 5h, n, 5h, n, 5h] with
  n = params // (DP·TP·PP) under ZeRO ≥ 1, params // (TP·PP) without ZeRO.
- who writes what (save_checkpoint): ZeRO 1/2: every rank its optimizer file; DP rank 0 the
  model, one file per layer when PP > 1, else one file. ZeRO 3 (and 0): one model and one
  optimizer file per rank. ZeRO 0: only the first TP·PP ranks write.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ckprof.errors import UsageError

DTYPE_BYTES = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}

# mlpstorage/config.py: LLM_SUBSET_PROCS — the subset mode's process count.
SUBSET_RANKS = 8


@dataclass(frozen=True)
class Shape:
    """A transformer (vocab, hidden, FFN, layers, heads, KV heads) or, with `flat_params`, a model
    known only by its parameter count (split into `layers` equal layers, no embedding)."""

    layers: int
    hidden: int = 0
    ffn: int = 0
    heads: int = 1
    kv_heads: int = 1
    vocab: int = 0
    flat_params: int = 0

    def num_parameters(self) -> int:
        if self.layers <= 0:
            return 0
        if self.flat_params:
            return self.flat_params
        h = self.hidden
        kv_dim = (h // self.heads) * self.kv_heads
        embedding = self.vocab * h
        per_layer = h + h * (h + 2 * kv_dim) + h * h + h + 2 * self.ffn * h + self.ffn * h
        return embedding + per_layer * self.layers + h + embedding

    def layer_tensors(self, index: int, tp: int, sharding: int) -> list[int]:
        """Element counts of layer `index`'s tensors on one rank (DLIO get_layer_parameters)."""
        if self.flat_params:
            if 1 <= index <= self.layers:
                return [self.flat_params // self.layers // tp // sharding]
            return []
        h, L = self.hidden, self.layers
        kv_dim = (h // self.heads) * self.kv_heads
        if index == 0 or index == L + 1:
            return [h * self.vocab // tp // sharding]  # embedding or lm_head
        if index == L + 2:
            return [h // sharding]  # final norm
        return [
            h // sharding,  # input norm
            h * (h + 2 * kv_dim) // tp // sharding,  # QKV
            h * h // tp // sharding,  # attention output (dense)
            h // sharding,  # post-attention norm
            h * 2 * self.ffn // tp // sharding,  # MLP h→ffn, ×2 for the gated unit
            h * self.ffn // tp // sharding,
        ]  # MLP ffn→h


@dataclass(frozen=True)
class Parallelism:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 0

    @property
    def mp(self) -> int:
        return self.tp * self.pp

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True)
class Preset:
    name: str
    shape: Shape
    par: Parallelism
    model_dtype: str = "fp16"
    optimizer_dtype: str = "fp32"
    source: str = ""


# configs/dlio/workload/llama3_{8b,70b,405b,1t}.yaml (shape, TP, PP, ZeRO) and
# mlpstorage/config.py LLM_ALLOWED_VALUES (closed-division process counts → DP).
PRESETS: dict[str, Preset] = {
    "llama3-8b": Preset(
        "llama3-8b",
        Shape(layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8, vocab=128256),
        Parallelism(tp=1, pp=1, dp=8, zero=3),
        source="llama3_8b.yaml, 8 processes",
    ),
    "llama3-70b": Preset(
        "llama3-70b",
        Shape(layers=80, hidden=8192, ffn=28672, heads=128, kv_heads=8, vocab=128256),
        Parallelism(tp=8, pp=1, dp=8, zero=3),
        source="llama3_70b.yaml, 64 processes",
    ),
    "llama3-405b": Preset(
        "llama3-405b",
        Shape(layers=126, hidden=16384, ffn=53248, heads=128, kv_heads=8, vocab=128256),
        Parallelism(tp=8, pp=32, dp=2, zero=1),
        source="llama3_405b.yaml, 512 processes",
    ),
    "llama3-1t": Preset(
        "llama3-1t",
        Shape(layers=128, hidden=25872, ffn=98304, heads=192, kv_heads=32, vocab=128256),
        Parallelism(tp=8, pp=64, dp=2, zero=1),
        source="llama3_1t.yaml, 1024 processes",
    ),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise UsageError(
            f"unknown preset {name!r}; presets: {', '.join(PRESETS)}",
            hint="or describe a model with --params or --hidden/--ffn/--layers/--heads/--kv-heads",
        ) from None


@dataclass(frozen=True)
class ShardFile:
    """One file a rank writes: its name inside the checkpoint directory and its size in bytes."""

    name: str
    nbytes: int
    kind: str  # "model" | "optimizer"


@dataclass
class RankPlan:
    rank: int
    tp_rank: int
    pp_rank: int
    dp_rank: int
    files: list[ShardFile] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.files)


def layer_range(pp_rank: int, pp: int, layers: int) -> tuple[int, int]:
    """First and last layer index (inclusive) of pipeline stage `pp_rank` (DLIO get_layer_index)."""
    n, rem = layers // pp, layers % pp
    if pp_rank < rem:
        start = pp_rank * (n + 1) + 1
        end = start + n
    else:
        start = rem * (n + 1) + (pp_rank - rem) * n + 1
        end = start + n - 1
    if pp_rank == pp - 1:
        end = layers + 2
    if pp_rank == 0:
        start = 0
    return start, end


def rank_plan(preset: Preset, rank: int) -> RankPlan:
    """The files rank `rank` writes in one checkpoint (DLIO BaseCheckpointing.save_checkpoint)."""
    s, p = preset.shape, preset.par
    tp_rank, pp_rank, dp_rank = rank % p.tp, (rank // p.tp) % p.pp, rank // p.mp
    mp_rank = rank % p.mp
    rp = RankPlan(rank, tp_rank, pp_rank, dp_rank)
    if p.zero == 0 and rank >= p.mp:
        return rp  # without ZeRO only the first model-parallel group checkpoints
    mbytes, obytes = DTYPE_BYTES[preset.model_dtype], DTYPE_BYTES[preset.optimizer_dtype]
    start, end = layer_range(pp_rank, p.pp, s.layers)
    sharding = p.dp if p.zero >= 3 else 1
    layer_bytes = {
        i: sum(t for t in s.layer_tensors(i, p.tp, sharding) if t > 0) * mbytes for i in range(start, end + 1)
    }
    prefix = f"zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}"
    if 0 < p.zero < 3:
        if dp_rank == 0 and s.layers > 0:
            if p.pp > 1:
                for i in range(start, end + 1):
                    rp.files.append(ShardFile(f"layer_{i}-model_{mp_rank}_model_states.pt", layer_bytes[i], "model"))
            else:
                rp.files.append(ShardFile(f"model_{mp_rank}_model_states.pt", sum(layer_bytes.values()), "model"))
    elif s.layers > 0:
        rp.files.append(ShardFile(f"{prefix}_model_states.pt", sum(layer_bytes.values()), "model"))
    n = s.num_parameters() // (p.dp * p.mp if p.zero > 0 else p.mp)
    if n > 0:
        groups = [n, s.hidden * 5] * 3
        rp.files.append(ShardFile(f"{prefix}_optim_states.pt", sum(g for g in groups if g > 0) * obytes, "optimizer"))
    return rp


def with_overrides(preset: Preset, **kw) -> Preset:
    """A preset with shape/parallelism fields replaced (None leaves a field as it is)."""
    shape_kw = {k: v for k, v in kw.items() if k in Shape.__dataclass_fields__ and v is not None}
    par_kw = {k: v for k, v in kw.items() if k in Parallelism.__dataclass_fields__ and v is not None}
    shape = replace(preset.shape, **shape_kw) if shape_kw else preset.shape
    par = replace(preset.par, **par_kw) if par_kw else preset.par
    name = preset.name if not (shape_kw or par_kw) else f"{preset.name}*"
    return replace(preset, name=name, shape=shape, par=par)


def validate(preset: Preset) -> None:
    s, p = preset.shape, preset.par
    for label, v in (("TP", p.tp), ("PP", p.pp), ("DP", p.dp), ("layers", s.layers)):
        if v < 1:
            raise UsageError(f"{label} must be at least 1 (got {v})")
    if p.zero not in (0, 1, 2, 3):
        raise UsageError(f"ZeRO stage must be 0, 1, 2 or 3 (got {p.zero})")
    if p.pp > s.layers:
        raise UsageError(
            f"PP={p.pp} pipeline stages but only {s.layers} layers: some stages would hold no layer",
            hint="lower --pp or raise --layers",
        )
    if not s.flat_params:
        if s.hidden < 1 or s.heads < 1 or s.kv_heads < 1:
            raise UsageError("a model shape needs --hidden, --heads and --kv-heads of at least 1")
        if s.heads % p.tp or s.kv_heads % p.tp and p.tp % s.kv_heads:
            raise UsageError(
                f"TP={p.tp} does not divide the shape: {s.heads} attention heads, {s.kv_heads} KV heads",
                hint="choose a TP that divides the number of heads",
            )
