"""Provenance in every recording (issue 26 item 3): a real `ckprof record` writes meta.json's
`provenance` (library versions, the command's and its config files' sha256, each --path's mount
options as /proc/self/mountinfo has them), and the report shows it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from support.command import ckprof_cmd
from support.system import mount_tmpfs, need_root

import ckprof
from ckprof.analysis import analyze
from ckprof.record import provenance as P
from ckprof.report.render import to_html, to_markdown

PY = sys.executable


def mountinfo_line(mount_point: str) -> list[str]:
    """The last /proc/self/mountinfo line mounted at `mount_point`, split (proc(5))."""
    lines = [ln.split() for ln in open("/proc/self/mountinfo") if ln.split()[4] == mount_point]
    return lines[-1]


def test_a_recording_names_its_libraries_configs_and_target_mount_options(tmp_path):
    need_root()
    target = mount_tmpfs(tmp_path / "target", size="4m")
    try:
        subprocess.run(["mount", "-o", "remount,noatime,nodev", str(target)], check=True)
        cfg = tmp_path / "run.yaml"
        cfg.write_text("model: llama3-8b\ncheckpoint:\n  fsync: true\n")
        big = tmp_path / "huge.json"
        big.write_bytes(b"[" + b"0," * (P.CONFIG_MAX_BYTES // 2) + b"0]")
        argv = [PY, "-c", "import sys; print(sys.argv)", str(cfg), f"--config={big}"]
        r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "rec"), "--path", str(target), "--", *argv)
        assert r.returncode == 0, r.stderr
        rec = ckprof.load(str(tmp_path / "rec"))
        line = mountinfo_line(str(target))
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)
    prov = rec.meta["provenance"]
    assert prov["command_sha256"] == hashlib.sha256("\0".join(argv).encode()).hexdigest()
    assert prov["config_sha256"] == {str(cfg): hashlib.sha256(cfg.read_bytes()).hexdigest()}
    assert str(big) in prov["config_not_hashed"] and "over 1048576 B" in prov["config_not_hashed"][str(big)]
    # the command runs this Python: its versions as importlib.metadata sees them
    assert prov["libraries"]["numpy"] == importlib.metadata.version("numpy")
    assert prov["libraries_unknown"] is None
    mount = rec.meta["topology"]["paths"][0]["mount"]
    assert mount["options"] == line[5] and "noatime" in mount["options"].split(",")
    assert mount["super_options"] == line[line.index("-") + 3] and "size=4096k" in mount["super_options"]

    rep = analyze(rec).model
    p = rep.recording.provenance
    assert p.kernel == os.uname().release and p.libraries["numpy"] == importlib.metadata.version("numpy")
    assert p.file_systems[0].fstype == "tmpfs" and p.file_systems[0].options == mount["options"]
    assert p.config_sha256 == prov["config_sha256"] and p.gpu_driver is None and p.gpu_driver_unknown
    js = rep.to_jsonable()["recording"]["provenance"]
    assert js["command_sha256"] == prov["command_sha256"]
    md = to_markdown(rep)
    assert "## Provenance" in md and f"config {cfg}: sha256 {prov['config_sha256'][str(cfg)]}" in md
    assert "mount options " + mount["options"] in md
    # the HTML report carries the same section (a browser reads its text: tests/test_report_chromium.py)
    page = to_html(rep, {})
    section = page[page.index("<h2 id='provenance'>") :]
    assert f"command sha256 {prov['command_sha256']}" in section and f"kernel {os.uname().release}" in section
    assert f"config {cfg}: sha256 {prov['config_sha256'][str(cfg)]}" in section


def test_another_python_or_no_python_leaves_the_libraries_unknown_with_why(tmp_path):
    other = tmp_path / "bin" / "python3"
    other.parent.mkdir()
    os.symlink(os.path.realpath(PY), other)  # the same binary, another environment
    p = P.provenance([str(other), "-c", "pass"], str(tmp_path))
    assert p["libraries"] is None and "not the recorder's Python" in p["libraries_unknown"]
    p = P.provenance(["/bin/sh", "-c", "true"], str(tmp_path))
    assert p["libraries"] is None and "not a Python script" in p["libraries_unknown"]
    script = tmp_path / "train"
    script.write_text(f"#!{PY}\nprint(1)\n")
    script.chmod(0o755)
    assert P.provenance([str(script)], str(tmp_path))["libraries"]["numpy"] == importlib.metadata.version("numpy")


def test_dlio_as_the_command_gets_its_version_and_commit(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist = site / "dlio_benchmark-2.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dlio_benchmark\nVersion: 2.0.0\n\n")
    commit = "0123456789abcdef0123456789abcdef01234567"
    (dist / "direct_url.json").write_text(
        json.dumps(
            {"url": "https://github.com/argonne-lcf/dlio_benchmark", "vcs_info": {"vcs": "git", "commit_id": commit}}
        )
    )
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    p = P.provenance([PY, "-m", "dlio_benchmark.main", "workload=llama3_8b"], str(tmp_path))
    assert p["dlio"] == {"version": "2.0.0", "commit": commit, "archive_sha256": None, "unknown": None}
    assert p["libraries"]["dlio_benchmark"] == "2.0.0"
    assert "dlio" not in P.provenance([PY, "-c", "pass"], str(tmp_path))
    # a shell running a `dlio_benchmark` that is no Python on the command's PATH (here: none at all;
    # where DLIO is installed, its console script on PATH is a Python and would be read)
    p = P.provenance(["/bin/sh", "dlio_benchmark"], str(tmp_path), env={"PATH": str(tmp_path)})
    assert p["dlio"]["version"] is None and "not a Python script" in p["dlio"]["unknown"]


def test_dlio_installed_from_an_archive_gets_the_archive_s_sha256(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist = site / "dlio_benchmark-2.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dlio_benchmark\nVersion: 2.0.0\n\n")
    sha = "109e875177e587e47b949297346c3b82186cfa956a19ad8966ec5e975c1afae6"
    # as pip wrote it for `pip install ./dlio_benchmark-2.0.0-e1919d7b.tar.gz` (pip 25)
    url = {"archive_info": {"hash": f"sha256={sha}", "hashes": {"sha256": sha}}, "url": "file:///x.tar.gz"}
    (dist / "direct_url.json").write_text(json.dumps(url))
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    p = P.provenance([PY, "-m", "dlio_benchmark.main"], str(tmp_path))
    assert p["dlio"] == {"version": "2.0.0", "commit": None, "archive_sha256": sha, "unknown": None}
    del url["archive_info"]["hashes"]  # an older pip wrote `hash` alone
    (dist / "direct_url.json").write_text(json.dumps(url))
    assert P.provenance([PY, "-m", "dlio_benchmark.main"], str(tmp_path))["dlio"]["archive_sha256"] == sha


def test_gpu_driver_version_is_in_the_gpu_collectors_describe():
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py not installed")
    from unittest import mock

    from test_gpu import FakeNvml, h100

    from ckprof.collectors.gpu import GpuCollector

    with (
        FakeNvml([h100(0)]),
        mock.patch.object(pynvml, "nvmlSystemGetDriverVersion", autospec=True, return_value="550.54.15"),
    ):
        c = GpuCollector(env={})
        assert c.probe().ok
        d = c.describe()
        c.close()
    assert d["driver_version"] == "550.54.15" and d["driver_version_error"] is None
    with (
        FakeNvml([h100(0)]),
        mock.patch.object(
            pynvml,
            "nvmlSystemGetDriverVersion",
            autospec=True,
            side_effect=pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED),
        ),
    ):
        c = GpuCollector(env={})
        assert c.probe().ok
        d = c.describe()
        c.close()
    assert d["driver_version"] is None and d["driver_version_error"]


def test_a_launchers_python_command_is_the_one_whose_libraries_count(tmp_path):
    """mpirun -np 8 dlio_benchmark ...: the launcher is no Python; the command it runs is."""
    launch = tmp_path / "launch"
    launch.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')
    launch.chmod(0o755)
    p = P.provenance([str(launch), "-np", "2", PY, "-c", "pass"], str(tmp_path))
    assert p["libraries"]["numpy"] == importlib.metadata.version("numpy") and "argv[3]" in p["libraries_source"]
    dlio = tmp_path / "dlio_benchmark"
    dlio.write_text(f"#!{PY}\nprint(1)\n")
    dlio.chmod(0o755)
    p = P.provenance([str(launch), "-np", "2", str(dlio), "workload=llama3_8b"], str(tmp_path))
    try:
        expected = {"version": importlib.metadata.version("dlio_benchmark"), "unknown": None}
    except importlib.metadata.PackageNotFoundError:
        expected = {"version": None, "unknown": "dlio_benchmark is not installed in this Python"}
    assert {k: p["dlio"][k] for k in expected} == expected


def test_compare_flags_the_provenance_that_differs_and_not_what_is_unknown():
    from ckprof.analysis.model import Provenance, TargetFileSystem
    from ckprof.analysis.provenance import differences

    fs = TargetFileSystem("/ckpt", "/ckpt", "ext4", "/dev/nvme0n1", "rw,relatime", "rw,data=ordered")
    a = Provenance(
        kernel="6.8.0",
        ckprof_version="0.1.0",
        python="3.11.7",
        libraries={"torch": "2.5.1", "numpy": "2.1.0"},
        gpu_driver="550.54.15",
        file_systems=[fs],
        command_sha256="c" * 64,
        config_sha256={"/w/a.yaml": "a" * 64},
    )
    assert differences(a, a) == []
    b = Provenance(
        kernel="6.8.0",
        ckprof_version="0.1.0",
        python="3.12.1",  # the recorder's Python, not the command's: not flagged
        libraries={"torch": "2.6.0", "numpy": "2.1.0", "s3fs": "2026.9.0"},
        gpu_driver=None,  # unknown: no difference guessed
        gpu_driver_unknown="no GPU recorded",
        file_systems=[TargetFileSystem("/ckpt", "/ckpt", "ext4", "/dev/nvme0n1", "rw,noatime", "rw,data=ordered")],
        command_sha256="d" * 64,
        config_sha256={"/w/a.yaml": "b" * 64},
    )
    assert differences(a, b) == [
        ("s3fs version", "not installed", "2026.9.0"),
        ("torch version", "2.5.1", "2.6.0"),
        ("/ckpt: mount options", "rw,relatime", "rw,noatime"),
        ("config files' sha256", "a" * 12, "b" * 12),
    ]
    assert differences(a, None) == [("provenance", "recorded", "not recorded")]
    unknown_libs = Provenance(kernel="6.9.0", libraries=None, libraries_unknown="another Python")
    assert differences(a, unknown_libs) == [("kernel", "6.8.0", "6.9.0"), ("config files' sha256", "a" * 12, "none")]


def test_a_hydra_config_group_picked_from_a_config_dir_is_hashed(tmp_path):
    # DLIO as MLPerf Storage runs it: `dlio_benchmark --config-dir DIR workload=NAME ++workload.x=y`
    conf = tmp_path / "conf"
    (conf / "workload").mkdir(parents=True)
    wl = conf / "workload" / "llama3_8b_small.yaml"
    wl.write_text("checkpoint:\n  fsync: True\n")
    argv = ["dlio_benchmark", "--config-dir", "conf", "workload=llama3_8b_small", "++workload.output.folder=/o"]
    hashes, skipped = P.config_hashes(argv, str(tmp_path))
    assert hashes == {str(wl): hashlib.sha256(wl.read_bytes()).hexdigest()} and skipped == {}
    # the = form, and a group whose option the directory does not have: nothing guessed
    assert P.config_hashes(["x", f"--config-dir={conf}", "workload=other"], "/")[0] == {}
    assert P.config_hashes(["x", "workload=llama3_8b_small"], str(tmp_path))[0] == {}  # no --config-dir
