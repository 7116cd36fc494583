"""Wraps checkpoint save/load calls the moment their modules are imported (an import hook).

Wrapped: torch.save (and torch.serialization.save); torch.distributed.checkpoint save,
async_save, load (and their state_dict_saver/state_dict_loader originals); safetensors.torch
save_file. Each call becomes one checkpoint window: a checkpoint_start and a checkpoint_end event
with the path and the bytes written (the file's size, or the checkpoint directory's total),
in the format of ckprof/markers.py, with source "patch".

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

_ENV = "CKPROF_EVENTS"
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_HOST = socket.gethostname()
_ids = itertools.count(1)
_lock = threading.Lock()
_busy = 0  # wrapped calls running in this process
_fd = {}


def _emit(event, **fields):
    path = os.environ.get(_ENV)
    if not path:
        return
    rec = {"t_ns": time.monotonic_ns(), "event": event, "pid": os.getpid(), "host": _HOST, "source": "patch"}
    for v in _RANK_VARS:
        r = os.environ.get(v)
        if r is not None and r.lstrip("-").isdigit():
            rec["rank"] = int(r)
            break
    rec.update({k: v for k, v in fields.items() if v is not None})
    try:
        fd = _fd.get(os.getpid())
        if fd is None:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            _fd[os.getpid()] = fd
        os.write(fd, (json.dumps(rec, separators=(",", ":"), default=str) + "\n").encode())
    except OSError:
        pass  # the training run goes on; the recorder reports a full disk


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


def _enter():
    global _busy
    with _lock:
        _busy += 1
        return _busy == 1


def _leave():
    global _busy
    with _lock:
        _busy -= 1


def _wrap(fn, api, kind, path_of):
    if getattr(fn, "__ckprof_wrapped__", False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _enter():
            try:
                return fn(*args, **kwargs)
            finally:
                _leave()
        path = None
        try:
            path = path_of(args, kwargs)
        except Exception:
            pass
        fobj = args[1] if api == "torch.save" and len(args) > 1 else kwargs.get("f")
        pos0 = None
        if path is None and fobj is not None and hasattr(fobj, "tell"):
            try:
                pos0 = fobj.tell()
            except Exception:
                pos0 = None
        cid = f"{_HOST}:{os.getpid()}:patch{next(_ids)}"
        common = {"id": cid, "kind": kind, "path": path, "name": api}
        _emit("checkpoint_start", **common)
        t0 = time.monotonic_ns()
        is_async = api.endswith("async_save")
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            _leave()
            _emit("checkpoint_end", ok=False, error=f"{type(e).__name__}: {e}", **common)
            raise
        nbytes = _size(path)
        if nbytes is None and pos0 is not None:
            try:
                nbytes = fobj.tell() - pos0
            except Exception:
                nbytes = None
        blocking_s = (time.monotonic_ns() - t0) / 1e9
        fut = getattr(result, "add_done_callback", None)
        if is_async and callable(fut):

            def done(f, common=common, path=path, blocking_s=blocking_s):
                _leave()
                err = None
                try:
                    err = f.exception()
                except BaseException as e:  # cancelled
                    err = e
                _emit(
                    "checkpoint_end",
                    ok=err is None,
                    bytes=_size(path),
                    blocking_s=blocking_s,
                    error=None if err is None else f"{type(err).__name__}: {err}",
                    **common,
                )

            result.add_done_callback(done)
            return result
        _leave()
        _emit("checkpoint_end", ok=True, bytes=nbytes, **common)
        return result

    wrapper.__ckprof_wrapped__ = True
    return wrapper


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


def _patch(mod, attr, api, kind, path_of):
    fn = getattr(mod, attr, None)
    if callable(fn):
        setattr(mod, attr, _wrap(fn, api, kind, path_of))
        return getattr(mod, attr)
    return None


def patch_torch(torch):
    w = _patch(torch, "save", "torch.save", "save", _torch_save_path)
    ser = sys.modules.get("torch.serialization")
    if ser is not None and w is not None:
        ser.save = w


def patch_dcp(dcp):
    saver = sys.modules.get("torch.distributed.checkpoint.state_dict_saver")
    loader = sys.modules.get("torch.distributed.checkpoint.state_dict_loader")
    for attr, api, kind, orig in (
        ("save", "torch.distributed.checkpoint.save", "save", saver),
        ("async_save", "torch.distributed.checkpoint.async_save", "save", saver),
        ("load", "torch.distributed.checkpoint.load", "load", loader),
    ):
        w = _patch(dcp, attr, api, kind, _dcp_path)
        if w is not None and orig is not None and hasattr(orig, attr):
            setattr(orig, attr, w)


def patch_safetensors(st):
    _patch(st, "save_file", "safetensors.torch.save_file", "save", _safetensors_path)


TARGETS = {"torch": patch_torch, "torch.distributed.checkpoint": patch_dcp, "safetensors.torch": patch_safetensors}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            self.patch(module)
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
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name, patch in TARGETS.items():  # already imported (unusual at site time)
        if name in sys.modules:
            patch(sys.modules[name])
