"""The NVMe collectors against a fake `nvme` executable (real subprocesses) and a sysfs tree in
tmp_path; registration in sources; a hung/denied/broken nvme-cli is a note, never a crash."""

import os

import psutil
import pytest
from support.nvme_data import ocp_c0_bytes
from support.nvme_fakes import fake_nvme, sysfs_nvme_tree

import ckprof
from ckprof.collectors.nvme import NvmeSmartCollector, controllers_behind
from ckprof.collectors.nvme_cli import NvmeCli, NvmeCliError
from ckprof.collectors.nvme_hwmon import NvmeHwmonCollector
from ckprof.collectors.topology import Topology
from ckprof.record.clock import FakeClock
from ckprof.record.recorder import Recorder
from ckprof.record.sources import SourceOptions, build_sources
from ckprof.recording.writer import RecordingWriter


def smart(tmp_path, mode="good", overrides=None, timeout_s=5.0, ctrls=None):
    binary = fake_nvme(tmp_path, mode, overrides)
    return NvmeSmartCollector(ctrls or {"nvme0": ["nvme0n1"]}, cli=NvmeCli(binary, timeout_s))


def test_good_nvme_cli_gives_a_row_and_describes_the_controller(tmp_path):
    c = smart(tmp_path)
    p = c.probe()
    assert p.ok, p.detail
    d = c.describe()["controllers"]["nvme0"]
    assert d["model"] == "QEMU NVMe Ctrl" and d["wctemp_c"] == pytest.approx(69.85)
    assert d["power_states"][0]["max_power_w"] == 25.0
    assert d["ocp_c0"] is False and "Invalid Field" in d["ocp_c0_detail"]
    (row,) = c.sample(123)
    assert row["ctrl"] == "nvme0" and row["t_ns"] == 123
    assert row["temp_c"] == pytest.approx(49.85) and row["data_units_written"] == 66
    assert row["power_state"] == 0 and row["critical_warning"] == 0 and row["error"] is None
    assert row.get("ocp_thermal_throttling_status") is None


def test_nvme_found_on_path(tmp_path, monkeypatch):
    fake_nvme(tmp_path, "good")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    c = NvmeSmartCollector({"nvme0": ["nvme0n1"]})  # default binary name "nvme"
    assert c.probe().ok
    assert c.sample(1)[0]["temp_c"] == pytest.approx(49.85)


def test_ocp_log_read_when_the_drive_has_it(tmp_path):
    blob = tmp_path / "c0.bin"
    blob.write_bytes(ocp_c0_bytes(events=4, status=1, ps_changes=9))
    c = smart(tmp_path, overrides={"get-log": f'cat "{blob}"'})
    assert c.probe().ok
    assert c.describe()["controllers"]["nvme0"]["ocp_c0"] is True
    (row,) = c.sample(1)
    assert (
        row["ocp_thermal_throttling_status"],
        row["ocp_thermal_throttling_events"],
        row["ocp_power_state_changes"],
    ) == (1, 4, 9)


def no_leftover(marker: str) -> bool:
    me = os.getpid()
    for p in psutil.process_iter(["cmdline", "ppid"]):
        try:
            if p.pid != me and any(marker in a for a in (p.info["cmdline"] or [])):
                return False
        except psutil.Error:
            pass
    return True


def test_hanging_nvme_cli_times_out_and_leaves_no_process(tmp_path):
    c = smart(tmp_path, "hang", timeout_s=0.3)
    p = c.probe()
    assert not p.ok and "did not answer within 0.3 s" in p.detail
    with pytest.raises(NvmeCliError) as e:
        c.cli.run("smart-log", "/dev/nvme0", "-o", "json")
    assert e.value.kind == "timeout"
    # the script's child (sleep 60) was killed with its process group, not left holding the pipe
    assert no_leftover(str(tmp_path))


@pytest.mark.parametrize(
    "mode,kind,words",
    [
        ("denied", "permission", "Permission denied"),
        ("fails", "failed", "Internal Error"),
        ("garbage", "unparseable", "no 'key: value' lines"),
        ("truncated", "unparseable", "unreadable JSON"),
    ],
)
def test_broken_nvme_cli_probes_false_with_the_reason(tmp_path, mode, kind, words):
    c = smart(tmp_path, mode)
    p = c.probe()
    assert not p.ok and words in p.detail
    with pytest.raises(NvmeCliError) as e:
        c.read_smart("nvme0")
    assert e.value.kind == kind
    if kind == "permission":
        assert "root" in p.hint


def test_missing_nvme_cli(tmp_path):
    c = NvmeSmartCollector({"nvme0": ["nvme0n1"]}, cli=NvmeCli(str(tmp_path / "no-such-nvme")))
    p = c.probe()
    assert not p.ok and "not found" in p.detail and "apt-get install nvme-cli" in p.hint


