"""`ckprof import-power` with the traces analyzers really write: units in the header (mW, µW, kW;
time in s/ms/µs/ns), Unix epochs in milliseconds, impossible readings. Each is read in its unit or
refused in one line naming the line; a refusal leaves the recording as it was."""

from __future__ import annotations

import json
import os

import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.testing import WALL_NS, RecordingBuilder, t

S = 1_000_000_000


@pytest.fixture
def built(tmp_path):
    return RecordingBuilder(tmp_path / "rec", duration_s=10).finish()


def write(tmp_path, text, name="trace.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def snapshot(rec) -> dict:
    """Every file of the recording and its bytes: what a refused import must leave alone."""
    out = {}
    for root, _, files in os.walk(rec):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, rec)] = open(p, "rb").read()
    return out


def stamp(seconds: float, unit: str) -> str:
    """WALL_NS + seconds as an integer in `unit` (s → a decimal)."""
    ns = WALL_NS + round(seconds * S)
    return {"s": f"{ns / S:.3f}", "ms": str(ns // 10**6), "us": str(ns // 10**3), "ns": str(ns)}[unit]


@pytest.mark.parametrize(
    "header,value,watts",
    [
        ("timestamp,power_mW", "7500", 7.5),
        ("Timestamp;Power [mW]", "7500", 7.5),
        ("time,power_uW", "7500000", 7.5),
        ("time,P (µW)", "7500000", 7.5),
        ("time,power_kW", "0.0075", 7.5),
        ("time,power_W", "7.5", 7.5),
    ],
)
def test_power_unit_from_the_header(tmp_path, built, header, value, watts):
    delim = ";" if ";" in header else ","
    rows = "".join(f"{stamp(1 + k, 's')}{delim}{value}\n" for k in range(3))
    out = ckprof_cmd("import-power", built, write(tmp_path, header + "\n" + rows), "--device", "nvme0")
    assert out.returncode == 0, out.stderr
    s = ckprof.load(built).samples("power_nvme0")
    assert s["power_w"].tolist() == pytest.approx([watts] * 3)
    d = ckprof.load(built).meta["collectors"]["power_nvme0"]["describe"]
    assert d["power_unit"]["from"].startswith("header")


@pytest.mark.parametrize(
    "header,unit",
    [("time_ms,watts", "ms"), ("Time (us),W", "us"), ("t_ns,watts", "ns"), ("timestamp [s],watts", "s")],
)
def test_time_unit_from_the_header(tmp_path, built, header, unit):
    rows = "".join(f"{stamp(1 + k, unit)},5\n" for k in range(3))
    out = ckprof_cmd("import-power", built, write(tmp_path, header + "\n" + rows), "--device", "nvme0")
    assert out.returncode == 0, out.stderr
    s = ckprof.load(built).samples("power_nvme0")
    assert s["t_ns"].tolist() == [t(1), t(2), t(3)]
    d = ckprof.load(built).meta["collectors"]["power_nvme0"]["describe"]
    assert d["time_unit"]["unit"] == unit and d["time_unit"]["from"].startswith("header")


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_unix_epoch_unit_inferred_from_magnitude(tmp_path, built, unit):
    """No header, Unix ms (what many loggers write): once an 'internal error: OverflowError'."""
    rows = "".join(f"{stamp(1 + k / 2, unit)},5\n" for k in range(3))
    out = ckprof_cmd("import-power", built, write(tmp_path, rows), "--device", "nvme0")
    assert out.returncode == 0, out.stderr
    assert "internal error" not in out.stderr
    rec = ckprof.load(built)
    assert rec.samples("power_nvme0")["t_ns"].tolist() == [t(1), t(1.5), t(2)]
    d = rec.meta["collectors"]["power_nvme0"]["describe"]
    assert d["time_unit"]["unit"] == unit and "magnitude" in d["time_unit"]["from"]
    assert d["power_unit"] == {"unit": "W", "from": "assumed: no header"}


@pytest.mark.parametrize(
    "text,line,what",
    [
        ("timestamp,watts\n{a},5\n{b},-0.5\n", 3, "-0.5 W is negative"),
        ("timestamp,power_mW\n{a},5\n{b},inf\n", 3, "'inf'"),
        ("{a},5\n{b},nan\n", 2, "'nan'"),
        ("time_ns,watts\n{a},5\n1e30,5\n", 3, "timestamp"),
        ("{a},5\n99999999999999999999999,5\n", 2, "timestamp"),
        ("time,power_MW\n{a},5\n", 1, "MW"),
        ("time,power_dBm\n{a},5\n", 1, "watts"),
        ("time,energy_J\n{a},5\n", 1, "watts"),
    ],
)
def test_impossible_values_refused_with_the_line_and_nothing_changed(tmp_path, built, text, line, what):
    before = snapshot(built)
    trace = write(tmp_path, text.format(a=stamp(1, "s"), b=stamp(2, "s")))
    out = ckprof_cmd("import-power", built, trace, "--device", "nvme0")
    err = out.stderr.strip()
    assert out.returncode == 2, err
    assert len(err.splitlines()) == 1 and err.startswith(f"ckprof: error: {trace}:{line}: "), err
    assert what in err and "internal error" not in err
    assert snapshot(built) == before


def test_negative_power_would_have_given_negative_joules(tmp_path, built):
    """The energy of a refused trace never reaches a report: the summary line is not printed."""
    trace = write(tmp_path, "".join(f"{stamp(1 + k, 's')},{-5 if k == 1 else 5}\n" for k in range(3)))
    out = ckprof_cmd("import-power", built, trace, "--device", "nvme0")
    assert out.returncode == 2 and f"{trace}:2:" in out.stderr and "imported" not in out.stderr
    assert "power_nvme0" not in json.loads(open(os.path.join(built, "meta.json")).read())["collectors"]
