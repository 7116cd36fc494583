"""The recorder's fault tier: `ckprof record` under real signals, full and read-only file systems,
closed and full descriptors. Every case runs the real `ckprof` (python -m ckprof) over real
child processes; the guarantees are written in docs/faults/record.md.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import CKPROF, ckprof_cmd, need_binary, need_root, run

import ckprof

PY = sys.executable

# A child that counts the terminating signals it receives: it says it is ready once its handlers
# are in place, and after the first signal waits `grace` seconds (a second delivery, or ckprof's
# SIGKILL, would land in that time) before writing what it got.
COUNTING = """
import json, signal, sys, time
out, grace = sys.argv[1], float(sys.argv[2])
got = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda n, f: got.append(signal.Signals(n).name))
open(out + ".ready", "w").close()
while not got:
    time.sleep(0.01)
time.sleep(grace)
with open(out, "w") as f:
    json.dump(got, f)
"""


def rec_args(tmp_path: Path, out: Path | None = None, *extra: str) -> list[str]:
    return ["record", "-q", "--no-patch", "-o", str(out or tmp_path / "rec"), "--path", str(tmp_path),
            "--flush-interval", "0.2s", *extra, "--"]


def wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def start_counting(tmp_path: Path, grace_s: float, *extra: str, wrap=(), **popen) -> tuple[subprocess.Popen, Path]:
    """ckprof recording the counting child, in a process group of its own; returns once the child is ready."""
    got = tmp_path / "got.json"
    popen.setdefault("start_new_session", True)
    p = subprocess.Popen([*CKPROF, *rec_args(tmp_path, None, *extra), *wrap, PY, "-c", COUNTING, str(got),
                          str(grace_s)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **popen)
    try:
        wait_for(Path(f"{got}.ready"))
    except AssertionError:
        p.kill()
        raise
    return p, got


def child_exit(out: Path) -> dict:
    ev = ckprof.load(str(out)).events
    return ev[ev["event"] == "child_exit"].iloc[0].to_dict()


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckprof: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture
def tmpfs(tmp_path):
    """Factory: tmpfs(size) → a freshly mounted tmpfs of that size in tmp_path; unmounted after."""
    need_root()
    mounts: list[Path] = []

    def make(size: str) -> Path:
        mp = tmp_path / f"tmpfs{len(mounts)}"
        mp.mkdir()
        run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mp)])
        mounts.append(mp)
        return mp

    yield make
    for mp in reversed(mounts):
        subprocess.run(["umount", "-l", str(mp)], capture_output=True)


def ext4_on_loop(make_loop, mountpoint: Path, *mount_opts: str) -> tuple[Path, str]:
    """A small ext4 on a fresh loop device, mounted with `mount_opts`: (mountpoint, loop name)."""
    need_binary("mkfs.ext4")
    lp = make_loop("16M")
    run(["mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", lp.dev])
    mountpoint.mkdir()
    run(["mount", *(["-o", ",".join(mount_opts)] if mount_opts else []), lp.dev, str(mountpoint)])
    lp.mountpoints.append(mountpoint)  # unmounted and detached by make_loop's teardown
    return mountpoint, lp.name


# -- F1, F2: each terminating signal reaches the command once; only ckprof's own forwarding arms --kill-after

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_ckprof_alone_is_forwarded_once(tmp_path, sig):
    p, got = start_counting(tmp_path, 0.5)
    os.kill(p.pid, sig)
    assert p.wait(60) == 0, p.stderr.read()
    assert json.loads(got.read_text()) == [sig.name]
    assert child_exit(tmp_path / "rec")["forwarded"] == [sig]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_process_group_is_delivered_once_and_arms_no_timer(tmp_path, sig):
    # kill -INT -PGID, as a shell's `kill %1` and many launchers do: ckprof and the command both
    # get it from the kernel. --kill-after 0.2 against a 1 s graceful shutdown: a timer started by
    # a signal ckprof did not forward would SIGKILL the command (F2).
    p, got = start_counting(tmp_path, 1.0, "--kill-after", "0.2")
    os.killpg(p.pid, sig)
    assert p.wait(60) == 0, p.stderr.read()
    assert json.loads(got.read_text()) == [sig.name]
    ev = child_exit(tmp_path / "rec")
    assert ev["forwarded"] == [] and not ev["killed"]
    assert ev["received"][0]["why"].startswith("sent to the process group")


def test_a_command_that_left_the_group_still_gets_a_group_signal_once(tmp_path):
    need_binary("setsid")  # not a group leader, setsid(1) calls setsid(2) and execs: same pid
    p, got = start_counting(tmp_path, 0.5, wrap=("setsid",))
    os.killpg(p.pid, signal.SIGTERM)
    assert p.wait(60) == 0, p.stderr.read()
    assert json.loads(got.read_text()) == ["SIGTERM"]
    assert child_exit(tmp_path / "rec")["forwarded"] == [signal.SIGTERM]


def test_a_signal_the_command_sends_to_ckprof_is_not_sent_back(tmp_path):
    code = ("import json, os, signal, sys, time; got = []\n"
            "signal.signal(signal.SIGTERM, lambda n, f: got.append(n))\n"
            "os.kill(os.getppid(), signal.SIGTERM); time.sleep(0.5)\n"
            "json.dump(got, open(sys.argv[1], 'w'))")
    r = ckprof_cmd(*rec_args(tmp_path), PY, "-c", code, str(tmp_path / "got.json"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "got.json").read_text()) == []
    ev = child_exit(tmp_path / "rec")
    assert ev["forwarded"] == [] and ev["received"][0]["why"] == "sent by the command itself"


def test_ctrl_c_on_a_terminal_reaches_the_command_once_and_arms_no_timer(tmp_path):
    # A real terminal: ckprof is the foreground process group of a pty (setsid -c makes the pty
    # its controlling terminal) and ^C written to the master makes the tty driver send SIGINT
    # to that group (termios ISIG). The command takes 1 s to finish its checkpoint; --kill-after
    # is 0.2 s and must not apply.
    need_binary("setsid")
    master, slave = os.openpty()
    got = tmp_path / "got.json"
    p = subprocess.Popen(["setsid", "-c", *CKPROF, *rec_args(tmp_path, None, "--kill-after", "0.2"),
                          PY, "-c", COUNTING, str(got), "1.0"], stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    output = bytearray()
    reader = threading.Thread(target=lambda: _drain(master, output), daemon=True)
    reader.start()
    try:
        wait_for(Path(f"{got}.ready"))
        os.write(master, b"\x03")
        assert p.wait(60) == 0, output.decode(errors="replace")
    finally:
        if p.poll() is None:
            p.kill()
        reader.join(5)
        os.close(master)
    assert json.loads(got.read_text()) == ["SIGINT"]
    ev = child_exit(tmp_path / "rec")
    assert ev["forwarded"] == [] and not ev["killed"]


def _drain(fd: int, into: bytearray) -> None:
    try:
        while chunk := os.read(fd, 4096):
            into += chunk
    except OSError:  # EIO once every slave is closed
        pass


def test_kill_after_kills_a_command_that_ignores_sigterm(tmp_path):
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "open(sys.argv[1], 'w').close(); time.sleep(60)")
    ready = tmp_path / "ready"
    p = subprocess.Popen([*CKPROF, *rec_args(tmp_path, None, "--kill-after", "0.5"), PY, "-c", code, str(ready)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(ready)
    t0 = time.monotonic()
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait(60) == -signal.SIGKILL
    assert time.monotonic() - t0 < 20
    assert "sending SIGKILL" in p.stderr.read()
    ev = child_exit(tmp_path / "rec")
    assert ev["killed"] and ev["signal"] == signal.SIGKILL
    assert ckprof.load(str(tmp_path / "rec")).meta["status"] == "complete"


# -- F3, F4: full and read-only file systems

def fill_then_exit(fill: Path, code: int) -> list[str]:
    """A child that fills the disk under `fill`, marks after that (must not raise), waits a few flushes, exits `code`."""
    prog = f"""
