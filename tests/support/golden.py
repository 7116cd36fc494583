"""The golden recordings of the host report (tests/test_report_json_stable.py compares their
reports with tests/data/report_golden/, tests/test_report_notes.py their notes' codes): each case
builds a recording with ckprof.testing and says the `ckprof report` options it is reported with."""

from __future__ import annotations

import numpy as np

from ckprof.testing import GPU_SCHEMA, NVME_SCHEMA, POWER_SCHEMA, RAPL_SCHEMA, START_NS, RecordingBuilder, bursts

MiB = 2**20


def gpu_and_nvme(rb, spans):
    """A GPU at 200 W, idle while `spans` write, and one NVMe drive warming 1 °C a second at 6 W."""
    rb.series(
        "gpu",
        GPU_SCHEMA,
        gpu="0",
        energy_mj=lambda t: t * 2e5,
        power_w=200,
        util_gpu_pct=lambda t: np.where(bursts(spans, 1)(t) > 0, 0, 90),
        temp_c=lambda t: 50 + t,
        clocks_event_reasons=0,
    )
    rb.series(
        "nvme",
        NVME_SCHEMA,
        device="nvme0",
        temp_c=lambda t: 40 + t,
        critical_warning=0,
        thm_temp1_trans_count=0,
        thm_temp1_total_time=0,
        power_w=6,
    )


def _event(rb, event, t_s, **kw):
    rb.events.append({"t_ns": START_NS + int(t_s * 1e9), "event": event, "source": "recorder", **kw})


# -- the cases: each a builder and the `ckprof report` options ---------------------------------------


def case_markers(path):
    """Two marked saves with GPU, NVMe SMART and block samples (energy, temperature, GPU idle), a
    load, and a workload's own seconds per save."""
    spans = [(3, 5), (8, 10)]
    rb = RecordingBuilder(
        path,
        duration_s=12,
        meta={"workload": {"results": {"checkpoints": [{"step": 0, "seconds": 1.5}, {"step": 1, "seconds": 1.75}]}}},
    )
    rb.block("nvme0n1", bursts(spans, 100 * MiB), queue=lambda t: bursts(spans, 8.0)(t))
    rb.host()
    gpu_and_nvme(rb, spans)
    for i, (a, b) in enumerate(spans):
        rb.checkpoint(a, b, int(100 * MiB * (b - a)), step=i, path=f"/ckpt/{i}", source="workload")
    rb.checkpoint(10.5, 11.5, 200 * MiB, kind="load", step=1, path="/ckpt/1")
    return rb, ["--gpus", "16384"]


def case_inferred(path):
    """No markers: windows inferred from write bursts; RAPL energy."""
    rb = RecordingBuilder(path, duration_s=20)
    rb.block("sda", bursts([(2, 4), (9, 10), (15, 17.5)], 80 * MiB))
    rb.host()
    rb.series("rapl", RAPL_SCHEMA, domain="package-0", energy_uj=lambda t: (t * 40e6).astype(np.int64))
    return rb, ["--mtbf", "3h"]


def case_energy_range(path):
    """A node power meter updating every 2 s: a 0.6 s save's energy is given as a range; a
    failed save; RAPL and GPU beside it."""
    rb = RecordingBuilder(path, duration_s=12)
    rb.block("sda", bursts([(2, 2.6), (6, 8)], 64 * MiB))
    rb.host()
    rb.rows(
        "node", [{"t_s": float(s), "device": "psu", "power_w": 300.0 + 10 * s} for s in range(0, 13, 2)], POWER_SCHEMA
    )
    rb.series("rapl", RAPL_SCHEMA, domain="package-0", energy_uj=lambda t: (t * 30e6).astype(np.int64))
    rb.checkpoint(2, 2.6, 38 * MiB, step=1, path="/ck/1")
    rb.checkpoint(6, 8, 128 * MiB, step=2, path="/ck/2")
    start = {"id": "synth:fail", "kind": "save", "source": "api", "pid": 1, "rank": 0, "step": 3}
    rb.event("checkpoint_start", 9, **start)
    rb.event("checkpoint_end", 9.5, **start, ok=False, error="OSError: No space left on device")
    return rb, []


def case_durability(path):
    """The file tracker's verdicts: durable, dirty at return and at the end, deleted before durable,
    an object-store save whose upload completed and one with no such event, an NFS file."""
    rb = RecordingBuilder(path, duration_s=14)
    rb.host(lambda t: np.where((t > 2) & (t <= 5.5), 64 * MiB, 0))
    rb.block("sda", bursts([(2, 3), (5, 6)], 64 * MiB))
    _event(rb, "file_tracker", 0, ok=True, reason=None)

    def save(a, b, p, **kw):
        cid = f"synth:{len(rb.events)}"
        rb.checkpoint(a, b, 64 * MiB, step=int(a), path=p, **kw)
        return cid

    def file(event, t_s, cid, p, first_pending=0, **kw):
        _event(rb, event, t_s, id=cid, path=p, bytes=64 * MiB, first_poll_pending_bytes=first_pending,
               first_poll_ns=START_NS + int(t_s * 1e9), **kw)  # fmt: skip

    a = save(2, 3, "/ck/1.bin", pending_bytes_at_return=64 * MiB, files_at_return=1)
    file("file_durable", 5.5, a, "/ck/1.bin", first_pending=64 * MiB, fs_magic=0xEF53)
    b = save(4, 4.5, "/ck/2.bin", pending_bytes_at_return=64 * MiB, files_at_return=1)
    file("file_pending_at_end", 14, b, "/ck/2.bin", first_pending=64 * MiB, pending_bytes=64 * MiB, fs_magic=0xEF53)
    c = save(6, 6.5, "/ck/3.bin", pending_bytes_at_return=64 * MiB, files_at_return=1)
    file("file_deleted_before_durable", 7, c, "/ck/3.bin", first_pending=64 * MiB, pending_bytes=60 * MiB)
    d = save(8, 8.5, "/nfs/4.bin", pending_bytes_at_return=0, files_at_return=1)
    file("file_durable", 8.6, d, "/nfs/4.bin", fs_magic=0x6969)
    save(10, 11, "s3://bucket/ck/5.pt", uploaded=True)
    save(12, 12.5, "s3://bucket/ck/6.pt")
    return rb, []


