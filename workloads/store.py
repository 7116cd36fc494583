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

from .config import is_s3

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
    return checked_manifest(m, path)


def checked_manifest(m, path: str) -> dict:
    """A parsed manifest that can be verified against, else a CkprofError naming `path`."""
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


# -- where a run's checkpoints go: one interface, a directory or an object store ------------------


def open_store(target: str, threads: int = 1):
    """The store behind a --target: an S3Store for s3://bucket/prefix (a connection per
    thread), else a FileStore."""
    return S3Store(target, threads) if is_s3(target) else FileStore(target)


class FileStore:
    """A checkpoint directory on any file system (block, NFS, FUSE, tmpfs): the module's functions
    above (write aside in .partial-*, publish by rename(2))."""

    def __init__(self, target: str):
        self.target = os.path.abspath(target)

    def prepare(self, rank: int) -> None:
        pass  # nothing to set up before a save

    def before_read(self, paths: list[str], *, direct: bool, warm: bool) -> str:
        """Before a load's window: a cold restore of just these files (fdatasync + DONTNEED each,
        ckprof.record.pagecache.evict: no root, the rest of the machine's cache kept), unless
        O_DIRECT or --warm. Returns how the page cache was bypassed, for the summary."""
        if direct:
            return "O_DIRECT"
        if warm:
            return "warm (page cache as it was)"
        from ckprof.record.pagecache import evict

        for p in paths:
            try:
                evict(p)
            except OSError:
                pass  # a missing or unreadable file: the read says so, checked
        return "fdatasync + posix_fadvise(POSIX_FADV_DONTNEED) of its files"

    def published_fields(self, nbytes: int | None) -> dict:
        return {}  # durability is judged from the files' pages (ckprof.analysis.durability)

    def location(self, name: str) -> str:
        return os.path.join(self.target, name)

    def staging(self, name: str, run_id: str) -> str:
        return partial_dir(self.target, name, run_id)

    def make_staging(self, staging: str) -> None:
        os.makedirs(staging)

    def shard(self, where: str, name: str) -> str:
        return os.path.join(where, name)

    def write_files(self, jobs, pool, **kw):
        from .shardio import write_files

        return write_files(jobs, pool, **kw)

    def write_staged(self, jobs, bufs, digests, **kw):
        from .shardio import write_staged

        return write_staged(jobs, bufs, digests, **kw)

    def read_files(self, jobs, **kw):
        from .shardio import read_files

        return read_files(jobs, **kw)

    def publish(self, staging: str, final: str, manifest: dict) -> None:
        publish(staging, final, manifest)

    def prune(self, keep: int) -> list[str]:
        return prune(self.target, keep)

    def complete_checkpoints(self) -> list[tuple[int, str]]:
        return complete_checkpoints(self.target)

    def next_step(self) -> int:
        return next_step(self.target)

    def read_manifest(self, where: str) -> dict:
        return read_manifest(where)

    def remove_partials(self, run_id: str, first_step: int) -> list[str]:
        return remove_partials(self.target, run_id)