import sys, time, ckprof
try:
    with open({str(fill)!r}, "wb") as f:
        while True:
            f.write(b"x" * 65536)
except OSError:
    pass
ckprof.mark("after the disk filled")
time.sleep(1.0)
sys.exit({code})
"""
    return [PY, "-c", prog]


@pytest.mark.parametrize("fs", ["tmpfs", "ext4"])
def test_disk_full_mid_run_truncates_the_recording_and_keeps_the_exit_status(tmp_path, tmpfs, make_loop, fs):
    mnt = tmpfs("4m") if fs == "tmpfs" else ext4_on_loop(make_loop, tmp_path / "mnt")[0]
    out = mnt / "rec"
    r = ckprof_cmd(*rec_args(tmp_path, out), *fill_then_exit(mnt / "fill", 7))
    assert r.returncode == 7, r.stderr  # the child's status, whatever became of the recording
    assert "disk full writing" in r.stderr and "Traceback" not in r.stderr
    rec = ckprof.load(str(out))
    assert rec.meta["status"] == "truncated"
    assert rec.meta["truncated"]["reason"] == "disk full"
    assert any("truncated: disk full at " in p for p in rec.problems), rec.problems
    assert not any("killed?" in p for p in rec.problems)
    assert rec.meta["exit"]["code"] == 7
    left = [p.name for p in out.rglob("*") if ".tmp" in p.name or p.name == ".ckprof-reserve"]
    assert left == []  # no temporary meta, part or reserve file behind


def test_full_file_system_at_start_is_one_line_and_runs_nothing(tmp_path, tmpfs):
    mnt = tmpfs("1m")
    subprocess.run(["dd", "if=/dev/zero", f"of={mnt / 'fill'}", "bs=64k"], capture_output=True)
    ran = tmp_path / "ran"
    r = ckprof_cmd(*rec_args(tmp_path, mnt / "rec"), "touch", str(ran))
    assert r.returncode == 2
    assert "No space left on device" in one_error_line(r.stderr)
    assert not ran.exists()
    assert not (mnt / "rec").exists() or list((mnt / "rec").iterdir()) == []


def test_file_system_turning_read_only_mid_run_keeps_the_command_going(tmp_path, make_loop):
    # `mount -o remount,ro` is refused (EBUSY) while a file is open for writing, as events.jsonl
    # is; ext4's errors=remount-ro is how a file system goes read-only under a running recorder
    # (a write to /sys/fs/ext4/<dev>/trigger_fs_error raises an ext4 error, Documentation/ABI/testing/sysfs-fs-ext4).
    mnt, dev = ext4_on_loop(make_loop, tmp_path / "mnt", "errors=remount-ro")
    trigger = Path(f"/sys/fs/ext4/{dev}/trigger_fs_error")
    if not trigger.exists():
        pytest.skip(f"{trigger}: this kernel cannot raise an ext4 error on demand")
    ready, go, done = tmp_path / "ready", tmp_path / "go", tmp_path / "done"
    code = (f"import os, sys, time; open({str(ready)!r}, 'w').close()\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
            f"time.sleep(0.5); open({str(done)!r}, 'w').write('went on'); sys.exit(6)")
    out = mnt / "rec"
    p = subprocess.Popen([*CKPROF, *rec_args(tmp_path, out), PY, "-c", code],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for(ready)
    time.sleep(0.5)  # a few flushes on the healthy file system
    trigger.write_text("ckprof fault test\n")
    go.touch()
    assert p.wait(60) == 6
    stderr = p.stderr.read()
    assert done.read_text() == "went on"
    assert "Read-only file system" in stderr and "could not finalise" in stderr and "Traceback" not in stderr
    rec = ckprof.load(str(out))  # what was written before is whole
    assert rec.meta["status"] == "recording" and not rec.samples("block").empty


# -- F7: --force replaces only a recording

def test_force_never_deletes_a_users_own_files(tmp_path):
    mine = tmp_path / "mine"
    (mine / "samples").mkdir(parents=True)
    (mine / "meta.json").write_text('{"experiment": "mine"}\n')
    (mine / "samples" / "data.csv").write_text("1,2\n")
    ran = tmp_path / "ran"
    r = ckprof_cmd(*rec_args(tmp_path, mine, "--force"), "touch", str(ran))
    assert r.returncode == 2
    assert "not a ckprof recording" in one_error_line(r.stderr)
    assert (mine / "meta.json").read_text() == '{"experiment": "mine"}\n'
    assert (mine / "samples" / "data.csv").read_text() == "1,2\n"
    assert not ran.exists()


def test_force_replaces_a_recording_and_keeps_files_added_to_it(tmp_path):
    out = tmp_path / "rec"
    assert ckprof_cmd(*rec_args(tmp_path, out), "true").returncode == 0
    first = ckprof.load(str(out)).meta["start"]["wall_ns"]
    (out / "notes.txt").write_text("keep")
    assert ckprof_cmd(*rec_args(tmp_path, out), "true").returncode == 2
    r = ckprof_cmd(*rec_args(tmp_path, out, "--force"), "sh", "-c", "exit 4")
    assert r.returncode == 4
    rec = ckprof.load(str(out))
    assert rec.meta["start"]["wall_ns"] > first and rec.meta["status"] == "complete"
    assert (out / "notes.txt").read_text() == "keep"


# -- F11: CKPROF_DEBUG=1 shows the traceback, and no longer hints at itself

def test_ckprof_debug_shows_the_traceback_instead_of_the_hint(tmp_path):
    # The working directory deleted under the shell: an error ckprof does not expect.
    cwd = tmp_path / "gone"
    cwd.mkdir()
    cmd = ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(cwd), *CKPROF, "record", "-q",
           "-o", str(tmp_path / "rec"), "--", "true"]
    env = {k: v for k, v in os.environ.items() if k != "CKPROF_DEBUG"}
    plain = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert plain.returncode == 1
    assert "rerun with CKPROF_DEBUG=1" in one_error_line(plain.stderr)
    cwd.mkdir()
    debug = subprocess.run(cmd, capture_output=True, text=True, env={**env, "CKPROF_DEBUG": "1"}, timeout=60)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr and "FileNotFoundError" in debug.stderr
    assert "rerun with" not in debug.stderr
    assert debug.stderr.splitlines()[-1] == plain.stderr.splitlines()[0].split(" (rerun with")[0]


# -- F17: ckprof's own stderr closed or full

FDS = """
import json, os, sys
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
fds = [fd for fd in range(64) if is_open(fd)]
if 1 in fds:
    print("child out", flush=True)
