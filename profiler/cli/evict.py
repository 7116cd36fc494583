"""`ckprof evict PATH`: drop a checkpoint's files from the page cache, so the next load is cold."""

from __future__ import annotations

import click

from ckprof.errors import UsageError
from ckprof.escape import visible
from ckprof.record.pagecache import evict as evict_path


@click.command("evict")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
def evict(paths):
    """Drop checkpoint files (a file, or every file under a folder) from the page cache, and
    nothing else, so that the next load of them reads from the device: a cold restore without
    root and without emptying the whole machine's cache (as /proc/sys/vm/drop_caches does).

    Each file is fdatasync'ed (dirty pages cannot be dropped), then posix_fadvise(DONTNEED)'ed;
    what cachestat(2) sees cached before and after is printed.

    \b
    ckprof evict /ckpt/checkpoint-500 && ckprof record -- python train.py --resume /ckpt/checkpoint-500
    """
    for p in paths:
        try:
            got = evict_path(p)
        except FileNotFoundError:
            raise UsageError(f"{visible(p)}: no such file or folder (or an empty folder)") from None
        except PermissionError as e:
            raise UsageError(f"{visible(p)}: cannot open its files to evict them ({e.strerror})") from None

        def mib(n):
            return "unknown (no cachestat(2))" if n is None else f"{n / 2**20:.1f} MiB"

        click.echo(
            f"{visible(p)}: {got['files']} file(s), {got['file_bytes'] / 2**20:.1f} MiB; in the page cache "
            f"before {mib(got['cached_bytes_before'])}, after {mib(got['cached_bytes_after'])}"
        )
