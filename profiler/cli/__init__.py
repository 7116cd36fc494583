"""The `ckprof` command line (click). Each command's logic lives in its own module."""

from __future__ import annotations

import sys

import click

from ckprof.errors import DEBUG_HINT, CkprofError, UsageError, debugging, hold_closed_std_fds, say


class CkprofGroup(click.Group):
    """Turns ckprof's own errors into one line on stderr and exit status 2 (usage) or 1, and any
    other failure into one line that says how to see the traceback; CKPROF_DEBUG=1 shows it."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except CkprofError as e:
            if debugging():
                raise
            say(f"ckprof: error: {e.one_line()}")  # say() makes a path's newlines and controls visible
            sys.exit(2 if isinstance(e, UsageError) else 1)
        except Exception as e:
            if debugging():
                raise
            say(f"ckprof: internal error: {type(e).__name__}: {e} ({DEBUG_HINT})")
            sys.exit(1)


@click.group(cls=CkprofGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ckprof", prog_name="ckprof")
def main():
    """ckprof: storage telemetry and power profiler for checkpoint workloads.

    \b
    Record any command:      ckprof record -- python train.py
    Check what can be read:  ckprof doctor
    Read a recording:        python -c "import ckprof; print(ckprof.load('ckprof-...').block())"
    """
    hold_closed_std_fds()


# Every command lives in its own module; they are added here (imports after `main` on purpose).
from .doctor import doctor  # noqa: E402
from .evict import evict  # noqa: E402
from .import_power import import_power_command as import_power  # noqa: E402
from .record import record  # noqa: E402
from .report import compare, export, report  # noqa: E402
from .workload import workload  # noqa: E402

for _command in (record, doctor, report, compare, export, import_power, workload, evict):
    main.add_command(_command)
