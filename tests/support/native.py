"""The native-threads checkpoint writer of tests/test_native_threads_real.py (the docstring there
says what it checks): a small C library (4 pthreads pwrite(2) a file, fsync) called three times
through ctypes by a script under `ckprof record`, and the checks on its report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import ckprof
from ckprof.analysis.analyze import analyze
from support.command import ckprof_cmd

MIN_COVER = 0.95
MiB = 2**20

WRITER_C = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct part { int fd; size_t off, len; unsigned char seed; };

static void *write_part(void *arg) {
    struct part *p = arg;
    size_t piece = 256 << 10;
    unsigned char *buf = malloc(piece);
    struct timespec nap = {0, 5 * 1000 * 1000};  /* the serialisation between two pieces: 5 ms */
    for (size_t done = 0; done < p->len; done += piece) {
        size_t n = p->len - done < piece ? p->len - done : piece;
        for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(p->seed + i + done);
        nanosleep(&nap, NULL);
        if (pwrite(p->fd, buf, n, (off_t)(p->off + done)) != (ssize_t)n) { free(buf); return (void *)1; }
    }
    free(buf);
    return NULL;
}

/* Write `total` bytes to `path` from `threads` pthreads (at most 16), fsync, close: 0 on success. */
int ckpt_save(const char *path, size_t total, int threads) {
    pthread_t tid[16];
    struct part parts[16];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), bad = 0;
    if (fd < 0) return -1;
    for (int t = 0; t < threads; t++) {
        parts[t] = (struct part){fd, total / threads * t, total / threads, (unsigned char)t};
        pthread_create(&tid[t], NULL, write_part, &parts[t]);
    }
    for (int t = 0; t < threads; t++) { void *r; pthread_join(tid[t], &r); bad |= r != NULL; }
    bad |= fsync(fd) != 0;
    bad |= close(fd) != 0;
    return bad ? -1 : 0;
}
"""

SCRIPT = r"""
import ctypes, json, os, sys, time
lib, root, out = ctypes.CDLL(sys.argv[1]), sys.argv[2], sys.argv[3]
lib.ckpt_save.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
saves = []
for s in range(3):
    time.sleep(1.5)  # training between saves
    path = os.path.join(root, f"ckpt_{s:04d}.bin")
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert lib.ckpt_save(path.encode(), 32 << 20, 4) == 0
    t1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    saves.append({"start_ns": t0, "end_ns": t1, "path": path, "bytes": os.path.getsize(path), "pid": os.getpid()})
json.dump(saves, open(out, "w"))
"""


def record_native(tmp_path, mnt):
    """Build the native writer, run the script under `ckprof record --path mnt`: (rec, report, saves)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc) to build the native writer")
    (tmp_path / "writer.c").write_text(WRITER_C)
    so = tmp_path / "libwriter.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-pthread", "-o", str(so), str(tmp_path / "writer.c")], check=True)
    (tmp_path / "w.py").write_text(SCRIPT)
    root, out, saves_json = mnt / "ckpt", tmp_path / "rec", tmp_path / "saves.json"
    root.mkdir()
    cmd = ["record", "-q", "--interval", "0.1", "-o", str(out), "--path", str(mnt)]
    cmd += ["--", sys.executable, str(tmp_path / "w.py"), str(so), str(root), str(saves_json)]
    r = ckprof_cmd(*cmd, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    rec = ckprof.load(str(out))
    return rec, analyze(rec).report, json.loads(saves_json.read_text())


def check_native(rec, rep, saves) -> list[str]:
    """Print each figure; the checks that failed (module docstring)."""
    anchor = rec.meta["start"]["monotonic_ns"]
    rows = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    print()
    failed = []
    for c in rows:
        print(
            f"  {c['id']} {c['source']} {c['path']}: {c['start_s']:.3f}-{c['app_end_s']} s bytes_app {c['bytes_app']} "
            f"durable {c['durable']} ({c['durable_basis']}) writers "
            f"{[(w['pid'], w['comm'], w['files'], w['bytes']) for w in c['writers'] or []]}"
        )
    if rep["run"]["windows_from"] != "files" or len(rows) != len(saves):
        failed.append(f"{len(rows)} checkpoints from {rep['run']['windows_from']} for {len(saves)} saves")
    for s in saves:
        best, row = 0.0, None
        for c in rows:
            a, b = anchor + c["start_s"] * 1e9, anchor + (c["app_end_s"] or c["start_s"]) * 1e9
            f = max(0.0, min(b, s["end_ns"]) - max(a, s["start_ns"])) / (s["end_ns"] - s["start_ns"])
            if f > best:
                best, row = f, c
        print(f"  {s['path']}: {(s['end_ns'] - s['start_ns']) / 1e6:.1f} ms, covered {100 * best:.1f} %")
        if best < MIN_COVER or row is None:
            failed.append(f"{s['path']} covered {100 * best:.1f} %")
            continue
        if row["path"] != s["path"] or row["bytes_app"] != s["bytes"] or s["bytes"] != 32 * MiB:
            failed.append(f"{row['id']}: {row['path']} bytes_app {row['bytes_app']}, the file {s['bytes']} B")
        who = [(w["pid"], w["bytes"]) for w in row["writers"] or []]
        if who != [(s["pid"], s["bytes"])]:
            failed.append(f"{row['id']}: writers {who}, the script's process {s['pid']} wrote {s['bytes']} B")
        if row["durable"] is not True:  # fsync'd inside the call, on a file system over block devices
            failed.append(f"{row['id']}: durable {row['durable']} ({row['durable_basis']})")
    return failed
