"""`ckprof workload`: flags → the generator's ModelOptions and RunConfig (ckprof.workloads.options),
then its `run`; `ckprof workload load DIR` reads a checkpoint back."""

from __future__ import annotations

import click

from ckprof.errors import UsageError, say
from ckprof.record.options import RecordOptions
from ckprof.recording.mlperf_rules import DEFAULT_EDITION, EDITIONS
from ckprof.units import click_callback, parse_interval, parse_size
from ckprof.workloads.config import RunConfig
from ckprof.workloads.options import ModelOptions, run

from .recording_options import recording_options

_size = click_callback(parse_size)
# The generator itself (ckprof.workloads.launch: numpy, the ranks, the recorder) is imported inside the
# commands that run it: the `ckprof` group imports every command module at start.


def model_options(f):
    opts = [
        click.option(
            "--preset",
            default=None,
            metavar="NAME",
            help="llama3-8b | llama3-70b | llama3-405b | llama3-1t (MLPerf Storage v2.0 sizes) [default: llama3-8b].",
        ),
        click.option(
            "--params",
            default=None,
            metavar="N",
            help="A custom model of N parameters (e.g. 13B), split into --layers layers.",
        ),
        click.option("--hidden", type=int, default=None, help="Custom shape: hidden size."),
        click.option("--ffn", type=int, default=None, help="Custom shape: FFN (intermediate) size."),
        click.option("--layers", type=int, default=None, help="Custom shape: transformer layers."),
        click.option("--heads", type=int, default=None, help="Custom shape: attention heads."),
        click.option("--kv-heads", type=int, default=None, help="Custom shape: KV heads (GQA)."),
        click.option("--vocab", type=int, default=None, help="Custom shape: vocabulary size [default: 128256]."),
        click.option("--tp", type=int, default=None, help="Tensor parallelism."),
        click.option("--pp", type=int, default=None, help="Pipeline parallelism."),
        click.option("--zero", type=int, default=None, help="ZeRO stage (0-3)."),
        click.option(
            "--ranks", type=int, default=None, help="Ranks (processes) [default: the preset's]; DP = ranks / (TP×PP)."
        ),
        click.option(
            "--subset",
            is_flag=True,
            help="Run only the first ranks (8, or --ranks) of the full layout, as MLPerf's subset mode "
            "(MLPerf Storage v3.0: llama3-8b only; --rules v2.0 for the others).",
        ),
        click.option(
            "--scale", type=float, default=None, help="Multiply every file's size by F (keeps rank and file structure)."
        ),
        click.option(
            "--total-size",
            callback=_size,
            default=None,
            metavar="SIZE",
            help="Scale so one checkpoint is SIZE in total (e.g. 4GiB).",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


MODEL_FLAGS = (
    "preset",
    "params",
    "hidden",
    "ffn",
    "layers",
    "heads",
    "kv_heads",
    "vocab",
    "tp",
    "pp",
    "zero",
    "ranks",
    "subset",
    "scale",
    "total_size",
)


def model_from_flags(flags: dict) -> ModelOptions:
    """model_options' flags (taken out of `flags`) → ModelOptions, checked there for Python callers too."""
    opts = {k: flags.pop(k) for k in MODEL_FLAGS}
    opts["total_bytes"] = opts.pop("total_size")
    return ModelOptions(**opts)


def run_from_flags(
    target,
    count,
    interval,
    compute,
    direct,
    no_fsync,
    chunk_size,
    threads,
    async_,
    keep,
    load_after,
    drop_caches,
    no_record,
    recording: RecordOptions,
    warm=False,
    rules=DEFAULT_EDITION,
    accelerator_type=None,
    accelerators=None,
) -> RunConfig:
    return RunConfig(
        target=target,
        count=count,
        interval_s=_interval(interval),
        compute=compute,
        direct=direct,
        fsync=not no_fsync,
        chunk_bytes=chunk_size,
        threads=threads,
        async_=async_,
        keep=keep,
        load=load_after,
        drop_caches=drop_caches,
        warm=warm,
        record=not no_record,
        recording=recording,
        rules=rules,
        accelerator_type=accelerator_type,
        accelerators=accelerators,
    )


def rules_option(f):
    return click.option(
        "--rules",
        type=click.Choice(EDITIONS),
        default=DEFAULT_EDITION,
        show_default=True,
        help="MLPerf Storage checkpointing rules to check the run against: a violation is refused, a "
        "flagged rule (scaled sizes, fewer than 10 checkpoints, a warm read...) printed and kept in "
        "meta.json's workload.rules; v2.0 for comparison, none to skip. See docs/workload.md.",
    )(f)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@model_options
@click.option(
    "--target",
    "-t",
    default=None,
    metavar="DIR|s3://BUCKET/PREFIX",
    help="Where checkpoints are written: a directory (created if missing; any file system: a disk, NFS, FUSE), "
    "or s3://bucket/prefix: each shard one object (multipart uploads of --chunk-size parts, boto3), the "
    "manifest written last; endpoint and credentials as the aws command takes them (AWS_ENDPOINT_URL_S3 or "
    "AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE). See docs/remote.md.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan (per-rank files and bytes) and write nothing.")
@click.option("--count", default=1, show_default=True, help="Checkpoints to write.")
@click.option(
    "--interval",
    default="0s",
    show_default=True,
    metavar="SECONDS",
    help="Compute phase between checkpoints (e.g. 5s).",
)
@click.option(
    "--compute",
    type=click.Choice(["sleep", "cpu", "gpu"]),
    default="sleep",
    show_default=True,
    help="What the compute phase does: sleep, a CPU busy loop, or a GPU busy loop (torch).",
)
@click.option("--direct", is_flag=True, help="O_DIRECT writes and reads (aligned buffers), bypassing the page cache.")
@click.option(
    "--no-fsync",
    is_flag=True,
    help="Skip fsync (shows what skipping it does; the data may still be in the page cache).",
)
@click.option(
    "--chunk-size",
    callback=_size,
    default=None,
    metavar="SIZE",
    help="Bytes per write(2)/read(2); on s3:// a multipart upload's part and a ranged GET (5 MiB or more) "
    "[default: 4MiB; 8MiB on s3://].",
)
@click.option("--threads", default=1, show_default=True, help="Writer/reader threads per rank.")
@click.option(
    "--async",
    "async_",
    is_flag=True,
    help="Stage each checkpoint in memory, write it in background threads while the next compute phase runs.",
)
@click.option("--keep", default=0, show_default=True, help="Keep the newest N complete checkpoints (0: keep all).")
@click.option(
    "--load",
    "load_after",
    is_flag=True,
    help="After the saves, all ranks read the newest checkpoint back and verify it.",
)
@click.option("--drop-caches", is_flag=True, help="Before a load, also write 3 to /proc/sys/vm/drop_caches (root).")
@click.option(
    "--warm",
    is_flag=True,
    help="A load reads what the page cache holds (default: its files are evicted first, a cold restore).",
)
@click.option("--no-record", is_flag=True, help="Do not record telemetry (a bare run).")
@rules_option
@click.option(
    "--accelerator-type",
    default=None,
    metavar="NAME",
    help="The simulated accelerator (MLPerf Storage v3.0 Rules.md Table 3): b200 (180 GB), mi355 (288 GB); "
    "h100, a100 (80 GB, whatif only). Its memory × --accelerators must hold the model's checkpoint.",
)
@click.option(
    "--accelerators",
    type=int,
    default=None,
    metavar="N",
    help="How many simulated accelerators [default: one per rank, as MLPerf's processes].",
)
@recording_options(interval_flag="--sample-interval", output_help="Recording directory")
@click.pass_context
def workload(ctx, dry_run, **flags):
    """Write (and read back) MLPerf-Storage-sized checkpoints, recorded by default.

    \b
    ckprof workload --preset llama3-8b --dry-run
    ckprof workload --preset llama3-8b --total-size 512MiB --target /mnt/ckpt --count 3 --interval 5s --load
    ckprof workload --preset llama3-405b --subset --rules v2.0 --scale 0.001 --target /mnt/ckpt --direct
    ckprof workload --preset llama3-8b --count 10 --accelerator-type b200 --dry-run
    ckprof workload load /mnt/ckpt/global_epoch1_step3
    ckprof workload --total-size 1GiB --ranks 2 --target s3://bucket/ckpt --load
    """
    if ctx.invoked_subcommand is not None:
        return
    model = model_from_flags(flags)
    if dry_run:
        from ckprof.workloads import rules
        from ckprof.workloads.plan import describe

        plan, cfg = model.plan(), run_from_flags(**flags)
        checks = rules.check_save(plan, cfg)  # a violation is shown, not refused: nothing runs
        click.echo(describe(plan))
        click.echo(rules.describe(cfg.rules, checks))
        return
    cfg = run_from_flags(**flags)
    model.plan()  # a bad model is said before a missing --target, as always
    ctx.exit(_interruptible(run, model, cfg))


def _interruptible(fn, *args) -> int:
    """Run the generator; SIGINT/SIGTERM/SIGHUP stop it cleanly (ranks stopped, nothing partial
    left, the recording finished) and ckprof exits 128 + the signal, as a shell reports it."""
    from ckprof.workloads.launch import Interrupted, interruptible

    interruptible()
    try:
        return fn(*args)
    except Interrupted as e:
        say(f"ckprof: {e.describe()}")
        return 128 + e.signum


def _interval(text: str) -> float:
    if str(text).strip() in ("0", "0s", "0ms"):
        return 0.0
    return parse_interval(text)


@workload.command("load")
@click.argument("checkpoint", metavar="DIR|s3://BUCKET/PREFIX/NAME")
@click.option("--ranks", type=int, default=None, help="Reader processes [default: the ranks that wrote it].")
@click.option("--direct", is_flag=True, help="O_DIRECT reads (else its files are evicted from the page cache first).")
@click.option("--drop-caches", is_flag=True, help="Also write 3 to /proc/sys/vm/drop_caches first (root).")
@click.option("--warm", is_flag=True, help="Read what the page cache holds: no eviction first (a warm restore).")
@click.option("--threads", default=1, show_default=True, help="Reader threads per rank.")
@click.option("--no-record", is_flag=True, help="Do not record telemetry.")
@rules_option
@recording_options(interval_flag="--sample-interval", output_help="Recording directory")
@click.pass_context
def load_cmd(ctx, checkpoint, ranks, direct, drop_caches, warm, threads, no_record, rules, recording):
    """Read a checkpoint written by `ckprof workload` with all ranks, verify every checksum,
    report the slowest rank's read GiB/s. Under --rules v3.0 the gap since the checkpoint was
    written is reported (MLPerf's two-invocation mode: at most 30 s; negative: clock skew)."""
    from ckprof.workloads.launch import load_main
    from ckprof.workloads.rules import invocation_start_unix_ns

    if ranks is not None and ranks < 1:
        raise UsageError(f"--ranks must be at least 1 (got {ranks})")
    if threads < 1:  # no reader thread would read anything, and every checksum would "fail"
        raise UsageError(f"--threads must be at least 1 (got {threads})")
    cfg = RunConfig(
        target=checkpoint,
        direct=direct,
        drop_caches=drop_caches,
        warm=warm,
        threads=threads,
        record=not no_record,
        recording=recording,
        load=True,
        rules=rules,
        invoked_unix_ns=invocation_start_unix_ns(),  # this invocation's process start (Rules.md 4.7.1)
    )
    ctx.exit(_interruptible(load_main, checkpoint, ranks, cfg))
