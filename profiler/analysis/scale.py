"""What a measured checkpoint time means at scale: the optimal checkpoint interval and its cost.

- Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
  τ = sqrt(2 δ M), δ the checkpoint time, M the mean time between failures.
- Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
  FGCS 22(3), eq. (37): τ = sqrt(2 δ M)·[1 + (1/3)·sqrt(δ / 2M) + δ / 18M] − δ  for δ < 2M, else M.
- The wasted fraction of time at interval τ (first order, as in Young and MLPerf Storage's
  checkpointing arithmetic): δ/τ for writing checkpoints plus (τ/2 + R)/M for the work lost and
  the restart R per failure, the failure landing on average half way through an interval.
- Failure model from Llama 3 (Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4):
  419 unexpected interruptions in 54 days of pre-training on 16,384 H100 GPUs; failures are
  taken as independent per GPU, so a cluster of N GPUs sees MTBF = 54 d · 16384 / (419 · N).
"""

from __future__ import annotations

import math

LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16384
LLAMA3_SOURCE = (
    "Llama 3 (Dubey et al. 2024, 'The Llama 3 Herd of Models', §3.3.4): "
    "419 unexpected interruptions in 54 days on 16,384 GPUs"
)


def llama3_mtbf_s(gpus: int) -> float:
    """Mean time between job interruptions (s) for `gpus` GPUs under the Llama 3 failure rate."""
    if gpus <= 0:
        raise ValueError("gpus must be positive")
    return LLAMA3_DAYS * 86400 * LLAMA3_GPUS / (LLAMA3_INTERRUPTIONS * gpus)


def young_interval_s(ckpt_s: float, mtbf_s: float) -> float:
    return math.sqrt(2 * ckpt_s * mtbf_s)


def daly_interval_s(ckpt_s: float, mtbf_s: float) -> float:
    if ckpt_s >= 2 * mtbf_s:
        return mtbf_s
    r = ckpt_s / (2 * mtbf_s)
    return math.sqrt(2 * ckpt_s * mtbf_s) * (1 + math.sqrt(r) / 3 + ckpt_s / (18 * mtbf_s)) - ckpt_s


def waste_fraction(interval_s: float, ckpt_s: float, mtbf_s: float, restart_s: float = 0.0) -> float:
    """Share of wall time lost to checkpointing and to failures at this interval (first order)."""
    return min(1.0, ckpt_s / interval_s + (interval_s / 2 + restart_s) / mtbf_s)


# where checkpoint_s comes from: the saves' mean blocking time, or where a save no call timed left
# that unknown (checkpoints.untimed), their mean window, which bounds the stall from above
CKPT_MEASURED = "measured (mean blocking time of the saves)"
CKPT_UPPER_BOUND = "an upper bound: the saves' mean window (no call timed them: whether training waited is unknown)"


def at_scale(
    ckpt_s: float,
    mtbf_s: float | None = None,
    gpus: int | None = None,
    restart_s: float | None = None,
    ckpt_source: str = CKPT_MEASURED,
) -> dict:
    """The report's `scale` section; empty fields when no MTBF was given or derivable."""
    source = None
    if mtbf_s is None and gpus:
        mtbf_s = llama3_mtbf_s(gpus)
        source = LLAMA3_SOURCE + f", scaled to {gpus} GPUs"
    elif mtbf_s is not None:
        source = "given with --mtbf"
    if mtbf_s is None or not ckpt_s or ckpt_s <= 0:
        return {}
    r = restart_s or 0.0
    young = young_interval_s(ckpt_s, mtbf_s)
    daly = daly_interval_s(ckpt_s, mtbf_s)
    return {
        "mtbf_s": mtbf_s,
        "mtbf_source": source,
        "gpus": gpus,
        "checkpoint_s": ckpt_s,
        "checkpoint_source": ckpt_source,
        "restart_s": r,
        "restart_source": "measured (mean load window)" if restart_s else "not measured (taken as 0 s)",
        "young_interval_s": young,
        "daly_interval_s": daly,
        "overhead_at_daly": waste_fraction(daly, ckpt_s, mtbf_s, r),
        "goodput_at_daly": 1 - waste_fraction(daly, ckpt_s, mtbf_s, r),
    }
