"""`ckprof record` under faults: full and read-only file systems, signals, closed or full stderr,
directories that are not ours, a killed recorder — each with the real thing."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from support.command import CKPROF, ckprof_cmd
from support.system import fill

import ckprof


def meta(rec) -> dict:
    return json.loads((rec / "meta.json").read_text())


# -- exit status and signals ----------------------------------------------------------------------


def test_exit_code_passes_through(tmp_path):
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", "sh", "-c", "exit 7")
    assert r.returncode == 7 and meta(tmp_path / "r")["status"] == "complete"


def test_death_by_signal_passes_through(tmp_path):
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == -signal.SIGTERM  # ckprof died of the same signal
    assert meta(tmp_path / "r")["exit"]["signal"] == signal.SIGTERM


def test_command_not_found_is_127(tmp_path):
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", "no-such-command-ckprof")
    assert r.returncode == 127 and "command not found" in r.stderr


def test_child_that_exits_at_once(tmp_path):
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", "true")
    assert r.returncode == 0 and ckprof.load(str(tmp_path / "r")).problems == []


def test_child_that_closes_its_stdout(tmp_path):
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", "sh", "-c", "exec >&-; sleep 0.2; exit 3")
    assert r.returncode == 3 and meta(tmp_path / "r")["status"] == "complete"


def test_background_process_left_behind_does_not_hang(tmp_path):
    t0 = time.monotonic()
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", "sh", "-c", "sleep 30 >/dev/null 2>&1 & exit 0")
    assert r.returncode == 0 and time.monotonic() - t0 < 15


def test_kill_after_kills_a_child_that_ignores_sigterm(tmp_path):
    p = subprocess.Popen(
        [*CKPROF, "record", "-q", "--kill-after", "0.5", "-o", str(tmp_path / "r"), "--", sys.executable, "-c",
         "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == -signal.SIGKILL  # the child was SIGKILLed; ckprof dies the same way
    assert "sending SIGKILL" in p.stderr.read()
    assert meta(tmp_path / "r")["exit"]["signal"] == signal.SIGKILL


COUNT_SIGINT = (
    "import signal, sys, time\n"
    "hits = []\n"
    "signal.signal(signal.SIGINT, lambda *a: hits.append(1))\n"
    "print('ready', flush=True)\n"
    "while not hits: time.sleep(0.01)\n"
    "time.sleep(0.8)\n"
    "open(sys.argv[1], 'w').write(str(len(hits)))\n"
)


@pytest.mark.parametrize("to", ["group", "ckprof"])
def test_sigint_reaches_the_child_once(tmp_path, to):
    """F1: `kill -INT -PGID` (job control, launchers) and `kill -INT PID` each reach the command
    exactly once: it runs in its own process group, and ckprof forwards to it."""
    p = subprocess.Popen(
        [*CKPROF, "record", "-q", "-o", str(tmp_path / "r"), "--", sys.executable, "-c", COUNT_SIGINT,
         str(tmp_path / "hits")],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert p.stdout.readline().strip() == "ready"
    if to == "group":
        os.killpg(p.pid, signal.SIGINT)
    else:
        os.kill(p.pid, signal.SIGINT)
    assert p.wait(timeout=30) == 0
    assert (tmp_path / "hits").read_text() == "1"


def test_terminal_ctrl_c_starts_no_kill_timer(tmp_path):
    """F2: a terminal's Ctrl-C reaches the child directly (the foreground process group); a child
    that takes 1.5 s to finish its checkpoint is not SIGKILLed by a 0.3 s --kill-after."""
    child = "import signal,time\nhits=[]\nsignal.signal(signal.SIGINT, lambda *a: hits.append(1))\n"
    child += "print('ready', flush=True)\nsignal.pause(); time.sleep(1.5); print('saved', len(hits), flush=True)"
    pid, fd = pty.fork()
    if pid == 0:  # a session of its own with the pty as controlling terminal, as an interactive shell
        os.execvp(CKPROF[0], [*CKPROF, "record", "-q", "--kill-after", "0.3", "-o", str(tmp_path / "r"), "--",
                              sys.executable, "-c", child])  # fmt: skip
    out = b""
    deadline = time.monotonic() + 30
    while b"ready" not in out and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            out += os.read(fd, 1024)
    time.sleep(0.5)  # see the issue note: a Ctrl-C in the command's first instants was once lost under load
    os.write(fd, b"\x03")  # the tty driver sends SIGINT to the foreground group (si_code SI_KERNEL)
    deadline = time.monotonic() + 60
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"ckprof did not exit after the command did: {out!r}")
        try:
            if select.select([fd], [], [], 0.2)[0]:
                out += os.read(fd, 1024)
        except OSError:  # EIO: every end of the pty is closed
            time.sleep(0.05)
    status = meta(tmp_path / "r")["exit"]
    assert b"saved 1" in out and status == {"code": 0, "signal": None, "error": None}, (out, status)


def test_kill_9_of_the_recorder_leaves_a_loadable_recording(tmp_path):
    p = subprocess.Popen([*CKPROF, "record", "-q", "--flush-interval", "200ms", "-o", str(tmp_path / "r"), "--",
                          "sleep", "30"], stderr=subprocess.DEVNULL)  # fmt: skip
    # killed once the command runs and a flush has had time to happen (a fixed 2 s sleep was too
    # short on a loaded machine: the recorder had not yet made its directory)
    events = tmp_path / "r" / "events.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (events.exists() and '"child_start"' in events.read_text()):
        time.sleep(0.1)
    time.sleep(1.0)
    p.kill()
    p.wait()
    rec = ckprof.load(str(tmp_path / "r"))
    assert not rec.samples("block").empty  # what was flushed is there
    assert any("did not finish" in x for x in rec.problems)
    child = next(
        json.loads(x) for x in (tmp_path / "r" / "events.jsonl").read_text().splitlines() if '"child_start"' in x
    )
    os.killpg(child["pid"], signal.SIGKILL)  # the command leads its own group: it outlived ckprof


# -- stderr closed or full: the child's status, never ckprof's ------------------------------------


def test_stderr_full_keeps_the_childs_status(tmp_path):
    with open("/dev/full", "w") as full:
        r = subprocess.run([*CKPROF, "record", "-o", str(tmp_path / "r"), "--", "sh", "-c", "echo out; exit 3"],
                           stdout=subprocess.PIPE, stderr=full, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 3 and r.stdout == "out\n"


def test_stderr_closed_keeps_the_childs_status_and_stdout(tmp_path):
    """F17: with 2>&- ckprof's lines go nowhere (not into the child's stdout), the child's fd 2
    stays closed, and the exit status is the child's."""
    script = f'{" ".join(CKPROF)} record -o {tmp_path / "r"} -- sh -c "ls /proc/\\$\\$/fd; exit 4" 2>&-'
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    fds = r.stdout.split()
    assert r.returncode == 4 and "2" not in fds and "ckprof" not in r.stdout, r.stdout


