"""`ckprof report`, `compare` and `export`: one recording or a job directory of many hosts."""

from __future__ import annotations

import os
import sys

import click

from ckprof.atomic import replacing
from ckprof.errors import UsageError, say, unexpected_as_one_line
from ckprof.jsonsafe import to_json
from ckprof.recording.job import Job
from ckprof.units import click_callback, parse_duration, parse_size

from . import job_report as job_commands

# The analysis and the renderers (pandas, matplotlib, Bokeh: seconds to import) are imported inside
# the commands that read a recording: the `ckprof` group imports every command module at start.

_mtbf = click_callback(parse_duration)

_include_foreign = click.option(
    "--include-foreign-hosts",
    is_flag=True,
    help="A job directory: keep host recordings made by another job (a different job id in their "
    "meta.json, or, with no ids, recorded at another time). By default each is named on stderr and "
    "in the report's notes, and left out.",
)


def analyse_path(path: str, **kw):
    """Load and analyse one recording; anything unexpected becomes a one-line RecordingError."""
    from ckprof.analysis import analyze
    from ckprof.recording.load import load

    rec = load(path)
    if isinstance(rec, Job):  # a job directory: report and export read it whole (job_report.py)
        hosts = rec.hosts
        first = next(iter(hosts.values())).path
        raise UsageError(
            f"{path} is a job of {len(hosts)} host(s) ({', '.join(hosts)}), not one recording",
            hint=f"give one host, e.g. {first}",
        )
    with unexpected_as_one_line(f"{path}: could not analyse the recording"):  # a line, never a traceback
        return analyze(rec, **kw)


def _read_rate(text: str | None) -> tuple[float | None, str | None]:
    """--read-bw: a rate (2.5GiB/s, 800MB/s) or a recording whose cold loads measured one."""
    if not text:
        return None, None
    if os.path.isdir(text):
        from ckprof.analysis.restore_prediction import measured_read_bps

        bps, basis = measured_read_bps(analyse_path(text).report)
        if not bps:
            raise UsageError(
                f"--read-bw {text}: {basis} there", hint="record `ckprof workload load DIR` on the same devices"
            )
        return bps, basis
    num = text.strip()
    for suffix in ("/s", "ps"):
        if num.lower().endswith(suffix):
            num = num[: -len(suffix)]
    try:
        bps = float(parse_size(num))
    except (ValueError, UsageError):
        raise UsageError(f"--read-bw {text!r}: not a rate (e.g. 2.5GiB/s) or a recording directory") from None
    if bps <= 0:
        raise UsageError(f"--read-bw {text!r}: must be more than 0")
    return bps, f"--read-bw {text}"


def _write(text: str, out: str | None) -> None:
    if out in (None, "-"):
        sys.stdout.write(text)
        return
    try:
        with replacing(out) as f:  # whole or not at all: a full disk leaves the previous file as it was
            f.write(text)
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror}") from None
    say(f"ckprof: wrote {out}")


@click.command()
@click.argument("recording", type=click.Path())
@click.option("-f", "--format", "fmt", type=click.Choice(["html", "md", "json"]), default="html", show_default=True)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Where to write [default: RECORDING-NAME.report.html for html, stdout for md/json].",
)
@click.option(
    "--mtbf", callback=_mtbf, metavar="DURATION", help="Mean time between failures (e.g. 3h) for the optimal interval."
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1),
    metavar="N",
    help="Cluster size: MTBF from Llama 3's failure rate (419 interruptions / 54 days / 16,384 GPUs).",
)
@click.option(
    "--windows",
    type=click.Choice(["auto", "markers", "inferred"]),
    default="auto",
    show_default=True,
    help="Checkpoint windows from markers, from device write bursts, or markers when there are any.",
)
@click.option(
    "--read-bw",
    metavar="RATE|RECORDING",
    help="The devices' cold read rate for restore predictions: e.g. 2.5GiB/s, or a recording whose "
    "cold loads measured it (`ckprof workload load` on the same devices) [default: this recording's cold loads].",
)
@click.option(
    "--static",
    is_flag=True,
    help="HTML without JavaScript: the timeline as a picture only (a smaller file). By default the "
    "HTML's timeline is interactive (zoom, hover values, checkpoint rows linked to their bands), "
    "its JavaScript inline, so the file still needs no network.",
)
@click.option(
    "--dask",
    "dask_address",
    metavar="ADDRESS",
    help="A job directory: analyse its hosts on this Dask cluster (e.g. tcp://scheduler:8786; "
    "its workers must see the job directory at the same path) [default: a process pool here].",
)
@click.option(
    "--serial", is_flag=True, help="A job directory: analyse its hosts one at a time in this process (no pool)."
)
@_include_foreign
def report(recording, fmt, output, mtbf, gpus, windows, read_bw, static, dask_address, serial, include_foreign_hosts):
    """Analyse a recording: checkpoint windows, bytes, bandwidth, energy, temperature, throttling.

    The HTML report is one self-contained file; its timeline is interactive (Bokeh, inline):
    drag to zoom, hover for values with units, click a checkpoint's # to zoom to it (--static: a
    picture instead; docs/report-format.md).

    \b
    ckprof report ckprof-20261121-120000                  # → ckprof-20261121-120000.report.html
    ckprof report run1 --format json > run1.json           # schema: docs/report-format.md
    ckprof report run1 --gpus 16384                        # optimal interval at that scale
    ckprof report JOBDIR --dask tcp://scheduler:8786       # a job's hosts analysed on Dask
    """
    from ckprof.report import formats, job_render

    job = job_commands.load_job(recording, include_foreign_hosts)
    if job is not None:  # host=<name>/ recordings of one job: read as one (PNG timelines)
        engine = dask_address or ("serial" if serial else "pool")
        keep = job_render.analyses_to_keep(fmt)
        an = job_commands.analyse_job(
            job, keep_analyses=keep, engine=engine, mtbf_s=mtbf, gpus=gpus, windows_from=windows
        )
    else:
        if dask_address or serial:
            raise UsageError(
                f"--dask and --serial are for a job directory (host=<name>/ recordings); {recording} is one recording"
            )
        bps, basis = _read_rate(read_bw)
        an = analyse_path(recording, mtbf_s=mtbf, gpus=gpus, windows_from=windows, read_bps=bps, read_bps_basis=basis)
    # one dispatch for both (report/formats.py): the renderer makes its own plots
    _write(
        formats.render(an, fmt, formats.RenderOptions(static=static)), output or formats.default_output(recording, fmt)
    )
    if fmt == "html" and job is None:  # the file is for a browser: its summary is said here too
        _say_summary(an.model)