with open(sys.argv[1], "w") as f:
    json.dump(fds, f)
sys.exit(3)
"""


@pytest.mark.parametrize("redirect,fds", [("2>&-", [0, 1]), ("2>/dev/full", [0, 1, 2]), (">&-", [0, 2])])
def test_closed_or_full_std_descriptors_change_nothing_for_the_command(tmp_path, redirect, fds):
    # Not quiet: ckprof has notes and a summary to say, and must say them nowhere but fd 2.
    out_txt, fds_json = tmp_path / "out.txt", tmp_path / "fds.json"
    args = [a for a in rec_args(tmp_path) if a != "-q"]
    cmd = ["sh", "-c", f'exec "$@" >"$0" {redirect}', str(out_txt), *CKPROF, *args, PY, "-c", FDS, str(fds_json)]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert json.loads(fds_json.read_text()) == fds  # exactly the descriptors it was given
    assert out_txt.read_text() == ("child out\n" if 1 in fds else "")
    assert ckprof.load(str(tmp_path / "rec")).meta["status"] == "complete"


# -- must keep holding

def test_sigkill_of_ckprof_loses_at_most_a_flush_and_leaves_nothing_running(tmp_path):
    flush_s = 0.3
    out = tmp_path / "rec"
    p = subprocess.Popen([*CKPROF, *rec_args(tmp_path, out)[:-1], "--flush-interval", f"{flush_s}s", "--",
                          "sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not list((out / "samples" / "host").glob("part-*")):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(2.0)  # several flushes after the first: a flusher that stopped would lose them all
        killed_ns = time.monotonic_ns()  # CLOCK_MONOTONIC, the recording's clock
        p.kill()
        p.wait(30)
        rec = ckprof.load(str(out))
        assert rec.meta["status"] == "recording" and any("killed?" in x for x in rec.problems)
        lost_s = (killed_ns - int(rec.samples("host")["t_ns"].max())) / 1e9
        assert lost_s < flush_s + 0.1 + 0.7  # a flush interval, a sample interval, a loaded machine
        time.sleep(1.0)  # ckprof's signal witness notices its parent is gone within 0.5 s
        group = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] for pid in _pids_in_group(p.pid)}
        assert list(group.values()) == [b"sleep"]  # only the command: ckprof's own helpers are gone
    finally:
        os.killpg(p.pid, signal.SIGKILL)


def _pids_in_group(pgid: int) -> list[int]:
    """Live processes of process group `pgid` (proc(5): /proc/PID/stat fields 3 and 5)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
            if int(pgrp) == pgid and state != "Z":  # a zombie has ended: only its parent's wait(2) is left
                pids.append(int(d))
    return pids


