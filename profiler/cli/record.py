"""`ckprof record -- CMD`: run a command and record telemetry while it runs."""

from __future__ import annotations

from dataclasses import replace

import click

from ckprof.record.options import RecordOptions

from .recording_options import recording_options


def write_job_host_files(out_dir: str) -> None:
    """A job host's 1 s roll-up and summary for `Job.block(1.0)` and `ckprof report JOBDIR`
    (recording.rollup, analysis.host_summary), after the recording is complete: a failure of either
    costs that reader time (it works from the samples), never the recording, nor the other file."""
    # imported here: only a job host's end needs the analysis (pandas), not every ckprof command
    from ckprof.analysis import host_summary
    from ckprof.record.session import warn
    from ckprof.recording import rollup
    from ckprof.recording.reader import Recording, read_meta

    for what, write, fallback in (
        (
            "1 s roll-up",
            lambda: rollup.write(Recording(out_dir, read_meta(out_dir))),
            "block(1.0) reads this host's samples",
        ),
        ("host summary", lambda: host_summary.write(out_dir), "the job report analyses this host from its samples"),
    ):
        try:
            write()
        except Exception as e:
            warn(f"note: no {what} written ({type(e).__name__}: {e}); {fallback}")


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@recording_options(output_help="Recording directory")
@click.option(
    "--path",
    "paths",
    multiple=True,
    metavar="PATH",
    help="Checkpoint directory: record the physical disks behind it [default: working directory]. Repeatable.",
)
@click.option(
    "--kill-after",
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="After forwarding SIGINT/SIGTERM/SIGHUP, SIGKILL the command if it has not exited by then.",
)
@click.option("-q", "--quiet", is_flag=True, help="No summary line at the end.")
@click.option(
    "--job-dir", metavar="DIR", help="Shared directory of a multi-node job: this node records into DIR/host=<name>/."
)
@click.option("--job-id", metavar="ID", help="The job's id [default: from SLURM_JOB_ID, TORCHELASTIC_RUN_ID, ...].")
@click.option("--host-name", metavar="NAME", help="This node's name in the job directory [default: the hostname].")
@click.option(
    "--prometheus-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve live metrics for Prometheus on this port (0: any free port).",
)
@click.option(
    "--prometheus-addr",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDR",
    help="Address to serve Prometheus metrics on (0.0.0.0 for every interface).",
)
@click.option(
    "--no-patch",
    is_flag=True,
    help="Do not mark a Python command's torch.save / DCP / safetensors saves automatically.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def record(
    recording: RecordOptions,
    paths,
    kill_after,
    quiet,
    job_dir,
    job_id,
    host_name,
    prometheus_port,
    prometheus_addr,
    no_patch,
    command,
):
    """Run COMMAND and record block-device and host telemetry while it runs.

    \b
    ckprof record -- python train.py --epochs 3
    ckprof record --path /mnt/ckpt -o run1 -- torchrun --nproc-per-node 8 train.py
    ckprof record --device nvme0n1 --interval 10ms -- fio job.fio

    The command runs without a shell, with your stdin/stdout/stderr, environment and imports;
    signals sent to ckprof are passed on (SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGQUIT, SIGWINCH, ...),
    and ckprof exits as the command did. Inside it, `ckprof.checkpoint()` marks
    checkpoint windows, and a Python command's torch.save / torch.distributed.checkpoint /
    safetensors saves are marked automatically (--no-patch turns that off). At the end the
    recording's path and a one-line summary go to stderr.
    """
    from ckprof.record import child
    from ckprof.record.session import record as do_record

    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise click.UsageError("no command given: ckprof record [OPTIONS] -- CMD [ARGS]...")
    result = do_record(
        list(command),
        replace(recording, quiet=quiet, paths=tuple(paths)),
        kill_after_s=kill_after,
        job_dir=job_dir,
        job_id=job_id,
        host_name=host_name,
        prometheus_port=prometheus_port,
        prometheus_addr=prometheus_addr,
        patch=not no_patch,
        job_host_closed=write_job_host_files,
    )
    child.exit_like(result)
