"""A job across hosts: one recording per node under host=<name>/, read back as one Job."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.command import CKPROF, ckprof_cmd

import ckprof
from ckprof.analysis.jobs import analyze_job
from ckprof.errors import RecordingError
from ckprof.recording.job import Job, job_identity

# Two ranks per node; every rank writes its shard inside a checkpoint window. The data files for the
# job's throughput are written beside the recorded --path, not in it: under the file-level rule
# (docs/analysis.md, "Saves from file activity") 8 MiB the tree writes under --path is a save the
# kernel saw, and a rank still writing its data while another rank's step 1 began made it part of step 1.
NODE = """
import ckprof, os, sys, time, multiprocessing as mp
def rank(r, delay):
    os.environ["RANK"] = str(r)
    with open(os.path.join({data!r}, f"data-{{r}}.bin"), "wb") as f:  # device bytes for the job's throughput
        f.write(os.urandom(8 << 20)); f.flush(); os.fsync(f.fileno())
    for step in (1, 2):
        with ckprof.checkpoint(step=step, path={d!r}, bytes=1 << 20):
            time.sleep(delay)
if __name__ == "__main__":
    node, delay = int(sys.argv[1]), float(sys.argv[2])
    ps = [mp.Process(target=rank, args=(node * 2 + i, delay)) for i in range(2)]
    [p.start() for p in ps]; [p.join() for p in ps]
