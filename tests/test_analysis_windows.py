"""Windows (markers, inferred bursts), durability, throttling, GPU idle time, run cost at scale."""

import math

import numpy as np
import pytest
from recbuild import GPU_SCHEMA, NVME_SCHEMA, RecordingBuilder

import ckprof
from ckprof.analysis import analyze, scale

MiB = 2**20


def bursts(spans, rate):
    return lambda t: sum(np.where((t > a) & (t <= b), rate, 0.0) for a, b in spans)


def test_inferred_windows_count_and_bytes(tmp_path):
    spans = [(2, 4), (7, 8), (11, 14), (17, 17.5)]
    rb = RecordingBuilder(tmp_path / "rec", duration_s=20)
    # background writes of 1 MiB/s, four bursts of 80 MiB/s; a 0.4 s dip inside the third
    rb.block("sda", lambda t: 1 * MiB + bursts(spans, 80 * MiB)(t) - np.where((t > 12) & (t <= 12.4), 80 * MiB, 0))
    an = analyze(ckprof.load(rb.finish()), windows_from="inferred")
    cps = an.report["checkpoints"]
    assert [c["source"] for c in cps] == ["inferred"] * 4
    for c, (a, b) in zip(cps, spans):
        assert c["start_s"] == pytest.approx(a, abs=0.11)
        assert c["app_end_s"] == pytest.approx(b, abs=0.11)
        dip = 0.4 * 80 * MiB if a == 11 else 0
        assert c["bytes_device"] == pytest.approx(81 * MiB * (b - a) - dip, rel=0.06)
    assert any("inferred" in n for n in an.report["notes"])


