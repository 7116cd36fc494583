"""The report on the QEMU tier's recording (one boot, shared with test_qemu_nvme.py): the
thermal warning raised in the guest is a throttle event, with its onset and temperature."""

import pytest

import ckprof
from ckprof.analysis import analyze
from ckprof.report import plots, render

# the first test of the session boots the guest (its fixture): up to 420 s of it under TCG on a
# loaded 2-core CI machine, inside this test's own limit
pytestmark = [pytest.mark.qemu, pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def an(qemu_recording):
    return analyze(ckprof.load(qemu_recording["path"]))


def test_thermal_warning_is_a_throttle_event_in_the_report(an, qemu_recording):
    rec = ckprof.load(qemu_recording["path"])
    ev = rec.events
    raised = ev[(ev["event"] == "mark") & (ev["text"] == "thermal_warning_raised")].iloc[0]
    t = an.report["throttling"]
    assert t["seen"] is True, t
    first = t["onsets"][0]
    assert "temperature" in first["what"] or "alarm" in first["what"], first
    raised_s = (int(raised["after_ns"]) - rec.start_ns) / 1e9
    assert -1.0 <= first["t_s"] - raised_s <= 2.0, (first, raised_s)
    assert first["temp_c"] == pytest.approx(49.85, abs=0.01)  # QEMU's constant 323 K
    assert t["statement"].startswith("Thermal throttling began")


def test_report_renders_the_qemu_recording(an):
    rep = an.report
    assert rep["recording"]["devices"] == ["nvme0n1"]
    assert rep["run"]["peak_temp_c"] is None or rep["run"]["peak_temp_c"] == pytest.approx(49.85, abs=0.01)
    html = render.to_html(rep, plots.all_plots(an))
    assert "Thermal throttling began" in html and "data:image/png;base64," in html


def test_ssd_efficiency_per_checkpoint_is_labelled_estimated(an):
    """GB/s per W and J/GiB of the emulated drive for each save: its bytes on nvme0n1 over its
    energy from QEMU's power-state table (25 W max power, no idle/active figures: estimated)."""
    saves = [c for c in an.report["checkpoints"] if c["kind"] == "save" and c["ok"] is not False]
    assert saves
    for c in saves:
        (ctrl, eff), *_ = c["ssd_efficiency"].items()
        assert eff["devices"] == ["nvme0n1"] and eff["provenance"] == "estimated"
        assert eff["mean_w"] == pytest.approx(25.0, rel=1e-6)
        assert eff["bytes"] == pytest.approx(c["devices"]["nvme0n1"]["write_bytes"])
        if eff["bytes"]:
            assert eff["gb_per_s_per_w"] == pytest.approx(eff["bytes"] / eff["energy_j"] / 1e9)
            assert eff["j_per_gib"] == pytest.approx(eff["energy_j"] / (eff["bytes"] / 2**30))
    assert "### SSD efficiency" in render.to_markdown(an.report)
