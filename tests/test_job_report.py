"""`ckprof report|compare|export JOBDIR`: every host analysed, then joined per checkpoint.

Synthetic hosts (ckprof.testing (profiler/testing.py): the real RecordingWriter) give known answers: the stall on the
wall clock, the slowest node and device, the spread, the totals. Real `ckprof record --job-dir`
runs are in tests/test_job.py.
"""

import json

import numpy as np
import pandas as pd
import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis.jobs import analyze_job
from ckprof.testing import WALL_NS, RecordingBuilder, job_dir, job_host, on

MiB = 2**20
EVIL = "<script>alert('x')</script>"
HEVIL = "<img src=x onerror=alert(1)>"  # a host name: no '/' in a directory name


def make_job(job, evil=False):
    """Node a: step 1 from 3 to 5 s (one device, 100 MiB/s). Node b, its clock 0.5 s later: ranks 2
    and 3 from 3 s, the last ending at 6 s; nvme0 at 100 MiB/s, nvme1 at 50 MiB/s (its slowest
    carrying device) and sda at 1 MiB/s all along (under 10 % of the bytes: not a candidate)."""
    a = job_host(0.0, [(1, 0, 3, 5, 200 * MiB)], {"nvme0n1": on(3, 5, 100 * MiB)})
    b = job_host(
        0.5,
        [(1, 2, 3, 5.5, 150 * MiB), (1, 3, 3, 6, 150 * MiB)],
        {
            "nvme0n1": on(3, 6, 100 * MiB),
            f"nvme1n1{EVIL if evil else ''}": on(3, 6, 50 * MiB),
            "sda": lambda t: 0 * t + 1 * MiB,
        },
        hostname=EVIL if evil else "synth",
    )
    return job_dir(job, {"a": a, f"b{HEVIL}" if evil else "b": b})


def test_overlapping_saves_count_their_shared_seconds_once_in_the_job_total(tmp_path):
    # host a: step 1 from 2 to 5 s and step 2 (an async save) from 4 to 6 s, 200 W throughout;
    # host b: step 1 only, 3 to 4 s. Each save's own joules hold 4-5 s; the job's total holds it once.
    a = job_host(0.0, [(1, 0, 2, 5, 100 * MiB), (2, 0, 4, 6, 100 * MiB)], {"nvme0n1": on(2, 6, 100 * MiB)})
    b = job_host(0.0, [(1, 1, 3, 4, 100 * MiB)], {"nvme0n1": on(3, 4, 100 * MiB)})
    j = analyze_job(ckprof.load(str(job_dir(tmp_path / "job", {"a": a, "b": b})))).report.job
    by_step = {c.step: c for c in j.checkpoints}
    assert by_step[1].per_host["a"].energy_j == pytest.approx(200 * 3, rel=0.02)
    assert by_step[2].per_host["a"].energy_j == pytest.approx(200 * 2, rel=0.02)
    assert sum(c.energy_j for c in j.checkpoints) == pytest.approx(200 * (3 + 2 + 1), rel=0.02)
    assert j.run.energy_j_total == pytest.approx(200 * (4 + 1), rel=0.02)  # a: 2-6 s once; b: 1 s


def test_the_stall_ends_at_the_last_call_s_return_not_at_an_async_write_s_end(tmp_path):
    # host a: an async save called at 2 s that returned at 2.5 s, its write done at 6 s; host b: a
    # synchronous one from 3 to 4 s. The training waited from 2 s to b's return at 4 s, not to 6 s.
    a = job_host(0.0, []).checkpoint(2, 6, 100 * MiB, step=1, blocking_s=0.5)
    b = job_host(0.0, [(1, 1, 3, 4, 100 * MiB)])
    j = analyze_job(ckprof.load(str(job_dir(tmp_path / "job", {"a": a, "b": b})))).report.job
    (c,) = j.checkpoints
    assert c.stall_s == pytest.approx(2.0, abs=1e-6)
    assert c.slowest_host == "a" and c.slowest_host_s == pytest.approx(4.0)  # its window: the write too
    assert c.per_host["a"].blocked_end_wall_ns == pytest.approx(WALL_NS + 2.5e9, abs=1e3)


