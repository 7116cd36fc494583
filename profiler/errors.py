"""ckprof's own small set of errors.

Vendor errors (NVMLError, a failing nvme-cli, PermissionError on a sysfs file) are turned into
these at the collector's edge, so the CLI can print one line with a hint instead of a traceback.
"""

DEBUG_HINT = "rerun with CKPROF_DEBUG=1 for the traceback"


class CkprofError(Exception):
    """Base class: a message a user can act on, and optionally a hint saying how."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def one_line(self, with_debug_hint: bool = True) -> str:
        """The message and its hint; `with_debug_hint=False` (under CKPROF_DEBUG) drops DEBUG_HINT."""
        msg = str(self)
        if not self.hint or (self.hint == DEBUG_HINT and not with_debug_hint):
            return msg
        return f"{msg} ({self.hint})"


class UsageError(CkprofError):
    """The user asked for something that cannot be: a bad flag, an unknown device."""


class CollectorUnavailable(CkprofError):
    """A collector cannot run here: missing binary, no permission, no such hardware."""


class RecordingError(CkprofError):
    """A recording cannot be read: not a recording, truncated, from a future schema."""
