"""Wraps checkpoint save/load calls the moment their modules are imported (an import hook).

Wrapped: torch.save and torch.load (and their torch.serialization originals);
torch.distributed.checkpoint save, async_save, load (and their state_dict_saver/state_dict_loader
originals); safetensors.torch save_file and load_file; Megatron-core dist_checkpointing.save; Hugging Face transformers Trainer._save_checkpoint and Trainer.save_model (the whole
checkpoint-N/ folder: weights, optimizer, scheduler, RNG state, trainer_state.json, and the
retention that deletes old checkpoints); Lightning Trainer.save_checkpoint (the state dict and
the fsspec write after it; through Lightning's AsyncCheckpointIO an async save that ends with its
background write, its clone the staging phase). Restores: HF resume_from_checkpoint (the model, optimizer,
scheduler, scaler and RNG loads) and Lightning's ckpt_path= (resume_start). A load's start event
carries how much of its files the page cache already held (cachestat(2)). Each call becomes one checkpoint window: a checkpoint_start and a
checkpoint_end event with the path and the bytes written (the file's size, or for a directory
the files in it written during the save, listed in `files`), in the format of ckprof/markers.py,
with source "patch".

The app's own finishing of a save is part of it: an os.fsync/os.fdatasync of one of the save's
files, an os.rename/os.replace of one (write to a temporary name, then rename), or an os.sync,
called right after (EXTEND_S) the save returned or the previous such call did, writes a `checkpoint_extend` event with the window's id and
the time that call returned; the analysis moves the window's end there, and the recorder's file
tracker follows a renamed file to its new name.

Training steps: a global torch.optim post-hook writes a `train_step` event after every optimizer
step (the step boundaries the async phases are measured against).

Calls made while another wrapped call runs in the process are not windows of their own (DCP's
writer may call torch.save per item, in worker threads); so two saves from two threads at once
count as one window. An async_save's window ends when its future completes; `blocking_s` is the
time the call itself blocked the training loop.

Self-contained (no import of ckprof): the child may run a Python without ckprof installed.
"""

import functools
import importlib.abc
import itertools
import json
import os
import socket
import sys
import threading
import time

import _ckprof_events  # the one writer (ckprof/recording/events.py); the sitecustomize loaded it

_ENV = _ckprof_events.ENV_EVENTS
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_HOST = socket.gethostname()
_ids = itertools.count(1)
_lock = threading.Lock()
_on_thread = threading.local()  # .save: the outermost save running on this thread ({"id": ...}), else None
_busy = 0  # wrapped calls running in this process, and async saves whose write is still running
_depth = threading.local()  # .n: wrapped calls running on this thread
_top = 0  # threads inside a save or load of its own (not yet returned)
_pending = {}  # thread ident -> async saves it started whose background write is still running
_recent = []  # (id, {path: True}, dir or None, end monotonic ns) of the latest saves, newest last
RECENT_MAX = 16
# An fsync/rename of a recent save's own file finishes that save when the process calls it right
# after its last save returned or its last such call did (a loop fsyncing many files chains): this
# many seconds at most in between. A rename that rotates old checkpoints, or an fsync, a training
# step later does not. Likewise an os.sync() (no file named) right after a save.
EXTEND_S = 0.25
_last = [0]  # monotonic ns of the latest save return or finishing call in this process
MAX_FILES_LISTED = 64


_dumps = json.JSONEncoder(separators=(",", ":"), default=str).encode


def _line(event, fields):
    """The event's JSON object without its opening brace and without t_ns."""
    rec = {"event": event, "pid": os.getpid(), "host": _HOST, "source": "patch"}
    for v in _RANK_VARS:
        r = os.environ.get(v)
        if r is not None and r.lstrip("-").isdigit():
            rec["rank"] = int(r)
            break
    rec.update({k: v for k, v in fields.items() if v is not None})
    return _dumps(rec)[1:]


def _write(line):
    path = os.environ.get(_ENV)
    if path:
        _ckprof_events.append_or_say(path, line.encode())  # never raises: the training run goes on


def _emit(event, t_ns=None, ckprof_since_ns=None, **fields):
    """Write one event. Without `t_ns` the clock is read after the line is formatted, so all that
    follows the stamp is one write(2): a checkpoint_end's window ends as late as can be.
    `ckprof_since_ns` (the wrapped call's return) adds ckprof_s: ckprof's own part of the window
    after the call returned (its look at the files and this formatting); the call's own time is
    t_ns − start − ckprof_s."""
    if not os.environ.get(_ENV):
        return
    rest = _line(event, fields)
    now = time.monotonic_ns() if t_ns is None else int(t_ns)
    own = "" if ckprof_since_ns is None else f'"ckprof_s":{(now - ckprof_since_ns) / 1e9!r},'
    _write(f'{{"t_ns":{now},{own}{rest}\n')


