"""/proc/diskstats in every kernel layout, and iostat's own test vectors (sysstat)."""

import re

import pandas as pd
import pytest
from support.procfs import LINE_4, LINE_11, LINE_15, LINE_17, LINE_20, LINE_24
from support.system import DATA

from ckprof.collectors.diskstats import FIELDS, parse_diskstats, parse_inflight, parse_sys_block_stat
from ckprof.recording.rates import block_rates


@pytest.mark.parametrize("line,n", [(LINE_11, 11), (LINE_15, 15), (LINE_17, 17), (LINE_20, 17), (LINE_24, 11)])
def test_layouts(line, n):
    st = next(iter(parse_diskstats(line).values()))
    assert st["read_ios"] == 101 and st["read_sectors"] == 303 and st["write_sectors"] == 707
    assert st["in_flight"] == 1 and st["io_ticks_ms"] == 10 and st["time_in_queue_ms"] == 11
    present = [f for f in FIELDS if st[f] is not None]
    assert len(present) == n


def test_layout_24_name_is_fourth_field():
    assert list(parse_diskstats(LINE_24)) == ["sda"]


def test_old_partition_layout():
    st = parse_diskstats(LINE_4)["sda1"]
    assert (st["read_ios"], st["read_sectors"], st["write_ios"], st["write_sectors"]) == (101, 303, 505, 707)
    assert st["read_ticks_ms"] is None and st["time_in_queue_ms"] is None


def test_sys_block_stat_and_inflight():
    st = parse_sys_block_stat(
        "     101        2      303        4      505        6      707        8        1       10       11\n"
    )
    assert st["write_ios"] == 505 and st["discard_ios"] is None
    assert parse_inflight("       3       16\n") == (3, 16)


def test_garbage_lines_are_skipped():
    text = "major minor  #blocks  name\n\n" + LINE_17 + "\n   8 0 bad x y z w v u t\n"
    assert list(parse_diskstats(text)) == ["sda"]


def _iostat_second_report(path):
    """The second 'Device' table of iostat -x output: {device: {column: value}}."""
    text = open(path).read()
    tables = re.findall(r"^Device\s+(.*?)\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    header, body = tables[1]
    cols = header.split()
    return {ln.split()[0]: dict(zip(cols, map(float, ln.split()[1:]))) for ln in body.strip().splitlines()}


def _uptime_ns(path):
    # iostat's interval comes from /proc/uptime's first field, in hundredths (sysstat iostat.c)
    return int(round(float(open(path).read().split()[0]) * 100)) * 10_000_000


def test_against_sysstat_vectors():
    """Our rates equal iostat's printed figures on sysstat's own test vectors."""
    vec = DATA / "sysstat"
    rows = []
    for root in ("root1", "root2"):
        t_ns = _uptime_ns(vec / root / "uptime")
        for dev, st in parse_diskstats((vec / root / "diskstats").read_text()).items():
            rows.append({"t_ns": t_ns, "device": dev, **st})
    rates = block_rates(pd.DataFrame(rows)).set_index("device")
    expected = _iostat_second_report(vec / "expected.iostat-x")
    assert set(expected) <= set(rates.index)
    ours = {
        "r/s": "read_iops",
        "w/s": "write_iops",
        "r_await": "r_await_ms",
        "w_await": "w_await_ms",
        "aqu-sz": "aqu_sz",
        "%util": "util_pct",
    }
    checked = 0
    for dev, exp in expected.items():
        r = rates.loc[dev]
        for col, mine in ours.items():
            assert round(r[mine], 2) == pytest.approx(exp[col], abs=0.0051), (dev, col)
            checked += 1
        assert round(r["read_bytes_per_s"] / 1024, 2) == pytest.approx(exp["rkB/s"], abs=0.0051), dev
        assert round(r["write_bytes_per_s"] / 1024, 2) == pytest.approx(exp["wkB/s"], abs=0.0051), dev
    assert checked == len(expected) * len(ours)
