"""The recorder with a replaced clock and /proc, /sys roots in tmp_path: no test sleeps."""

import pyarrow as pa
from support.procfs import fake_block_tree

import ckprof
from ckprof.collectors.base import Collector
from ckprof.collectors.blockdev import BlockCollector
from ckprof.record.clock import FakeClock
from ckprof.record.recorder import Recorder
from ckprof.recording.schema import T_NS, col
from ckprof.recording.writer import RecordingWriter


def set_counters(root, dev, write_sectors, write_ios, queue_ms, io_ms, inflight_w):
    (root / "proc" / "diskstats").write_text(
        f"   8       0 {dev} 0 0 0 0 {write_ios} 0 {write_sectors} {queue_ms} {inflight_w} {io_ms} {queue_ms} 0 0 0 0 0 0\n"
    )
    (root / "sys" / "class" / "block" / dev / "inflight").write_text(f"0 {inflight_w}\n")


def test_block_rates_from_fake_roots(tmp_path):
    root = fake_block_tree(tmp_path)
    clock = FakeClock()
    w = RecordingWriter(str(tmp_path / "rec"), warn=lambda m: None)
    w.create({"start": {"wall_ns": 0, "monotonic_ns": clock.now_ns(), "uncertainty_ns": 0}})
    set_counters(root, "sda", 0, 0, 0, 0, 0)
    block = BlockCollector(["sda"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    assert block.probe().ok
    assert block.describe()["devices"]["sda"]["queue"]["scheduler"] == "none"
    rec = Recorder(w, [block], clock=clock)
    # 0.5 s: 1 MiB written in 8 I/Os, 8 in flight on average (4000 ms in queue over 500 ms)
    rec.sample_once(block)
    clock.advance_s(0.5)
    set_counters(root, "sda", 2048, 8, 4000, 500, 8)
    rec.sample_once(block)
    w.finish()
    df = ckprof.load(w.path).block()
    assert len(df) == 1
    r = df.iloc[0]
    assert r["write_bytes"] == 1 << 20
    assert r["write_bytes_per_s"] == 2 << 20
    assert r["write_iops"] == 16
    assert r["aqu_sz"] == 8
    assert r["util_pct"] == 100
    assert r["w_await_ms"] == 500
    assert r["inflight_write"] == 8


def test_frozen_counters_are_detected(tmp_path):
    root = fake_block_tree(tmp_path, iostats=0)
    set_counters(root, "sda", 0, 0, 0, 0, 0)
    block = BlockCollector(["sda"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    p = block.probe()
    assert p.ok and "frozen" in p.detail and p.hint


def test_missing_device_probe_says_how_to_find_one(tmp_path):
    root = fake_block_tree(tmp_path)
    set_counters(root, "sda", 0, 0, 0, 0, 0)
    p = BlockCollector(["nvme9n1"], proc_root=str(root / "proc"), sys_root=str(root / "sys")).probe()
    assert not p.ok and "nvme9n1" in p.detail and "doctor" in p.hint


def test_sys_block_stat_fallback(tmp_path):
    root = fake_block_tree(tmp_path)
    (root / "sys" / "class" / "block" / "sda" / "stat").write_text("1 0 8 0 2 0 16 0 0 0 0\n")
    block = BlockCollector(["sda"], proc_root=str(root / "no-proc"), sys_root=str(root / "sys"))
    assert block.probe().ok
    assert block.sample(5)[0]["write_sectors"] == 16


class Slow(Collector):
    """Each sample takes 2.5 periods of the fake clock."""

    name = "slow"
    schema = pa.schema([T_NS, col("n", pa.int64(), "1")])
    period_s = 0.1

    def __init__(self, clock, stop_after, recorder_box):
        self.clock, self.n, self.stop_after, self.box = clock, 0, stop_after, recorder_box

    def sample(self, t_ns):
        self.n += 1
        self.clock.advance_s(0.25)
        if self.n >= self.stop_after:
            self.box[0]._stop.set()
        return [{"t_ns": t_ns, "n": self.n}]


class Broken(Collector):
    name = "broken"
    period_s = 0.1

    def sample(self, t_ns):
        raise RuntimeError("sensor fell off")


def test_overrun_ticks_are_skipped_not_bunched(tmp_path):
    clock = FakeClock()
    w = RecordingWriter(str(tmp_path / "rec"), warn=lambda m: None)
    w.create({"start": {"wall_ns": 0, "monotonic_ns": clock.now_ns(), "uncertainty_ns": 0}})
    box = [None]
    slow = Slow(clock, 5, box)
    rec = Recorder(w, [slow], clock=clock)
    box[0] = rec
    rec._run(slow)
    st = rec.stats["slow"]
    assert st.samples == 5
    assert st.skipped_ticks == 10  # each 0.25 s sample overruns 2 of the 0.1 s ticks
    w.flush()
    t = ckprof.load(w.path).samples("slow")["t_ns"].diff().dropna()
    assert (t == 300_000_000).all()  # resumes on the grid: 0.3 s apart, never bunched


def test_broken_collector_is_noted_once_and_recording_goes_on(tmp_path):
    clock = FakeClock()
    w = RecordingWriter(str(tmp_path / "rec"), warn=lambda m: None)
    w.create({"start": {"wall_ns": 0, "monotonic_ns": clock.now_ns(), "uncertainty_ns": 0}})
    b = Broken()
    rec = Recorder(w, [b], clock=clock)
    for _ in range(3):
        rec.sample_once(b)
    assert rec.stats["broken"].errors == 3
    ev = ckprof.load(w.path).events
    assert list(ev["event"]) == ["collector_error"]
    assert "sensor fell off" in ev["error"][0]