@pytest.mark.parametrize("argv,expect", [
    (["true"], 0),                                   # a command that exits at once
    (["sh", "-c", "exit 3"], 3),
    (["sh", "-c", "kill -USR1 $$"], -signal.SIGUSR1),  # death by signal: ckprof dies of it too
])
def test_exit_status_and_death_by_signal_pass_through(tmp_path, argv, expect):
    r = ckprof_cmd(*rec_args(tmp_path), *argv)
    assert r.returncode == expect, r.stderr
    rec = ckprof.load(str(tmp_path / "rec"))
    assert rec.meta["status"] == "complete"
    assert rec.meta["exit"]["code"] == (expect if expect >= 0 else 128 - expect)


def test_24000_concurrent_marks_arrive_intact(tmp_path):
    code = """
import threading, ckprof
def marks(t):
    for i in range(1000):
        ckprof.mark(f"{t}:{i}", thread=t, i=i, pad="x" * (i % 200))
threads = [threading.Thread(target=marks, args=(t,)) for t in range(24)]
for th in threads: th.start()
for th in threads: th.join()
"""
    r = ckprof_cmd(*rec_args(tmp_path), PY, "-c", code)
    assert r.returncode == 0, r.stderr
    lines = (tmp_path / "rec" / "events.jsonl").read_bytes().splitlines()
    marks = [json.loads(line) for line in lines if b'"event":"mark"' in line]
    assert len(marks) == 24000
    assert {(m["thread"], m["i"]) for m in marks} == {(t, i) for t in range(24) for i in range(1000)}
    assert all(m["text"] == f"{m['thread']}:{m['i']}" and len(m["pad"]) == m["i"] % 200 for m in marks)


