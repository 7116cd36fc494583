"""Running the wrapped command: same stdio, signals passed through, its exit status returned.

The rules are perf record's and a shell's:
  - no shell: argv is executed as given, PATH searched; 127 when not found, 126 when not executable;
  - the command runs in a process group of its own (docs/faults.md, "Signals"), so a signal meant
    for ckprof's group — a launcher's or job control's `kill -INT -PGID` — reaches it once: from
    ckprof, which forwards to the command's group every signal a wrapper passes on (FORWARDED
    below: SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT, SIGWINCH, SIGCONT, SIGTSTP, ...);
    a signal ignored when ckprof started stays ignored, in ckprof and in the command. When ckprof runs in
    a terminal's foreground, the command's group is made the foreground one (tcsetpgrp(3)), so
    Ctrl-C and Ctrl-Z reach it straight from the terminal, once, and ckprof follows a Ctrl-Z
    (it stops too, and on `fg` hands the terminal back and continues the command);
  - after the first terminating signal ckprof forwarded, the command gets `kill_after_s` seconds,
    then SIGKILL (a terminal's Ctrl-C starts no timer: the command got it directly, not from ckprof);
  - ckprof exits with the child's code; when the child died of signal N, ckprof re-raises N on
    itself after finalising the recording, so its parent sees the same death (128+N in a shell).

The signals are blocked in every ckprof thread (block_signals() runs before any thread starts)
and taken synchronously with sigtimedwait(2) in the main thread, so nothing interrupts the
recorder and ckprof never dies of a signal meant for its command. The child is started with
posix_spawn(3), whose setsigmask clears that block in the child alone and whose setpgroup gives
it its own process group.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from dataclasses import dataclass

from ckprof.errors import CLOSED_STD_FDS, say

TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # forwarded, and start --kill-after
# Every signal is forwarded but those that are ckprof's own, as tini does (src/tini.c,
# configure_signals: every signal but the faults and SIGTTIN/SIGTTOU, and SIGCHLD it reaps on):
# SIGKILL/SIGSTOP cannot be caught; SIGCHLD says the command changed state; the faults
# (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT) come from ckprof's own code;
# SIGTTIN/SIGTTOU are the terminal's job control of ckprof's own I/O; SIGPIPE/SIGXFSZ come from
# ckprof's own writes (Python ignores both; a write fails with EPIPE/EFBIG instead). Realtime
# signals are passed on too. (GNU time and perf leave the command in their own process group, so
# a group's signal reaches it without them; a wrapper that gives it a group of its own must pass
# them on: tini -g, dumb-init.)
OWN = {
    signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD,
    signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP, signal.SIGSYS, signal.SIGABRT,
    signal.SIGTTIN, signal.SIGTTOU, signal.SIGPIPE, signal.SIGXFSZ,
}  # fmt: skip
SI_KERNEL = 0x80  # si_code of a signal the kernel raised (include/uapi/asm-generic/siginfo.h)
_forwarded: frozenset = frozenset()  # what block_signals() chose, for run()


def forwardable() -> frozenset:
    """The signals ckprof passes on to the command: all but its OWN and those ignored when it
    started (`nohup` ignores SIGHUP, a shell's `&` without job control SIGINT and SIGQUIT): the
    command inherits those ignored (execve(2) keeps SIG_IGN), as it would without ckprof."""
    return frozenset(s for s in signal.valid_signals() if s not in OWN and signal.getsignal(s) != signal.SIG_IGN)


class _Forwarder:
    """Passes the signals ckprof takes on to the command's group: those sigtimedwait(2) returns,
    and those a thread ckprof did not start took (see block_signals); queued until the command
    runs, dropped once it is gone."""

    def __init__(self):
        self.pid: int | None = None
        self.done = False
        self.early: list[int] = []  # taken before the command was started
        self.forwarded: list[int] = []
        self.first_terminating_at: float | None = None  # --kill-after counts from here
        self.skip_cont = False  # the shell's SIGCONT after a Ctrl-Z is ckprof's (_follow_stop)

    def take(self, signo: int, si_code: int | None = None) -> None:
        if self.done or signo not in _forwarded:
            return
        if signo == signal.SIGXCPU and si_code in (SI_KERNEL, None):
            return  # the kernel's, about ckprof's own RLIMIT_CPU (setrlimit(2)); a `kill -XCPU` is passed on
        if signo == signal.SIGCONT and self.skip_cont:
            self.skip_cont = False
            return
        if self.pid is None:
            self.early.append(signo)
            return
        _signal_group(self.pid, signo)
        self.forwarded.append(signo)
        if signo in TERMINATING:
            self.first_terminating_at = self.first_terminating_at or time.monotonic()

    def started(self, pid: int) -> None:
        self.pid = pid
        early, self.early = self.early, []
        for signo in early:
            self.take(signo)


_forwarder = _Forwarder()


def _on_stray(signo, frame) -> None:
    _forwarder.take(signo)


def block_signals() -> None:
    """Block the signals to forward and SIGCHLD in this thread and every thread it starts, and
    SIGTTOU, so that ckprof may take the terminal back from the background (tcsetpgrp(3)).

    A thread a library started before this (OpenBLAS's, at numpy's import) does not block them,
    and the kernel gives a process-directed signal to any thread that does not block it (signal(7))
    — whose default action would end ckprof. So each also gets a handler that passes it on: such
    a signal reaches the command, never kills ckprof (a handler is reset to the default in the
    command by execve(2))."""
    global _forwarded, _forwarder
    _forwarded = forwardable()
    _forwarder = _Forwarder()
    for signo in _forwarded:
        signal.signal(signo, _on_stray)
    signal.pthread_sigmask(signal.SIG_BLOCK, {*_forwarded, signal.SIGCHLD, signal.SIGTTOU})


class Terminal:
    """The controlling terminal, when ckprof was started in its foreground (an interactive shell):
    the command's process group gets the foreground while it runs (termios, tcsetpgrp(3))."""

    def __init__(self, fd: int = 0):
        try:
            self.fd = fd if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp() else None
        except OSError:
            self.fd = None

    def ours(self) -> bool:
        try:
            return self.fd is not None and os.tcgetpgrp(self.fd) == os.getpgrp()
        except OSError:
            return False

    def give(self, pgid: int) -> None:
        if self.ours():
            try:
                os.tcsetpgrp(self.fd, pgid)
            except OSError:
                pass

    def take_back(self) -> None:
        if self.fd is not None:
            try:
                os.tcsetpgrp(self.fd, os.getpgrp())  # SIGTTOU is blocked: allowed from the background
            except OSError:
                pass


@dataclass
class ChildResult:
    pid: int | None
    exit_code: int  # what ckprof should exit with (128+N for a signal, 126/127 for spawn errors)
    signal: int | None = None  # the signal the child died of, if any
    error: str | None = None  # why the command could not be started
    forwarded: tuple = ()  # signals forwarded to the child
    killed: bool = False  # escalated to SIGKILL


def spawn(argv: list[str], env: dict, pass_fds: tuple = ()) -> int:
    """Start argv with posix_spawnp: inherited stdio (a descriptor that was closed when ckprof
    started is closed in the child too) and `pass_fds`, an empty signal mask, the dispositions
    ckprof inherited (signals ignored then stay ignored; Python's own SIGPIPE/SIGXFSZ ignores are
    undone)."""
    for fd in pass_fds:  # inheritable for this exec only (subprocess closes it in any other child)
        os.set_inheritable(fd, True)
    try:
        return os.posix_spawnp(
            argv[0],
            argv,
            env,
            file_actions=[(os.POSIX_SPAWN_CLOSE, fd) for fd in sorted(CLOSED_STD_FDS)],
            setpgroup=0,  # a process group of its own, led by the command
            setsigmask=(),  # unblock everything block_signals() blocked (SIGTTOU included)
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),  # Python ignores SIGPIPE/SIGXFSZ
        )
    finally:
        for fd in pass_fds:
            os.set_inheritable(fd, False)


