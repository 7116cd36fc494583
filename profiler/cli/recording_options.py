"""The recording's command-line options, one decorator for every command that records
(`record`, `workload`, `workload load`): the flags, their help and their parsing live here, and the
command receives them as one `recording: RecordOptions` (record/options.py)."""

from __future__ import annotations

import functools

import click

from ckprof.record.options import RecordOptions
from ckprof.units import click_callback, parse_interval

_interval = click_callback(parse_interval)
_FLAGS = ("output", "recording_interval", "nvme_interval", "flush_interval", "force", "devices")


def recording_options(interval_flag: str = "--interval", output_help: str = "Recording directory"):
    """Add -o/--output, the sampling interval (named `interval_flag`: the workload's own --interval is
    the time between its checkpoints, so it records with --sample-interval), --nvme-interval,
    --flush-interval, --device and --force; the command gets `recording=RecordOptions(...)`."""

    options = [
        click.option("-o", "--output", metavar="DIR", help=f"{output_help} [default: ./ckprof-YYYYmmdd-HHMMSS]."),
        click.option(
            interval_flag,
            "recording_interval",
            default="100ms",
            show_default=True,
            callback=_interval,
            help="Block-device and host sampling interval (e.g. 100ms, 10ms, 10Hz).",
        ),
        click.option(
            "--device",
            "devices",
            multiple=True,
            metavar="NAME|all",
            help="Record this block device (e.g. nvme0n1, loop0) instead of the disks behind the checkpoint directory, or every disk with 'all'. Repeatable.",
        ),
        click.option("--force", is_flag=True, help="Replace a recording already in the output directory."),
        click.option(
            "--flush-interval",
            default="5s",
            show_default=True,
            callback=_interval,
            help="How often samples are written to disk (what a killed recorder can lose).",
        ),
        click.option(
            "--nvme-interval",
            default="1s",
            show_default=True,
            callback=_interval,
            help="NVMe SMART polling interval (one nvme-cli call per controller each time).",
        ),
    ]

    def decorate(f):
        @functools.wraps(f)
        def command(*args, **flags):
            got = {k: flags.pop(k) for k in _FLAGS}
            flags["recording"] = RecordOptions(
                output=got["output"],
                interval_s=got["recording_interval"],
                nvme_interval_s=got["nvme_interval"],
                flush_s=got["flush_interval"],
                force=got["force"],
                devices=tuple(got["devices"]),
            )
            return f(*args, **flags)

        for option in reversed(options):
            command = option(command)
        return command

    return decorate
