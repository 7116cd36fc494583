"""A constant 10 W trace imported with `ckprof import-power` is 10 W × the window in every output.

Through the real CLI, on real recordings (`ckprof record` of a child that marks one 2 s
checkpoint): report JSON, Markdown and HTML, compare, Parquet export — for one host and for a job
of two hosts. The trace is written in the analyzer's own terms (Unix seconds, watts) and put on
the recording's clock by import-power.
"""

from __future__ import annotations

import json
import re
import sys

import pandas as pd
import pytest
from support.command import ckprof_cmd

WATTS = 10.0
CHILD = (
    "import ckprof, time\n"
    "time.sleep(1.2)\n"
    "with ckprof.checkpoint(step=1, bytes=1 << 20):\n"
    "    time.sleep(2.0)\n"
    "time.sleep(0.5)\n"
)
UNITS_J = {"J": 1.0, "kJ": 1e3, "MJ": 1e6}


def ckprof(*args, cwd=None):
    r = ckprof_cmd(*args, cwd=cwd, timeout=120)
    assert r.returncode == 0, f"ckprof {' '.join(args)}: {r.stderr}"
    return r


def import_10w(rec_dir, tmp_path, name="psu"):
    """A 10 Hz, 10.000 W trace from 5 s before the recording's start to 30 s after it."""
    meta = json.loads((rec_dir / "meta.json").read_text())
    t0_s = int(meta["start"]["wall_ns"]) / 1e9 - 5
    trace = tmp_path / f"{rec_dir.name}-trace.csv"
    trace.write_text("timestamp,watts\n" + "".join(f"{t0_s + i / 10:.3f},{WATTS:.3f}\n" for i in range(350)))
    ckprof("import-power", str(rec_dir), str(trace), "--device", name)


def record(tmp_path, *where):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ckprof("record", "-q", *where, "--path", str(tmp_path), "--", sys.executable, str(script))


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trace10w")
    one, other, job = tmp / "one", tmp / "other", tmp / "job"
    for rec in (one, other):
        record(tmp, "-o", str(rec))
        import_10w(rec, tmp)
    for host in ("a", "b"):
        record(tmp, "--job-dir", str(job), "--host-name", host)
        import_10w(job / f"host={host}", tmp)
    return {"one": one, "other": other, "job": job, "tmp": tmp}


def window_s(cp: dict) -> float:
    """The seconds energy is integrated over: start to durable end, else to the save's return."""
    end = cp["durable_end_s"] if cp.get("durable_end_s") is not None else cp["app_end_s"]
    return end - cp["start_s"]


def report_json(path) -> dict:
    return json.loads(ckprof("report", str(path), "--format", "json").stdout)


def joules_in(text: str) -> list[float]:
    """Every energy figure printed with a joule unit ('20.0 J', '1.2 kJ'), in joules."""
    return [float(n.replace(",", "")) * UNITS_J[u] for n, u in re.findall(r"([\d,]+\.?\d*)\s*(kJ|MJ|J)\b", text)]


def test_report_json_gives_10_w_times_the_window(recs):
    rep = report_json(recs["one"])
    (cp,) = rep["checkpoints"]
    e = cp["energy"]
    assert list(e) == ["external:psu"], e  # the one vocabulary: an imported trace is external:<name>
    assert e["external:psu"]["provenance"] == "derived"  # measured power, integrated
    assert e["external:psu"]["energy_j"] == pytest.approx(WATTS * window_s(cp), rel=1e-3)
    assert cp["energy_total_j"] == pytest.approx(WATTS * window_s(cp), rel=1e-3)
    assert rep["run"]["idle_power_w"]["power_psu.power_w"] == pytest.approx(WATTS, rel=1e-6)
    assert e["external:psu"]["above_idle_j"] == pytest.approx(0.0, abs=1e-6)


