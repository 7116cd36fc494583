"""The `ckprof` command line (click). Each command's logic lives in its own module."""
from __future__ import annotations

import os
import sys
import traceback

import click

from ckprof.console import hold_std_fds, say, write_stderr
from ckprof.errors import DEBUG_HINT, CkprofError


def debugging() -> bool:
    return bool(os.environ.get("CKPROF_DEBUG"))


class CkprofGroup(click.Group):
    """Turns any error into one line on stderr and exit status 2 (usage) or 1.

    With CKPROF_DEBUG=1 the traceback comes first (with the error it was raised from), and the
    line leaves out the hint to rerun with CKPROF_DEBUG=1.
    """

    def main(self, *args, **kwargs):
        hold_std_fds()  # before ckprof opens a file: see ckprof.console
        return super().main(*args, **kwargs)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own: it prints usage errors itself
        except CkprofError as e:
            self._fail(e, e.one_line(with_debug_hint=not debugging()),
                       2 if type(e).__name__ == "UsageError" else 1)
        except OSError as e:  # an environment ckprof did not expect (a deleted working directory, EIO)
            frame = traceback.extract_tb(e.__traceback__)[-1]
            where = e.filename or f"{os.path.basename(frame.filename)}:{frame.lineno}"
            self._fail(e, f"{e.strerror or e} ({where})" + ("" if debugging() else f" ({DEBUG_HINT})"), 1)
        except Exception as e:  # noqa: BLE001 - a bug: still one line, the traceback on request
            self._fail(e, f"internal error: {type(e).__name__}: {e}" + ("" if debugging() else f" ({DEBUG_HINT})"), 1)

    @staticmethod
    def _fail(exc: BaseException, line: str, code: int):
        if debugging():
            write_stderr("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        say(f"error: {line}")
        sys.exit(code)


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
