"""The `ckprof` command line (click). Each command's logic lives in its own module."""

from __future__ import annotations

import sys

import click

from ckprof.errors import CkprofError


class CkprofGroup(click.Group):
    """Turns ckprof's own errors into one line on stderr and exit status 2 (usage) or 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CkprofError as e:
            click.echo(f"ckprof: error: {e.one_line()}", err=True)
            sys.exit(2 if type(e).__name__ == "UsageError" else 1)


@click.group(cls=CkprofGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ckprof", prog_name="ckprof")
def main():
    """ckprof: storage telemetry and power profiler for checkpoint workloads.

    \b
    Record any command:      ckprof record -- python train.py
    Check what can be read:  ckprof doctor
    Read a recording:        python -c "import ckprof; print(ckprof.load('ckprof-...').block())"
    """


# Every command lives in its own module; they are added here (imports after `main` on purpose).
from .doctor import doctor  # noqa: E402
from .import_power import import_power_command as import_power  # noqa: E402
from .record import record  # noqa: E402
from .report import compare, export, report  # noqa: E402
from .workload import workload  # noqa: E402

for _command in (record, doctor, report, compare, export, import_power, workload):
    main.add_command(_command)
