"""ckprof's injected sitecustomize (ckprof/instrument/__init__.py says why and how).

1. Chain: find and run the sitecustomize that would have run without this one (the next on
   sys.path), so a user's or distribution's sitecustomize still works.
2. Under `ckprof record` (CKPROF_EVENTS set), install the import hook that marks saves.
"""

import os
import sys


def _chain(here):
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:  # as site.py does for a failing sitecustomize: say so, go on
        import traceback

        print("Error in sitecustomize (chained by ckprof):", file=sys.stderr)
        traceback.print_exc()


def _install(here):
    import importlib.util

    spec = importlib.util.spec_from_file_location("_ckprof_autopatch", os.path.join(here, "_ckprof_autopatch.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_ckprof_autopatch"] = mod
    spec.loader.exec_module(mod)
    mod.install()


_here = os.path.dirname(os.path.abspath(__file__))
_chain(_here)
if os.environ.get("CKPROF_EVENTS") and os.environ.get("CKPROF_PATCH", "1") != "0":
    try:
        _install(_here)
    except Exception as e:  # instrumentation must never stop the user's program
        print(f"ckprof: automatic checkpoint marking disabled: {type(e).__name__}: {e}", file=sys.stderr)
