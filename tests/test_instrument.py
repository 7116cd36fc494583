"""Zero-code instrumentation under `ckprof record`: one window per torch.save / DCP save, with
path and bytes; --no-patch; chaining to an existing sitecustomize; no torch import paid for."""

import json
import os
import sys

import pytest
from support.command import ckprof_cmd
from support.frameworks import with_savelog

import ckprof
from ckprof.analysis import analyze
from ckprof.record.instrument import pythonpath_with_site, site_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "train_checkpoint.py")


def record(tmp_path, *cmd, opts=(), env=None):
    out = tmp_path / "rec"
    r = ckprof_cmd("record", "-q", "-o", str(out), "--path", str(tmp_path), *opts, "--", *cmd, env=env, timeout=240)
    assert r.returncode == 0, r.stderr
    return ckprof.load(str(out)), r


def events(rec):
    with open(os.path.join(rec.path, "events.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_torch_save_and_dcp_give_one_window_per_save(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    ck = tmp_path / "ckpt"
    rec, r = record(
        tmp_path,
        sys.executable,
        EXAMPLE,
        "--dir",
        str(ck),
        "--saver",
        "both",
        "--steps",
        "40",
        "--every",
        "10",
        "--width",
        "128",
        "--fsync",
    )
    assert r.stdout.count("saved ") == 4
    cps = analyze(rec).report["checkpoints"]
    assert [c["source"] for c in cps] == ["patch"] * 4  # DCP's own torch.save calls inside are not windows
    assert [c["api"] for c in cps] == ["torch.save", "torch.distributed.checkpoint.save"] * 2
    for c, step in zip(cps, (10, 20, 30, 40)):
        path = os.path.join(ck, f"step{step:05d}" + (".pt" if c["api"] == "torch.save" else ""))
        assert c["path"] == path
        on_disk = (
            os.path.getsize(path)
            if os.path.isfile(path)
            else sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
        )
        assert c["bytes_app"] == on_disk > 100_000
        assert c["duration_s"] > 0 and c["ok"] is True


def test_no_patch_marks_nothing(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    rec, _ = record(
        tmp_path,
        sys.executable,
        EXAMPLE,
        "--dir",
        str(tmp_path / "c"),
        "--steps",
        "10",
        "--width",
        "32",
        opts=("--no-patch",),
    )
    assert not [e for e in events(rec) if e["event"] == "checkpoint_start"]
    assert rec.meta["patch"] is False


def test_async_save_window_ends_when_the_write_completes(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    script = tmp_path / "a.py"
    script.write_text(
        "import torch, torch.distributed.checkpoint as dcp\n"
        "f = dcp.async_save({'w': torch.zeros(1000, 1000)}, checkpoint_id=%r)\n"
        "f.result()\n" % str(tmp_path / "async")
    )
    rec, _ = record(tmp_path, sys.executable, str(script))
    ends = [e for e in events(rec) if e["event"] == "checkpoint_end"]
    assert len(ends) == 1 and ends[0]["ok"] is True
    assert ends[0]["name"] == "torch.distributed.checkpoint.async_save"
    assert ends[0]["bytes"] > 4_000_000 and 0 < ends[0]["blocking_s"]


def test_safetensors_save_file(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch")
    pytest.importorskip("safetensors", reason="safetensors not installed")
    script = tmp_path / "s.py"
    script.write_text(
        "import torch\nfrom safetensors.torch import save_file\n"
        "save_file({'w': torch.ones(256, 256)}, %r)\n" % str(tmp_path / "m.safetensors")
    )
    rec, _ = record(tmp_path, sys.executable, str(script))
    (cp,) = analyze(rec).report["checkpoints"]
    assert cp["api"] == "safetensors.torch.save_file"
    assert cp["bytes_app"] == os.path.getsize(tmp_path / "m.safetensors")


def test_chains_to_an_existing_sitecustomize_and_does_not_import_torch(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIR_SITECUSTOMIZE'] = 'ran'\n")
    script = tmp_path / "p.py"
    script.write_text(
        "import os, sys\nprint(os.environ.get('THEIR_SITECUSTOMIZE'), 'torch' in sys.modules,"
        " '_ckprof_autopatch' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(theirs))
    rec, r = record(tmp_path, sys.executable, str(script), env=env)
    assert r.stdout.split() == ["ran", "False", "True"]


def test_pythonpath_keeps_the_users_entries():
    assert pythonpath_with_site("/a:/b") == os.pathsep.join([site_dir(), "/a", "/b"])
    assert pythonpath_with_site(pythonpath_with_site(None)) == site_dir()


def test_dcp_load_is_a_load_window(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    script = tmp_path / "l.py"
    ck = tmp_path / "dcp"
    script.write_text(
        "import torch, torch.distributed.checkpoint as dcp\n"
        "sd = {'w': torch.ones(512, 512)}\n"
        "dcp.save(sd, checkpoint_id=%r)\n"
        "out = {'w': torch.zeros(512, 512)}\n"
        "dcp.load(out, checkpoint_id=%r)\n"
        "assert bool((out['w'] == 1).all())\n" % (str(ck), str(ck))
    )
    rec, _ = record(tmp_path, sys.executable, str(script))
    rep = analyze(rec).report
    assert [(c["kind"], c["api"]) for c in rep["checkpoints"]] == [
        ("save", "torch.distributed.checkpoint.save"),
        ("load", "torch.distributed.checkpoint.load"),
    ]
    assert rep["run"]["loads"] == 1 and rep["run"]["mean_restart_s"] > 0


def test_save_inside_a_marked_checkpoint_is_one_window(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    script = tmp_path / "m.py"
    script.write_text(
        "import torch, ckprof\n"
        "with ckprof.checkpoint(step=7, path=%r):\n"
        "    torch.save({'w': torch.ones(64, 64)}, %r)\n"
        "torch.save({'w': torch.ones(64, 64)}, %r)\n" % (str(tmp_path), str(tmp_path / "a.pt"), str(tmp_path / "b.pt"))
    )
    rec, _ = record(tmp_path, sys.executable, str(script))
    assert len([e for e in events(rec) if e["event"] == "checkpoint_start"]) == 3
    cps = analyze(rec).report["checkpoints"]
    assert [(c["source"], c["step"], c["path"]) for c in cps] == [
        ("api", 7, str(tmp_path)),
        ("patch", None, str(tmp_path / "b.pt")),
    ]


FINISH = """
import json, os, sys, time, torch
d = sys.argv[1]
sd = {"w": torch.randn(512, 512)}
from savelog import waited_ns  # with_savelog puts tests/frameworks on the path
saves = []
for k in range(3):
    time.sleep(0.4)  # training between saves
    w0, t0 = waited_ns(), time.monotonic_ns()
    final = os.path.join(d, f"model_{k}.pt")
    if k == 1:  # the app's own finishing: write under a temporary name, fsync, rename
        torch.save(sd, final + ".tmp")
        with open(final + ".tmp", "rb+") as f:
            time.sleep(0.1)  # the app does something else between the save and its fsync
            os.fsync(f.fileno())
        os.replace(final + ".tmp", final)
    else:
        torch.save(sd, final)
        fd = os.open(final, os.O_RDONLY)
        time.sleep(0.1)
        os.fsync(fd)
        os.close(fd)
    t1 = time.monotonic_ns()
    saves.append([t0, t1, waited_ns() - w0])
print(json.dumps(saves))
"""


def test_the_apps_fsync_and_rename_after_a_save_are_part_of_it(tmp_path):
    """The save ends when the app's own fsync/rename of its files returns, and a file renamed to
    its final name is followed there (no 'gone before the tracker looked')."""
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    script = tmp_path / "finish.py"
    script.write_text(with_savelog(FINISH))
    ck = tmp_path / "ck"
    ck.mkdir()
    rec, r = record(tmp_path, sys.executable, str(script), str(ck))
    saves = json.loads(r.stdout.strip().splitlines()[-1])
    ext = [e for e in events(rec) if e["event"] == "checkpoint_extend"]
    assert [e["op"] for e in ext] == ["fsync", "fsync", "replace", "fsync"]
    assert ext[2]["renamed_to"] == str(ck / "model_1.pt")
    cps = analyze(rec).report["checkpoints"]
    assert len(cps) == 3  # three saves 0.4 s apart in one folder: three checkpoints
    start_ns = rec.start_ns
    for c, (a, b, waited) in zip(cps, saves):
        s0, e0 = start_ns + c["start_s"] * 1e9, start_ns + c["app_end_s"] * 1e9
        cover = (min(e0, b) - max(s0, a)) / (b - a)
        print(
            f"{c['path']}: window covers {cover:.1%} of the measured save, starts {(a - s0) / 1e6:.2f} ms before it; "
            f"the script waited {waited / 1e6:.1f} ms for a CPU in it"
        )
        # ≥ 95 %, less what the script's thread waited for a CPU (after the window's last stamp, before
        # its own clock read, no window can hold that wait: tests/support/frameworks.py)
        assert cover >= 0.95 - waited / (b - a) and -0.5e9 <= a - s0 <= 0.5e9
    assert cps[1]["path"] == str(ck / "model_1.pt")
    assert not any("removed before" in x for c in cps for x in c["durable_basis"])


def test_step_and_folder_name_the_checkpoint():
    import dataclasses

    from ckprof.analysis.grouping import checkpoint_key, step_in_path
    from ckprof.analysis.records import Window

    assert step_in_path("/out/checkpoint-500/optimizer.pt") == 500
    assert step_in_path("/ck/epoch=0-step=50.ckpt") == 50
    assert step_in_path("/ck/global_step7/mp_rank_00_model_states.pt") == 7
    assert step_in_path("/ck/rank0.pt") is None
    w = Window(
        id="1", source="patch", kind="save", start_ns=0, app_end_ns=1, name="torch.save", path="/ck/step_3/rank1.pt"
    )
    assert checkpoint_key(w) == ("save", "dir", "/ck/step_3", 3)
    dcp = dataclasses.replace(w, name="torch.distributed.checkpoint.save", path="/ck/step_3")
    assert checkpoint_key(dcp) == ("save", "dir", "/ck/step_3", 3)
