"""The plan: which rank writes which files of how many bytes, for a preset, a world and a scale.

`--ranks N` sets the world as DLIO's comm_size does: DP = N / (TP·PP). `--subset` keeps the
preset's full layout (its DP) and runs only its first ranks (8 by default), as MLPerf Storage's
subset mode does ("checkpoint.mode=subset", mlpstorage/benchmarks/dlio.py). `--scale F` or
`--total-size` multiply every file by the same factor, so the rank and file structure of a
1,544-file checkpoint stays the same at a laptop's size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ckprof.errors import UsageError
from ckprof.units import fmt_bytes

from .model import SUBSET_RANKS, Preset, RankPlan, ShardFile, rank_plan, validate

ALIGN = 4096  # scaled files are whole 4 KiB blocks (O_DIRECT alignment; the page size)
MAX_FILE_BYTES = 2**63 - 1  # a file's size is an off_t, a signed 64-bit count of bytes (lseek(2))


@dataclass
class Plan:
    preset: Preset
    world: int  # ranks of the full layout (TP·PP·DP)
    ranks: list[RankPlan]  # the ranks that run: all of them, or the subset's first ranks
    scale: float = 1.0
    subset: bool = False
    full_bytes: int = 0  # one checkpoint at full size (of the ranks that run)

    @property
    def nranks(self) -> int:
        return len(self.ranks)

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.ranks)

    @property
    def nfiles(self) -> int:
        return sum(len(r.files) for r in self.ranks)

    def to_dict(self) -> dict:
        p = self.preset
        return {
            "preset": p.name,
            "shape": vars(p.shape),
            "parallelism": vars(p.par),
            "world": self.world,
            "ranks": self.nranks,
            "subset": self.subset,
            "scale": self.scale,
            "files": self.nfiles,
            "bytes": self.nbytes,
            "full_bytes": self.full_bytes,
            "parameters": p.shape.num_parameters(),
            "model_dtype": p.model_dtype,
            "optimizer_dtype": p.optimizer_dtype,
        }


def make_plan(
    preset: Preset,
    ranks: int | None = None,
    subset: bool = False,
    scale: float | None = None,
    total_bytes: int | None = None,
) -> Plan:
    if scale is not None and not scale > 0:
        raise UsageError(f"--scale must be more than 0 (got {scale})")
    if total_bytes is not None and total_bytes <= 0:
        raise UsageError(f"--total-size must be more than 0 (got {total_bytes} B)")
    if scale is not None and total_bytes is not None:
        raise UsageError("give --scale or --total-size, not both")
    if ranks is not None and ranks < 1:
        raise UsageError(f"--ranks must be at least 1 (got {ranks})")
    par = preset.par
    if subset:
        n = SUBSET_RANKS if ranks is None else ranks
        if n > par.world:
            raise UsageError(f"--subset of {n} ranks, but {preset.name} has only {par.world}")
        world = par.world
    else:
        world = par.world if ranks is None else ranks
        if world % par.mp:
            raise UsageError(
                f"{world} ranks are not a multiple of TP×PP = {par.tp}×{par.pp} = {par.mp} for {preset.name}",
                hint=f"use --ranks {par.mp}·k, or --subset to run the first ranks of the full layout",
            )
        preset = replace(preset, par=replace(par, dp=world // par.mp))
        n = world
    validate(preset)
    plans = [rank_plan(preset, r) for r in range(n)]
    full = sum(r.nbytes for r in plans)
    if full == 0:
        raise UsageError(f"{preset.name}: this layout writes nothing")
    if total_bytes is not None:
        scale = total_bytes / full
    scale = 1.0 if scale is None else float(scale)
    largest = max(f.nbytes for r in plans for f in r.files)
    if largest * scale > MAX_FILE_BYTES:
        what = f"its largest file, {largest:,} B" + (f" × {scale:g}," if scale != 1.0 else ",")
        raise UsageError(
            f"{preset.name}: {what} would be more than a file can hold ({MAX_FILE_BYTES:,} B)",
            hint="scale it down with --total-size or --scale",
        )
    if scale != 1.0:
        plans = [replace(r, files=[replace(f, nbytes=scaled(f.nbytes, scale)) for f in r.files]) for r in plans]
    return Plan(preset, world, plans, scale, subset, full)


def scaled(nbytes: int, scale: float) -> int:
    """A file's size times `scale`, in whole 4 KiB blocks, at least one block."""
    return max(ALIGN, round(nbytes * scale / ALIGN) * ALIGN)


def _sizes(files: list[ShardFile]) -> str:
    sizes = sorted({f.nbytes for f in files})
    if len(sizes) <= 3:
        return ", ".join(f"{s:,} B" for s in sizes)
    return f"{sizes[0]:,} … {sizes[-1]:,} B"


def describe(plan: Plan, max_ranks: int = 16) -> str:
    """The dry-run text: the model, the layout, per-rank files and bytes, the total."""
    p, s, par = plan.preset, plan.preset.shape, plan.preset.par
    lines = []
    if s.flat_params:
        lines.append(f"model       {p.name}: {s.num_parameters():,} parameters (given), {s.layers} layers")
    else:
        lines.append(
            f"model       {p.name}: {s.num_parameters():,} parameters; hidden {s.hidden}, FFN {s.ffn}, "
            f"{s.layers} layers, {s.heads} heads, {s.kv_heads} KV heads, vocab {s.vocab}"
        )
    lines.append(
        f"layout      TP {par.tp} × PP {par.pp} × DP {plan.world // par.mp} = {plan.world} ranks, "
        f"ZeRO-{par.zero}; model state {p.model_dtype}, optimizer state {p.optimizer_dtype}"
        + (f"  [{p.source}]" if p.source else "")
    )
    if plan.subset:
        lines.append(f"subset      ranks 0..{plan.nranks - 1} of {plan.world} write their share (MLPerf subset mode)")
    if plan.scale != 1.0:
        lines.append(
            f"scale       × {plan.scale:.6g} of {plan.full_bytes:,} B ({fmt_bytes(plan.full_bytes)}); "
            f"files rounded to whole {ALIGN} B blocks"
        )
    lines.append("rank  files  bytes                    file sizes")
    shown = plan.ranks if plan.nranks <= max_ranks else plan.ranks[: max_ranks // 2] + plan.ranks[-max_ranks // 2 :]
    for i, r in enumerate(shown):
        if plan.nranks > max_ranks and i == max_ranks // 2:
            lines.append(f"...   ({plan.nranks - max_ranks} ranks not shown)")
        lines.append(f"{r.rank:<5d} {len(r.files):<6d} {r.nbytes:>18,} B  {_sizes(r.files)}")
    first = plan.ranks[0].files
    names = ", ".join(f"{f.name} ({f.nbytes:,} B)" for f in first[:6]) + (
        f", … ({len(first) - 6} more)" if len(first) > 6 else ""
    )
    lines.append(f"rank 0      {names}")
    lines.append(
        f"total       {plan.nfiles:,} files, {plan.nbytes:,} B ({fmt_bytes(plan.nbytes)}) per checkpoint "
        f"over {plan.nranks} ranks"
    )
    return "\n".join(lines)
