"""Zero-code instrumentation: under `ckprof record`, a Python child's checkpoint saves are marked.

`ckprof record` prepends `site_dir()` to the child's PYTHONPATH. Python's site module imports
the first `sitecustomize` on sys.path (docs.python.org/3/library/site.html), which is ours: it
takes its folder off sys.path again (the command's sys.path is what it would be without ckprof),
runs the sitecustomize that would otherwise have run (chaining), then puts an import hook on
sys.meta_path that wraps torch.save, torch.distributed.checkpoint.save / async_save / load,
safetensors.torch.save_file, Hugging Face Trainer._save_checkpoint / save_model and Lightning
Trainer.save_checkpoint the moment their modules are imported, and wraps os.fsync / fdatasync /
rename / replace / sync so that a save's own finishing extends its window. A child that never imports
torch pays one small finder on sys.meta_path. `ckprof record --no-patch` turns it off.

The files in site/ import nothing from ckprof, so a child running another Python (a venv
without ckprof) is patched too; events follow markers.py's format (source "patch").
"""

import os


def site_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")


def pythonpath_with_site(existing: str | None) -> str:
    """PYTHONPATH with ckprof's site directory first (once), the user's value after it unchanged.

    Every entry is kept as it is, an empty one included: Python reads an empty entry as the working
    directory (`export PYTHONPATH=$PYTHONPATH:/x` with PYTHONPATH unset gives ":/x"). Unset and
    set-but-empty both name no directory, so neither gains an entry ("site:" would add the working
    directory)."""
    site = site_dir()
    if not existing:
        return site
    if existing == site or existing.startswith(site + os.pathsep):  # ckprof under ckprof
        return existing
    return site + os.pathsep + existing
