"""The fanotify reader in C (fanreader.c, built with the package) as the file-activity source sees it.

The C side reads the group's events, takes the usual one — a file's create, modify, close_write or
delete, by a pid this side has said is the recorded tree's, in a directory it has said is wholly
under the recorded paths — keeps each file's burst, and hands back the finished bursts' entries
already encoded as JSON (`Reader.finished`), with the paths of those the file tracker watches
beside them where asked (`Reader.list_paths`: the tracker takes them in-process). Every other event is handed back to be judged in Python
(ckprof.record.fileactivity), which calls `note` / `rename` for the burst table, kept only in C.

Where the library is not built (no C compiler at install), or was built from another
fanreader.c, the source reads in Python as before and the start event and meta.json say which
reader ran and why. CKPROF_FILE_ACTIVITY_READER=python forces the Python reader (to compare).
"""

from __future__ import annotations

import ctypes
import json
import os

from .clib import HERE, load_built

ENV = "CKPROF_FILE_ACTIVITY_READER"
ABI = 4  # fanreader.c's FR_ABI
# fr_cycle's answers (fanreader.c: why it came back to Python)
IDLE, EVENT, CONN, FLUSH, STOP = range(5)

_LIB: ctypes.CDLL | None = None
_WHY_NOT: str | None = None


