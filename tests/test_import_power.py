"""`ckprof import-power`: run as a user runs it (the real executable), on real and built recordings."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.errors import UsageError
from ckprof.power.energy import energy_j
from ckprof.recording.import_power import parse_time_ns, read_trace
from ckprof.recording.schema import col
from ckprof.testing import WALL_NS, RecordingBuilder, t


def iso(wall_ns: int, zone: str = "Z") -> str:
    dt = datetime.fromtimestamp(wall_ns // 1000 / 1e6, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f") + zone


def test_record_then_import_an_iso_trace(tmp_path):
    rec_dir = tmp_path / "rec"
    out = ckprof_cmd("record", "-q", "-o", str(rec_dir), "--", sys.executable, "-c", "import time; time.sleep(1.5)")
    assert out.returncode == 0, out.stderr
    meta = json.loads((rec_dir / "meta.json").read_text())
    a, end = meta["start"], meta["end"]
    # a 10 Hz trace at 7.5 W from 1 s before the recording to 1 s after it, as an analyzer logs it
    first = a["wall_ns"] - 1_000_000_000
    n = (end["wall_ns"] - first) // 100_000_000 + 10
    lines = ["Timestamp,Voltage [V],Current [A],Power [W]"]
    lines += [f"{iso(first + k * 100_000_000)},12.0,0.625,7.5" for k in range(n)]
    (tmp_path / "wt310.csv").write_text("\n".join(lines) + "\n")
    out = ckprof_cmd("import-power", str(rec_dir), str(tmp_path / "wt310.csv"), "--device", "nvme0")
    assert out.returncode == 0, out.stderr
    assert "measured" in out.stderr and "as power_nvme0" in out.stderr
    rec = ckprof.load(str(rec_dir))
    s = rec.samples("power_nvme0")
    assert len(s) == n and (s["power_w"] == 7.5).all()
    # the mapping through the anchor: a reading at the anchor's wall time lands on its monotonic time
    assert s["t_ns"].iloc[10] - (s["wall_ns"].iloc[10] - a["wall_ns"]) == a["monotonic_ns"]
    m = rec.meta["collectors"]["power_nvme0"]
    assert m["describe"]["provenance"] == "measured" and m["describe"]["source_file"] == str(tmp_path / "wt310.csv")
    assert m["columns"]["power_w"]["unit"] == "W" and m["columns"]["power_w"]["provenance"] == "measured"
    assert rec.meta["status"] == "complete" and set(rec.meta["collectors"]) >= {"block", "host", "power_nvme0"}
    e = energy_j(rec, "nvme0", rec.start_ns, rec.end_ns)
    assert e.joules == pytest.approx(7.5 * e.seconds) and e.coverage == 1.0


@pytest.fixture
def built(tmp_path):
    meter = [col("power_w", pa.float64(), "W")]
    return RecordingBuilder(tmp_path / "rec", duration_s=10).rows("ipmi", [{"t_s": 0, "power_w": 1.0}], meter).finish()


def write(tmp_path, text, name="trace.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_unix_seconds_semicolons_decimal_commas_and_clock_offset(tmp_path, built):
    w0 = WALL_NS / 1e9
    trace = write(
        tmp_path,
        "# WT310E export\nTime;Power (W)\n" + "".join(f"{w0 + 2 + k * 0.5:.3f};{k + 10},5\n" for k in range(5)),
    )
    out = ckprof_cmd("import-power", built, trace, "--device", "ssd.a", "--clock-offset", "-1.5")
    assert out.returncode == 0, out.stderr
    s = ckprof.load(built).samples("power_ssd.a")
    assert s["power_w"].tolist() == [10.5, 11.5, 12.5, 13.5, 14.5]
    assert s["t_ns"].iloc[0] == t(0.5)  # 2 s into the recording, minus 1.5 s
    assert ckprof.load(built).meta["collectors"]["power_ssd.a"]["describe"]["clock_offset_s"] == -1.5


def test_bad_row_names_the_line_and_writes_nothing(tmp_path, built):
    before = open(os.path.join(built, "meta.json")).read()
    w0 = WALL_NS / 1e9
    trace = write(tmp_path, f"timestamp,watts\n{w0 + 1},5.0\n{w0 + 2},5.1\n{w0 + 3},n/a\n")
    out = ckprof_cmd("import-power", built, trace, "--device", "nvme0")
    assert out.returncode == 2
    assert out.stderr.strip() == f"ckprof: error: {trace}:4: cannot read 'n/a' as watts"
    assert not os.path.exists(os.path.join(built, "samples", "power_nvme0"))
    assert open(os.path.join(built, "meta.json")).read() == before
    trace = write(tmp_path, f"{w0 + 1},5.0\nyesterday,5.1\n", "t2.csv")
    with pytest.raises(UsageError, match=r"t2.csv:2: cannot read 'yesterday' as a timestamp"):
        read_trace(trace)


def test_no_overlap_names_both_ranges(tmp_path, built):
    trace = write(tmp_path, "2020-01-01T00:00:00Z,3\n2020-01-01T00:00:01Z,3\n")
    out = ckprof_cmd("import-power", built, trace, "--device", "nvme0")
    assert out.returncode == 2
    err = out.stderr.strip()
    assert err.startswith(f"ckprof: error: {trace}: no reading falls inside the recording")
    start = datetime.fromtimestamp(WALL_NS / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds")
    assert "the trace covers 2020-01-01T00:00:00.000+00:00 to 2020-01-01T00:00:01.000+00:00" in err
    assert f"the recording {start} to " in err and "--clock-offset" in err
    assert len(out.stderr.strip().splitlines()) == 1


def test_second_import_needs_replace(tmp_path, built):
    trace = write(tmp_path, f"{iso(WALL_NS + 10**9)},4\n{iso(WALL_NS + 2 * 10**9)},4\n")
    assert ckprof_cmd("import-power", built, trace, "--device", "nvme0").returncode == 0
    out = ckprof_cmd("import-power", built, trace, "--device", "nvme0")
    assert out.returncode == 2 and "already has a power_nvme0 series" in out.stderr and "--replace" in out.stderr
    trace2 = write(tmp_path, f"{iso(WALL_NS + 10**9)},6\n{iso(WALL_NS + 3 * 10**9)},6\n", "t2.csv")
    assert ckprof_cmd("import-power", built, trace2, "--device", "nvme0", "--replace").returncode == 0
    assert ckprof.load(built).samples("power_nvme0")["power_w"].tolist() == [6.0, 6.0]


def test_not_a_recording_and_bad_device(tmp_path):
    trace = write(tmp_path, "1,2\n")
    out = ckprof_cmd("import-power", str(tmp_path), trace, "--device", "nvme0")
    assert out.returncode == 1 and "not a ckprof recording" in out.stderr
    out = ckprof_cmd("import-power", str(tmp_path), trace, "--device", "../x")
    assert out.returncode == 2 and "--device '../x'" in out.stderr


def test_parse_time_forms():
    assert parse_time_ns("1795000000.25") == 1795000000_250_000_000
    assert parse_time_ns("2026-11-21T22:10:00Z") == parse_time_ns("2026-11-21 23:10:00+01:00")
    assert parse_time_ns("2026-11-21T22:10:00.123456") == parse_time_ns("2026-11-21T22:10:00Z") + 123_456_000
    with pytest.raises(ValueError):
        parse_time_ns("nan")