def test_markers_win_over_inference_in_auto(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.block("sda", bursts([(2, 3), (6, 7)], 50 * MiB))
    rb.checkpoint(2, 3, 50 * MiB, step=10, path="/ckpt/10")
    an = analyze(ckprof.load(rb.finish()))
    (cp,) = an.report["checkpoints"]
    assert (cp["source"], cp["step"], cp["path"]) == ("api", 10, "/ckpt/10")
    assert cp["bytes_device"] == pytest.approx(50 * MiB, rel=0.01)
    assert cp["device_to_app_ratio"] == pytest.approx(1.0, rel=0.01)


def test_checkpoint_left_in_page_cache_is_flagged_not_durable(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.block("sda", lambda t: 0 * t)  # nothing reaches the device
    rb.host(lambda t: np.where(t > 2.1, 64 * MiB, 2 * MiB))  # 64 MiB dirty from the save on
    rb.checkpoint(2, 2.5, 64 * MiB, step=1)
    an = analyze(ckprof.load(rb.finish()))
    (cp,) = an.report["checkpoints"]
    assert cp["durable_at_return"] is False
    assert cp["durable"] is False and cp["durable_end_s"] is None
    assert cp["pending_bytes_at_return"] == pytest.approx(62 * MiB)
    assert an.report["run"]["not_durable_at_return"] == 1
    assert any("NOT DURABLE" in n for n in an.report["notes"])


def test_writeback_after_return_sets_the_durable_end(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    # the save returns at 3 s with 64 MiB dirty; writeback drains them 5 s → 6 s
    rb.host(lambda t: np.where((t > 2) & (t <= 5.5), 64 * MiB, 0))
    rb.block("sda", bursts([(5, 6)], 64 * MiB))
    rb.checkpoint(2, 3, 64 * MiB, step=1)
    (cp,) = analyze(ckprof.load(rb.finish())).report["checkpoints"]
    assert cp["durable_at_return"] is False
    assert cp["durable_end_s"] == pytest.approx(6.0, abs=0.11)
    assert cp["bytes_device"] == pytest.approx(64 * MiB, rel=0.01)


def test_fsynced_checkpoint_is_durable_at_return(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.host(lambda t: 0 * t)
    rb.block("sda", bursts([(2, 3)], 64 * MiB))
    rb.checkpoint(2, 3, 64 * MiB, step=1)
    (cp,) = analyze(ckprof.load(rb.finish())).report["checkpoints"]
    assert cp["durable_at_return"] is True
    assert cp["durable_end_s"] == pytest.approx(3.0, abs=0.11)


def _thermal(tmp_path, throttle: bool):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=30)
    spans = [(3, 5), (10, 12), (17, 19), (24, 26)]
    rb.block(
        "nvme0n1",
        lambda t: bursts(spans, 1000 * MiB)(t) - np.where(throttle & (t > 24), 500 * MiB, 0) * (bursts(spans, 1)(t)),
        queue=lambda t: bursts(spans, 32.0)(t),
    )
    temp = lambda t: 40 + 1.5 * t  # noqa: E731  heats up through the run, 76 °C at 24 s
    rb.series(
        "nvme",
        NVME_SCHEMA,
        device="nvme0",
        temp_c=temp,
        critical_warning=lambda t: np.where(throttle & (t > 24.5), 0x02, 0),
        thm_temp1_trans_count=lambda t: np.where(throttle & (t > 24), 1, 0),
        thm_temp1_total_time=lambda t: np.where(throttle, np.clip(t - 24, 0, None), 0).astype(int),
        power_w=5,
    )
    for i, (a, b) in enumerate(spans):
        rb.checkpoint(a, b, 2000 * MiB, step=i)
    return analyze(ckprof.load(rb.finish())).report


def test_throttle_onset_events_and_hot_vs_cool(tmp_path):
    rep = _thermal(tmp_path, throttle=True)
    t = rep["throttling"]
    assert t["seen"] is True
    assert t["onsets"][0]["t_s"] == pytest.approx(24.1, abs=0.11)
    assert t["onsets"][0]["temp_c"] == pytest.approx(40 + 1.5 * 24.1, abs=0.2)
    last = rep["checkpoints"][-1]
    assert last["throttle_events"] == 2  # the transition counter once, the critical-warning bit once
    assert last["throttle_s"] == pytest.approx(2.0, abs=0.1)
    assert all(c["throttle_events"] == 0 for c in rep["checkpoints"][:-1])
    hc = t["hot_vs_cool"]
    assert hc["hottest_id"] == last["id"]
    assert hc["bandwidth_ratio_hot_to_cool"] == pytest.approx(0.5, rel=0.05)  # half the bandwidth once throttled
    assert "began" in t["statement"]


def test_no_throttle_is_said_plainly(tmp_path):
    t = _thermal(tmp_path, throttle=False)["throttling"]
    assert t["seen"] is False and t["onsets"] == []
    assert t["statement"].startswith("No thermal throttling seen")


def test_throttle_not_checkable_without_signals(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=5)
    rb.block("sda", bursts([(1, 2)], 10 * MiB))
    t = analyze(ckprof.load(rb.finish())).report["throttling"]
    assert t["statement"].startswith("Throttling could not be checked")


def test_gpu_idle_seconds_and_thermal_reason(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.block("sda", bursts([(4, 7)], 10 * MiB))
    for g in ("0", "1"):
        idle_from = 4 if g == "0" else 5  # GPU 0 idles for the whole 3 s save, GPU 1 for 2 s
        rb.series(
            "gpu",
            GPU_SCHEMA,
            gpu=g,
            energy_mj=lambda t: t * 1e5,
            power_w=100,
            temp_c=60,
            util_gpu_pct=lambda t, a=idle_from: np.where((t > a) & (t <= 7), 0, 95),
            clocks_event_reasons=lambda t, g=g: np.where((g == "1") & (t > 6) & (t <= 6.5), 0x40, 0x1),
        )
    rb.checkpoint(4, 7, 30 * MiB)
    rep = analyze(ckprof.load(rb.finish())).report
    (cp,) = rep["checkpoints"]
    assert cp["gpu_idle_s_by_gpu"]["gpu0"] == pytest.approx(3.0, abs=0.01)
    assert cp["gpu_idle_s_by_gpu"]["gpu1"] == pytest.approx(2.0, abs=0.01)
    assert cp["gpu_idle_s"] == pytest.approx(2.5, abs=0.01)
    assert cp["throttle_events"] == 1  # GPU 1's HW thermal slowdown (0x40); 0x1 (GPU idle) is not thermal
    assert cp["throttle_s"] == pytest.approx(0.5, abs=0.01)


def test_blocked_share_and_goodput(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=20)
    rb.block("sda", bursts([(2, 4), (10, 13)], 10 * MiB))
    rb.checkpoint(2, 4, 20 * MiB)
    rb.checkpoint(10, 13, 30 * MiB)
    rb.checkpoint(12, 13, 30 * MiB)  # a second rank overlapping: the union counts once
    rb.checkpoint(15, 16, 10 * MiB, kind="load")
    rep = analyze(ckprof.load(rb.finish()), mtbf_s=3600).report
    run = rep["run"]
    assert any("2 checkpoint windows overlap" in n for n in rep["notes"])
    assert run["blocked_s"] == pytest.approx(5.0)
    assert run["blocked_share"] == pytest.approx(0.25)
    assert run["goodput_estimate"] == pytest.approx(0.75)
    assert run["loads"] == 1 and run["mean_restart_s"] == pytest.approx(1.0)


def test_young_daly_and_llama3_failure_model():
    # Llama 3: 419 interruptions / 54 days on 16,384 GPUs → one every 3.09 h at that size
    assert scale.llama3_mtbf_s(16384) / 3600 == pytest.approx(54 * 24 / 419)
    assert scale.llama3_mtbf_s(1024) == pytest.approx(16 * scale.llama3_mtbf_s(16384))
    assert scale.young_interval_s(60, 3600 * 3) == pytest.approx(math.sqrt(2 * 60 * 10800))
    d = scale.daly_interval_s(60, 10800)
    assert d == pytest.approx(math.sqrt(2 * 60 * 10800) * (1 + math.sqrt(60 / 21600) / 3 + 60 / (18 * 10800)) - 60)
    assert scale.daly_interval_s(100, 40) == 40  # δ ≥ 2M: checkpoint every MTBF
    sc = scale.at_scale(60, gpus=16384, restart_s=120)
    assert sc["overhead_at_daly"] == pytest.approx(
        60 / sc["daly_interval_s"] + (sc["daly_interval_s"] / 2 + 120) / sc["mtbf_s"]
    )
    assert sc["goodput_at_daly"] == pytest.approx(1 - sc["overhead_at_daly"])
    assert "419" in sc["mtbf_source"]
    assert scale.at_scale(60) == {}