def run(
    argv: list[str], env: dict, kill_after_s: float = 10.0, on_start=None, warn=None, pass_fds: tuple = ()
) -> ChildResult:
    """Run argv to completion; returns its ChildResult. block_signals() must have run first."""
    warn = warn or (lambda m: say(f"ckprof: {m}"))
    wait_set = {*_forwarded, signal.SIGCHLD}
    signals = _forwarder
    try:
        pid = spawn(argv, env, pass_fds)
    except FileNotFoundError:
        return ChildResult(None, 127, error=f"{argv[0]}: command not found")
    except PermissionError:
        return ChildResult(None, 126, error=f"{argv[0]}: permission denied (not executable?)")
    except OSError as e:
        return ChildResult(None, 126, error=f"{argv[0]}: cannot execute: {e.strerror}")
    tty = Terminal()
    tty.give(pid)
    if on_start:
        on_start(pid)
    signals.started(pid)
    killed = False
    try:
        while True:
            # SIGCHLD (in the set) wakes this at the command's exit or stop: the timeout only paces the
            # kill-after grace period once a signal was forwarded (each idle wake-up is CPU the user pays)
            info = signal.sigtimedwait(wait_set, 0.25 if signals.first_terminating_at else 5.0)
            done, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if done and not os.WIFSTOPPED(status):
                break
            if info is not None:
                # the grace period counts from a signal ckprof itself sent: a terminal's Ctrl-C
                # went to the command directly, and its graceful shutdown is its own to take
                signals.take(info.si_signo, info.si_code)
            if done:  # stopped (Ctrl-Z reached its group)
                _follow_stop(pid, tty, signals)
                continue
            since = signals.first_terminating_at
            if since and not killed and time.monotonic() - since > kill_after_s:
                warn(f"command did not exit {kill_after_s:g} s after the signal: sending SIGKILL")
                _signal_group(pid, signal.SIGKILL)
                killed = True
    finally:
        signals.done = True
        tty.take_back()
    forwarded = tuple(signals.forwarded)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return ChildResult(pid, 128 - code, signal=-code, forwarded=forwarded, killed=killed)
    return ChildResult(pid, code, forwarded=forwarded, killed=killed)


