"""Checkpoint directories as production checkpointers keep them: write aside, publish atomically.

Every rank writes into `<target>/.partial-<name>-<run id>/`. Once all ranks have written and
fsynced, rank 0 writes the manifest (each file's rank, size and checksum), fsyncs it and the
directory, renames the directory to `<target>/<name>` (rename(2) is atomic) and fsyncs the
target so the rename itself is durable. A directory with a checkpoint's name therefore always
holds a complete checkpoint; one killed half-way stays `.partial-*` and has no manifest.
`--keep N` deletes the oldest complete checkpoints only after the new one is published.
Names follow DLIO's: global_epoch1_step<N>.
"""

from __future__ import annotations

import json
import os
import re
import shutil

from ckprof.errors import CkprofError

MANIFEST = "ckprof-manifest.json"
FORMAT = "ckprof-workload-checkpoint"
VERSION = 1
PARTIAL = ".partial-"
_NAME = re.compile(r"^global_epoch(\d+)_step(\d+)$")
CHECKSUM_ALGO = "xxh3_64 over the chunks' xxh3_64 digests (8 B big-endian each)"


def checkpoint_name(step: int, epoch: int = 1) -> str:
    return f"global_epoch{epoch}_step{step}"


def partial_dir(target: str, name: str, run_id: str) -> str:
    return os.path.join(target, f"{PARTIAL}{name}-{run_id}")


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def complete_checkpoints(target: str) -> list[tuple[int, str]]:
    """(step, path) of every published checkpoint under `target`, oldest first."""
    out = []
    try:
        names = os.listdir(target)
    except FileNotFoundError:
        return []
    for n in names:
        m = _NAME.match(n)
        if m and os.path.isfile(os.path.join(target, n, MANIFEST)):
            out.append((int(m.group(2)), os.path.join(target, n)))
    return sorted(out)


def next_step(target: str) -> int:
    done = complete_checkpoints(target)
    return done[-1][0] + 1 if done else 1


def write_manifest(directory: str, manifest: dict) -> None:
    path = os.path.join(directory, MANIFEST)
    with open(path, "w") as f:
        json.dump({"format": FORMAT, "version": VERSION, "checksum": CHECKSUM_ALGO, **manifest}, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def publish(partial: str, final: str, manifest: dict) -> None:
    """Manifest, fsync, atomic rename, fsync of the parent: after this `final` is complete and durable."""
    write_manifest(partial, manifest)
    fsync_dir(partial)
    if os.path.exists(final):
        raise CkprofError(f"{final} already exists: not replacing a published checkpoint")
    os.rename(partial, final)
    fsync_dir(os.path.dirname(final))


def prune(target: str, keep: int) -> list[str]:
    """Delete the oldest complete checkpoints so that `keep` remain (keep=0: delete nothing)."""
    if keep <= 0:
        return []
    done = complete_checkpoints(target)
    removed = []
    for _, path in done[:-keep] if len(done) > keep else []:
        # unpublish first (a rename), so a crash mid-delete leaves no half checkpoint with a real name
        doomed = os.path.join(target, f"{PARTIAL}deleting-{os.path.basename(path)}")
        os.rename(path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        removed.append(path)
    if removed:
        fsync_dir(target)
    return removed


def read_manifest(directory: str) -> dict:
    path = os.path.join(directory, MANIFEST)
    if not os.path.lexists(directory):
        raise CkprofError(f"{directory}: no such directory", hint=_what_to_load(os.path.dirname(directory)))
    try:
        with open(path) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise CkprofError(
            f"{directory}: not a complete checkpoint (no {MANIFEST})", hint=_what_to_load(directory)
        ) from None
    except NotADirectoryError:
        raise CkprofError(
            f"{directory}: not a directory; a checkpoint is a directory with {MANIFEST}",
            hint=_what_to_load(os.path.dirname(directory)),
        ) from None
    except OSError as e:
        raise CkprofError(f"{path}: cannot be read ({e.strerror})") from None
    except ValueError as e:
        raise CkprofError(f"{path}: unreadable manifest ({e})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or not isinstance(m.get("files"), list):
        raise CkprofError(f"{path}: not a ckprof workload manifest")
    why = manifest_problem(m)
    if why:
        raise CkprofError(f"{path}: {why}: not verified", hint="the checkpoint is damaged or was not written by ckprof")
    return m


def _what_to_load(directory: str) -> str:
    """The hint for a directory that is not a checkpoint: the newest one under it, if any."""
    if not os.path.isdir(directory):
        return "give a directory written by `ckprof workload`, e.g. <target>/global_epoch1_step1"
    done = complete_checkpoints(directory)
    if done:
        return f"it holds {len(done)} checkpoint(s); the newest is {done[-1][1]}"
    partial = any(n.startswith(PARTIAL) for n in os.listdir(directory))
    if os.path.basename(os.path.normpath(directory)).startswith(PARTIAL) or partial:
        return "a .partial-* directory is a checkpoint that was never published (its run was stopped): nothing to load"
    return "give a directory written by `ckprof workload`, e.g. <target>/global_epoch1_step1"


# A manifest's chunk size sizes each reader thread's buffer: at most 1 GiB, as --chunk-size
# (write(2) and read(2) move at most 0x7ffff000 bytes per call on Linux: man 2 write, NOTES).
MAX_CHUNK_BYTES = 2**30


def bad_file_name(name) -> bool:
    """True unless `name` is one plain file name: a manifest never makes a reader open anything
    outside its checkpoint (no '/', so no '..' walk and no absolute path; path_resolution(7))."""
    return not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name or name == MANIFEST


def manifest_problem(m: dict) -> str | None:
    """Why a manifest cannot be verified against, or None: it lists at least one file, a positive
    chunk size, and every entry is a plain file name inside the checkpoint directory."""
    if not m["files"]:
        return "the manifest lists no files"
    chunk = m.get("chunk_bytes")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 0 < chunk <= MAX_CHUNK_BYTES:
        return f"chunk_bytes must be a whole number of bytes from 1 to {MAX_CHUNK_BYTES} (got {chunk!r})"
    seen = set()
    for i, f in enumerate(m["files"]):
        if not isinstance(f, dict) or not all(k in f for k in ("name", "rank", "bytes", "xxh3")):
            return f"entry {i} lacks name, rank, bytes or xxh3"
        name = f["name"]
        if bad_file_name(name):
            return f"entry {i} names {name!r}, which is not a file inside the checkpoint"
        if name in seen:
            return f"entry {i} names {name!r} a second time"
        seen.add(name)
        for key in ("bytes", "rank"):
            v = f[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                return f"entry {i} ({name}) has a bad {key}: {v!r}"
        if not isinstance(f["xxh3"], str):
            return f"entry {i} ({name}) has a bad xxh3: {f['xxh3']!r}"
    return None


def remove_partials(target: str, run_id: str) -> list[str]:
    """Remove this run's unpublished directories (after a failure: nothing half-written is left)
    and any `.partial-deleting-*` that retention (prune) was stopped in the middle of deleting.
    Returns the names of the checkpoints whose unfinished directories were removed."""
    try:
        names = os.listdir(target)
    except OSError:
        return []
    removed = []
    for n in names:
        if n.startswith(f"{PARTIAL}deleting-"):
            shutil.rmtree(os.path.join(target, n), ignore_errors=True)
        elif n.startswith(PARTIAL) and n.endswith(f"-{run_id}"):
            shutil.rmtree(os.path.join(target, n), ignore_errors=True)
            removed.append(n[len(PARTIAL) : -len(run_id) - 1])
    return sorted(removed)