def test_a_background_process_left_behind_does_not_hang_ckprof(tmp_path):
    out_txt = tmp_path / "out.txt"
    with open(out_txt, "w") as out:
        p = subprocess.Popen([*CKPROF, *rec_args(tmp_path), "sh", "-c", "sleep 60 & exit 4"],
                             stdout=out, stderr=out, start_new_session=True)
        try:
            t0 = time.monotonic()
            assert p.wait(30) == 4
            assert time.monotonic() - t0 < 15
        finally:
            os.killpg(p.pid, signal.SIGKILL)  # the sleep left behind
    assert ckprof.load(str(tmp_path / "rec")).meta["status"] == "complete"


def test_output_path_with_spaces_and_non_ascii(tmp_path):
    out = tmp_path / "my runs" / "prüfung ✓ 检查点 1"
    r = ckprof_cmd(*[a for a in rec_args(tmp_path, out) if a != "-q"], "true")
    assert r.returncode == 0, r.stderr
    assert str(out) in r.stderr
    rec = ckprof.load(str(out))
    assert rec.meta["status"] == "complete" and rec.path == str(out)


# -- cases of our own

def test_a_command_that_closes_its_stdout(tmp_path):
    r = ckprof_cmd(*rec_args(tmp_path), "sh", "-c", "exec >&-; sleep 0.3; echo still here >&2; exit 5")
    assert r.returncode == 5 and "still here" in r.stderr and r.stdout == ""
    assert ckprof.load(str(tmp_path / "rec")).meta["status"] == "complete"


def test_a_copy_taken_while_recording_loads(tmp_path):
    need_binary("cp")
    out = tmp_path / "rec"
    code = "import time, ckprof\nfor i in range(40):\n    ckprof.mark(f'm{i}'); time.sleep(0.05)"
    p = subprocess.Popen([*CKPROF, *rec_args(tmp_path, out)[:-1], "--flush-interval", "50ms", "--", PY, "-c", code],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(out / "meta.json")
    copies = []
    while p.poll() is None and len(copies) < 5:
        copy = tmp_path / f"copy{len(copies)}"
        subprocess.run(["cp", "-r", str(out), str(copy)], capture_output=True)  # files may vanish: cp says so
        copies.append(copy)
        time.sleep(0.2)
    assert p.wait(60) == 0
    assert copies
    for copy in copies:
        rec = ckprof.load(str(copy))
        assert rec.meta["status"] in ("recording", "complete")
        _ = rec.samples("host"), rec.events  # every part that was copied whole reads
        assert not any(".parquet" in x for x in rec.problems), rec.problems  # a torn last event line may be skipped


def test_output_through_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    r = ckprof_cmd(*rec_args(tmp_path, link), "true")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and (real / "meta.json").exists()
    assert ckprof.load(str(link)).meta["status"] == "complete"
    r = ckprof_cmd(*rec_args(tmp_path, link, "--force"), "true")  # replacing through the link keeps the link
    assert r.returncode == 0 and link.is_symlink() and ckprof.load(str(real)).meta["status"] == "complete"
