"""`ckprof import-power RECORDING TRACE.csv`: add a lab power analyzer's readings to a recording."""

from __future__ import annotations

import click

from ckprof.errors import say
from ckprof.recording.import_power import import_power as do_import


@click.command("import-power")
@click.argument("recording", metavar="RECORDING")
@click.argument("trace", metavar="TRACE.csv")
@click.option(
    "--device",
    required=True,
    metavar="NAME",
    help="What the analyzer measured (e.g. nvme0); the series is samples/power_NAME.",
)
@click.option(
    "--clock-offset",
    default=0.0,
    show_default=True,
    type=float,
    metavar="SECONDS",
    help="Seconds added to every trace time (the analyzer's clock runs that far behind).",
)
@click.option("--replace", is_flag=True, help="Replace a series imported before for the same device.")
def import_power_command(recording, trace, device, clock_offset, replace):
    """Add a lab power analyzer's readings (timestamp, power) to RECORDING as a measured series.

    \b
    ckprof import-power ckprof-20261121-120000 wt310.csv --device nvme0
    ckprof import-power run1 trace.csv --device nvme0 --clock-offset -1.5

    TRACE.csv: one reading a line, a time then power. Times: ISO 8601 (UTC unless a zone is
    given) or Unix time, in the header's unit (time_s, time_ms, time_us, time_ns, 'Time (ms)'),
    else s/ms/us/ns by magnitude. Power in the header's unit (power_W, power_mW, power_uW or
    power_µW, power_kW, 'Power [mW]'), else watts. The header is optional. Negative or non-finite
    power is refused with its line, and then nothing is written.
    """
    s = do_import(recording, trace, device, clock_offset, replace)
    say(
        f"ckprof: imported {s['rows']} readings ({s['rows_in_recording']} inside the recording, "
        f"mean {s['mean_w']:.2f} W there, measured) as {s['series']}; times {s['time_unit']['unit']} "
        f"({s['time_unit']['from']}), power {s['power_unit']['unit']} ({s['power_unit']['from']})"
    )