def test_markdown_and_html_show_it(recs):
    cp = report_json(recs["one"])["checkpoints"][0]
    want = WATTS * window_s(cp)
    md = ckprof("report", str(recs["one"]), "--format", "md").stdout
    # the tables print joules with one decimal: the window no longer ends on a sampling bin (the
    # durable end is the files', unknown here without a path), so allow that rounding
    assert any(j == pytest.approx(want, abs=0.051) for j in joules_in(md)), (want, joules_in(md))
    html_path = recs["tmp"] / "one.html"
    ckprof("report", str(recs["one"]), "-o", str(html_path))
    # the page's text: not its scripts (the interactive timeline's JavaScript and data)
    html = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", " ", html_path.read_text(), flags=re.S))
    assert any(j == pytest.approx(want, abs=0.051) for j in joules_in(html)), (want, joules_in(html))


def test_compare_shows_both(recs):
    cmp = json.loads(ckprof("compare", str(recs["one"]), str(recs["other"]), "--format", "json").stdout)
    rows = {m["metric"]: m for m in cmp["metrics"]}
    want = [WATTS * window_s(report_json(recs[k])["checkpoints"][0]) for k in ("one", "other")]
    for metric in ("energy per checkpoint", "energy per checkpoint: external:psu"):
        assert rows[metric]["values"] == [pytest.approx(w, rel=1e-3) for w in want], rows[metric]
        assert rows[metric]["provenance"] == "derived"
    md = ckprof("compare", str(recs["one"]), str(recs["other"])).stdout
    assert "energy per checkpoint: external:psu [J" in md


def test_parquet_export_has_it(recs):
    out = recs["tmp"] / "export"
    ckprof("export", str(recs["one"]), "--format", "parquet", "-o", str(out))
    df = pd.read_parquet(out / "checkpoints.parquet")
    cp = report_json(recs["one"])["checkpoints"][0]
    cols = [c for c in df.columns if "energy" in c and c.endswith("_j")]
    assert any(df[c].iloc[0] == pytest.approx(WATTS * window_s(cp), rel=1e-3) for c in cols), df[cols].to_dict()


def test_a_job_gives_each_node_10_w_times_its_window(recs):
    rep = report_json(recs["job"])
    (c,) = [c for c in rep["job"]["checkpoints"] if c["kind"] == "save"]
    for host in ("a", "b"):
        node = c["per_host"][host]
        assert node["energy_by_component_j"]["external:psu"] == pytest.approx(WATTS * node["durable_s"], rel=1e-3)
        assert node["energy_j"] == pytest.approx(WATTS * node["durable_s"], rel=1e-3)
    assert c["energy_j"] == pytest.approx(sum(WATTS * c["per_host"][h]["durable_s"] for h in "ab"), rel=1e-3)
    md = ckprof("report", str(recs["job"]), "--format", "md").stdout
    # the tables print joules with one decimal (40.04 J prints as 40.0 J): allow that rounding
    assert any(j == pytest.approx(c["energy_j"], abs=0.051) for j in joules_in(md)), (c["energy_j"], joules_in(md))
    html_path = recs["tmp"] / "job.html"
    ckprof("report", str(recs["job"]), "-o", str(html_path))
    # the page's text: not its scripts (the interactive timeline's JavaScript and data)
    html = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", " ", html_path.read_text(), flags=re.S))
    assert any(j == pytest.approx(c["energy_j"], abs=0.051) for j in joules_in(html)), (c["energy_j"], joules_in(html))
    # compare on a job directory puts its hosts side by side
    cmp = json.loads(ckprof("compare", str(recs["job"]), "--format", "json").stdout)
    rows = {m["metric"]: m for m in cmp["metrics"]}
    want = [WATTS * window_s(report_json(recs["job"] / f"host={h}")["checkpoints"][0]) for h in "ab"]
    assert rows["energy per checkpoint: external:psu"]["values"] == [pytest.approx(w, rel=1e-3) for w in want]
    out = recs["tmp"] / "job-export"
    ckprof("export", str(recs["job"]), "--format", "parquet", "-o", str(out))
    df = pd.read_parquet(out / "checkpoints.parquet")
    cols = [col for col in df.columns if "energy" in col and col.endswith("_j")]
    for host in ("a", "b"):
        row = df[df["host"] == host].iloc[0]
        cp = report_json(recs["job"] / f"host={host}")["checkpoints"][0]
        assert any(row[col] == pytest.approx(WATTS * window_s(cp), rel=1e-3) for col in cols), row[cols].to_dict()
