"""Running the wrapped command: same stdio, signals passed through, its exit status returned.

The rules are perf record's and a shell's:
  - no shell: argv is executed as given, PATH searched; 127 when not found, 126 when not executable;
  - the command keeps exactly the descriptors ckprof was given (ckprof's own are close-on-exec;
    ckprof.console holds a missing 0/1/2 close-on-exec too);
  - SIGINT, SIGTERM and SIGHUP reach the command exactly once: ckprof forwards one only when it
    did not already reach the command's process group (signals.py has the policy);
  - `kill_after_s` seconds after ckprof forwarded a signal, the command gets SIGKILL. A signal the
    command received directly (Ctrl-C) starts no timer: its graceful shutdown takes what it takes;
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

from ckprof.console import say

from .signals import TERMINATING, WAIT_SET, Witness, block_signals, decide

__all__ = ["ChildResult", "block_signals", "exit_like", "run", "spawn"]


@dataclass
class ChildResult:
    pid: int | None
    exit_code: int           # what ckprof should exit with (128+N for a signal, 126/127 for spawn errors)
    signal: int | None = None  # the signal the child died of, if any
    error: str | None = None   # why the command could not be started
    forwarded: tuple = ()      # signals forwarded to the child
    killed: bool = False       # escalated to SIGKILL
    received: tuple = ()       # every terminating signal ckprof got: {signal, sender_pid, forwarded, why}


def spawn(argv: list[str], env: dict) -> int:
    """Start argv with posix_spawnp: inherited stdio, default signal mask and dispositions."""
    return os.posix_spawnp(
        argv[0], argv, env,
        setsigmask=(),  # unblock everything block_signals() blocked
        setsigdef=(*TERMINATING, signal.SIGPIPE, signal.SIGXFSZ),  # Python ignores SIGPIPE/SIGXFSZ
    )


def run(argv: list[str], env: dict, kill_after_s: float = 10.0, on_start=None, warn=None) -> ChildResult:
    """Run argv to completion; returns its ChildResult. block_signals() must have run first."""
    warn = warn or say
    witness = Witness()  # before the child: it must be in the group before any signal to it
    try:
        return _run(argv, env, kill_after_s, on_start, warn, witness)
    finally:
        witness.close()


def _run(argv, env, kill_after_s, on_start, warn, witness) -> ChildResult:
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
    received: list[dict] = []
    forwarded_at = None
    killed = False
    while True:
        info = signal.sigtimedwait(WAIT_SET, 0.25)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if info is not None and info.si_signo in TERMINATING:
            forward, why = decide(info, pid, witness)
            received.append({"signal": info.si_signo, "sender_pid": info.si_pid if info.si_code <= 0 else None,
                             "forwarded": forward, "why": why})
            if forward:
                os.kill(pid, info.si_signo)
                forwarded.append(info.si_signo)
                forwarded_at = forwarded_at or time.monotonic()
        if forwarded_at and not killed and time.monotonic() - forwarded_at > kill_after_s:
            warn(f"command did not exit {kill_after_s:g} s after the forwarded signal: sending SIGKILL")
            os.kill(pid, signal.SIGKILL)
            killed = True
    code = os.waitstatus_to_exitcode(status)
    common = {"forwarded": tuple(forwarded), "killed": killed, "received": tuple(received)}
    if code < 0:
        return ChildResult(pid, 128 - code, signal=-code, **common)
    return ChildResult(pid, code, **common)


def exit_like(result: ChildResult) -> None:
    """Exit as the child did: same code, or die of the same signal (without a core file)."""
    for stream in (sys.stdout, sys.stderr):  # None when started without it; a full device raises
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
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