def _signal_group(pid: int, sig: int) -> None:
    """Send `sig` to the command's process group (as a terminal or a launcher would have), or to
    the command alone when its group is gone."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _follow_stop(pid: int, tty: Terminal, signals: _Forwarder) -> None:
    """The command was stopped (Ctrl-Z reached its group): take the terminal back and stop ckprof
    too, so the shell sees its job stopped; when continued (`fg` or `bg`), continue the command,
    giving it the terminal again when ckprof has it."""
    if tty.fd is None:
        return  # no job control here: whoever stopped the command will continue it (through ckprof)
    tty.take_back()
    # the shell's SIGCONT that will wake ckprof is ckprof's: the command gets one, below, not two
    signals.skip_cont = signal.SIGCONT in _forwarded
    os.kill(os.getpid(), signal.SIGSTOP)
    tty.give(pid)
    _signal_group(pid, signal.SIGCONT)
    if signal.sigtimedwait({signal.SIGCONT}, 0) is not None:  # pending here, or taken by _on_stray
        signals.skip_cont = False


def exit_like(result: ChildResult) -> None:
    """Exit as the child did: same code, or die of the same signal (without a core file)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a full or closed stream must not change the exit status
            pass
    if result.signal:
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ValueError, OSError):
            pass
        if result.signal not in (signal.SIGKILL, signal.SIGSTOP):  # these cannot be caught anyway
            signal.signal(result.signal, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {result.signal})
        os.kill(os.getpid(), result.signal)
        time.sleep(1)  # the signal is delivered on return from kill(); this is not reached
    os._exit(result.exit_code)
