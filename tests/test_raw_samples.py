"""The recorder's bulk path (read raw now, convert at flush) gives the rows the per-sample path
(`sample()`: parse, one dict a row) gives, for every layout, device churn and unreadable file."""

import pyarrow.parquet as pq
import pytest
from support.procfs import LINE_4, LINE_11, LINE_15, LINE_17, LINE_20, LINE_24, fake_block_tree

from ckprof.collectors.blockdev import SCHEMA as BLOCK_SCHEMA
from ckprof.collectors.blockdev import BlockCollector
from ckprof.collectors.diskstats import parse_diskstats
from ckprof.collectors.host import HostCollector
from ckprof.record.clock import FakeClock
from ckprof.record.recorder import Recorder
from ckprof.recording.writer import RecordingWriter


def _tree(tmp_path, devs=("sda", "sdb")):
    root = tmp_path / "root"
    for d in devs:
        fake_block_tree(root, d)
    return root


def _both(block: BlockCollector, t_ns: int = 7) -> tuple[list[dict], list[dict]]:
    return block.sample(t_ns), block.table([t_ns], [block.read_raw()]).to_pylist()


def _diskstats(root, text):
    (root / "proc" / "diskstats").write_text(text)


@pytest.mark.parametrize("line", [LINE_17, LINE_20, LINE_15, LINE_11, LINE_24, LINE_4.replace("sda1", "sda")])
def test_every_layout(tmp_path, line):
    root = _tree(tmp_path)
    _diskstats(root, line + "\n" + line.replace("sda", "sdb").replace(" 101 ", " 999 ") + "\n")
    (root / "sys" / "class" / "block" / "sda" / "inflight").write_text("       3        4\n")
    (root / "sys" / "class" / "block" / "sdb" / "inflight").write_text("garbage\n")
    block = BlockCollector(["sda", "sdb"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    old, new = _both(block)
    assert old == new and len(new) == 2
    assert new[0]["inflight_read"] == 3 and new[1]["inflight_write"] is None


def test_devices_coming_and_going_in_one_batch(tmp_path):
    """Lines move, a device disappears and comes back, an older layout appears: one take()."""
    root = _tree(tmp_path, ("sda", "sdb", "sdc"))
    for d in ("sda", "sdb"):
        (root / "sys" / "class" / "block" / d / "inflight").write_text("0 1\n")
    _diskstats(root, "")
    block = BlockCollector(["sda", "sdb", "sdc"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    texts = [
        LINE_17 + "\n" + LINE_17.replace("sda", "sdb") + "\n",
        "   7 0 loop0" + LINE_17.split("sda")[1] + "\n" + LINE_17 + "\n" + LINE_17.replace("sda", "sdb") + "\n",
        LINE_17.replace("sda", "sdb") + "\n",  # sda gone
        LINE_17.replace("sda", "sdc") + "\n" + LINE_17 + "\n",
        LINE_11 + "\n" + LINE_17.replace("sda", "sdb") + "\n",
        "",
    ]
    old, ts, raws = [], [], []
    for t, text in enumerate(texts):
        _diskstats(root, text)
        old += block.sample(t)
        ts.append(t)
        raws.append(block.read_raw())
    assert block.table(ts, raws).to_pylist() == old
    assert [r["device"] for r in old] == ["sda", "sdb", "sda", "sdb", "sdb", "sda", "sdc", "sda", "sdb"]


def test_sys_block_stat_fallback(tmp_path):
    root = _tree(tmp_path)
    (root / "sys" / "class" / "block" / "sda" / "stat").write_text("1 0 8 0 2 0 16 0 0 0 0\n")
    (root / "sys" / "class" / "block" / "sda" / "inflight").write_text("0 2\n")
    block = BlockCollector(["sda", "sdb"], proc_root=str(root / "no-proc"), sys_root=str(root / "sys"))
    old, new = _both(block)
    assert old == new and [r["device"] for r in new] == ["sda"] and new[0]["write_sectors"] == 16


def test_real_diskstats_and_host(tmp_path):
    """This machine's /proc: the devices it has, and psutil's CPU times and meminfo."""
    from ckprof.collectors.topology import Topology

    devs = Topology().disks()[:8] or ["none"]
    block = BlockCollector(devs)
    if not block.probe().ok:
        pytest.skip("no readable block device here")
    raw = block.read_raw()
    # the same text both ways (the counters move between two reads of the real file)
    parsed = parse_diskstats(raw[0].decode(), only=set(devs))
    old = [{"t_ns": 1, "device": d, **v} for d, v in parsed.items()]
    new = block.table([1], [raw]).to_pylist()
    assert [{k: v for k, v in r.items() if not k.startswith("inflight_")} for r in new] == sorted(
        old, key=lambda r: devs.index(r["device"])
    )
    host = HostCollector()
    h_raw = host.read_raw()
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "stat").write_bytes(h_raw[0] + b"\n")
    (tmp_path / "proc" / "meminfo").write_bytes(h_raw[1])
    import psutil

    psutil.PROCFS_PATH = str(tmp_path / "proc")
    try:
        old_h = HostCollector(proc_root=str(tmp_path / "proc")).sample(1)
    finally:
        psutil.PROCFS_PATH = "/proc"
    assert host.table([1], [h_raw]).to_pylist() == old_h


def test_recorder_writes_the_same_parts_and_summary_rows(tmp_path):
    root = _tree(tmp_path)
    _diskstats(root, LINE_17 + "\n" + LINE_15.replace("sda", "sdb") + "\n")
    for d in ("sda", "sdb"):
        (root / "sys" / "class" / "block" / d / "inflight").write_text("1 2\n")
    clock = FakeClock()
    w = RecordingWriter(str(tmp_path / "rec"), warn=lambda m: None)
    w.create({"start": {"wall_ns": 0, "monotonic_ns": clock.now_ns(), "uncertainty_ns": 0}})
    block = BlockCollector(["sda", "sdb"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    rec = Recorder(w, [block], clock=clock)
    expected = []
    for i in range(3):
        expected += block.sample(clock.now_ns())
        rec.sample_once(block)
        clock.advance_s(0.1)
        if i == 1:
            w.flush()
    w.finish()
    parts = sorted((tmp_path / "rec" / "samples" / "block").glob("part-*.parquet"))
    assert len(parts) == 1  # the two flushes merged at the end
    table = pq.read_table(parts[0])
    assert table.schema == BLOCK_SCHEMA and table.to_pylist() == expected
    assert table.schema.field("write_sectors").metadata == BLOCK_SCHEMA.field("write_sectors").metadata
    st = rec.stats["block"]
    assert st.samples == 3 and set(st.last_rows) == {("sda",), ("sdb",)}
    assert st.first_rows[("sda",)] == expected[0] and st.prev_rows[("sdb",)] == expected[3]


def test_an_idle_device_is_not_asked_for_its_inflight_split(tmp_path):
    """/proc/diskstats's in_flight is the sum of /sys/block/<dev>/inflight's two counts: where it
    is 0 both are 0 and the file is not read (here it does not exist: a read would give None)."""
    root = _tree(tmp_path)
    idle = LINE_17.replace(" 8 1 10 ", " 8 0 10 ")  # in_flight 0
    _diskstats(root, idle + "\n" + LINE_17.replace("sda", "sdb") + "\n")
    (root / "sys" / "class" / "block" / "sdb" / "inflight").write_text("1 0\n")
    block = BlockCollector(["sda", "sdb"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    old, new = _both(block)
    assert old == new
    assert [(r["in_flight"], r["inflight_read"], r["inflight_write"]) for r in new] == [(0, 0, 0), (1, 1, 0)]
    # sda busy now: its (missing) inflight file is read, and says it could not be
    _diskstats(root, LINE_17 + "\n")
    old, new = _both(block)
    assert old == new and (new[0]["in_flight"], new[0]["inflight_read"]) == (1, None)


def test_the_live_endpoint_gets_a_reading_and_the_one_before_it_together(tmp_path):
    """A scrape turns the last two readings into rates; while the sampler reads on, the pair it
    gets is one reading and its predecessor, never one reading twice (which made the endpoint's
    bandwidth and queue depth vanish for that scrape)."""
    import threading

    root = _tree(tmp_path)
    _diskstats(root, LINE_17 + "\n")
    (root / "sys" / "class" / "block" / "sda" / "inflight").write_text("1 2\n")
    w = RecordingWriter(str(tmp_path / "rec"), warn=lambda m: None)
    w.create({"start": {"wall_ns": 0, "monotonic_ns": 0, "uncertainty_ns": 0}})
    block = BlockCollector(["sda"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    rec = Recorder(w, [block], clock=FakeClock())
    st, stop, t = rec.stats["block"], threading.Event(), [0]

    def sampler():
        while not stop.is_set():
            t[0] += 1
            block.read(t[0])

    block.read(0)
    block.read(1)
    t[0] = 1
    th = threading.Thread(target=sampler)
    th.start()
    try:
        pairs = [st.last_two_rows() for _ in range(300)]
    finally:
        stop.set()
        th.join()
        w.finish()
    for last, prev in pairs:
        assert last[("sda",)]["t_ns"] == prev[("sda",)]["t_ns"] + 1
