"""ckprof's injected sitecustomize (ckprof/instrument/__init__.py says why and how).

1. Leave sys.path as it would be without ckprof: this folder is on PYTHONPATH only so that Python's
   site module finds this file (docs.python.org/3/library/site.html); it is taken off sys.path
   before anything else runs, so the command imports every module from where it would have.
2. Chain: find and run the sitecustomize that would have run without this one (the next on
   sys.path), so a user's or distribution's sitecustomize still works.
3. Under `ckprof record` (CKPROF_EVENTS set), install the import hook that marks saves.
"""

import os
import sys


def _leave_sys_path(here):
    for i, p in enumerate(sys.path):
        if os.path.abspath(p or os.curdir) == here:
            del sys.path[i]
            return


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


def _load(name, path):
    """A module by its file's path (this folder is no longer on sys.path), under `name`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_here = os.path.dirname(os.path.abspath(__file__))
# the one events writer lives with the recording's format: ckprof/recording/events.py, from
# ckprof/record/instrument/site/ (standard library only, like everything this file loads)
_events_py = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(_here))), "recording", "events.py")
_leave_sys_path(_here)
_chain(_here)
if os.environ.get("CKPROF_EVENTS") and os.environ.get("CKPROF_PATCH", "1") != "0":
    try:
        _load("_ckprof_events", _events_py)  # the one writer, which the patches and ckprof.mark() share
        _load("_ckprof_autopatch", os.path.join(_here, "_ckprof_autopatch.py")).install()
    except Exception as e:  # instrumentation must never stop the user's program
        print(f"ckprof: automatic checkpoint marking disabled: {type(e).__name__}: {e}", file=sys.stderr)
