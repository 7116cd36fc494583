"""Which terminating signals ckprof passes on to the command: each one reaches it exactly once.

The policy (docs/faults/record.md):

  - a signal that also reached the command's process group is not forwarded: the command, a
    member of that group, already has it. That covers the terminal (Ctrl-C: the tty driver sends
    SIGINT to the whole foreground process group, si_code SI_KERNEL), a shell's `kill -INT %1`
    and `kill -INT -PGID` (kill(2) with a negative pid: every member, si_code SI_USER), and
    senders that signal every process of a cgroup one by one (systemd's KillMode=control-group,
    Slurm's step kill);
  - a signal sent to ckprof alone (`kill PID`, a launcher signalling the process it started) is
    forwarded once;
  - a signal the command sent to ckprof itself is not sent back to it;
  - when the command has left ckprof's process group (setsid, setpgid), nothing sent to that
    group reaches it: every signal is forwarded.

kill(2)'s siginfo cannot tell a signal sent to the group from one sent to ckprof alone (both
are SI_USER from the same sender), so ckprof keeps a witness: a small process in its own
process group that blocks the terminating signals and does nothing else. A signal sent to the
group stays pending in the witness (/proc/PID/status ShdPnd, proc(5)); one sent to ckprof alone
does not. After each signal the witness saw, a fresh one replaces it, so a pending signal is
never counted twice. Without a witness (it could not start), SI_KERNEL signals are taken as the
terminal's and not forwarded, SI_USER ones are forwarded: the rule before the witness.
"""
from __future__ import annotations

import os
import signal
import sys
import time

TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WAIT_SET = {*TERMINATING, signal.SIGCHLD}
SI_KERNEL = 0x80  # include/uapi/asm-generic/siginfo.h; codes <= 0 (SI_USER, SI_QUEUE, SI_TKILL) are
                  # sent by a process, si_pid says which
# A sender that signals processes one at a time (a cgroup's members) reaches the witness a little
# after ckprof: look again this long before deciding the signal was ckprof's alone.
RECHECK_S = 0.05

# The witness: blocked signals stay pending (it inherits ckprof's blocked mask through
# posix_spawn); it exits when ckprof is gone (its parent changes), so it never outlives ckprof
# by more than half a second, even after a SIGKILL.
_WITNESS_CODE = ("import os, sys, time\n"
                 "parent = int(sys.argv[1])\n"
                 "while os.getppid() == parent:\n"
                 "    time.sleep(0.5)\n")


def block_signals() -> None:
    """Block the terminating signals and SIGCHLD in this thread and every thread it starts."""
    signal.pthread_sigmask(signal.SIG_BLOCK, WAIT_SET)


def _pending(pid: int) -> int:
    """The signal mask pending on process `pid` (shared and thread-directed), 0 when unreadable."""
    mask = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("ShdPnd:", "SigPnd:")):
                    mask |= int(line.split()[1], 16)
    except (OSError, ValueError):
        return 0
    return mask


class Witness:
    """A process in ckprof's process group that records which signals reached the group."""

    def __init__(self):
        self.pid: int | None = None
        self.start()

    def start(self) -> None:
        old = self.pid
        self.pid = None
        if sys.executable:
            devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
            try:  # the new one first, so a signal to the group between the two reaches one of them
                self.pid = os.posix_spawn(sys.executable, [sys.executable, "-S", "-c", _WITNESS_CODE,
                                                           str(os.getpid())],
                                          {}, file_actions=devnull)
            except OSError:
                self.pid = None
        if old is not None:
            self._end(old)

    def saw(self, signo: int) -> bool:
        """Whether `signo` reached the witness (so the whole process group); replaces it if so."""
        if self.pid is None:
            return False
        deadline = time.monotonic() + RECHECK_S
        while not _pending(self.pid) & (1 << (signo - 1)):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        self.start()
        return True

    def close(self) -> None:
        if self.pid is not None:
            self._end(self.pid)
            self.pid = None

    @staticmethod
    def _end(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def decide(info, child_pid: int, witness: Witness | None) -> tuple[bool, str]:
    """(forward?, why) for a terminating signal ckprof received (a sigtimedwait siginfo)."""
    if info.si_code <= 0 and info.si_pid == child_pid:
        return False, "sent by the command itself"
    try:
        in_group = os.getpgid(child_pid) == os.getpgrp()
    except ProcessLookupError:
        return False, "the command has already exited"
    if not in_group:
        return True, "the command left ckprof's process group"
    if witness is None or witness.pid is None:
        if info.si_code == SI_KERNEL:
            return False, "from the terminal: the whole foreground process group has it"
        return True, "sent to ckprof"
    if witness.saw(info.si_signo):
        return False, "sent to the process group: the command has it"
    return True, "sent to ckprof alone"
