"""Writing a file whole or not at all: the one rule for every file ckprof replaces (reports,
comparisons, exports).

The new content goes to a temporary file beside the target, is fsync(2)ed, then rename(2)d over
it: rename is atomic within a file system (POSIX rename(2): "If newpath already exists, it will be
atomically replaced"), so a reader sees the old file or the new one, never a cut one. The directory
is fsync(2)ed after, so the rename itself survives a crash (fsync(2): "calling fsync() on the file
does not ensure that the entry in the directory containing the file has also reached disk"). On any
failure — a full disk, a quota, an interrupt — the temporary file is removed and the target keeps
what it held.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot fsync a directory (EINVAL): the file is in place anyway
        pass
    finally:
        os.close(fd)


@contextmanager
def replacing(path: str, mode: str = "w"):
    """A file object (`mode` "w" or "wb") whose content becomes `path` once the block ends without
    an exception. A symbolic link at `path` stays a link: the file it names is replaced. Its
    permission bits are kept (a new file gets 0666 less the umask, as open(2) gives). Something at
    `path` that is not a regular file (/dev/stdout, a pipe, a terminal) is written in place: there
    is no file to replace."""
    if mode not in ("w", "wb"):
        raise ValueError(f"replacing: mode {mode!r} (only 'w' or 'wb')")
    target = os.path.realpath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    # /dev/stdout, /dev/fd/N name an open descriptor (proc(5): /proc/self/fd): its file, even a regular one, is
    # the caller's to keep; a rename would put a new file at a path the descriptor no longer has
    if (st is not None and not stat.S_ISREG(st.st_mode)) or target.startswith("/proc/"):
        with open(path, mode) as f:
            yield f
        return
    folder, name = os.path.split(target)
    fd, tmp = _create_beside(folder, name)
    try:
        if st is not None:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        with open(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(folder)


def _create_beside(folder: str, name: str) -> tuple[int, str]:
    """A new, empty, hidden file in `folder` (O_EXCL: never one another process made), named
    `.NAME.tmp-PID-N.tmp`: ".tmp-" as the writer's temporary parts, and *.tmp, which
    recording.stamp leaves out of a recording's fingerprint."""
    for n in range(100):
        tmp = os.path.join(folder, f".{name}.tmp-{os.getpid()}-{n}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: no free temporary name for {name}")
