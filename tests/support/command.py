"""Running the ckprof command in tests: one helper, two modes.

    ckprof_cmd("report", rec, "--format", "json")                   # a real child process
    ckprof_cmd("workload", "--dry-run", *args, in_process=True)     # click's CliRunner, here

By default the real command runs in a child process (`python -m ckprof`, this interpreter) and a
subprocess.CompletedProcess comes back (returncode, stdout and stderr as text). With
`in_process=True` the click command is invoked in this process (click.testing.CliRunner) and
click's Result comes back (exit_code, output, stdout, stderr, exception): for tests that need no
process of the command's own (help, refusals, reports of built recordings), and run faster so.
`CKPROF` is the argv prefix for the tests that start the command themselves (Popen, a shell, a
wrapper such as sudo or unshare).

The child's environment is `env` when given (whole, as subprocess takes it), else clean_env(): this
process's own without the variables a surrounding ckprof or launcher sets, so a test means the same
run under `ckprof record`, torchrun or Slurm.
"""

from __future__ import annotations

import os
import subprocess
import sys

CKPROF = [sys.executable, "-m", "ckprof"]

# Set by a surrounding launcher (torchrun, mpirun, Slurm): a child would take them as its rank.
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def clean_env(extra: dict | None = None, **more: str) -> dict:
    """This process's environment without CKPROF_* and launcher variables, plus `extra`/`more`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CKPROF_") and k not in LAUNCHER_VARIABLES}
    env.update(extra or {})
    env.update(more)
    return env


def ckprof_cmd(*args, in_process: bool = False, timeout: float = 120, env: dict | None = None, **kw):
    """Run `ckprof ARGS...` (arguments str()-ed): a child process, or in this process."""
    argv = [str(a) for a in args]
    if in_process:
        from click.testing import CliRunner

        from ckprof.cli import main

        kw.setdefault("catch_exceptions", True)
        return CliRunner().invoke(main, argv, env=env, **kw)
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([*CKPROF, *argv], timeout=timeout, env=clean_env() if env is None else env, **kw)
