"""Running the wrapped command: same stdio, signals passed through, its exit status returned.

The rules are perf record's and a shell's:
  - no shell: argv is executed as given, PATH searched; 127 when not found, 126 when not executable;
  - SIGINT, SIGTERM and SIGHUP sent to ckprof (kill(2): si_code SI_USER) are forwarded to the child.
    The same signals from the terminal (si_code SI_KERNEL: the tty driver signals the whole
    foreground process group, kernel/signal.c kill_pgrp with SEND_SIG_PRIV) already reached the
    child, and are not sent twice;
  - after the first terminating signal ckprof forwarded, the child gets `kill_after_s` seconds,
    then SIGKILL (a terminal's Ctrl-C starts no timer: the child got it directly, not from ckprof);
  - ckprof exits with the child's code; when the child died of signal N, ckprof re-raises N on
    itself after finalising the recording, so its parent sees the same death (128+N in a shell).

The signals are blocked in every ckprof thread (block_signals() runs before any thread starts)
and taken synchronously with sigtimedwait(2) in the main thread, so nothing interrupts the
recorder. The child is started with posix_spawn(3), whose setsigmask clears that block in the
child alone.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from dataclasses import dataclass

from ckprof.errors import CLOSED_STD_FDS, say

TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_WAIT_SET = {*TERMINATING, signal.SIGCHLD}
SI_KERNEL = 0x80  # include/uapi/asm-generic/siginfo.h


def block_signals() -> None:
    """Block the terminating signals and SIGCHLD in this thread and every thread it starts."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAIT_SET)


@dataclass
class ChildResult:
    pid: int | None
    exit_code: int  # what ckprof should exit with (128+N for a signal, 126/127 for spawn errors)
    signal: int | None = None  # the signal the child died of, if any
    error: str | None = None  # why the command could not be started
    forwarded: tuple = ()  # signals forwarded to the child
    killed: bool = False  # escalated to SIGKILL


def spawn(argv: list[str], env: dict) -> int:
    """Start argv with posix_spawnp: inherited stdio (a descriptor that was closed when ckprof
    started is closed in the child too), default signal mask and dispositions."""
    return os.posix_spawnp(
        argv[0],
        argv,
        env,
        file_actions=[(os.POSIX_SPAWN_CLOSE, fd) for fd in sorted(CLOSED_STD_FDS)],
        setsigmask=(),  # unblock everything block_signals() blocked
        setsigdef=(*TERMINATING, signal.SIGPIPE, signal.SIGXFSZ),  # Python ignores SIGPIPE/SIGXFSZ
    )


def run(argv: list[str], env: dict, kill_after_s: float = 10.0, on_start=None, warn=None) -> ChildResult:
    """Run argv to completion; returns its ChildResult. block_signals() must have run first."""
    warn = warn or (lambda m: say(f"ckprof: {m}"))
    try:
        pid = spawn(argv, env)
    except FileNotFoundError:
        return ChildResult(None, 127, error=f"{argv[0]}: command not found")
    except PermissionError:
        return ChildResult(None, 126, error=f"{argv[0]}: permission denied (not executable?)")
    except OSError as e:
        return ChildResult(None, 126, error=f"{argv[0]}: cannot execute: {e.strerror}")
    if on_start:
        on_start(pid)
    forwarded: list[int] = []
    first_signal_at = None
    killed = False
    while True:
        info = signal.sigtimedwait(_WAIT_SET, 0.25)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if info is not None and info.si_signo in TERMINATING and info.si_code != SI_KERNEL:
            os.kill(pid, info.si_signo)
            forwarded.append(info.si_signo)
            # the grace period is counted from a signal ckprof itself sent: a terminal's Ctrl-C
            # went to the child directly, and its graceful shutdown is its own to take
            first_signal_at = first_signal_at or time.monotonic()
        if first_signal_at and not killed and time.monotonic() - first_signal_at > kill_after_s:
            warn(f"command did not exit {kill_after_s:g} s after the signal: sending SIGKILL")
            os.kill(pid, signal.SIGKILL)
            killed = True
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return ChildResult(pid, 128 - code, signal=-code, forwarded=tuple(forwarded), killed=killed)
    return ChildResult(pid, code, forwarded=tuple(forwarded), killed=killed)


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