# -- file systems -----------------------------------------------------------------------------------


def test_full_disk_mid_run_is_a_truncated_recording(tmp_path, small_fs):
    """F3: the child runs on and keeps its status; the recording says truncated and why; no temp file."""
    fs = small_fs("3m")
    rec = fs / "rec"
    r = ckprof_cmd("record", "-q", "--flush-interval", "200ms", "-o", str(rec), "--",
           "sh", "-c", f"sleep 0.5; dd if=/dev/zero of={fs}/fill bs=64k 2>/dev/null; sleep 1; exit 5")  # fmt: skip
    assert r.returncode == 5
    m = meta(rec)
    assert m["status"] == "truncated" and "disk full" in m["truncated"]
    assert not [n for n in os.listdir(rec) if ".tmp-" in n or n.startswith(".ckprof")]
    rep = ckprof_cmd("report", str(rec), "--format", "json")
    assert rep.returncode == 0 and any("truncated (disk full" in n for n in json.loads(rep.stdout)["notes"])


def test_full_file_system_at_start_is_one_line_and_runs_nothing(tmp_path, small_fs):
    """F4."""
    fs = small_fs("1m")
    fill(fs / "fill")
    r = ckprof_cmd("record", "-o", str(fs / "rec"), "--", "touch", str(tmp_path / "ran"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "No space left" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "ran").exists()


def test_file_system_gone_read_only_mid_run_keeps_the_childs_status(tmp_path, make_loop):
    """An ext4 that hits an error remounts read-only (errors=remount-ro), as on a failing disk:
    the child runs on and keeps its status, ckprof says it stopped, what was written is readable."""
    lp = make_loop("32M", direct_io=False)
    mnt = lp.mkfs_mount(tmp_path / "mnt")
    subprocess.run(["mount", "-o", "remount,errors=remount-ro", str(mnt)], check=True)
    trigger = f"/sys/fs/ext4/{lp.name}/trigger_fs_error"
    if not os.path.exists(trigger):
        pytest.skip(f"{trigger}: this kernel cannot inject an ext4 error")
    script = f"sleep 0.8; echo 1 > {trigger}; sleep 0.8; exit 6"
    r = ckprof_cmd("record", "-q", "--flush-interval", "200ms", "-o", str(mnt / "rec"), "--", "sh", "-c", script)
    assert r.returncode == 6 and "Traceback" not in r.stderr
    assert "Read-only file system" in r.stderr and "stopped recording samples" in r.stderr
    rec = ckprof.load(str(mnt / "rec"))
    assert not rec.samples("block").empty and rec.problems  # the status it could not finish is said


# -- directories: what --force may replace ----------------------------------------------------------


def test_force_never_deletes_a_users_files(tmp_path):
    """F7: meta.json and samples/ that are not a ckprof recording's are left alone, even with --force."""
    d = tmp_path / "mine"
    (d / "samples").mkdir(parents=True)
    (d / "meta.json").write_text('{"my": "own data"}')
    (d / "samples" / "keep.txt").write_text("keep")
    r = ckprof_cmd("record", "--force", "-o", str(d), "--", "true")
    assert r.returncode == 2 and "not a ckprof recording" in r.stderr
    assert (d / "meta.json").read_text() == '{"my": "own data"}' and (d / "samples" / "keep.txt").exists()


def test_force_replaces_a_recording_and_keeps_other_files(tmp_path):
    d = tmp_path / "rec"
    assert ckprof_cmd("record", "-q", "-o", str(d), "--", "sh", "-c", "exit 1").returncode == 1
    (d / "notes.txt").write_text("mine")
    assert ckprof_cmd("record", "-o", str(d), "--", "true").returncode == 2  # not without --force
    assert ckprof_cmd("record", "-q", "--force", "-o", str(d), "--", "true").returncode == 0
    assert meta(d)["exit"]["code"] == 0 and (d / "notes.txt").read_text() == "mine"


def test_output_through_a_symlink_and_with_spaces_and_non_ascii(tmp_path):
    real = tmp_path / "real dir ü ✓"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    r = ckprof_cmd("record", "-q", "-o", str(link / "rec ∆"), "--", "true")
    assert r.returncode == 0 and meta(real / "rec ∆")["status"] == "complete"
    assert ckprof_cmd("report", str(link / "rec ∆"), "--format", "md").returncode == 0


def test_recording_copied_while_it_is_written_loads(tmp_path):
    p = subprocess.Popen([*CKPROF, "record", "-q", "--flush-interval", "200ms", "-o", str(tmp_path / "r"), "--",
                          "sleep", "3"])  # fmt: skip
    deadline = time.monotonic() + 20  # a loaded machine takes a while to start the recorder
    while time.monotonic() < deadline and not list((tmp_path / "r" / "samples" / "block").glob("part-*")):
        time.sleep(0.05)
    time.sleep(0.3)
    assert p.poll() is None, "the recording ended before it could be copied mid-run"
    shutil.copytree(tmp_path / "r", tmp_path / "copy")
    p.wait(timeout=30)
    rec = ckprof.load(str(tmp_path / "copy"))
    assert rec.meta["status"] == "recording" and not rec.samples("block").empty
    assert ckprof_cmd("report", str(tmp_path / "copy"), "--format", "json").returncode == 0


# -- errors: one line, or the traceback when asked ---------------------------------------------------


def test_ckprof_debug_shows_the_traceback_and_no_hint(tmp_path):
    """F11."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.json").write_text("[1, 2]")
    plain = ckprof_cmd("report", str(bad))
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    debug = ckprof_cmd("report", str(bad), env={**os.environ, "CKPROF_DEBUG": "1"})
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "rerun with CKPROF_DEBUG" not in debug.stderr


def test_24000_marks_from_many_threads_arrive_intact(tmp_path):
    events = tmp_path / "events.jsonl"
    events.touch()
    os.environ["CKPROF_EVENTS"] = str(events)
    try:

        def work(k):
            for i in range(3000):
                ckprof.mark(f"thread {k} mark {i}", i=i)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    finally:
        del os.environ["CKPROF_EVENTS"]
    lines = events.read_bytes().splitlines()
    parsed = [json.loads(x) for x in lines]
    assert len(parsed) == 24_000 and len({p["text"] for p in parsed}) == 24_000


@pytest.mark.parametrize("args", [["--interval", "fast"], ["--path", "/no/such/dir"], [], ["--device", "nosuchdev0"]])
def test_bad_record_input_is_one_line(tmp_path, args):
    r = ckprof_cmd("record", "-o", str(tmp_path / "r"), *args, *(["--", "true"] if args else []))
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip()
    assert not (tmp_path / "r" / "meta.json").exists()


def test_a_10ms_soak_keeps_memory_flat(tmp_path):
    """Bounded version of the soak (benchmarks/soak.py runs it for 5 minutes): ckprof's RSS at
    10 ms sampling stays flat once the first parts are flushed and merged."""
    import psutil

    p = subprocess.Popen([*CKPROF, "record", "-q", "--interval", "10ms", "--flush-interval", "1s",
                          "-o", str(tmp_path / "r"), "--", "sleep", "36"])  # fmt: skip
    proc = psutil.Process(p.pid)
    rss_mib = []
    for _ in range(7):  # at 8, 12, ... 32 s
        time.sleep(4 if rss_mib else 8)
        rss_mib.append(proc.memory_info().rss / 2**20)
    assert p.wait(timeout=60) == 0
    # one step is allowed (the allocator's arenas settle as the first merges happen); no slope after
    late = max(rss_mib[3:]) - rss_mib[3]
    total = max(rss_mib) - rss_mib[0]
    assert late < 2 and total < 16, f"RSS at 8, 12, ... 32 s (MiB): {[round(x, 1) for x in rss_mib]}"
