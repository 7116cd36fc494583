"""Sleep until a file is written to: inotify(7) IN_MODIFY on one path, with a stop that wakes it.

A thread that only needs to look when a file grows (the file tracker, on events.jsonl) would
otherwise wake on a timer to find nothing: on this VM each wake-up costs ~80 µs of CPU, which is
most of what an idle recorder pays. inotify_init1(2) and inotify_add_watch(2) come from libc through
ctypes (the standard library has no binding); where they fail (no libc symbol, the per-user watch
limit in /proc/sys/fs/inotify/max_user_watches reached) `FileWatch.open` returns None and the caller
keeps its timer.
"""

from __future__ import annotations

import ctypes
import os
import select

IN_MODIFY = 0x00000002  # <sys/inotify.h>
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC


class FileWatch:
    def __init__(self, inotify_fd: int):
        self._fd = inotify_fd
        self._stop_r, self._stop_w = os.pipe()

    @classmethod
    def open(cls, path: str) -> tuple[FileWatch | None, str | None]:
        """(a watch on `path`, None), or (None, why not)."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init, add = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError) as e:
            return None, f"no inotify in libc ({e})"
        fd = init(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return None, f"inotify_init1: {os.strerror(ctypes.get_errno())}"
        if add(fd, os.fsencode(path), IN_MODIFY) < 0:
            err = ctypes.get_errno()
            os.close(fd)
            return None, f"inotify_add_watch {path}: {os.strerror(err)}"
        return cls(fd), None

    def wait(self, timeout_s: float | None) -> bool:
        """Block until the file is modified, stop() is called, or `timeout_s` passes (None: no
        timeout). True if stop() was called. Pending notifications are drained: one wake-up for
        any number of writes since the last."""
        ready, _, _ = select.select([self._fd, self._stop_r], [], [], timeout_s)
        if self._fd in ready:
            try:
                while os.read(self._fd, 65536):
                    pass
            except BlockingIOError:
                pass
        return self._stop_r in ready

    def stop(self) -> None:
        os.write(self._stop_w, b"x")

    def close(self) -> None:
        for fd in (self._fd, self._stop_r, self._stop_w):
            os.close(fd)