def _say_summary(rep) -> None:
    """The report's summary (report/tables.py summary_rows: each figure with its unit and whether it
    was measured, derived or estimated) and what it could not measure, with why (the report's
    `*_not_measured` notes), on stderr, for whoever ran the command."""
    from ckprof.report.tables import summary_rows

    rows = [r for r in summary_rows(rep) if r[0] not in ("command", "host")]
    width = max((len(what) for what, _, _ in rows), default=0)
    for what, value, provenance in rows:
        say(f"  {what:<{width}}  {value} [{provenance}]" if value != "—" else f"  {what:<{width}}  unknown")
    for note in rep.notes:
        if note.code.endswith("_not_measured"):
            say(f"  {note.text}")


@click.command()
@click.argument("recordings", nargs=-1, required=True, type=click.Path())
@click.option("-f", "--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("-o", "--output", metavar="FILE", help="Where to write [default: stdout].")
@_include_foreign
def compare(recordings, fmt, output, include_foreign_hosts):
    """Compare recordings side by side, with ratios to the first one: the run's figures (sync
    against async: the stall per save, the background write, the steps beside it), then save k
    of each recording (two targets: bytes, seconds, GiB/s, where the bytes went, durable where).

    \b
    ckprof compare nvme-run xfs-run lustre-run
    ckprof compare sync-run async-run
    ckprof compare disk-run s3-run
    """
    from ckprof.report import compare as C
    from ckprof.report import render

    recordings = job_commands.expand(recordings, include_foreign_hosts)  # a job directory: its hosts side by side
    if len(recordings) < 2:
        raise UsageError("compare needs at least two recordings (or a job directory of two hosts or more)")
    reports = [analyse_path(p).report for p in recordings]
    cmp = C.compare(reports)
    if fmt == "json":
        _write(to_json(cmp.to_jsonable()), output)
    else:
        _write(C.markdown(cmp, render.md_table), output)


@click.command()
@click.argument("recording", type=click.Path())
@click.option("-f", "--format", "fmt", type=click.Choice(["perfetto", "csv", "parquet"]), required=True)
@click.option(
    "-o",
    "--output",
    metavar="PATH",
    help="A .json file for perfetto, a directory for csv/parquet [default: RECORDING-NAME.trace.json or RECORDING-NAME-export/].",
)
@_include_foreign
def export(recording, fmt, output, include_foreign_hosts):
    """Export checkpoint windows and metrics: a Perfetto/Chrome trace (open it in ui.perfetto.dev),
    or checkpoints and timeline tables as CSV or Parquet."""
    from ckprof.report.export import export as do_export

    job = job_commands.load_job(recording, include_foreign_hosts)
    name = os.path.basename(os.path.abspath(recording))
    out = output or (f"{name}.trace.json" if fmt == "perfetto" else f"{name}-export")
    an = analyse_path(recording) if job is None else None  # its errors are its own, not "cannot write"
    try:
        if job is not None:  # every host, with a host column (one process per host in a trace)
            files = job_commands.export(job, fmt, out)
        else:
            files = do_export(an, fmt, out)
    except OSError as e:  # written whole or not at all (ckprof.atomic): the previous export stays
        raise UsageError(f"cannot write {out}: {e.strerror}") from None
    for f in files:
        say(f"ckprof: wrote {f}")
