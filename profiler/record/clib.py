"""The optional C libraries built beside this package (record/colsampler.c and record/fanreader.c,
built by setup.py as extensions when a C compiler is there, loaded with ctypes): where one is, and
why it cannot be loaded. Each caller checks its own symbols and ABI and keeps its own Python path.
record/pagecache.py finds _fanreader for its fr_look on its own: the injected instrumentation loads
that module by its path in the recorded program (stdlib only, no package around it)."""

from __future__ import annotations

import ctypes
import importlib.machinery
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def load_built(stem: str, what: str, here: str = HERE) -> tuple[ctypes.CDLL | None, str | None, str | None]:
    """(the library: `stem` + this Python's extension suffix in `here`, its path, None), or
    (None, its path or None, why not): `what` names it in the reason (e.g. "the native sampler")."""
    paths = [os.path.join(here, stem + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
    path = next((p for p in paths if os.path.exists(p)), None)
    if path is None:
        return None, None, f"{what} was not built (no C compiler when ckprof was installed)"
    try:
        return ctypes.CDLL(path), path, None
    except OSError as e:
        return None, path, f"cannot load {path}: {e}"
