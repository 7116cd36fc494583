"""The one writer of a recording's events.jsonl, for every process that writes events: ckprof's
recorder (recording/writer.py), `ckprof.checkpoint()` / `ckprof.mark()` (ckprof.record.markers), the
workload's ranks and the automatic markers of the injected sitecustomize (_ckprof_autopatch), which
loads this file by its path under the name `_ckprof_events`. It lives with the recording's format,
below the recorder and the markers (docs/architecture.md, "Layers").

Each event is one line appended with one write(2) on an O_APPEND descriptor (atomic position, no
interleaving between processes: docs/architecture.md, "Events go straight to a file").

Which descriptor: `ckprof record` opens events.jsonl once more for the command and passes it on
across exec (not close-on-exec), named in CKPROF_EVENTS_FD as "FD:DEV:INO:PATH". A process writes
through it while it is still that open file (fstat(2): same device and inode, open for appending)
and CKPROF_EVENTS still names PATH; otherwise it opens CKPROF_EVENTS itself. So a command that
drops to another user (setpriv, runuser, su) still writes its marks into a file only ckprof's user
may open (0644, in a directory it may not even enter), and a descriptor number the command closed
or reused for a file of its own is never written to. A descriptor is checked again (fstat) before
each write, so a process that closed it and opened another file under its number is safe too.

A mark that cannot be written (no descriptor, and the file cannot be opened: `sudo` closes every
descriptor above 2; a full disk) never stops the process: it is said once per process on stderr.

Self-contained (the standard library only): the command may run a Python without ckprof.
"""

import errno
import fcntl
import json
import os
from typing import Any

ENV_EVENTS = "CKPROF_EVENTS"
ENV_EVENTS_FD = "CKPROF_EVENTS_FD"

_open: dict[
    tuple[int, str], tuple[int, int, int]
] = {}  # (pid, path) → (fd, st_dev, st_ino): a forked child looks again
_said: set[int] = set()  # pids that said a mark was lost


def pass_on(path: str) -> tuple[int, str]:
    """Open `path` for the command: (fd, CKPROF_EVENTS_FD's value). The caller lets the command
    inherit fd and closes it afterwards."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    st = os.fstat(fd)
    return fd, f"{fd}:{st.st_dev}:{st.st_ino}:{path}"


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _appendable(fd: int) -> bool:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    return bool(flags & os.O_APPEND) and flags & os.O_ACCMODE != os.O_RDONLY


def _inherited(path: str) -> tuple[int, int, int] | None:
    """The descriptor ckprof passed on for `path`, when this process still has it; else None."""
    value = os.environ.get(ENV_EVENTS_FD, "")
    try:
        fd_text, dev, ino, for_path = value.split(":", 3)
        fd, want = int(fd_text), (int(dev), int(ino))
        if for_path == path and _identity(fd) == want and _appendable(fd):
            return fd, *want
    except (ValueError, OSError):
        pass
    return None


def _descriptor(path: str) -> int:
    key = (os.getpid(), path)
    got = _open.get(key)
    if got is not None:
        try:
            if _identity(got[0]) == got[1:]:
                return got[0]
        except OSError:
            pass
        _open.pop(key, None)  # closed, or its number reused by the process: look again
    got = _inherited(path)
    if got is None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        got = (fd, *_identity(fd))
    _open[key] = got
    return got[0]


def append(path: str, line: bytes) -> None:
    """Append one whole line (bytes, ending in a newline) with one write(2). Raises OSError."""
    os.write(_descriptor(path), line)


def append_or_say(path: str, line: bytes) -> bool:
    """append(), and when it fails, say so once per process on stderr instead of raising: a mark
    must never stop the run. True when written."""
    try:
        append(path, line)
        return True
    except OSError as e:
        _say_once(e)
        return False


def _say_once(e: OSError) -> None:
    pid = os.getpid()
    if pid in _said:
        return
    _said.add(pid)
    why = e.strerror or str(e)
    hint = ""
    if e.errno in (errno.EACCES, errno.EPERM):
        hint = (
            f" (it runs as uid {os.geteuid()}, not ckprof's user, without the descriptor ckprof passed"
            f" on in {ENV_EVENTS_FD}: was it closed, e.g. by sudo?)"
        )
    msg = f"ckprof: process {pid}: checkpoint marks lost: cannot write the recording's events: {why}{hint}; said once\n"
    try:
        os.write(2, msg.encode())
    except OSError:
        pass


def line(event: dict[str, Any]) -> bytes:
    """An event as its line: one JSON object, compact, newline-ended."""
    return (json.dumps(event, separators=(",", ":"), default=str) + "\n").encode()


def append_event(path: str, event: dict[str, Any]) -> None:
    """Append one event as one line with one write(2) (O_APPEND: atomic position, no interleaving).
    Raises OSError: the recorder's writer decides what a failed write means for the recording."""
    append(path, line(event))