def case_device_gone(path):
    """A recorded device removed mid-recording (a uevent): the save after it has unknown device
    figures with the reason; two ranks' saves overlap; the recording was truncated."""
    rb = RecordingBuilder(path, duration_s=12, meta={"status": "truncated", "truncated": "disk full"})
    rb.block("sdb", bursts([(2, 3), (7, 8)], 50 * MiB))
    rb.block("sdc", bursts([(2, 3.5)], 20 * MiB))
    rb.host()
    rb.event("device_remove", 5.0, source="udev", device="sdb", uevent={"ACTION": "remove", "DEVNAME": "sdb"})
    rb.checkpoint(2, 3, 50 * MiB, step=1, path="/ck/1", rank=0)
    rb.checkpoint(2.2, 3.5, 20 * MiB, step=1, path="/ck/1b", rank=1)
    rb.checkpoint(7, 8, 50 * MiB, step=2, path="/ck/2", rank=0)
    rb.checkpoint(10, None, 10 * MiB, step=3, path="/ck/3")  # never ended
    return rb, []


def case_file_saves(path):
    """Saves seen only as files written (fanotify `file_activity`), a directory per step, no markers."""
    root = "/ck"
    rb = RecordingBuilder(path, duration_s=20)
    rb.block("sda", bursts([(1, 2.6), (5, 6.6)], 8 * MiB))
    rb.host()
    rb.event("file_activity_source", 0.0, file_activity_source="fanotify", paths=[root], source="recorder")
    for pid, comm in ((100, "writer"), (101, "dd")):
        rb.event("file_activity_process", 0.5, source="fanotify", pid=pid, ppid=1, comm=comm, cmdline=[comm])

    def f(p, a, b, size, writers=(100,), ops=("create", "modify", "close_write"), **kw):
        entry = {"path": p, "start_ns": rb.ns(a), "end_ns": rb.ns(b), "ops": list(ops), "writers": list(writers)}
        rb.event("file_activity", b, source="fanotify", files=[{**entry, "size_bytes": size, "kernel_events": 3, **kw}])

    for k, t0 in enumerate((1.0, 5.0)):
        f(f"{root}/step_{k}", t0, t0, None, dir=True, ops=["create"])
        f(f"{root}/step_{k}/a.bin", t0 + 0.1, t0 + 1.0, 3 * MiB, writers=[100])
        f(f"{root}/step_{k}/b.bin", t0 + 0.2, t0 + 1.5, 5 * MiB, writers=[101])
    f(f"{root}/latest.txt", 12.0, 12.1, 16, writers=[100])
    return rb, []


def case_ranks_throttle(path):
    """Four ranks' DCP calls grouped into one save (parts, the slowest part), saved again later;
    an NVMe SSD heating up and throttling in the last save (onsets, hot vs cool)."""
    rb = RecordingBuilder(path, duration_s=14)
    spans = [(1, 2.3), (6, 7), (11, 12.5)]
    rb.block(
        "nvme0n1",
        lambda t: bursts(spans, 400 * MiB)(t) - np.where(t > 11, 200 * MiB, 0) * bursts(spans, 1)(t),
        queue=lambda t: bursts(spans, 16.0)(t),
    )
    rb.series(
        "nvme",
        NVME_SCHEMA,
        device="nvme0",
        temp_c=lambda t: 40 + 3 * t,
        critical_warning=lambda t: np.where(t > 11.5, 0x02, 0),
        thm_temp1_trans_count=lambda t: np.where(t > 11, 1, 0),
        thm_temp1_total_time=lambda t: np.clip(t - 11, 0, None).astype(int),
        power_w=5,
    )
    dcp = "torch.distributed.checkpoint.save"
    for step, (a, b) in enumerate(spans):
        for r in range(4 if step == 0 else 1):
            mark = {"id": f"s{step}r{r}", "kind": "save", "source": "patch", "pid": 100 + r, "rank": r}
            mark |= {"path": "/ck/dcp", "name": dcp, "bytes": int(400 * MiB * (b - a))}
            rb.event("checkpoint_start", a + 0.01 * r, **mark)
            rb.event("checkpoint_end", b + 0.1 * r if step == 0 else b, **mark, ok=True)
    return rb, []


def case_empty(path):
    """Nothing but the host collector: no block samples, no energy, no temperature."""
    rb = RecordingBuilder(path, duration_s=3)
    rb.host()
    return rb, []


CASES = {
    name.removeprefix("case_"): fn
    for name, fn in sorted(globals().items())
    if name.startswith("case_") and callable(fn)
}