def test_one_controller_failing_keeps_the_other(tmp_path):
    smart_json = os.path.join(os.path.dirname(__file__), "data", "nvme", "qemu", "smart-log.before.json")
    over = {
        "smart-log": f'case "$2" in */nvme1) echo "open: Permission denied" >&2; exit 1;; *) cat "{smart_json}";; esac'
    }
    c = NvmeSmartCollector(
        {"nvme0": ["nvme0n1"], "nvme1": ["nvme1n1"]}, cli=NvmeCli(fake_nvme(tmp_path, "good", over), 5)
    )
    p = c.probe()
    assert p.ok and "skipped nvme1" in p.detail
    assert [r["ctrl"] for r in c.sample(1)] == ["nvme0"]
    assert "Permission denied" in c.describe()["skipped"]["nvme1"]


def test_failing_mid_run_raises_so_the_recorder_notes_it_and_other_collectors_go_on(tmp_path):
    sys_root, proc_root, hw = sysfs_nvme_tree(tmp_path)
    nv = smart(tmp_path, "good")
    assert nv.probe().ok
    hwmon = NvmeHwmonCollector(["nvme0"], sys_root=sys_root)
    assert hwmon.probe().ok
    rec_dir = tmp_path / "rec"
    writer = RecordingWriter(str(rec_dir))
    clock = FakeClock()
    writer.create({"start": {"monotonic_ns": clock.now_ns(), "wall_ns": 0}})
    r = Recorder(writer, [nv, hwmon], clock=clock)
    r.sample_once(nv)
    r.sample_once(hwmon)
    fake_nvme(tmp_path, "hang")  # nvme-cli starts hanging mid-run
    nv.cli.timeout_s = 0.2
    clock.advance_s(1)
    r.sample_once(nv)
    r.sample_once(hwmon)
    writer.finish(collectors=r.collectors_meta())
    rec = ckprof.load(str(rec_dir))
    assert len(rec.samples("nvme")) == 1
    assert len(rec.samples("nvme_hwmon")) == 2
    ev = rec.events
    err = ev[ev["event"] == "collector_error"]
    assert list(err["collector"]) == ["nvme"] and "did not answer" in err["error"].iloc[0]
    assert rec.meta["collectors"]["nvme"]["errors"] == 1


def test_hwmon_reads_composite_sensors_and_alarm(tmp_path):
    sys_root, _, hw = sysfs_nvme_tree(tmp_path, temps=((1, "Composite", 49850), (2, "Sensor 1", 51250)), alarm=1)
    c = NvmeHwmonCollector(["nvme0"], sys_root=sys_root)
    assert c.probe().ok
    rows = c.sample(5)
    assert [(r["sensor"], r["label"], r["temp_c"]) for r in rows] == [
        ("temp1", "Composite", 49.85),
        ("temp2", "Sensor 1", 51.25),
    ]
    assert rows[0]["alarm"] is True and rows[1]["alarm"] is None
    d = c.describe()["sensors"]["nvme0"]["temp1"]
    assert (d["max_c"], d["crit_c"]) == (69.85, 99.85)
    with open(os.path.join(hw, "temp1_alarm"), "w") as f:
        f.write("0\n")
    assert c.sample(6)[0]["alarm"] is False


def test_hwmon_on_older_kernels_under_the_pci_device(tmp_path):
    sys_root, _, _ = sysfs_nvme_tree(tmp_path, hwmon_under_device=True)
    c = NvmeHwmonCollector(["nvme0"], sys_root=sys_root)
    assert c.probe().ok and c.sample(1)[0]["temp_c"] == 49.85


def test_hwmon_absent_is_a_reason(tmp_path):
    c = NvmeHwmonCollector(["nvme0"], sys_root=str(tmp_path))
    p = c.probe()
    assert not p.ok and "CONFIG_NVME_HWMON" in p.hint


def test_controllers_behind_disk_and_partition(tmp_path):
    sys_root, proc_root, _ = sysfs_nvme_tree(tmp_path, partition="nvme0n1p1")
    topo = Topology(sys_root=sys_root, proc_root=proc_root)
    assert controllers_behind(topo, ["nvme0n1"]) == {"nvme0": ["nvme0n1"]}
    assert controllers_behind(topo, ["nvme0n1p1"]) == {"nvme0": ["nvme0n1p1"]}
    assert controllers_behind(topo, ["loop0"]) == {}