def test_a_node_s_save_no_call_timed_leaves_the_stall_unknown(tmp_path):
    # b's save was found from its files (no call timed): how long b's training waited is unknown
    a = job_host(0.0, [(1, 0, 2, 5, 100 * MiB)])
    b = job_host(0.0, []).checkpoint(3, 4, 100 * MiB, step=1, source="files")
    j = analyze_job(ckprof.load(str(job_dir(tmp_path / "job", {"a": a, "b": b})))).report.job
    (c,) = j.checkpoints
    assert c.per_host["b"].blocked_end_wall_ns is None and c.per_host["a"].blocked_end_wall_ns is not None
    assert c.stall_s is None and j.run.mean_stall_s is None and j.run.blocked_s is None


def run(*args):
    r = ckprof_cmd(*args, in_process=True)
    assert not (r.exception and not isinstance(r.exception, SystemExit)), r.exception
    return r


def test_known_stall_slowest_node_and_device_spread_totals(tmp_path):
    rep = analyze_job(ckprof.load(str(make_job(tmp_path / "job")))).report
    j = rep.job
    assert j.hosts == ["a", "b"] and j.hosts_left_out == [] and j.id == "77"
    (c,) = j.checkpoints
    assert (c.kind, c.step, c.hosts, c.ranks) == ("save", 1, 2, 3)
    # wall clock: a from 3.0 to 5.0; b from 3.5 to 6.5 → the stall is 3.5 s
    assert c.stall_s == pytest.approx(3.5, abs=1e-6)
    assert c.slowest_host == "b" and c.slowest_host_s == pytest.approx(3.0)
    assert c.fastest_host_s == pytest.approx(2.0) and c.spread_s == pytest.approx(1.0)
    assert c.per_host["b"].start_offset_s == pytest.approx(0.5)
    sd = c.slowest_device
    assert sd.host == "b" and sd.device == "nvme1n1" and sd.of_devices == 2
    assert sd.gib_per_s == pytest.approx(50 / 1024, rel=0.1)
    # who it waited for: b's rank 3, the last to return (3 s, 150 MiB), nvme1n1 its slowest device
    hb = c.held_up_by
    assert (hb.host, hb.rank, hb.device) == ("b", 3, "nvme1n1")
    assert hb.seconds == pytest.approx(3.0) and hb.bytes_app == 150 * MiB
    assert c.bytes_app == 500 * MiB
    pa, pb = c.per_host["a"], c.per_host["b"]
    assert pa.bytes_device == pytest.approx(200 * MiB, rel=0.02)
    assert pb.bytes_device == pytest.approx(450 * MiB + 3 * MiB, rel=0.05)  # sda's trickle counts too
    assert pa.energy_j == pytest.approx(200 * (pa.durable_s), rel=0.05)  # 200 W over its window
    assert c.energy_j == pytest.approx(pa.energy_j + pb.energy_j) and c.energy_hosts == 2
    run_ = j.run
    assert run_.checkpoints == 1 and run_.bytes_app_total == 500 * MiB
    assert run_.energy_j_total == pytest.approx(c.energy_j)
    assert j.wall_s == pytest.approx(10.5) and run_.blocked_s == pytest.approx(3.5)
    assert run_.blocked_share == pytest.approx(3.5 / 10.5)
    assert run_.slowest_host_counts == {"b": 1}
    # each host's own report is there, unchanged in shape
    assert set(rep.hosts) == {"a", "b"} and len(rep.hosts["b"]["checkpoints"]) == 2