"""


def start_node(tmp_path, job, name, node, delay, extra=()):
    script, ckpt = tmp_path / "node.py", tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    script.write_text(NODE.format(d=str(ckpt), data=str(tmp_path)))
    env = dict(os.environ, SLURM_JOB_ID="4242", SLURM_NODEID=str(node))
    return subprocess.Popen(
        [
            *CKPROF,
            "record",
            "-q",
            "--job-dir",
            str(job),
            "--host-name",
            name,
            "--path",
            str(ckpt),
            *extra,
            "--",
            sys.executable,
            str(script),
            str(node),
            str(delay),
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_nodes_one_job(tmp_path):
    job = tmp_path / "job"
    nodes = [start_node(tmp_path, job, "node-a", 0, 0.1), start_node(tmp_path, job, "node-b", 1, 0.6)]
    for p in nodes:
        assert p.wait(timeout=60) == 0, p.stderr.read()
    assert sorted(n for n in os.listdir(job) if not n.startswith(".")) == ["host=node-a", "host=node-b"]
    j = ckprof.load(str(job))
    assert isinstance(j, Job) and list(j.hosts) == ["node-a", "node-b"]
    meta_b = j.hosts["node-b"].meta["job"]
    assert meta_b["id"] == "4242" and meta_b["id_source"] == "SLURM_JOB_ID" and meta_b["node_rank"] == 1
    cps = j.checkpoints()
    assert len(cps) == 8 and set(cps["rank"]) == {0, 1, 2, 3}
    assert set(cps[cps["host"] == "node-b"]["rank"]) == {2, 3}
    summary = analyze_job(j).report.job.checkpoints  # the stall's one rule
    assert [c.step for c in summary] == [1, 2]
    for row in summary:
        assert row.slowest_host == "node-b" and row.hosts == 2 and row.ranks == 4
        assert row.slowest_host_s >= 0.55 and row.fastest_host_s < row.slowest_host_s
        assert row.spread_s > 0.3 and row.stall_s >= row.slowest_host_s - 1e-6  # wall-clock float rounding
        assert row.bytes_app == 4 << 20
    b = j.block()
    assert set(b["host"]) == {"node-a", "node-b"} and "t_wall_ns" in b
    # the same interface as one host's Recording: each frame gains `host` and `t_wall_ns`
    for frame in ("events", "host", "proc", "checkpoints", "block"):
        both = getattr(j, frame)() if frame != "events" else j.events
        for name, one in j.hosts.items():
            mine = getattr(one, frame)() if frame != "events" else one.events
            assert len(both[both["host"] == name]) == len(mine), frame
            assert set(mine.columns) - {"host"} <= set(both.columns), frame
    one = j.hosts["node-a"]
    assert list(one.hosts) == [one.host_name] and j.collectors == sorted(
        set(one.collectors) | set(j.hosts["node-b"].collectors)
    )
    # the clock-sync state is recorded, and an unsynchronised clock is said, not hidden
    assert "kernel" in meta_b["clock_sync"]


def test_same_host_name_twice_is_refused(tmp_path):
    job = tmp_path / "job"
    r1 = ckprof_cmd("record", "-q", "--job-dir", str(job), "--host-name", "n1", "--path", str(tmp_path), "--", "true")
    assert r1.returncode == 0
    r2 = ckprof_cmd("record", "-q", "--job-dir", str(job), "--host-name", "n1", "--path", str(tmp_path), "--", "true")
    assert r2.returncode == 2 and "same name" in r2.stderr and "--host-name" in r2.stderr


def test_half_written_host_is_named_and_the_rest_read(tmp_path):
    job = tmp_path / "job"
    r = ckprof_cmd("record", "-q", "--job-dir", str(job), "--host-name", "good", "--path", str(tmp_path), "--", "true")
    assert r.returncode == 0
    (job / "host=broken" / "samples").mkdir(parents=True)  # a node that died before its meta.json
    j = ckprof.load(str(job))
    assert list(j.hosts) == ["good"]
    assert any("host=broken" in p and "meta.json" in p for p in j.problems)


def test_job_dir_with_no_readable_host(tmp_path):
    (tmp_path / "job" / "host=x").mkdir(parents=True)
    with pytest.raises(RecordingError, match="no readable host"):
        ckprof.load(str(tmp_path / "job"))


def test_job_options_need_job_dir(tmp_path):
    r = ckprof_cmd("record", "--host-name", "x", "--", "true")
    assert r.returncode == 2 and "--job-dir" in r.stderr
    r = ckprof_cmd("record", "-o", str(tmp_path / "a"), "--job-dir", str(tmp_path / "j"), "--", "true")
    assert r.returncode == 2 and "not both" in r.stderr


def test_job_identity_from_launchers():
    assert job_identity(None, {"TORCHELASTIC_RUN_ID": "abc", "GROUP_RANK": "3"}) == {
        "id": "abc",
        "id_source": "TORCHELASTIC_RUN_ID",
        "node_rank": 3,
        "node_rank_source": "GROUP_RANK",
    }
    assert job_identity("mine", {"SLURM_JOB_ID": "1"})["id"] == "mine"


@pytest.mark.root
def test_real_hostnames_in_uts_namespaces(tmp_path):
    """Each node in its own UTS namespace (unshare -u) has its own hostname: no --host-name needed."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1)")
    job = tmp_path / "job"
    procs = []
    for name in ("alpha", "beta"):
        cmd = " ".join(
            [
                f"hostname {name} &&",
                *CKPROF,
                "record",
                "-q",
                "--job-dir",
                str(job),
                "--path",
                str(tmp_path),
                "--",
                sys.executable,
                "-c",
                "'import ckprof; ckprof.mark(\"hello\")'",
            ]
        )
        procs.append(subprocess.Popen(["unshare", "-u", "sh", "-c", cmd], stderr=subprocess.PIPE, text=True))
    for p in procs:
        assert p.wait(timeout=60) == 0, p.stderr.read()
    j = ckprof.load(str(job))
    assert list(j.hosts) == ["alpha", "beta"]
    ev = j.events
    assert set(ev[ev["event"] == "mark"]["host"]) == {"alpha", "beta"}