def _load(here: str | None = None) -> ctypes.CDLL | None:
    """The library built beside this module (or in `here`), once; None and _WHY_NOT when not."""
    global _LIB, _WHY_NOT
    if _LIB is not None or _WHY_NOT is not None:
        return _LIB
    lib, path, _WHY_NOT = load_built("_fanreader", "the C reader", here or HERE)
    if lib is None:
        return None
    p, i64, i32, u32, c = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint32, ctypes.c_char_p
    i64p, i = ctypes.POINTER(i64), ctypes.c_int
    # the ABI first: a library from another fanreader.c may lack a function named below
    abi = getattr(lib, "fr_abi", None)
    if abi is None:
        _WHY_NOT = f"{path} has no fr_abi: it does not match this ckprof's Python side (rebuild it: pip install .)"
        return None
    abi.restype, abi.argtypes = i, []
    if abi() != ABI:
        _WHY_NOT = f"{path} does not match this ckprof's Python side (rebuild it: pip install .)"
        return None
    for name, res, args in (
        ("fr_new", p, [ctypes.c_size_t]),
        ("fr_free", None, [p]),
        ("fr_read", i64, [p, i]),
        ("fr_buf", p, [p]),
        ("fr_add_pid", i, [p, i32]),
        ("fr_drop_pid", None, [p, i32]),
        ("fr_set_dir", i, [p, c, u32, c]),
        ("fr_clear_dirs", None, [p]),
        ("fr_note", i, [p, c, u32, c, u32, c, u32, i32, i64, i64, i64]),
        ("fr_rename", i, [p, c, u32, c, u32, c, u32, c, u32, c, c, i32, i64, i]),
        ("fr_move_prefix", None, [p, c, c]),
        ("fr_add_scanned", i, [p, c, i64, i]),
        ("fr_first_end", i64, [p]),
        ("fr_emit", None, [p, i64, i64, i, i64, i64]),
        ("fr_take", i, [p, i64, i64p, i64p, i64, i64, i64]),
        ("fr_set_text", i, [p, i, u32, c]),
        ("fr_out", p, [p, i64p, i64p, i64p]),
        ("fr_out_reset", None, [p]),
        ("fr_counts", None, [p, i64p]),
        ("fr_cycle", i, [p, i, i, i, i, i64, i64, i64, i64, i64, i64p]),
        ("fr_set_list", None, [p, u32, u32]),
        ("fr_paths", p, [p, i64p]),
        ("fr_set_size_budget", None, [p, ctypes.c_double, ctypes.c_double]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _LIB = lib
    return lib


def why_not() -> str | None:
    """Why the C reader cannot run here (None when it can)."""
    if os.environ.get(ENV, "").lower() == "python":
        return f"{ENV}=python"
    _load()
    return _WHY_NOT


def _b(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


class Reader:
    """One C reader (burst table, pid and directory sets, a read buffer) for one group."""

    def __init__(self, ops, texts: tuple[str, str, str, str, str], bufsize: int = 1 << 16):
        """`ops`: (mask bits, name) of each op an entry lists, in order; `texts`: what `found_by`,
        `writers_unknown` and `size_unknown` (deleted; gone; the size budget spent) say. The
        entries' texts are the Python reader's (record/fileactivity.py), given here once."""
        lib = _load()
        if lib is None:
            raise OSError(_WHY_NOT)
        self._lib = lib
        self._s = lib.fr_new(bufsize)
        if not self._s:
            raise MemoryError("fanotify reader")
        self._off, self._evlen = ctypes.c_int64(0), ctypes.c_int64(0)
        self._len, self._files, self._max_end = ctypes.c_int64(0), ctypes.c_int64(0), ctypes.c_int64(0)
        self._offp, self._evlenp = ctypes.byref(self._off), ctypes.byref(self._evlen)
        self._lenp, self._filesp, self._max_endp = map(ctypes.byref, (self._len, self._files, self._max_end))
        self._io = (ctypes.c_int64 * 6)()  # fr_cycle's IO_* values
        if len(ops) != 6:
            raise ValueError("the C reader lists six ops")
        texts_json = [(bits, name) for bits, name in ops] + [(0, t) for t in texts]
        for which, (bits, text) in enumerate(texts_json):
            if lib.fr_set_text(self._s, which, bits, json.dumps(text).encode()):
                self.close()
                raise MemoryError("fanotify reader")

    def read(self, fd: int) -> int:
        """read(2) the queued events into the C buffer: bytes (0 when none)."""
        n = self._lib.fr_read(self._s, fd)
        if n < 0:
            raise OSError(-n, os.strerror(-n))
        return n

    def take(self, n: int, t_ns: int, offset_ns: int, max_lead_ns: int):
        """Take the buffer's events in C; yield each one Python must judge, as its bytes."""
        return self.take_rest(0, n, t_ns, offset_ns, max_lead_ns)

    def cycle(
        self,
        fan_fd: int,
        stop_fd: int,
        exec_fd: int,
        fork_fd: int,
        merge_ns: int,
        others_ns: int,
        flush_every_ns: int,
        quiet_ns: int,
        max_lead_ns: int,
    ) -> int:
        """Pause, read and take in C until Python is needed (fanreader.c fr_cycle): IDLE, EVENT
        (`event()` is its bytes), CONN, FLUSH or STOP; OSError when read(2) failed. An fd < 0 is
        not polled. The GIL is released meanwhile (ctypes.CDLL)."""
        r = self._lib.fr_cycle(
            self._s,
            fan_fd,
            stop_fd,
            exec_fd,
            fork_fd,
            merge_ns,
            others_ns,
            flush_every_ns,
            quiet_ns,
            max_lead_ns,
            self._io,
        )
        if r < 0:
            raise OSError(-r, os.strerror(-r))
        return r

    def event(self) -> tuple[bytes, int, int, int]:
        """After EVENT: (the event's bytes, where the rest of its buffer begins, the buffer's
        length, the read's stamp) — with `take_rest` the rest of that read is taken."""
        io = self._io
        off, evlen = io[0], io[1]
        return ctypes.string_at(self._lib.fr_buf(self._s) + off, evlen), off + evlen, io[2], io[3]

    @property
    def cycle_offset_ns(self) -> int:
        """CLOCK_REALTIME − CLOCK_MONOTONIC as the cycle read it for its last read."""
        return self._io[4]

    @property
    def mine_ns(self) -> int:
        """When fr_cycle last read the tree's events (0: never)."""
        return self._io[5]

    def take_rest(self, start: int, n: int, t_ns: int, offset_ns: int, max_lead_ns: int):
        """Take the events of the last read's buffer from `start` in C; yield each one Python
        must judge, as its bytes (as `take`)."""
        lib, s = self._lib, self._s
        self._off.value = start
        while lib.fr_take(s, n, self._offp, self._evlenp, t_ns, offset_ns, max_lead_ns):
            off, evlen = self._off.value, self._evlen.value
            yield ctypes.string_at(lib.fr_buf(s) + off, evlen)
            self._off.value = off + evlen

    def add_pid(self, pid: int) -> None:
        self._lib.fr_add_pid(self._s, pid)

    def drop_pid(self, pid: int) -> None:
        self._lib.fr_drop_pid(self._s, pid)

    def set_dir(self, handle: bytes, path: str) -> None:
        self._lib.fr_set_dir(self._s, handle, len(handle), _b(path))

    def clear_dirs(self) -> None:
        self._lib.fr_clear_dirs(self._s)

    def note(self, handle, name, path, mask, pid, t_ns, offset_ns, max_lead_ns) -> bool:
        p = None if path is None else _b(path)
        return (
            self._lib.fr_note(self._s, handle, len(handle), name, len(name), p, mask, pid, t_ns, offset_ns, max_lead_ns)
            == 1
        )

    def rename(self, old, new, old_path: str, new_path: str, pid: int, t_ns: int, is_dir: bool) -> None:
        (_t, oh, on), (_t2, nh, nn) = old, new
        lib = self._lib
        lib.fr_rename(
            self._s, oh, len(oh), on, len(on), nh, len(nh), nn, len(nn), _b(old_path), _b(new_path), pid, t_ns, is_dir
        )

    def move_prefix(self, old: str, new: str) -> None:
        self._lib.fr_move_prefix(self._s, _b(old), _b(new))

    def add_scanned(self, path: str, t_ns: int, is_dir: bool) -> None:
        self._lib.fr_add_scanned(self._s, _b(path), t_ns, is_dir)

    def first_end_ns(self) -> int | None:
        t = self._lib.fr_first_end(self._s)
        return None if t < 0 else t

    def emit(self, now_ns: int, quiet_ns: int, everything: bool, offset_ns: int, max_lead_ns: int) -> None:
        self._lib.fr_emit(self._s, now_ns, quiet_ns, everything, offset_ns, max_lead_ns)

    def list_paths(self, want_mask: int, skip_mask: int) -> None:
        """From now on list, beside each batch, the path of each entry (not a directory) whose
        mask has a bit of `want_mask` and none of `skip_mask` (`finished`'s third item)."""
        self._lib.fr_set_list(self._s, want_mask, skip_mask)

    def finished(self) -> tuple[bytes, int, bytes] | None:
        """The entries finished since the last call, as the JSON of a list's items (the
        `file_activity` event's `files`), the latest end_ns among them, and the listed paths
        (`list_paths`; in the entries' order, as their "path" holds them before JSON's escapes),
        NUL-separated, undecoded (filetracker.WrittenBatch.of_blob); None when none."""
        lib, s = self._lib, self._s
        ptr = lib.fr_out(s, self._lenp, self._filesp, self._max_endp)
        if not self._files.value:
            return None
        blob = ctypes.string_at(ptr, self._len.value)
        listed = lib.fr_paths(s, self._lenp)
        n = self._len.value
        paths = ctypes.string_at(listed, n - 1) if n else b""
        lib.fr_out_reset(s)
        return blob, self._max_end.value, paths

    def size_budget(self, per_s: float, at_once: float) -> None:
        """Read the sizes of at most `per_s` finished files a second of the bursts' stamps,
        `at_once` in a row (fanreader.c size_budget); the others' `size_unknown` is the last text."""
        self._lib.fr_set_size_budget(self._s, per_s * 1e-9, at_once)

    def counts(self) -> dict:
        out = (ctypes.c_int64 * 4)()
        self._lib.fr_counts(self._s, out)
        return {"events_in_c": out[0], "events_kept": out[1], "files": out[2], "sizes_not_read": out[3]}

    def close(self) -> None:
        if self._s:
            self._lib.fr_free(self._s)
            self._s = None
