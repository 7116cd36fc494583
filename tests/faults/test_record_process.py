"""The `ckprof record` process itself (issue 22, items 1, 4, 8, 11): what the command imports,
which signals reach it, whether its marks reach the recording when it runs as another user, and
a working directory that no longer exists."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from support.command import CKPROF, ckprof_cmd

import ckprof


def meta(rec) -> dict:
    return json.loads((rec / "meta.json").read_text())


def events(rec) -> list[dict]:
    return [json.loads(line) for line in (rec / "events.jsonl").read_text().splitlines()]


# -- 1. PYTHONPATH: the command imports what it imports without ckprof ---------------------------

SHOW_PATH = "import json, sys\nprint(json.dumps(sys.path))\nimport mymod\nprint(mymod.WHERE)\n"


def _env(pythonpath):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


@pytest.mark.parametrize("pythonpath", [":/nonexistent", "/nonexistent::", "", None, "lib"])
def test_the_command_imports_from_where_it_would_without_ckprof(tmp_path, pythonpath):
    """An empty PYTHONPATH entry is the working directory (as `export PYTHONPATH=$PYTHONPATH:/x`
    makes it): `mymod` in the working directory imports under ckprof as without it, and the
    command's sys.path is the same, entry for entry (set but empty, unset, relative too)."""
    work, scripts = tmp_path / "work", tmp_path / "scripts"
    (work / "lib").mkdir(parents=True)
    scripts.mkdir()
    where = "lib" if pythonpath == "lib" else "cwd"
    (work / ("lib" if where == "lib" else ".") / "mymod.py").write_text(f"WHERE = {where!r}\n")
    (scripts / "show.py").write_text(SHOW_PATH)
    argv = [sys.executable, str(scripts / "show.py")]
    plain = subprocess.run(argv, cwd=work, env=_env(pythonpath), capture_output=True, text=True, timeout=60)
    if pythonpath in ("", None):  # no entry names the working directory: mymod is not found either way
        assert "ModuleNotFoundError" in plain.stderr
    else:
        assert plain.returncode == 0, plain.stderr
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", *argv, cwd=work, env=_env(pythonpath))
    assert r.returncode == plain.returncode, r.stderr
    assert r.stdout == plain.stdout  # the same sys.path, and mymod from the same place
    assert ("ModuleNotFoundError" in r.stderr) == ("ModuleNotFoundError" in plain.stderr)


