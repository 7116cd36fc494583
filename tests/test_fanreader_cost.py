"""What the C fanotify reader (record/fanreader.c) costs a file, in system calls (issue 21, cost).

Events are made here in fanotify(7)'s layout (struct fanotify_event_metadata, then one
FAN_EVENT_INFO_TYPE_DFID_NAME record: header, fsid, struct file_handle, the name) for files that
exist, with a pid and a directory handle the reader has been told are the tree's; the reader's
group is a pipe, so no root is needed. Counted: read(2) by the thread's `syscr`
(/proc/thread-self/io, proc(5)), statx(2) by a shim put before libc (LD_PRELOAD) in a child.
That the entries are the Python reader's, byte for byte, is tests/test_fanreader.py's.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from ckprof.record import fanreader
from ckprof.record.fileactivity import new_c_reader

FAN_MODIFY, FAN_CLOSE_WRITE, FAN_CREATE = 0x2, 0x8, 0x100
HANDLE = struct.pack("=Ii", 8, 1) + b"\x07" * 8  # struct file_handle: handle_bytes, handle_type, f_handle
PID = 4242


def event(name: bytes, handle: bytes = HANDLE, mask: int = FAN_CREATE | FAN_MODIFY | FAN_CLOSE_WRITE) -> bytes:
    """One event of PID's as the kernel writes it: the merged create, write and close of a new file."""
    rec = handle + name + b"\0"
    rec += b"\0" * (-(4 + 8 + len(rec)) % 4)
    info = struct.pack("=BBH", 2, 0, 4 + 8 + len(rec)) + b"\0" * 8 + rec  # DFID_NAME, fsid
    return struct.pack("=IBBHQii", 24 + len(info), 3, 0, 24, mask, -1, PID) + info


@pytest.fixture
def reader():
    why = fanreader.why_not()
    if why is not None:
        pytest.skip(f"the C reader cannot run here: {why}")
    r = new_c_reader()
    yield r
    r.close()


def syscr() -> int:
    """read(2)-family calls this thread has made (each look is one, counted at the next look)."""
    fd = os.open("/proc/thread-self/io", os.O_RDONLY)
    try:
        text = os.pread(fd, 4096, 0).decode()
    finally:
        os.close(fd)
    return int(text.split("syscr:")[1].split()[0])


def test_a_read_that_left_room_for_another_event_ends_the_cycle_without_a_second_read(reader, tmp_path):
    if not os.path.exists("/proc/thread-self/io"):
        pytest.skip("no per-task I/O accounting (CONFIG_TASK_IO_ACCOUNTING)")
    (tmp_path / "f0").write_bytes(b"x" * 5)
    reader.add_pid(PID)
    reader.set_dir(HANDLE, str(tmp_path))
    fan_r, fan_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # the group: its reads as fanotify's
    stop_r, stop_w = os.pipe2(os.O_CLOEXEC)
    try:
        os.write(fan_w, event(b"f0"))
        looks = syscr()
        looks = syscr() - looks  # a look's own read
        before = syscr()
        why = reader.cycle(fan_r, stop_r, -1, -1, 10**6, 10**6, 10**8, 5 * 10**8, 10**9)
        reads = syscr() - before - looks
        got = reader.finished()
    finally:
        for fd in (fan_r, fan_w, stop_r, stop_w):
            os.close(fd)
    assert why == fanreader.FLUSH
    (entry,) = json.loads(b"[" + got[0] + b"]")
    assert entry["path"] == str(tmp_path / "f0") and entry["size_bytes"] == 5
    # fanotify_read(2) stops at an empty queue or at an event that does not fit: a read of 60 bytes
    # into 64 KiB found the queue empty, and what comes next is read after the merge pause
    assert reads == 1, f"{reads} read(2) calls in a cycle that read one event"


SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
long shim_by_path, shim_by_dir;
int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *st) {
  static int (*real)(int, const char *, int, unsigned int, struct statx *);
  if (!real) real = (int (*)(int, const char *, int, unsigned int, struct statx *))dlsym(RTLD_NEXT, "statx");
  if (dirfd == AT_FDCWD) shim_by_path++; else shim_by_dir++;
  return real(dirfd, path, flags, mask, st);
}
"""

CHILD = r"""
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[3])
from test_fanreader_cost import HANDLE, PID, event
from ckprof.record import fanreader
from ckprof.record.fileactivity import new_c_reader