@pytest.mark.root
@pytest.mark.slow
def test_torchrun_workload_across_two_hosts(tmp_path):
    """A two-node 'cluster' on one machine: each node in its own UTS namespace (its own hostname),
    each wrapped by `ckprof record --job-dir`, running `ckprof workload` under torchrun (gloo) with
    2 ranks a node. The job read back finds each node's checkpoints and the slowest node."""
    pytest.importorskip("torch")
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1)")
    job, target = tmp_path / "job", tmp_path / "target"
    target.mkdir()
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for node in (0, 1):
        inner = [
            *CKPROF,
            "record",
            "-q",
            "--job-dir",
            str(job),
            "--path",
            str(target),
            "--",
            *torchrun,
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--nproc-per-node",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(port),
            "-m",
            "ckprof.cli",
            "workload",
            "--preset",
            "llama3-8b",
            "--total-size",
            "16MiB",
            "--target",
            str(target),
            "--count",
            "2",
            "--interval",
            "0.2s",
            "--load",
        ]
        procs.append(
            subprocess.Popen(
                ["unshare", "-u", "sh", "-c", f'hostname node{node} && exec "$@"', "sh", *inner],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    j = ckprof.load(str(job))
    assert list(j.hosts) == ["node0", "node1"]
    cps = j.checkpoints()
    for host in ("node0", "node1"):
        mine = cps[cps["host"] == host]
        assert sorted(mine[mine["kind"] == "save"]["step"]) == [1, 2] and (mine["kind"] == "load").sum() == 1
        assert mine["ok"].all()
    # the job's report reads both nodes as one: every node's checkpoints, the slowest node, the stall
    rep = ckprof_cmd("report", str(job), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    jr = __import__("json").loads(rep.stdout)["job"]
    assert jr["hosts"] == ["node0", "node1"] and jr["hosts_left_out"] == []
    rsaves = [c for c in jr["checkpoints"] if c["kind"] == "save"]
    assert [c["step"] for c in rsaves] == [1, 2] and all(c["hosts"] == 2 for c in rsaves), rsaves
    for c in rsaves:
        assert c["slowest_host"] in {"node0", "node1"} and c["stall_s"] >= c["slowest_host_s"] - 1e-6
        # each node its ranks' share; on failure, each node's windows of the step say which it counted
        per_node = {
            h: (n["windows"], n["bytes_app"], n["start_offset_s"], n["seconds"]) for h, n in c["per_host"].items()
        }
        assert set(c["per_host"]) == {"node0", "node1"} and c["bytes_app"] == 16 << 20, (c["step"], per_node, str(job))
    assert [c["kind"] for c in jr["checkpoints"]].count("load") == 1
    # the job's throughput: every node's device bytes once, on the wall clock, in 2^k s bins
    tp = jr["throughput"]
    assert tp["hosts"] == 2 and tp["hosts_without_devices"] == [] and tp["bin_s"] & (tp["bin_s"] - 1) == 0
    assert tp["write_bytes_total"] >= 4 * (8 << 20)  # each of the 4 ranks' fsync'd 8 MiB
    raw = ckprof.load(str(job)).samples("block", ["device", "write_sectors"])
    written = raw.groupby(["host", "device"])["write_sectors"].agg(lambda s: (s.max() - s.min()) * 512).sum()
    assert sum(tp["write_bytes"]) == tp["write_bytes_total"] and abs(tp["write_bytes_total"] - written) <= len(
        tp["write_bytes"]
    ), (tp["write_bytes_total"], written)
    assert tp["start_wall_ns"] <= jr["start_wall_ns"] < tp["start_wall_ns"] + tp["bin_s"] * 1e9
    html = ckprof_cmd("report", str(job), "-o", str(tmp_path / "job.html"))
    page = (tmp_path / "job.html").read_text()
    assert html.returncode == 0 and "id='plot-nodes'" in page and "id='plot-throughput'" in page


def test_host_summaries_stand_for_the_samples(tmp_path, monkeypatch):
    """Each host writes summary.json as its recording closes; the job report reads those instead of
    the samples and gives the same report; a recording changed since is analysed from its samples."""
    from ckprof.analysis import host_summary, jobs

    job = tmp_path / "job"
    nodes = [start_node(tmp_path, job, "node-a", 0, 0.1), start_node(tmp_path, job, "node-b", 1, 0.4)]
    for p in nodes:
        assert p.wait(timeout=60) == 0, p.stderr.read()
    for h in ("node-a", "node-b"):
        s = job / f"host={h}" / host_summary.SUMMARY_FILE
        assert s.exists() and s.stat().st_size < 64 * 1024
    with_summaries = ckprof_cmd("report", str(job), "--format", "json")
    assert with_summaries.returncode == 0, with_summaries.stderr
    # read, not analysed: with every host summarised, no host's samples are analysed
    calls = []
    monkeypatch.setattr(jobs, "host_part", lambda *a, **k: calls.append(a) or pytest.fail("analysed"))
    rep = analyze_job(ckprof.load(str(job)), keep_analyses=0, engine="serial").report
    assert calls == [] and rep.job.checkpoints[0].slowest_host == "node-b"
    monkeypatch.undo()
    for h in ("node-a", "node-b"):
        os.rename(job / f"host={h}" / "summary.json", tmp_path / f"{h}.summary.json")
    from_samples = ckprof_cmd("report", str(job), "--format", "json")
    assert from_samples.returncode == 0, from_samples.stderr
    assert with_summaries.stdout == from_samples.stdout
    for h in ("node-a", "node-b"):
        os.rename(tmp_path / f"{h}.summary.json", job / f"host={h}" / "summary.json")
    # a copy without its files' times (cp -r) keeps its summaries: none is stale
    import shutil

    copy = shutil.copytree(job, tmp_path / "copy", copy_function=shutil.copyfile)
    notes = analyze_job(ckprof.load(str(copy)), keep_analyses=0, engine="serial").report.notes
    assert not [n for n in notes if n.code == "host_summaries_not_used"], notes
    part, why = host_summary.read(str(copy / "host=node-a"), {})
    assert why is None and part.report["recording"]["path"] == str(copy / "host=node-a")  # where it is now
    # a marker added to node-b after its summary was written: its summary is stale, and said so
    with open(job / "host=node-b" / "events.jsonl", "a") as f:
        f.write("\n")
    notes = analyze_job(ckprof.load(str(job)), keep_analyses=0, engine="serial").report.notes
    (stale,) = [n for n in notes if n.code == "host_summaries_not_used"]
    assert "(the recording changed since)" in stale.text and "node-b" in stale.text


def test_block_rollups_stand_for_the_samples(tmp_path, monkeypatch):
    """Each job host writes its block rates at 1 s as it closes; Recording/Job.block(1.0) read that
    roll-up instead of the samples and give the same frame; a changed recording's is not used."""
    import pandas as pd

    from ckprof.recording import reader, rollup

    job = tmp_path / "job"
    nodes = [start_node(tmp_path, job, "node-a", 0, 1.0), start_node(tmp_path, job, "node-b", 1, 1.2)]
    for p in nodes:
        assert p.wait(timeout=60) == 0, p.stderr.read()
    for h in ("node-a", "node-b"):
        assert (job / f"host={h}" / rollup.BLOCK_FILE).exists()
    with monkeypatch.context() as m:  # read, not computed: the samples' rates are never made
        m.setattr(reader, "block_rates", lambda *a, **k: pytest.fail("computed from the samples"))
        from_rollups = ckprof.load(str(job)).block(1.0)
    assert not from_rollups.empty and set(from_rollups["host"]) == {"node-a", "node-b"}
    # the README's two DuckDB queries, run on this job: the same bytes as ckprof's frames
    import re

    import duckdb

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    queries = re.findall(r"```sql\n(.*?)```", readme, re.S)
    # each reads '<the README's job directory>/host=*/...': that directory becomes this test's job
    readme_job = {m for q in queries for m in re.findall(r"read_parquet\('([^']+?)/host=\*/", q)}
    assert len(queries) == 2 and len(readme_job) == 1, queries
    per_device_sql, per_second_sql = [q.replace(next(iter(readme_job)), str(job)) for q in queries]
    raw = ckprof.load(str(job)).samples("block", ["device", "write_sectors"])
    want = raw.groupby(["host", "device"])["write_sectors"].agg(lambda s: (s.max() - s.min()) * 512 / 2**30)
    got = duckdb.sql(per_device_sql).df().set_index(["host", "device"])
    assert got["written_gib"].to_dict() == pytest.approx(want.to_dict())
    per_second = duckdb.sql(per_second_sql).df()
    assert per_second["written_gib"].sum() == pytest.approx(from_rollups["write_bytes"].sum() / 2**30)
    assert per_second["hosts"].max() == 2 and per_second["unix_s"].is_monotonic_increasing
    assert (per_second["unix_s"] * 1e9 - from_rollups["t_wall_ns"].min()).abs().min() < 1e9  # wall clock
    for h in ("node-a", "node-b"):
        os.rename(job / f"host={h}" / rollup.BLOCK_FILE, tmp_path / f"{h}.rollup")
    from_samples = ckprof.load(str(job)).block(1.0)
    pd.testing.assert_frame_equal(from_rollups, from_samples)
    os.rename(tmp_path / "node-b.rollup", job / "host=node-b" / rollup.BLOCK_FILE)
    rec = ckprof.load(str(job / "host=node-b"))
    assert rollup.read_block(rec) is not None
    (job / "host=node-a" / rollup.BLOCK_FILE).write_bytes(b"PAR1 torn")  # damaged: the samples answer
    assert rollup.read_block(ckprof.load(str(job / "host=node-a"))) is None
    with open(job / "host=node-b" / "events.jsonl", "a") as f:  # a marker added since: stale
        f.write("\n")
    assert rollup.read_block(rec) is None
    pd.testing.assert_frame_equal(
        rec.block(1.0),
        ckprof.load(str(job))
        .block(1.0)
        .query("host == 'node-b'")
        .drop(columns=["host", "t_wall_ns"])
        .reset_index(drop=True),
    )