def _as_path(x):
    if isinstance(x, (str, bytes)) or hasattr(x, "__fspath__"):
        p = os.fsdecode(os.fspath(x))
        return p
    return None


def _size(path):
    """Bytes of a file, or of every file under a directory (a DCP checkpoint)."""
    if not path:
        return None
    try:
        if os.path.isdir(path):
            total = 0
            for root, _, files in os.walk(path):
                for f in files:
                    try:
                        total += os.path.getsize(os.path.join(root, f))
                    except OSError:
                        pass
            return total
        return os.path.getsize(path)
    except OSError:
        return None


def _written_since(path, t0_wall_ns):
    """(bytes, [files]) of the files under directory `path` modified at or after t0 (this save's)."""
    total, files = 0, []
    for root, _, names in os.walk(path):
        for f in names:
            p = os.path.join(root, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            if st.st_mtime_ns >= t0_wall_ns:
                total += st.st_size
                files.append(p)
    return total, files


def _load_sibling(name):
    """A module of this folder, by its path (this folder is not on sys.path); None if it fails."""
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    except Exception:
        return None


class _Hooks:
    """What _ckprof_uploads needs of this module."""

    emit = staticmethod(lambda event, t_ns=None, **fields: _emit(event, t_ns=t_ns, **fields))
    busy = staticmethod(lambda: _busy > 0)
    new_id = staticmethod(lambda: f"{_HOST}:{os.getpid()}:patch{next(_ids)}")


# uploads to an object store (fsspec files, botocore's S3 writes): _ckprof_uploads.py
_uploads_mod = _load_sibling("_ckprof_uploads")
_uploads = _uploads_mod.Uploads(_Hooks) if _uploads_mod else None
# every S3 request through botocore or aiobotocore: s3_request events (_ckprof_uploads.S3Requests)
_s3_requests = _uploads_mod.S3Requests(_Hooks.emit) if _uploads_mod else None


def _is_url(path):
    return _uploads_mod is not None and _uploads_mod.is_url(path)


_pagecache = []  # ckprof/record/pagecache.py, loaded by its path (it imports only the stdlib)


def _load_pagecache():
    """Load the cachestat(2) helper when a checkpoint module is imported, not inside a save."""
    if _pagecache:
        return _pagecache[0]
    mod = None
    try:
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location(
            "_ckprof_pagecache", os.path.join(here, os.pardir, os.pardir, "pagecache.py")
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
    except Exception:
        sys.modules.pop("_ckprof_pagecache", None)
        mod = None
    _pagecache.append(mod)
    return mod


def _at_return(path):
    """The save's pages still dirty or under writeback as it returns (cachestat(2)): a file the
    program deletes at once (retention) is never seen by the recorder's tracker, so this is the
    only look at it."""
    pc = _load_pagecache() if path else None
    if pc is None:
        return {}
    try:
        got = pc.pending_bytes(path)
    except Exception:  # cachestat unavailable
        return {}
    return {} if got is None else {"pending_bytes_at_return": got[0], "files_at_return": got[1]}


def _remember(cid, path, is_dir, files):
    if not path or _is_url(path):
        return
    real = os.path.realpath(path)
    paths = {real: True}
    for f in files or ():
        paths[os.path.realpath(f)] = True
    _recent.append((cid, paths, real if is_dir else None, time.monotonic_ns()))
    del _recent[:-RECENT_MAX]
    _last[0] = _recent[-1][3]


def _save_of(path):
    """The id of the latest recent save that wrote `path` (or holds it in its folder), if any."""
    if not _recent or not path:
        return None
    real = os.path.realpath(path)
    for cid, paths, folder, _ in reversed(_recent):
        if real in paths or (folder and real.startswith(folder + os.sep)):
            return cid
    return None


def _finishing(op, t_call, path=None, **fields):
    """After an fsync/rename/sync (called at t_call) returned: extend the save it finishes, if any."""
    if _busy or not _recent or t_call - _last[0] > EXTEND_S * 1e9:  # inside a save, or not right after one
        return
    cid = _recent[-1][0] if path is None else _save_of(path)
    if cid is None:
        return
    _last[0] = time.monotonic_ns()
    if fields.get("renamed_to"):
        for rc, paths, _, _ in _recent:
            if rc == cid:
                paths[os.path.realpath(fields["renamed_to"])] = True
    _emit("checkpoint_extend", id=cid, op=op, path=path, **fields)


def _fd_path(fd):
    try:
        fd = fd if isinstance(fd, int) else fd.fileno()
        return os.readlink(f"/proc/self/fd/{fd}")
    except (OSError, AttributeError, ValueError, TypeError):
        return None


def patch_os():
    """os.fsync, os.fdatasync, os.rename, os.replace, os.sync: a save's own finishing."""
    if getattr(os.fsync, "__ckprof_wrapped__", False):
        return

    def on_fd(fn, op):
        @functools.wraps(fn)
        def wrapper(fd):
            t_call = time.monotonic_ns()
            r = fn(fd)
            if _recent:
                _finishing(op, t_call, _fd_path(fd))
            return r

        wrapper.__ckprof_wrapped__ = True
        return wrapper

    def on_rename(fn, op):
        @functools.wraps(fn)
        def wrapper(src, dst, *a, **k):
            t_call = time.monotonic_ns()
            s, d = _as_path(src), _as_path(dst)
            real_src = os.path.realpath(s) if (_recent and s) else None  # before it moves
            r = fn(src, dst, *a, **k)
            if real_src and d:
                _finishing(op, t_call, real_src, renamed_to=os.path.abspath(d))
            return r

        wrapper.__ckprof_wrapped__ = True
        return wrapper

    def on_sync(fn):
        @functools.wraps(fn)
        def wrapper():
            t_call = time.monotonic_ns()
            r = fn()
            if _recent:
                _finishing("sync", t_call)
            return r

        wrapper.__ckprof_wrapped__ = True
        return wrapper

    os.fsync = on_fd(os.fsync, "fsync")
    if hasattr(os, "fdatasync"):
        os.fdatasync = on_fd(os.fdatasync, "fdatasync")
    os.rename = on_rename(os.rename, "rename")
    os.replace = on_rename(os.replace, "replace")
    if hasattr(os, "sync"):
        os.sync = on_sync(os.sync)


def _enter():
    """Count a wrapped call in. True when it is a save or load of its own: no wrapped call runs on
    this thread, none is running on another, and no async save's background write is running, or
    only ones this thread started (the training loop's next save while its last one still writes:
    a save of its own; a call from another thread then, the background write's torch.save, is
    part of the save that thread writes). Every call that counted in leaves by _leave, or an async
    save's by _handed_off at its return and _async_done when its write completes."""
    global _busy, _top
    tid = threading.get_ident()
    with _lock:
        _busy += 1
        mine = getattr(_depth, "n", 0)
        _depth.n = mine + 1
        top = mine == 0 and _top == 0 and (not _pending or tid in _pending)
        _top += top
        return top


def marks_its_own_saves():
    """For a process whose saves are marked by the program itself (ckprof workload's ranks, whose
    rank 0 marks each save for all): from now on every upload here is part of a save that is
    running, never a save of its own (_ckprof_uploads.Uploads: busy)."""
    _enter()


def _leave(top=False):
    """A call that _enter counted in returned, on its own thread (top: one that was a save or load of its own)."""
    global _busy, _top
    with _lock:
        _busy -= 1
        _depth.n -= 1
        _top -= top


def _handed_off():
    """An async save of its own returned, its write still running: this thread is free, the save is
    pending until _async_done. Returns the thread's ident, for _async_done."""
    global _top
    tid = threading.get_ident()
    with _lock:
        _depth.n -= 1
        _top -= 1
        _pending[tid] = _pending.get(tid, 0) + 1
    return tid


def _async_done(tid):
    """The write of an async save that thread `tid` started completed (on whatever thread)."""
    global _busy
    with _lock:
        _busy -= 1
        n = _pending.pop(tid, 0) - 1
        if n > 0:
            _pending[tid] = n


def _at_start(path):
    """A load's files already in the page cache as it starts (cachestat(2))."""
    pc = _load_pagecache() if path else None
    if pc is None:
        return {}
    try:
        got = pc.cached_bytes(path)
    except Exception:
        return {}
    return (
        {} if got is None else {"cached_bytes_at_start": got["cached_bytes"], "file_bytes_at_start": got["file_bytes"]}
    )


def _wrap(fn, api, kind, path_of, is_dir=False, step_of=None, needs_path=False):
    if getattr(fn, "__ckprof_wrapped__", False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t_call = time.monotonic_ns()  # the window starts when the call did, before ckprof's own look
        if not _enter():
            try:
                return fn(*args, **kwargs)
            finally:
                _leave()
        if _uploads is not None:
            _uploads.begin()  # the uploads made from here to the end are this save's
        path = step = None
        try:
            path = path_of(args, kwargs)
        except Exception:
            pass
        if path and "://" not in path and not os.path.isabs(path):
            # a checkpoint_id relative to the program's working directory: the recorder's file
            # tracker and the analysis (which joins this call with the files it wrote) need it whole
            path = os.path.abspath(path)
        try:
            step = step_of(args, kwargs) if step_of else None
        except Exception:
            pass
        fobj = args[1] if api == "torch.save" and len(args) > 1 else kwargs.get("f")
        pos0 = remote_file = None
        if path is None and fobj is not None and _uploads_mod is not None:
            path = remote_file = _uploads_mod.file_url(fobj)  # an fsspec file: its close uploads
        if remote_file:
            pos0 = _tell(fobj)
            if pos0 == 0:  # a file opened for this save: the save's I/O starts at its open
                t_call = min(t_call, _uploads_mod.opened_at(fobj) or t_call)
        elif path is None and fobj is not None:
            name = getattr(fobj, "name", None)  # a file the program opened itself
            if isinstance(name, str) and os.path.isfile(name):
                path = os.path.abspath(name)
            if hasattr(fobj, "tell"):
                try:
                    pos0 = fobj.tell()
                except Exception:
                    pos0 = None
        if needs_path and not path:  # e.g. Lightning's resume_start without a checkpoint: no load
            try:
                return fn(*args, **kwargs)
            finally:
                _leave(top=True)
        cid = f"{_HOST}:{os.getpid()}:patch{next(_ids)}"
        common = {"id": cid, "kind": kind, "path": path, "name": api}
        inner = {"id": cid}  # what a plugin called inside hands this save (patch_lightning_async_io)
        _on_thread.save = inner if kind == "save" else None
        at_start = _at_start(path) if kind == "load" else {}
        _emit("checkpoint_start", t_ns=t_call, step=step, **at_start, **common)
        is_async = api.endswith("async_save")
        t0_wall = time.time_ns() - 2_000_000_000  # file mtimes are coarse (a jiffy): allow slack

        # a load from s3://: the bytes s3torchconnector's GET streams return for it from here on
        got0 = _uploads_mod.s3torch_received(path) if kind == "load" and _is_url(path) else None

        def measured():
            """(bytes, files written) once the save is complete."""
            if got0 is not None:  # none received through s3torchconnector: unknown, not 0
                return (_uploads_mod.s3torch_received(path) - got0) or None, None
            if _is_url(path) and not remote_file:  # the objects its uploads completed
                return _uploads.taken()[0], None
            if path and is_dir and os.path.isdir(path):
                n, files = _written_since(path, t0_wall)
                return n, files if len(files) <= MAX_FILES_LISTED else None
            n = None if remote_file else _size(path)
            if n is None and pos0 is not None:
                try:
                    n = fobj.tell() - pos0
                except Exception:
                    n = None
            return n, None

        def end_when_written(upload, blocking_s, raised=None):
            """An async save ends when its write completes (at once, if it already has), ok unless
            the write's Future or the plugin's kept error says otherwise, or its call raised
            `raised` after handing the write over. The call has returned: this thread is free (its
            next save is one of its own), the save pending until then."""
            error_of, owner = inner.get("error_of"), _handed_off()

            def done(f):
                t_done = time.monotonic_ns()  # the save ended here: the look at its files below is ckprof's
                _async_done(owner)
                err = raised
                if err is None:
                    try:
                        err = f.exception() or (error_of() if error_of else None)
                    except BaseException as e:  # cancelled
                        err = e
                nbytes, files = measured()
                _emit(
                    "checkpoint_end",
                    t_ns=t_done,
                    ok=err is None,
                    bytes=nbytes,
                    files=files,
                    blocking_s=blocking_s,
                    error=None if err is None else f"{type(err).__name__}: {err}",
                    **_upload_fields(path, remote_file),
                    **common,
                )
                _remember(cid, path, is_dir, files)

            upload.add_done_callback(done)

        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            _on_thread.save = None
            handed = inner.get("upload")
            if callable(getattr(handed, "add_done_callback", None)):
                # Lightning's AsyncCheckpointIO submits this call's write to its thread, then raises
                # an earlier write's kept error: the write still runs, and it is this call's. The
                # window stays open (its torch.save nested in it, not a save of its own) until the
                # write completes, and ends failed with the error the call raised.
                end_when_written(handed, (time.monotonic_ns() - t_call) / 1e9, raised=e)
                raise
            _leave(top=True)
            _emit("checkpoint_end", ok=False, error=f"{type(e).__name__}: {e}", **common)
            raise
        t_ret = time.monotonic_ns()
        _on_thread.save = None
        # the call held the training from the window's start to its return, as a synchronous save's
        # window does (ckprof's bookkeeping at the start, ~0.1 ms, inside both): start + blocking_s is
        # the return, where the staging and persist phases are placed against it
        blocking_s = (t_ret - t_call) / 1e9
        # the CUDA bytes it copies to host, walked after the return: ckprof's time, not the call's
        d2h = _d2h_of(args[0] if args else kwargs.get("state_dict")) if is_async else None
        # DCP's async_save returns a Future, or with an AsyncStager such as DefaultStager an
        # AsyncSaveResponse holding two: staging_completion (the state copied to host memory, in the
        # background) and upload_completion (the write). The save ends with the upload. A plugin
        # called inside (Lightning's AsyncCheckpointIO) hands its background write's Future instead.
        staging = getattr(result, "staging_completion", None) if is_async else None
        upload = getattr(result, "upload_completion", result) if is_async else result
        if inner.get("upload") is not None:
            is_async, upload = True, inner["upload"]
        fut = getattr(upload, "add_done_callback", None)
        if is_async and callable(getattr(staging, "add_done_callback", None)):

            def staged(f, common=common):
                t_staged = time.monotonic_ns()
                _emit(
                    "checkpoint_phase",
                    t_ns=t_staged,
                    phase="staging",
                    ok=not f.cancelled() and f.exception() is None,
                    id=common["id"],
                    start_ns=t_call,
                    staged_by="stager",
                    **_d2h_fields(d2h, t_staged - t_call, "the call's start to the stager's completion"),
                )

            staging.add_done_callback(staged)
        elif is_async and d2h is not None and callable(fut):  # DCP staged the state inside the call
            _emit(
                "checkpoint_phase",
                t_ns=t_ret,
                phase="staging",
                ok=True,
                id=cid,
                start_ns=t_call,
                staged_by="call",
                **_d2h_fields(d2h, t_ret - t_call, "the async_save call's wall time (staging and DCP's planning)"),
            )
        if is_async and callable(fut):
            end_when_written(upload, blocking_s)
            return result
        _leave(top=True)
        t_ret = time.monotonic_ns()  # the save's return
        nbytes, files = measured()
        at_ret = _at_return(path) if kind == "save" and not _is_url(path) else {}
        if kind == "save":
            _remember(cid, path, is_dir, files)
        at_ret.update(_upload_fields(path, remote_file))
        # the window ends after ckprof's look at the files: the training waited for that too
        _emit("checkpoint_end", ckprof_since_ns=t_ret, ok=True, bytes=nbytes, files=files, **at_ret, **common)
        if remote_file and kind == "save":  # its close uploads the rest: that finishes this save
            _uploads_mod.finished_by_close(fobj, cid)
        if kind == "save":
            _last[0] = time.monotonic_ns()  # the fsync that follows is measured from here
        return result

    wrapper.__ckprof_wrapped__ = True
    return wrapper


def _cuda_bytes(obj, depth=0):
    """Bytes of the CUDA tensors in a state dict (nested dicts, lists, tuples), walked once: Σ
    numel × element_size of each tensor whose is_cuda is true (a DTensor's local shard). None when
    it holds a Stateful object (DCP calls its state_dict() inside the save: its tensors are unknown
    here, and calling it twice would change what is measured)."""
    if depth > 64:
        return None
    if isinstance(obj, dict):
        obj = obj.values()
    elif not isinstance(obj, (list, tuple)):
        if hasattr(obj, "is_cuda") and hasattr(obj, "numel"):
            t = obj.to_local() if callable(getattr(obj, "to_local", None)) else obj
            return t.numel() * t.element_size() if t.is_cuda else 0
        return None if callable(getattr(obj, "state_dict", None)) else 0
    total = 0
    for v in obj:
        n = _cuda_bytes(v, depth + 1)
        if n is None:
            return None
        total += n
    return total


def _d2h_of(state):
    """(CUDA bytes of the state an async save stages, or None, and why not): the device-to-host
    copy's bytes. A failure to walk it is unknown, never raised into the training loop."""
    try:
        n = _cuda_bytes(state)
    except Exception as e:
        return None, f"could not walk the state dict ({type(e).__name__})"
    return (
        (n, None) if n is not None else (None, "the state dict holds Stateful objects (their tensors are not walked)")
    )


def _d2h_fields(d2h, staging_ns, basis):
    """A staging phase event's device-to-host fields: bytes summed from the state dict (measured),
    seconds over the staging span (derived: no CUDA event brackets the copy itself)."""
    if d2h is None:
        return {}
    n, why = d2h
    if n == 0:
        why = "no CUDA tensors in the state dict (nothing copied to host)"
    return {
        "d2h_bytes": n,
        "d2h_s": None if not n else staging_ns / 1e9,
        "d2h_basis": why or f"Σ bytes of the state dict's CUDA tensors at the call; seconds: {basis}",
    }


def patch_lightning_async_io(mod):
    """Lightning's AsyncCheckpointIO.save_checkpoint: clones the checkpoint's tensors on the loop's
    thread (staging), then submits the write to its one-thread executor and returns. Inside a
    Trainer.save_checkpoint window, that window becomes an async save: it is handed the write's
    Future (its end) and a staging phase event at the submit. The write's own torch.save, in the
    executor's thread, is part of the window (a call inside a wrapped one)."""
    cls = getattr(mod, "AsyncCheckpointIO", None)
    fn = getattr(cls, "save_checkpoint", None)
    if not callable(fn) or getattr(fn, "__ckprof_wrapped__", False):
        return

    @functools.wraps(fn)
    def save_checkpoint(self, *args, **kwargs):
        outer = getattr(_on_thread, "save", None)
        setup = getattr(self, "_ensure_setup", None)
        if outer is None or "upload" in outer or not callable(setup):
            return fn(self, *args, **kwargs)
        t_call = time.monotonic_ns()
        setup()
        ex, futures, err0 = self._executor, [], getattr(self, "_error", None)
        submit = ex.submit

        def captured(*a, **k):
            f = submit(*a, **k)
            futures.append(f)
            return f

        ex.submit = captured  # an instance attribute over the class's method, for this call only
        try:
            return fn(self, *args, **kwargs)
        finally:
            t_staged = time.monotonic_ns()
            try:
                del ex.submit
            except AttributeError:
                pass
            if futures:
                outer["upload"] = futures[0]

                def error_of(self=self, err0=err0):  # the plugin keeps its thread's error, not the Future
                    e = getattr(self, "_error", None)
                    return e if e is not None and e is not err0 else None

                outer["error_of"] = error_of
                ckpt = kwargs.get("checkpoint", args[0] if args else None)
                n, why = _d2h_of(ckpt)
                _emit(
                    "checkpoint_phase",
                    t_ns=t_staged,
                    phase="staging",
                    ok=True,
                    id=outer["id"],
                    start_ns=t_call,
                    staged_by="lightning AsyncCheckpointIO clone",
                    d2h_bytes=0 if n == 0 else None,
                    d2h_basis=why
                    or (
                        "no CUDA tensors in the checkpoint"
                        if n == 0
                        else "cloned on the tensors' own device (no copy to host here); "
                        "the host copy is inside the background write's torch.save"
                    ),
                )

    save_checkpoint.__ckprof_wrapped__ = True
    cls.save_checkpoint = save_checkpoint


def _tell(fobj):
    try:
        return fobj.tell()
    except Exception:
        return None


def _upload_fields(path, remote_file):
    """A save to an object store: what its uploads did (the file a torch.save wrote into says at
    its close, in a checkpoint_extend)."""
    if remote_file or not _is_url(path):
        return {}
    return _uploads.taken()[1]


def _torch_save_path(args, kwargs):
    return _as_path(args[1] if len(args) > 1 else kwargs.get("f"))


def _dcp_path(args, kwargs):
    cid = kwargs.get("checkpoint_id")
    if cid is not None:
        return _as_path(cid)
    for key in ("storage_writer", "storage_reader"):
        sw = kwargs.get(key)
        if sw is not None:
            p = getattr(sw, "path", None) or getattr(sw, "checkpoint_id", None)
            if p is not None:
                return _as_path(p)
    return None


def _safetensors_path(args, kwargs):
    return _as_path(args[1] if len(args) > 1 else kwargs.get("filename"))


def _patch(mod, attr, api, kind, path_of, is_dir=False, step_of=None, needs_path=False):
    fn = getattr(mod, attr, None)
    if callable(fn):
        setattr(mod, attr, _wrap(fn, api, kind, path_of, is_dir, step_of, needs_path))
        return getattr(mod, attr)
    return None


def _torch_load_path(args, kwargs):
    f = args[0] if args else kwargs.get("f")
    p = _as_path(f)
    if p is None and _uploads_mod is not None:
        p = _uploads_mod.s3torch_url(f)  # an s3torchconnector S3Reader: its object
    if p is None:
        name = getattr(f, "name", None)  # a file object the program opened
        p = os.path.abspath(name) if isinstance(name, str) and os.path.isfile(name) else None
    return p


def patch_torch(torch):
    ser = sys.modules.get("torch.serialization")
    w = _patch(torch, "save", "torch.save", "save", _torch_save_path)
    if ser is not None and w is not None:
        ser.save = w
    w = _patch(torch, "load", "torch.load", "load", _torch_load_path)
    if ser is not None and w is not None:
        ser.load = w


def patch_dcp(dcp):
    saver = sys.modules.get("torch.distributed.checkpoint.state_dict_saver")
    loader = sys.modules.get("torch.distributed.checkpoint.state_dict_loader")
    for attr, api, kind, orig in (
        ("save", "torch.distributed.checkpoint.save", "save", saver),
        ("async_save", "torch.distributed.checkpoint.async_save", "save", saver),
        ("load", "torch.distributed.checkpoint.load", "load", loader),
    ):
        w = _patch(dcp, attr, api, kind, _dcp_path, is_dir=True)
        if w is not None and orig is not None and hasattr(orig, attr):
            setattr(orig, attr, w)


def _safetensors_load_path(args, kwargs):
    return _as_path(args[0] if args else kwargs.get("filename"))


def patch_safetensors(st):
    _patch(st, "save_file", "safetensors.torch.save_file", "save", _safetensors_path)
    _patch(st, "load_file", "safetensors.torch.load_file", "load", _safetensors_load_path)


def _hf_checkpoint_dir(args, kwargs):
    """Trainer._save_checkpoint(self, model, trial): <output dir>/checkpoint-<global step>."""
    self = args[0]
    trial = args[2] if len(args) > 2 else kwargs.get("trial")
    run_dir = self.args.output_dir if trial is None else self._get_output_dir(trial=trial)
    return os.path.join(run_dir, f"checkpoint-{self.state.global_step}")


def _hf_step(args, kwargs):
    return int(args[0].state.global_step)


def _hf_resume_dir(args, kwargs):
    for key in ("resume_from_checkpoint", "checkpoint"):
        if key in kwargs:
            return _as_path(kwargs[key])
    return _as_path(args[1]) if len(args) > 1 else None


def _hf_save_model_dir(args, kwargs):
    out = args[1] if len(args) > 1 else kwargs.get("output_dir")
    return _as_path(out) or args[0].args.output_dir


def patch_transformers_trainer(mod):
    """Hugging Face Trainer: one window per checkpoint-N/ save (every file in it, and the
    retention of old ones), one per save_model; the torch.save/safetensors calls inside are parts of it."""
    cls = getattr(mod, "Trainer", None)
    if cls is None:
        return
    for attr, api, path_of, step_of in (
        ("_save_checkpoint", "transformers.Trainer._save_checkpoint", _hf_checkpoint_dir, _hf_step),
        ("save_model", "transformers.Trainer.save_model", _hf_save_model_dir, None),
    ):
        _patch(cls, attr, api, "save", path_of, is_dir=True, step_of=step_of)
    # resume_from_checkpoint: the model, then (later, as training starts) optimizer, scheduler,
    # scaler and RNG state: one restore, grouped by their checkpoint-N folder when read
    for attr in ("_load_from_checkpoint", "_load_optimizer_and_scheduler", "_load_scaler", "_load_rng_state"):
        _patch(cls, attr, f"transformers.Trainer.{attr}", "load", _hf_resume_dir, is_dir=True, needs_path=True)


def _lightning_path(args, kwargs):
    return _as_path(args[1] if len(args) > 1 else kwargs.get("filepath"))


def _lightning_step(args, kwargs):
    return int(args[0].global_step)


def _lightning_resume_path(args, kwargs):
    return _as_path(args[1] if len(args) > 1 else kwargs.get("checkpoint_path"))


def patch_lightning_connector(mod):
    """Lightning's ckpt_path=: _CheckpointConnector.resume_start reads the checkpoint file."""
    cls = getattr(mod, "_CheckpointConnector", None)
    if cls is not None:
        api = f"{mod.__name__.split('.')[0]}.Trainer(ckpt_path=).resume_start"
        _patch(cls, "resume_start", api, "load", _lightning_resume_path, needs_path=True)


def patch_lightning_trainer(mod):
    """Lightning Trainer.save_checkpoint: the state dict, then its write through fsspec."""
    cls = getattr(mod, "Trainer", None)
    if cls is not None:
        api = f"{mod.__name__.split('.')[0]}.Trainer.save_checkpoint"
        _patch(cls, "save_checkpoint", api, "save", _lightning_path, step_of=_lightning_step)


def _megatron_dir(args, kwargs):
    """megatron.core.dist_checkpointing.save(sharded_state_dict, checkpoint_dir, ...)."""
    return _as_path(args[1] if len(args) > 1 else kwargs.get("checkpoint_dir"))


def patch_megatron(mod):
    """Megatron-core dist_checkpointing.save (serialization.py; the package re-exports it after
    this import): one window per rank from the call, which validates the sharding with collectives
    before any file is written. An async save (async_sharded_save=True) returns before its forked
    writers write: the recorded file activity carries its window to the finalization's last file."""
    _patch(mod, "save", "megatron.core.dist_checkpointing.save", "save", _megatron_dir, is_dir=True)


_optimizers = None  # optimizer -> [index in the order they first stepped, steps], weakly held


def _optimizer_stepped(opt, args, kwargs):
    """A training step ended: torch.optim's global post-hook runs after every optimizer.step(), so
    steps are known with no code in the training loop (HF Trainer and Lightning step through it too;
    with gradient accumulation it is the optimizer's step, the step a checkpoint's step counts). One
    `train_step` event per step; `optimizer` tells two optimizers (or a wrapper and its inner one) apart."""
    global _optimizers
    if not os.environ.get(_ENV):
        return
    if _optimizers is None:
        import weakref

        _optimizers = weakref.WeakKeyDictionary()
    try:
        seen = _optimizers.setdefault(opt, [len(_optimizers), 0])
    except TypeError:  # not weakly referenceable: count it under one shared entry
        seen = [-1, 0]
    seen[1] += 1
    _emit("train_step", optimizer=seen[0], n=seen[1], via="optimizer")


def patch_optimizer(mod):
    """torch.optim.optimizer: register the global step post-hook once (torch >= 2.0)."""
    register = getattr(mod, "register_optimizer_step_post_hook", None)
    if register is not None and not getattr(mod, "_ckprof_step_hook", None):
        mod._ckprof_step_hook = register(_optimizer_stepped)


def _s3_url(args, kwargs):
    """boto3's upload_file(Filename, Bucket, Key) / upload_fileobj(Fileobj, Bucket, Key)."""
    bucket = args[2] if len(args) > 2 else kwargs.get("Bucket", kwargs.get("bucket"))
    key = args[3] if len(args) > 3 else kwargs.get("Key", kwargs.get("key"))
    return f"s3://{bucket}/{key}"


def patch_boto3_inject(mod):
    """boto3's client.upload_file / upload_fileobj (a Bucket's and an Object's call them): one
    window from the call to its return, the botocore uploads inside it counted (_ckprof_uploads)."""
    for attr in ("upload_file", "upload_fileobj"):
        _patch(mod, attr, f"boto3 {attr}", "save", _s3_url)


def patch_boto3_transfer(mod):
    cls = getattr(mod, "S3Transfer", None)
    if cls is not None:
        _patch(cls, "upload_file", "boto3 S3Transfer.upload_file", "save", _s3_url)


def patch_fsspec(mod):
    if _uploads is not None:
        _uploads_mod.patch_fsspec(mod, _uploads)


def patch_fsspec_core(mod):
    if _uploads is not None:
        _uploads_mod.patch_fsspec_core(mod)


def patch_botocore(mod):
    if _uploads is not None:
        _uploads_mod.patch_botocore(mod, _uploads, _s3_requests)


def patch_aiobotocore(mod):
    if _s3_requests is not None:
        _uploads_mod.patch_aiobotocore(mod, _s3_requests)


def patch_s3torchconnector(mod):
    """s3torchconnector's S3Client and S3Writer (_ckprof_uploads.patch_s3torchconnector): its
    writer's close is the upload's end, one s3_request per object."""
    if _uploads is not None:
        _uploads_mod.patch_s3torchconnector(mod, _uploads, _s3_requests)


TARGETS = {
    "torch": patch_torch,
    "torch.optim.optimizer": patch_optimizer,
    "torch.distributed.checkpoint": patch_dcp,
    "safetensors.torch": patch_safetensors,
    "megatron.core.dist_checkpointing.serialization": patch_megatron,
    "transformers.trainer": patch_transformers_trainer,
    "lightning.pytorch.trainer.trainer": patch_lightning_trainer,
    "pytorch_lightning.trainer.trainer": patch_lightning_trainer,
    "lightning.pytorch.trainer.connectors.checkpoint_connector": patch_lightning_connector,
    "lightning.pytorch.plugins.io.async_plugin": patch_lightning_async_io,
    "pytorch_lightning.plugins.io.async_plugin": patch_lightning_async_io,
    "pytorch_lightning.trainer.connectors.checkpoint_connector": patch_lightning_connector,
    # object stores (_ckprof_uploads.py): fsspec's buffered files, botocore's S3 writes, boto3's uploads
    "fsspec.spec": patch_fsspec,
    "fsspec.core": patch_fsspec_core,
    "botocore.client": patch_botocore,
    "aiobotocore.client": patch_aiobotocore,
    "s3torchconnector._s3client._s3client": patch_s3torchconnector,
    "boto3.s3.inject": patch_boto3_inject,
    "boto3.s3.transfer": patch_boto3_transfer,
}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            self.patch(module)
            _load_pagecache()
        except Exception as e:  # never break the import
            print(f"ckprof: could not wrap {module.__name__}: {type(e).__name__}: {e}", file=sys.stderr)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self.loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self._busy = set()

    def find_spec(self, fullname, path, target=None):
        patch = TARGETS.get(fullname)
        if patch is None or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


def install():
    patch_os()
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name, patch in TARGETS.items():  # already imported (unusual at site time)
        if name in sys.modules:
            patch(sys.modules[name])