assert fanreader._load(sys.argv[5]) is not None, fanreader._WHY_NOT  # the library the test loaded

shim, names = ctypes.CDLL(sys.argv[1]), json.loads(sys.argv[2])
r = new_c_reader()
r.add_pid(PID)
for handle, path in json.loads(sys.argv[4]):
    r.set_dir(bytes.fromhex(handle), path)
buf = b"".join(event(n.encode(), bytes.fromhex(h)) for n, h in names)
ctypes.memmove(r._lib.fr_buf(r._s), buf, len(buf))
counts = lambda: (ctypes.c_long.in_dll(shim, "shim_by_path").value, ctypes.c_long.in_dll(shim, "shim_by_dir").value)
fds = set(os.listdir("/proc/self/fd"))
c0 = counts()
judged = list(r.take(len(buf), 10**15, 0, 10**9))
c1 = counts()
entries = json.loads(b"[" + r.finished()[0] + b"]")
left = set(os.listdir("/proc/self/fd")) - fds
print(json.dumps({"by_path": c1[0] - c0[0], "by_dir": c1[1] - c0[1], "judged": len(judged),
                  "sizes": {os.path.basename(e["path"]): e["size_bytes"] for e in entries}, "fds_left": len(left)}))
"""


@pytest.fixture
def statx_counter(reader, tmp_path):
    """Run CHILD under the statx shim: (files [(name, directory handle)], dirs [(handle, path)]) →
    its answer: statx(2) calls by path and relative to a directory, sizes, descriptors open."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the statx shim")
    so = tmp_path / "shim.so"
    (tmp_path / "shim.c").write_text(SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(tmp_path / "shim.c"), "-ldl"], check=True)

    def run(files, dirs):
        env = dict(os.environ, LD_PRELOAD=str(so))
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(so), json.dumps([(n, h.hex()) for n, h in files]),
             os.path.dirname(__file__),
             json.dumps([(h.hex(), p) for h, p in dirs]), os.path.dirname(fanreader._load()._name)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        return json.loads(out.stdout)

    return run


def test_files_finished_one_after_another_in_a_directory_are_looked_up_from_it(statx_counter, tmp_path):
    d = tmp_path / "step_1"
    d.mkdir()
    for i in range(20):
        (d / f"shard_{i}").write_bytes(b"y" * i)
    got = statx_counter([(f"shard_{i}", HANDLE) for i in range(20)], [(HANDLE, str(d))])
    assert got["judged"] == 0 and got["sizes"] == {f"shard_{i}": i for i in range(20)}
    # the first by its path; the rest relative to the directory, opened once (O_PATH) at the second
    assert (got["by_path"], got["by_dir"]) == (1, 19), got
    assert got["fds_left"] == 0  # the directory's descriptor is closed before the call returns


def test_files_spread_over_directories_open_none_and_the_answers_stay_the_paths(statx_counter, tmp_path):
    handles = [struct.pack("=Ii", 8, 1) + bytes([k]) * 8 for k in range(3)]
    dirs = [(h, str(tmp_path / f"d{k}")) for k, h in enumerate(handles)]
    for _h, p in dirs:
        os.mkdir(p)
    files = []
    for i in range(9):  # each file in another directory than the one before: no descriptor opened
        h, p = dirs[i % 3]
        with open(os.path.join(p, f"f{i}"), "wb") as f:
            f.write(b"z" * i)
        files.append((f"f{i}", h))
    # a directory whose path the reader holds is gone: its file is gone by either lookup
    gone = tmp_path / "d_gone"
    gone.mkdir()
    (gone / "a").write_bytes(b"1")
    (gone / "b").write_bytes(b"2")
    hg = struct.pack("=Ii", 8, 1) + b"\x09" * 8
    dirs.append((hg, str(gone)))
    shutil.rmtree(gone)
    files += [("a", hg), ("b", hg)]
    got = statx_counter(files, dirs)
    assert got["judged"] == 0
    assert got["sizes"] == {**{f"f{i}": i for i in range(9)}, "a": None, "b": None}, got
    # "a" by its path; "b" too: the directory, second in a row, could not be opened
    assert (got["by_path"], got["by_dir"]) == (11, 0), got