def test_a_users_sitecustomize_in_the_working_directory_still_runs(tmp_path):
    """PYTHONPATH=":/x" puts the working directory on sys.path before site runs, so a
    sitecustomize there runs without ckprof; under ckprof it runs too (chained), and the
    command's saves are still marked (ckprof's own sitecustomize ran first)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "sitecustomize.py").write_text("import os\nos.environ['THEIRS'] = str(os.getpid())\n")
    # ckprof's own Python runs that sitecustomize too (same PYTHONPATH, same directory) and the
    # command inherits its variable: only the command's own pid says the command ran it
    code = "import os, sys\nprint(os.environ.get('THEIRS') == str(os.getpid()), '_ckprof_autopatch' in sys.modules)\n"
    (tmp_path / "p.py").write_text(code)
    argv = [sys.executable, str(tmp_path / "p.py")]
    env = _env(":/nonexistent")
    assert subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True).stdout.split() == ["True", "False"]
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", *argv, cwd=work, env=env)
    assert r.returncode == 0 and r.stdout.split() == ["True", "True"], r.stderr


# -- 4. Signals meant for the command -------------------------------------------------------------

WAIT_FOR_SIGNAL = (
    "import signal, sys, time\n"
    "got = []\n"
    "signal.signal(int(sys.argv[1]), lambda n, f: got.append(n))\n"
    "print('ready', flush=True)\n"
    "deadline = time.monotonic() + 20\n"
    "while not got and time.monotonic() < deadline: time.sleep(0.01)\n"
    "time.sleep(0.3)\n"
    "print('got', len(got), flush=True)\n"
)

FORWARDED = ["SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGQUIT", "SIGALRM", "SIGCONT", "SIGPWR", "SIGURG", "SIGRTMIN"]


@pytest.mark.parametrize("name", FORWARDED)
def test_a_signal_meant_for_the_command_reaches_it_once_and_the_recording_finishes(tmp_path, name):
    """SLURM's --signal=USR1 (Lightning's auto-requeue), a terminal's resize, a thread dump's
    QUIT: sent to ckprof, each reaches the command once; ckprof does not die of it, exits as the
    command did, and the recording is complete with the signal in child_exit's `forwarded`."""
    sig = getattr(signal, name)
    rec = tmp_path / "r"
    p = subprocess.Popen(
        [*CKPROF, "record", "-q", "-o", str(rec), "--", sys.executable, "-c", WAIT_FOR_SIGNAL, str(int(sig))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout.readline().strip() == "ready"
    os.kill(p.pid, sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, (p.returncode, err)
    assert out.split() == ["got", "1"], (out, err)
    assert meta(rec)["status"] == "complete"
    (exit_event,) = [e for e in events(rec) if e["event"] == "child_exit"]
    assert exit_event["forwarded"] == [int(sig)]


def test_the_command_dying_of_a_forwarded_signal_is_passed_on(tmp_path):
    """SIGUSR1 kills a command that does not handle it: ckprof finishes the recording, then
    dies of the same signal (128+10 in a shell)."""
    p = subprocess.Popen(
        [*CKPROF, "record", "-q", "-o", str(tmp_path / "r"), "--", sys.executable, "-c",
         "import time; print('ready', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout.readline().strip() == "ready"
    os.kill(p.pid, signal.SIGUSR1)
    assert p.wait(timeout=60) == -signal.SIGUSR1
    m = meta(tmp_path / "r")
    assert m["status"] == "complete" and m["exit"]["signal"] == signal.SIGUSR1


def test_a_signal_ignored_when_ckprof_started_stays_ignored(tmp_path):
    """`nohup ckprof record -- CMD`: SIGHUP was ignored before ckprof ran, so CMD ignores it as it
    would without ckprof; a hangup does not kill it (ckprof used to reset it and forward it)."""
    script = "trap '' HUP; exec \"$@\""
    p = subprocess.Popen(
        ["sh", "-c", script, "sh", *CKPROF, "record", "-q", "-o", str(tmp_path / "r"), "--", sys.executable, "-c",
         "import time; print('ready', flush=True); time.sleep(1.5); print('done', flush=True)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout.readline().strip() == "ready"
    os.kill(p.pid, signal.SIGHUP)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out.strip() == "done", (p.returncode, out, err)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_tstp_sent_to_ckprof_stops_the_command_and_cont_continues_it(tmp_path):
    """`kill -TSTP <ckprof>` (no terminal) stops the command, which is what was meant; ckprof
    does not stop in its place, leaving the command running unrecorded. `kill -CONT` resumes it."""
    p = subprocess.Popen(
        [*CKPROF, "record", "-q", "-o", str(tmp_path / "r"), "--", sys.executable, "-c",
         "import os, time; print(os.getpid(), flush=True); time.sleep(2); print('done', flush=True)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    child_pid = int(p.stdout.readline())
    os.kill(p.pid, signal.SIGTSTP)
    deadline = time.monotonic() + 10
    while _state(child_pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _state(child_pid) == "T"
    assert _state(p.pid) != "T"  # ckprof keeps recording
    os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out.strip() == "done", (out, err)


# -- 8. Marks from a command running as another user ---------------------------------------------


@pytest.fixture
def as_nobody():
    """(argv prefix running a Python as nobody, its environment): `import ckprof` works for nobody
    through a link to the source tree in a folder anyone may read (pytest's tmp_path is 0700)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the command drops to nobody")
    setpriv, python = shutil.which("setpriv"), "/usr/bin/python3"
    if not setpriv or not os.access(python, os.X_OK):
        pytest.skip("needs setpriv and a /usr/bin/python3 that nobody may run")
    shared = tempfile.mkdtemp(prefix="ckprof-nobody-")
    os.chmod(shared, 0o755)
    os.symlink(os.path.dirname(os.path.abspath(ckprof.__file__)), os.path.join(shared, "ckprof"))
    yield [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", python], _env(shared)
    shutil.rmtree(shared)


MARKS = (
    "import ckprof, sys\n"
    "ckprof.mark('as nobody')\n"
    "with ckprof.checkpoint(step=1, path='/nonexistent'):\n"
    "    pass\n"
    "import _ckprof_autopatch\n"  # the automatic markers' writer, as its patches call it
    "_ckprof_autopatch._emit('mark', text='from the patch')\n"
)


def test_marks_of_a_command_running_as_another_user_reach_the_recording(tmp_path, as_nobody):
    """ckprof as root, the command as nobody: events.jsonl stays 0644 in a directory nobody cannot
    even enter, and every mark still arrives (the descriptor ckprof passes on)."""
    prefix, env = as_nobody
    rec = tmp_path / "r"
    r = ckprof_cmd("record", "-q", "-o", str(rec), "--", *prefix, "-c", MARKS, env=env, cwd="/")
    assert r.returncode == 0, r.stderr
    assert "ckprof" not in r.stderr, r.stderr
    got = [(e["event"], e.get("text"), e.get("source")) for e in events(rec) if e.get("source") in ("api", "patch")]
    assert got == [
        ("mark", "as nobody", "api"),
        ("checkpoint_start", None, "api"),
        ("checkpoint_end", None, "api"),
        ("mark", "from the patch", "patch"),
    ]
    assert (rec / "events.jsonl").stat().st_mode & 0o777 == 0o644


def test_a_mark_that_cannot_be_written_is_said_once(tmp_path, as_nobody):
    """As nobody, with the passed descriptor closed (as `sudo` closes every descriptor above 2),
    the file cannot be opened: the command goes on, and stderr says so once, however many marks."""
    prefix, env = as_nobody
    code = "import os; os.closerange(3, 4096)\n" + MARKS + "ckprof.mark('again')\nprint('went on')\n"
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", *prefix, "-c", code, env=env, cwd="/")
    assert r.returncode == 0 and r.stdout.strip() == "went on", r.stderr
    said = [line for line in r.stderr.splitlines() if "marks" in line]
    assert len(said) == 1 and "Permission denied" in said[0], r.stderr


def test_a_reused_descriptor_number_is_never_written_to(tmp_path):
    """The command closed the passed descriptor and opened a file of its own under the same
    number: marks go to the recording through the path, never into the command's file."""
    code = (
        "import os, ckprof\n"
        "n = int(os.environ['CKPROF_EVENTS_FD'].split(':')[0])\n"
        "fd = os.open(os.environ['MINE'], os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "os.dup2(fd, n)\n"  # closes the passed descriptor, n is now the command's own file
        "ckprof.mark('to the recording')\n"
    )
    mine = tmp_path / "mine.txt"
    env = dict(os.environ, MINE=str(mine))
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "r"), "--", sys.executable, "-c", code, env=env)
    assert r.returncode == 0, r.stderr
    assert mine.read_text() == ""
    assert [e["text"] for e in events(tmp_path / "r") if e["event"] == "mark"] == ["to the recording"]


# -- 11. A working directory that no longer exists ------------------------------------------------


def test_a_deleted_working_directory_is_named_as_the_cause(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    marker = tmp_path / "ran"
    p = subprocess.Popen(
        ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone), *CKPROF, "record", "-q",
         "--", "touch", str(marker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err = p.communicate(timeout=60)
    lines = err.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, err
    assert "working directory" in lines[0] and "no longer exists" in lines[0], err
    assert "space" not in lines[0] and not marker.exists()


# -- Ctrl-Z and `fg` in an interactive shell stay as they were -----------------------------------

COUNT_CONT = (
    "import signal, time\n"
    "conts = []\n"
    "signal.signal(signal.SIGCONT, lambda n, f: conts.append(n))\n"
    "print('ready', flush=True)\n"
    "deadline = time.monotonic() + 30\n"
    "while not conts and time.monotonic() < deadline: time.sleep(0.01)\n"
    "time.sleep(0.5)\n"
    "print('conts=%d.' % len(conts), flush=True)\n"
)


def test_ctrl_z_and_fg_in_a_shell_continue_the_command_once(tmp_path):
    """In bash with job control: Ctrl-Z stops the command (the terminal's SIGTSTP to its group)
    and ckprof follows, so bash says the job stopped; `fg` continues ckprof, which continues the
    command: one SIGCONT, not a second forwarded one (the shell's SIGCONT to ckprof is ckprof's)."""
    import pty
    import select
    import shlex

    bash = shutil.which("bash")
    if not bash:
        pytest.skip("needs bash")
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(bash, [bash, "--norc", "--noprofile", "-i"], dict(os.environ, PS1="$ "))
    out = b""

    def until(what: bytes, timeout_s: float = 60) -> None:
        nonlocal out
        deadline = time.monotonic() + timeout_s
        while what not in out:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"no {what!r} in {out!r}")
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    out += os.read(fd, 4096)
                except OSError:
                    break

    try:
        (tmp_path / "c.py").write_text(COUNT_CONT)  # a file: the terminal echoes the command line
        argv = [*CKPROF, "record", "-q", "-o", str(tmp_path / "r"), "--", sys.executable, str(tmp_path / "c.py")]
        os.write(fd, (shlex.join(argv) + "\n").encode())
        until(b"ready\r\n")
        time.sleep(0.3)
        os.write(fd, b"\x1a")  # Ctrl-Z
        until(b"Stopped")
        os.write(fd, b"fg\n")
        until(b"conts=")
        until(b"$ ", 30)
        os.write(fd, b"exit\n")
    finally:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(fd)
    assert b"conts=1." in out, out
    assert meta(tmp_path / "r")["status"] == "complete"
    (exit_event,) = [e for e in events(tmp_path / "r") if e["event"] == "child_exit"]
    assert exit_event["forwarded"] == [], (exit_event, out)  # ckprof's own SIGCONT only: the shell's was not passed on


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGTERM"])
def test_a_stream_of_signals_while_the_recording_finishes_never_kills_ckprof(tmp_path, name):
    """A signal every few ms from the command's start until ckprof has exited: none kills ckprof,
    not while it starts the command nor while it finishes the recording (a thread that a library
    started before ckprof blocked its signals — OpenBLAS's, at numpy's import — must not take one)."""
    sig = getattr(signal, name)
    p = subprocess.Popen(
        [*CKPROF, "record", "-q", "--kill-after", "30", "-o", str(tmp_path / "r"), "--", sys.executable, "-c",
         "import signal, time; signal.signal(signal.%s, signal.SIG_IGN); print('ready', flush=True); time.sleep(0.5)"
         % name],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout.readline().strip() == "ready"
    sent = 0
    while p.poll() is None:
        try:
            os.kill(p.pid, sig)
            sent += 1
        except ProcessLookupError:
            break
        time.sleep(0.002)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, (p.returncode, sent, err)
    assert meta(tmp_path / "r")["status"] == "complete"