def test_report_json_md_html(tmp_path):
    job = make_job(tmp_path / "job", evil=True)
    r = run("report", job, "--format", "json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert rep["schema"] == "ckprof-report" and rep["schema_version"] == 1
    assert rep["job"]["checkpoints"][0]["slowest_host"] == f"b{HEVIL}"
    assert rep["fields"]["job.checkpoints[].stall_s"]["unit"] == "s"
    md = run("report", job, "--format", "md")
    assert md.exit_code == 0 and "## Checkpoints across nodes" in md.stdout and "◀ slowest" in md.stdout
    out = tmp_path / "r.html"
    h = run("report", job, "-o", out)
    assert h.exit_code == 0, h.output
    text = out.read_text()
    assert EVIL not in text and HEVIL not in text and "&lt;script&gt;" in text and "&lt;img src" in text
    assert "id='plot-nodes'" in text and "Per node" in text and text.count("<details") == 2


def test_half_written_host_and_host_without_checkpoints(tmp_path):
    job = make_job(tmp_path / "job")
    (job / "host=dead" / "samples").mkdir(parents=True)  # died before its meta.json
    job_dir(job, {"idle": job_host(0.2, [], {"nvme0n1": lambda t: 0 * t})})  # recorded, never checkpointed
    r = run("report", job, "--format", "json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["job"]["hosts"] == ["a", "b", "idle"] and rep["job"]["hosts_left_out"] == ["dead"]
    notes = analyze_job(ckprof.load(str(job)), engine="serial").report.notes
    assert [n.text for n in notes] == rep["notes"]  # the JSON has each note's text
    codes = [(n.code, n.subject) for n in notes]
    assert ("job_reader", None) in codes  # the job reader's own: host=dead has no meta.json
    assert ("host_no_checkpoints", "idle") in codes and ("checkpoint_not_seen", None) in codes
    c = rep["job"]["checkpoints"][0]
    assert c["slowest_host"] == "b" and c["missing_hosts"] == ["idle"]
    md = run("report", job, "--format", "md")
    assert md.exit_code == 0 and "host=dead: left out" in md.stdout and "not seen" in md.stdout


def test_one_host_with_no_checkpoints_still_reports(tmp_path):
    job = job_dir(
        tmp_path / "job",
        {
            "x": job_host(0, [(1, 0, 3, 5, 200 * MiB)], {"nvme0n1": on(3, 5, 100 * MiB)}),
            "y": job_host(0, [], {"nvme0n1": lambda t: 0 * t}, gpu_w=0),
        },
    )
    for fmt in ("json", "md", "html"):
        r = run("report", job, "--format", fmt, "-o", tmp_path / f"r.{fmt}")
        assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["job"]["checkpoints"][0]["slowest_host"] == "x" and rep["job"]["checkpoints"][0]["spread_s"] == 0


def test_unsynchronised_clock_is_a_note(tmp_path):
    job = make_job(tmp_path / "job")
    meta = json.loads((job / "host=b" / "meta.json").read_text())
    meta["job"]["clock_sync"]["kernel"] = {"synchronised": False, "maxerror_us": 16_000_000}
    (job / "host=b" / "meta.json").write_text(json.dumps(meta))
    rep = json.loads(run("report", job, "--format", "json").stdout)
    assert any(n.startswith("host=b: clock not known to be synchronised") for n in rep["notes"])
    assert rep["job"]["problems"] and rep["job"]["checkpoints"][0]["slowest_host"] == "b"


def test_export_and_compare_on_a_job(tmp_path):
    job = make_job(tmp_path / "job")
    r = run("export", job, "--format", "csv", "-o", tmp_path / "exp")
    assert r.exit_code == 0, r.output
    cps = pd.read_csv(tmp_path / "exp" / "checkpoints.csv")
    assert list(cps.columns[:1]) == ["host"] and sorted(cps["host"]) == ["a", "b", "b"]
    tl = pd.read_csv(tmp_path / "exp" / "timeline.csv")
    assert set(tl["host"]) == {"a", "b"}
    r = run("export", job, "--format", "perfetto", "-o", tmp_path / "t.json")
    assert r.exit_code == 0, r.output
    ev = json.load(open(tmp_path / "t.json"))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    assert sorted(names.values()) == ["host=a", "host=b"]
    x = {e["pid"]: e["ts"] for e in ev if e.get("ph") == "X" and e.get("cat") == "checkpoint"}
    pid = {v: k for k, v in names.items()}
    assert x[pid["host=b"]] - x[pid["host=a"]] == pytest.approx(0.5e6, rel=1e-3)  # on the job's wall clock
    c = run("compare", job, "--format", "json")
    assert c.exit_code == 0, c.output
    cmp = json.loads(c.stdout)
    assert [p.rsplit("/", 1)[1] for p in cmp["recordings"]] == ["host=a", "host=b"]


def test_compare_a_job_of_one_host_says_what_it_needs(tmp_path):
    job = job_dir(tmp_path / "job", {"x": job_host(0, [(1, 0, 3, 5, 200 * MiB)], {"nvme0n1": on(3, 5, 100 * MiB)})})
    r = run("compare", job)
    assert r.exit_code == 2 and "job directory of two hosts" in r.output and "Traceback" not in r.output


def test_a_devices_first_interval_counts_in_the_hosts_total(tmp_path):
    """An interval goes to the bin holding its middle; a long first interval (0 → 0.35 s) lies
    bins before its end, and the host's total (the job's throughput is made from it) keeps it."""
    from ckprof.analysis import timeline
    from ckprof.testing import BLOCK_SCHEMA

    rb = RecordingBuilder(duration_s=2.0)
    times = [0.0, 0.35, *np.round(np.arange(0.45, 2.0, 0.1), 9)]
    zero = {f.name: 0 for f in BLOCK_SCHEMA if f.name not in ("t_ns", "device")}
    rb.rows(
        "block",
        [{**zero, "t_s": s, "device": "vda", "write_sectors": 2048 * i} for i, s in enumerate(times)],
        BLOCK_SCHEMA,
    )
    tl = timeline.build(ckprof.load(rb.finish(tmp_path / "rec")))
    written = (len(times) - 1) * 2048 * 512
    assert tl.devices["vda"].write_bytes.sum() == written
    assert tl.total.write_bytes.sum() == written  # the first interval's 1 MiB was dropped before


def test_a_hosts_throughput_starts_with_its_recording(tmp_path):
    """A recording that starts 35 ms before a 1 s wall-clock boundary: its first interval's middle
    (50 ms in) lies past the boundary, yet its series starts in the bin that holds its start, so the
    job's throughput covers the job's start (CI once saw it begin 35 ms after)."""
    from ckprof.analysis import job_throughput, timeline

    rb = RecordingBuilder(duration_s=3.0, wall_ns=WALL_NS - 35_000_000)
    rb.block("vda", on(1, 2, 10 * MiB))
    rec = ckprof.load(rb.finish(tmp_path / "rec"))
    tl = timeline.build(rec)
    s = job_throughput.host_series(rec, tl)
    start_wall_ns = rec.timebase.to_wall_ns(tl.start_ns)
    assert s.bin_s == 1
    assert s.first_bin * 10**9 <= start_wall_ns < (s.first_bin + 1) * 10**9
    assert sum(s.write_bytes) == pytest.approx(10 * MiB, rel=0.01) and s.write_bytes[0] == 0


def test_job_throughput_joins_hosts_of_any_bin_width():
    """Hosts' series at 1 s and 4 s bins (epoch-aligned) join at 4 s: bytes kept, bins lined up."""
    from ckprof.analysis.job_model import HostSeries
    from ckprof.analysis.job_throughput import join

    a = HostSeries(bin_s=1, first_bin=1001, write_bytes=[1, 2, 3, 4, 5], read_bytes=[0] * 5)  # s 1001..1005
    b = HostSeries(bin_s=4, first_bin=251, write_bytes=[10, 20], read_bytes=[7, 0])  # s 1004..1011
    j = join({"a": a, "b": b, "c": None})
    assert j.bin_s == 4 and j.start_wall_ns == 1000 * 10**9
    assert j.write_bytes == [1 + 2 + 3, 4 + 5 + 10, 20] and j.read_bytes == [0, 7, 0]
    assert j.write_bytes_total == 45 and j.hosts == 2 and j.hosts_without_devices == ["c"]
    assert j.peak_write_gib_per_s == pytest.approx(20 / 4 / 2**30)
    assert join({"c": None}) is None


def test_a_failed_rollup_leaves_the_summary_and_says_why(tmp_path, monkeypatch, capsys):
    """At record end a job host writes its 1 s roll-up and its summary; one failing (a full disk)
    costs only that file, with a one-line note, never the other nor the recording."""
    from ckprof.analysis import host_summary
    from ckprof.cli.record import write_job_host_files
    from ckprof.recording import rollup

    rb = RecordingBuilder(duration_s=3.0)
    rb.block("vda", on(1.0, 2.0, 50 * MiB))
    path = str(job_dir(tmp_path / "job", {"a": rb}) / "host=a")

    def full_disk(rec):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rollup, "write", full_disk)
    write_job_host_files(path)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ckprof: note: no 1 s roll-up written (OSError: [Errno 28] No space left on device); "
        "block(1.0) reads this host's samples"
    ]
    part, why = host_summary.read(path, {})
    assert why is None and part is not None
    assert ckprof.load(path).block(1.0)["write_bytes"].sum() == pytest.approx(50 * MiB, rel=0.01)