class S3Store:
    """s3://bucket/prefix: each shard one object, `<prefix>/<name>/<shard file name>`, and the
    manifest `<prefix>/<name>/ckprof-manifest.json`, written last. S3 has no rename, so a
    checkpoint is published by its manifest: a PutObject is atomic (a reader sees the whole object
    or none), and a checkpoint without one is never listed, loaded or pruned as complete. A run
    that fails deletes the objects of the checkpoints it did not publish and aborts their
    multipart uploads; retention deletes a checkpoint's manifest first, then its shards."""

    def __init__(self, target: str, threads: int = 1):
        from .s3io import split_url

        self.target = target.rstrip("/")
        self.bucket, self.prefix = split_url(self.target)
        self.top = self.prefix + "/" if self.prefix else ""  # every checkpoint's keys start so
        self.threads = threads
        self._s3 = None

    @property
    def s3(self):
        if self._s3 is None:
            from .s3io import client

            self._s3 = client(self.threads)
        return self._s3

    def prepare(self, rank: int) -> None:
        """In a rank, before its first save's clock starts: under a recording, its S3 requests as
        events (s3io.record_requests), then the client (botocore loads S3's service model: ~0.1-0.3
        s, which the first save would otherwise carry)."""
        from .s3io import record_requests

        record_requests(rank)
        self.s3  # noqa: B018 - made now

    def before_read(self, paths: list[str], *, direct: bool, warm: bool) -> str:
        return "over HTTP, ranged GETs (no page cache on this host)"

    def published_fields(self, nbytes: int | None) -> dict:
        """The save's end event, once every rank's objects' completing calls returned and the
        manifest is in: durable in the object store (ckprof.analysis.durability)."""
        return {"uploaded": True, "upload_bytes": nbytes}

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def key_of(self, url: str) -> str:
        from .s3io import split_url

        return split_url(url)[1]

    def location(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"

    def staging(self, name: str, run_id: str) -> str:
        return self.location(name)  # no rename on S3: the shards go under the final name

    def make_staging(self, staging: str) -> None:
        pass  # an S3 "folder" is a key prefix: nothing to make

    def shard(self, where: str, name: str) -> str:
        return f"{self.key_of(where)}/{name}"  # a job's path is its object's key

    def write_files(self, jobs, pool, *, direct=False, fsync=True, **kw):
        from .s3io import write_objects

        return write_objects(self.s3, self.bucket, jobs, pool, **kw)

    def write_staged(self, jobs, bufs, digests, *, direct=False, fsync=True, **kw):
        from .s3io import write_staged

        return write_staged(self.s3, self.bucket, jobs, bufs, digests, **kw)

    def read_files(self, jobs, *, direct=False, evict=False, **kw):
        from .s3io import read_objects

        return read_objects(self.s3, self.bucket, jobs, **kw)

    def _keys(self) -> list[str]:
        """Every key under the prefix (ListObjectsV2, 1,000 a page)."""
        out: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.top):
            out.extend(o["Key"] for o in page.get("Contents") or ())
        return out

    def _by_checkpoint(self, keys: list[str]) -> dict[str, tuple[int, list[str]]]:
        """Keys grouped by the checkpoint name right under the prefix: name → (step, keys)."""
        out: dict[str, tuple[int, list[str]]] = {}
        for k in keys:
            name, sep, _ = k[len(self.top) :].partition("/")
            m = _NAME.match(name) if sep else None
            if m:
                out.setdefault(name, (int(m.group(2)), []))[1].append(k)
        return out

    def publish(self, staging: str, final: str, manifest: dict) -> None:
        """The manifest, put only if none is there (If-None-Match: *, RFC 9110 section 13.1.2; S3
        answers 412 PreconditionFailed when the object exists): one request, and a published
        checkpoint is never replaced. A store that does not take the condition (501) is asked with
        a HEAD first."""
        key = f"{self.key_of(final)}/{MANIFEST}"
        body = json.dumps({"format": FORMAT, "version": VERSION, "checksum": CHECKSUM_ALGO, **manifest}, indent=1)
        put = dict(Bucket=self.bucket, Key=key, Body=(body + "\n").encode(), ContentType="application/json")
        exists = CkprofError(f"{final} already exists: not replacing a published checkpoint")
        try:
            self.s3.put_object(**put, IfNoneMatch="*")
        except Exception as e:  # noqa: BLE001
            if _code(e) in ("PreconditionFailed", "412"):
                raise exists from None
            if _code(e) not in ("NotImplemented", "501"):
                raise
            if self._exists(key):
                raise exists from None
            self.s3.put_object(**put)

    def _exists(self, key: str) -> bool:
        try:
            self.s3.head_object(Bucket=self.bucket, Key=key)
            return True
        except Exception as e:  # noqa: BLE001
            if _code(e) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def complete_checkpoints(self) -> list[tuple[int, str]]:
        out = []
        for name, (step, keys) in self._by_checkpoint(self._keys()).items():
            if f"{self.key(name)}/{MANIFEST}" in keys:
                out.append((step, self.location(name)))
        return sorted(out)

    def next_step(self) -> int:
        done = self.complete_checkpoints()
        return done[-1][0] + 1 if done else 1

    def _delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1,000 keys
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})

    def prune(self, keep: int) -> list[str]:
        if keep <= 0:
            return []
        done = self.complete_checkpoints()
        removed = []
        by_name = self._by_checkpoint(self._keys()) if len(done) > keep else {}
        for _, url in done[:-keep] if len(done) > keep else []:
            name = url.rsplit("/", 1)[-1]
            manifest = f"{self.key(name)}/{MANIFEST}"
            self._delete([manifest])  # unpublished first: never a half-deleted checkpoint with a manifest
            self._delete([k for k in by_name.get(name, (0, []))[1] if k != manifest])
            removed.append(url)
        return removed

    def read_manifest(self, where: str) -> dict:
        key = f"{self.key_of(where)}/{MANIFEST}"
        url = f"s3://{self.bucket}/{key}"
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as e:  # noqa: BLE001
            if _code(e) in ("NoSuchKey", "404"):
                raise CkprofError(
                    f"{where}: not a complete checkpoint (no {MANIFEST})",
                    hint="give s3://bucket/prefix/global_epoch1_step<N> written by `ckprof workload`",
                ) from None
            raise CkprofError(f"{url}: cannot be read ({s3_error(e)})") from None
        try:
            m = json.loads(body)
        except ValueError as e:
            raise CkprofError(f"{url}: unreadable manifest ({e})") from None
        return checked_manifest(m, url)

    def remove_partials(self, run_id: str, first_step: int) -> list[str]:
        """The objects of this run's checkpoints that have no manifest (steps from `first_step` on),
        and the multipart uploads still open under them."""
        removed = []
        try:
            for name, (step, keys) in sorted(self._by_checkpoint(self._keys()).items()):
                if step < first_step or f"{self.key(name)}/{MANIFEST}" in keys:
                    continue
                self._delete(keys)
                removed.append(name)
            pages = self.s3.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=self.top)
            for page in pages:
                for u in page.get("Uploads") or ():
                    name = u["Key"][len(self.top) :].partition("/")[0]
                    m = _NAME.match(name)
                    if m and int(m.group(2)) >= first_step:
                        self.s3.abort_multipart_upload(Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"])
                        removed.append(name)
        except Exception:  # noqa: BLE001 - best effort after a failure, which is what gets reported
            pass
        return sorted(set(removed))


def _code(e: BaseException) -> str | None:
    """botocore's error code (ClientError), else None."""
    return ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code")


def s3_error(e: BaseException) -> str:
    """One line for a botocore error: its code and message, or the exception's type and text."""
    code = _code(e)
    return f"{code}: {e}" if code else f"{type(e).__name__}: {e}"
