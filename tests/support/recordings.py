"""Built recordings more than one test module reports on (ckprof.testing builds them)."""

import numpy as np

from ckprof.testing import GPU_SCHEMA, NVME_SCHEMA, RecordingBuilder, bursts

MiB = 2**20


def three_saves(path):
    """30 s, three saves (4-7, 12-15, 20-23 s) on two NVMe devices, a GPU idle while they write, the
    SSD warming; a command line with HTML in it (it must stay text in every output)."""
    rb = RecordingBuilder(path, duration_s=30, command=["python", "train.py", "--out", "/ckpt/<b>&'\""])
    spans = [(4, 7), (12, 15), (20, 23)]
    act = bursts(spans, 1.0)
    rb.block("nvme0n1", lambda t: act(t) * 800 * MiB * (1 - 0.01 * t), queue=lambda t: act(t) * 16)
    rb.block("nvme1n1", lambda t: act(t) * 780 * MiB, queue=lambda t: act(t) * 15)
    rb.host(lambda t: act(t) * 100 * MiB)
    rb.series(
        "gpu",
        GPU_SCHEMA,
        gpu="0",
        energy_mj=lambda t: t * 3e5 + np.cumsum(act(t)) * 1e4,
        power_w=300,
        util_gpu_pct=lambda t: np.where(act(t) > 0, 2, 97),
        temp_c=lambda t: 55 + 0.3 * t,
        clocks_event_reasons=0,
    )
    rb.series(
        "nvme",
        NVME_SCHEMA,
        device="nvme0",
        temp_c=lambda t: 45 + t,
        critical_warning=0,
        thm_temp1_trans_count=lambda t: (t > 21).astype(int),
        thm_temp1_total_time=lambda t: np.clip(t - 21, 0, None),
        power_w=lambda t: 4 + 5 * act(t),
    )
    for i, (a, b) in enumerate(spans):
        rb.checkpoint(a, b, int(2 * 780 * MiB * (b - a)), step=100 * (i + 1), path=f"/ckpt/step{i}<i>")
    return rb.finish()