def test_sources_register_nvme_and_note_a_broken_nvme_cli(tmp_path):
    sys_root, proc_root, _ = sysfs_nvme_tree(tmp_path)
    good = fake_nvme(tmp_path, "good")
    opts = SourceOptions(
        paths=[], devices=["nvme0n1"], sys_root=sys_root, proc_root=proc_root, nvme_bin=good, nvme_interval_s=0.5
    )
    s = build_sources(opts)
    names = [c.name for c in s.collectors]
    assert "nvme" in names and "nvme_hwmon" in names
    assert next(c for c in s.collectors if c.name == "nvme").period_s == 0.5
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    opts.nvme_bin = fake_nvme(bad_dir, "denied")
    s = build_sources(opts)
    names = [c.name for c in s.collectors]
    assert "nvme" not in names and "nvme_hwmon" in names and "block" in names
    assert any(n.startswith("nvme: skipped:") and "Permission denied" in n for n in s.notes)
    assert s.probes["nvme"]["ok"] is False


def test_power_state_unsupported_is_said_once_and_not_asked_again(tmp_path):
    calls = tmp_path / "calls"
    over = {"get-feature": f'echo x >> "{calls}"; echo "NVMe status: Invalid Field in Command(0x4002)" >&2; exit 2'}
    c = smart(tmp_path, overrides=over)
    assert c.probe().ok
    c.describe()
    first = c.sample(1)[0]
    assert first.get("power_state") is None and "Invalid Field" in first["error"]
    second = c.sample(2)[0]
    assert second["temp_c"] == pytest.approx(49.85) and second["error"] is None
    assert calls.read_text().count("x") == 1
    assert "Invalid Field" in c.describe()["controllers"]["nvme0"]["power_state_error"]


def test_controllers_behind_a_native_multipath_head(tmp_path):
    # nvme_core.multipath=Y on a multi-controller subsystem: the disk's parent is nvme-subsys0,
    # and the controllers are listed in /sys/class/nvme-subsystem/nvme-subsys0/.
    sys_root = tmp_path / "sys"
    subsys = sys_root / "devices" / "virtual" / "nvme-subsystem" / "nvme-subsys0"
    (subsys / "nvme0n1").mkdir(parents=True)
    for c in ("nvme1", "nvme0"):
        (subsys / c).mkdir()
    (sys_root / "class" / "block").mkdir(parents=True)
    (sys_root / "class" / "nvme-subsystem").mkdir(parents=True)
    os.symlink(subsys / "nvme0n1", sys_root / "class" / "block" / "nvme0n1")
    os.symlink(subsys, subsys / "nvme0n1" / "device")
    os.symlink(subsys, sys_root / "class" / "nvme-subsystem" / "nvme-subsys0")
    topo = Topology(sys_root=str(sys_root), proc_root=str(tmp_path))
    assert controllers_behind(topo, ["nvme0n1"]) == {"nvme0": ["nvme0n1"], "nvme1": ["nvme0n1"]}


def test_power_state_and_critical_warning_changes_are_events(tmp_path):
    q = os.path.join(os.path.dirname(__file__), "data", "nvme", "qemu")
    state = tmp_path / "state"
    state.write_text("before")
    over = {
        "smart-log": f'if [ "$(cat {state})" = before ]; then cat "{q}/smart-log.before.json"; '
        f'else cat "{q}/smart-log.after-overtemp.json"; fi',
        "get-feature": f'if [ "$(cat {state})" = before ]; then echo "Current value:00000000"; '
        f'else echo "Current value:00000002"; fi',
    }
    c = smart(tmp_path, overrides=over)
    assert c.probe().ok
    c.sample(1)
    assert c.events() == []  # the first poll is the baseline
    state.write_text("after")
    c.sample(2)
    assert c.events() == [
        {"event": "nvme_power_state", "ctrl": "nvme0", "from": 0, "to": 2},
        {"event": "nvme_critical_warning", "ctrl": "nvme0", "from": 0, "to": 2},
    ]
    c.sample(3)
    assert c.events() == []


def test_controllers_behind_a_dm_device(tmp_path):
    sys_root, proc_root, _ = sysfs_nvme_tree(tmp_path)
    dm = tmp_path / "sys" / "devices" / "virtual" / "block" / "dm-0"
    (dm / "slaves").mkdir(parents=True)
    (dm / "dm").mkdir()
    (dm / "dm" / "name").write_text("ckpt\n")
    os.symlink(os.path.join(sys_root, "class", "block", "nvme0n1"), dm / "slaves" / "nvme0n1")
    os.symlink(dm, os.path.join(sys_root, "class", "block", "dm-0"))
    topo = Topology(sys_root=sys_root, proc_root=proc_root)
    assert controllers_behind(topo, ["dm-0"]) == {"nvme0": ["dm-0"]}
