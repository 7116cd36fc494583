"""`ckprof record` as a user runs it: the real executable, real child processes, real signals."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support.command import CKPROF, ckprof_cmd

import ckprof

PY = sys.executable


def rec_args(tmp_path, *extra):
    # --device vda-like auto choice depends on the machine: record the disks behind tmp_path
    return ["record", "-q", "-o", str(tmp_path / "rec"), "--path", str(tmp_path), *extra, "--"]


def test_exit_code_passes_through(tmp_path):
    r = ckprof_cmd(
        *rec_args(tmp_path), PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    )
    assert r.returncode == 3
    assert r.stdout == "out\n" and "err" in r.stderr
    rec = ckprof.load(str(tmp_path / "rec"))
    assert rec.meta["status"] == "complete" and rec.meta["exit"]["code"] == 3
    assert "child_exit" in set(rec.events["event"])


def test_command_not_found_is_127(tmp_path):
    r = ckprof_cmd(*rec_args(tmp_path), "no-such-command-ckprof")
    assert r.returncode == 127 and "command not found" in r.stderr
    assert ckprof.load(str(tmp_path / "rec")).meta["status"] == "complete"


def test_not_executable_is_126(tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    r = ckprof_cmd(*rec_args(tmp_path), str(script))
    if os.geteuid() == 0 and r.returncode == 0:
        pytest.skip("root can execute files without x bits on this file system")
    assert r.returncode == 126


def test_stdin_passes_through(tmp_path):
    r = ckprof_cmd(*rec_args(tmp_path), PY, "-c", "import sys; print(sys.stdin.read().upper())", input="hello")
    assert r.returncode == 0 and r.stdout.strip() == "HELLO"


def test_environment_only_gains_ckprof_variables(tmp_path):
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    env = dict(os.environ, MY_VAR="mine", PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    r = ckprof_cmd(*rec_args(tmp_path), PY, "-c", code, env=env)
    child_env = json.loads(r.stdout)
    added = set(child_env) - set(env)
    assert added and all(k.startswith("CKPROF_") for k in added), added
    changed = {k for k in env if k in child_env and child_env[k] != env[k] and k != "PYTHONPATH"}
    assert not changed
    assert child_env["CKPROF_EVENTS"] == str(tmp_path / "rec" / "events.jsonl")


def _start(tmp_path, code, *extra):
    return subprocess.Popen(
        [*CKPROF, *rec_args(tmp_path, *extra), PY, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path, timeout=20):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


TRAP = """
import os, signal, sys, time
def on(sig, frame):
    open(os.path.join({d!r}, 'got-' + signal.Signals(sig).name), 'w').close()
    sys.exit({code})
signal.signal(signal.SIGTERM, on); signal.signal(signal.SIGHUP, on)
open(os.path.join({d!r}, 'ready'), 'w').close()
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_is_forwarded_and_recording_finalised(tmp_path, sig):
    p = _start(tmp_path, TRAP.format(d=str(tmp_path), code=7))
    _wait_for(tmp_path / "ready")
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert (tmp_path / f"got-{sig.name}").exists()
    assert p.returncode == 7
    rec = ckprof.load(str(tmp_path / "rec"))
    assert rec.meta["status"] == "complete"
    exit_ev = rec.events[rec.events["event"] == "child_exit"].iloc[0]
    assert exit_ev["forwarded"] == [int(sig)]


def test_child_killed_by_signal_is_re_raised(tmp_path):
    p = _start(
        tmp_path, "import os, time; open(os.path.join(%r, 'ready'), 'w').close(); time.sleep(60)" % str(tmp_path)
    )
    _wait_for(tmp_path / "ready")
    p.send_signal(signal.SIGTERM)  # the child has no handler: it dies of SIGTERM, and so does ckprof
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM
    rec = ckprof.load(str(tmp_path / "rec"))
    assert rec.meta["exit"]["signal"] == signal.SIGTERM and rec.meta["status"] == "complete"


def test_stubborn_child_is_killed_after_grace(tmp_path):
    code = (
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(os.path.join(%r, 'ready'), 'w').close(); time.sleep(60)" % str(tmp_path)
    )
    p = _start(tmp_path, code, "--kill-after", "0.5")
    _wait_for(tmp_path / "ready")
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    assert "SIGKILL" in err


def test_sigkill_of_the_recorder_leaves_a_readable_recording(tmp_path):
    code = (
        "import ckprof, os, time\n"
        "with ckprof.checkpoint(step=1):\n"
        "    time.sleep(0.2)\n"
        "open(os.path.join(%r, 'ready'), 'w').close()\n"
        "time.sleep(30)\n" % str(tmp_path)
    )
    p = _start(tmp_path, code, "--flush-interval", "200ms")
    _wait_for(tmp_path / "ready")
    time.sleep(1.0)  # let a few flushes land
    p.kill()
    p.communicate(timeout=30)
    rec = ckprof.load(str(tmp_path / "rec"))
    assert any("did not finish" in pr for pr in rec.problems)
    host = rec.samples("host")
    assert len(host) >= 5
    assert len(rec.checkpoints()) == 1
    for name in rec.collectors:
        rec.samples(name)  # every part left behind reads
    assert not [pr for pr in rec.problems if "unreadable" in pr]


def test_no_command_is_a_usage_error(tmp_path):
    r = ckprof_cmd("record", "-o", str(tmp_path / "rec"))
    assert r.returncode == 2 and "no command" in r.stderr.lower()


def test_unknown_device_lists_the_devices(tmp_path):
    r = ckprof_cmd("record", "-o", str(tmp_path / "rec"), "--device", "nvme99n9", "--", "true")
    assert r.returncode == 2
    assert "unknown --device nvme99n9" in r.stderr and "devices here:" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "rec").exists()


def test_missing_path_is_an_error(tmp_path):
    r = ckprof_cmd("record", "--path", str(tmp_path / "nope"), "--", "true")
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_non_empty_output_refused_unless_force(tmp_path):
    out = tmp_path / "rec"
    out.mkdir()
    (out / "precious.txt").write_text("keep")
    r = ckprof_cmd("record", "-o", str(out), "--", "true")
    assert r.returncode == 2 and "--force" in r.stderr
    r = ckprof_cmd("record", "-q", "-o", str(out), "--force", "--", "true")
    assert r.returncode == 0 and (out / "precious.txt").read_text() == "keep"
    assert ckprof.load(str(out)).meta["status"] == "complete"


def test_bad_interval_is_a_usage_error(tmp_path):
    r = ckprof_cmd("record", "--interval", "fast", "--", "true")
    assert r.returncode == 2 and "interval" in r.stderr


def test_summary_line(tmp_path):
    r = ckprof_cmd("record", "-o", str(tmp_path / "rec"), "--path", str(tmp_path), "--", "true")
    assert r.returncode == 0
    assert "recorded" in r.stderr and str(tmp_path / "rec") in r.stderr and "checkpoint(s) marked" in r.stderr


def test_help_explains():
    r = ckprof_cmd("record", "--help")
    assert r.returncode == 0 and "--interval" in r.stdout and "signals" not in r.stderr


def test_doctor_lists_collectors_and_topology(tmp_path):
    r = ckprof_cmd("doctor", "--path", str(tmp_path))
    assert r.returncode == 0
    assert "block" in r.stdout and "host" in r.stdout and str(tmp_path) in r.stdout
