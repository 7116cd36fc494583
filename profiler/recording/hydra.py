"""Hydra's command line (hydra.cc, "Override grammar" and "Command line flags"), read the same way
by the recorder (the config files a command read: record/provenance.py) and the audit (DLIO's
workload YAML and output folder: analysis/audit.py)."""

from __future__ import annotations

import os
from collections.abc import Sequence


def value(argv: Sequence[str], key: str) -> str | None:
    """A Hydra override's value on the command line (key=value, +key=value, ++key=value)."""
    for arg in argv:
        k, eq, v = arg.lstrip("+").partition("=")
        if eq and k == key:
            return v
    return None


def group_files(argv: Sequence[str]) -> list[str]:
    """The config files Hydra reads for `group=option` arguments from the `--config-dir` (`-cd`)
    directories the command names: DIR/group/option.yaml (Hydra's config groups; DLIO runs as
    `dlio_benchmark --config-dir DIR workload=NAME`). Unresolved: relative to the command's cwd."""
    dirs: list[str] = []
    picks: list[tuple[str, str]] = []
    for i, arg in enumerate(argv[1:], 1):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(argv[i + 1])
        elif arg.startswith("--config-dir="):
            dirs.append(arg.split("=", 1)[1])
        elif "=" in arg and not arg.startswith("-"):
            group, option = arg.lstrip("+").split("=", 1)
            if group and option and "." not in group and all(c.isalnum() or c in "_-./" for c in group + option):
                picks.append((group, option))
    return [os.path.join(d, g, f"{o}{ext}") for d in dirs for g, o in picks for ext in (".yaml", ".yml")]
