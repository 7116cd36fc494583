"""ckprof's own messages: one line each, on stderr (fd 2), best effort.

Two rules keep a wrapped command's stdio and exit status untouched whatever the caller did with
ckprof's standard descriptors:

  - a descriptor 0, 1 or 2 that ckprof was started without is held by /dev/null opened
    close-on-exec (open(2) returns the lowest free descriptor, so ckprof's own files would
    otherwise land there, and whatever is written to fd 2 would go into one of them, a
    recording's events.jsonl say). Close-on-exec (fcntl(2) FD_CLOEXEC) means the command
    still starts without that descriptor, as it was given;
  - a message that cannot be written (stderr closed, a full device: `2>/dev/full` gives
    ENOSPC, a closed pipe EPIPE) is dropped. It never goes to stdout (print(file=None)
    would), and it never changes ckprof's exit status.
"""
from __future__ import annotations

import os
import sys

STD_FDS = (0, 1, 2)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def hold_std_fds() -> list[int]:
    """Open /dev/null (close-on-exec) on each of 0, 1, 2 that is closed; returns those fds."""
    held = []
    for fd in STD_FDS:
        if _is_open(fd):
            continue
        try:
            got = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return held
        if got != fd:  # a lower one was closed meanwhile: cannot happen single-threaded, but be exact
            os.dup2(got, fd, inheritable=False)
            os.close(got)
        held.append(fd)
    return held


def say(msg: str) -> None:
    """One `ckprof: msg` line on stderr; dropped when stderr is absent or cannot be written."""
    write_stderr(f"ckprof: {msg}\n")


def write_stderr(text: str) -> None:
    """Write text to sys.stderr and flush; nothing when it is None (fd 2 was closed) or fails."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass
