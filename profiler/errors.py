"""ckprof's own small set of errors.

Vendor errors (NVMLError, a failing nvme-cli, PermissionError on a sysfs file) are turned into
these at the collector's edge, so the CLI can print one line with a hint instead of a traceback.
"""

import os
import sys
from contextlib import contextmanager

from ckprof.escape import visible

DEBUG_ENV = "CKPROF_DEBUG"
DEBUG_HINT = f"rerun with {DEBUG_ENV}=1 for the traceback"

# Standard descriptors that were closed when ckprof started (`2>&-`): held on /dev/null so that
# ckprof's own files cannot take their numbers, and closed again in the wrapped command.
CLOSED_STD_FDS: set[int] = set()


def hold_closed_std_fds() -> None:
    """Put /dev/null on any of fds 0-2 that is closed, remembering which (CLOSED_STD_FDS)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            got = os.open(os.devnull, os.O_RDWR)
            if got != fd:  # lower ones were closed too and are being filled in order
                os.dup2(got, fd)
                os.close(got)
            CLOSED_STD_FDS.add(fd)


def say(line: str) -> None:
    """One line for the person on stderr. A closed or full stderr (`2>&-`, `2>/dev/full`) loses
    the line, never the command's exit status: nothing here raises. Every line goes through
    ckprof.escape.visible, so a path, command or device name in it cannot break it in two
    or send the terminal a control sequence (docs/faults.md, "What is escaped where")."""
    if 2 in CLOSED_STD_FDS or sys.stderr is None:
        return
    try:
        sys.stderr.write(visible(line) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def debugging() -> bool:
    """CKPROF_DEBUG=1: show Python's traceback instead of ckprof's one-line error."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


class CkprofError(Exception):
    """Base class: a message a user can act on, and optionally a hint saying how."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def __reduce__(self):  # whole across a process pool or Dask: a worker's error keeps its hint
        return (type(self), (str(self), self.hint))

    def one_line(self) -> str:
        msg = str(self)
        return f"{msg} ({self.hint})" if self.hint else msg


class UsageError(CkprofError):
    """The user asked for something that cannot be: a bad flag, an unknown device."""


class CollectorUnavailable(CkprofError):
    """A collector cannot run here: missing binary, no permission, no such hardware."""


class RecordingError(CkprofError):
    """A recording cannot be read: not a recording, truncated, from a future schema."""


@contextmanager
def unexpected_as_one_line(what: str):
    """Inside: ckprof's own errors pass; any other exception becomes a RecordingError saying
    "{what} (TypeName: message)" with DEBUG_HINT — or, with CKPROF_DEBUG=1, stays itself."""
    try:
        yield
    except CkprofError:
        raise
    except Exception as e:
        if debugging():
            raise
        raise RecordingError(f"{what} ({type(e).__name__}: {e})", hint=DEBUG_HINT) from None
