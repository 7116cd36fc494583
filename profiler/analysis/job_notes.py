"""Every note the job report writes, each with its code: what the job's figures leave out, and why.
A note's `subject` is the host it is about, or None for the job.

The codes are what tests and tools match; the text is for a reader and may be reworded.
"""

from __future__ import annotations

from .job_model import JobCheckpoint, JobThroughput
from .model_base import Note

# the codes, one per rule that writes a note
JOB_READER = "job_reader"  # the job reader's own problem (recording/job.py): a host left out, a clock
SUMMARIES_NOT_USED = "host_summaries_not_used"
HOST_NOT_ANALYSED = "host_not_analysed"
HOST_NO_CHECKPOINTS = "host_no_checkpoints"
CHECKPOINT_NOT_SEEN = "checkpoint_not_seen"
CHECKPOINT_UNFINISHED = "checkpoint_unfinished"
DEVICE_UNKNOWN_HOST = "device_unknown_host"
HOSTS_WITHOUT_DEVICES = "hosts_without_device_samples"
NETWORK_UNKNOWN_HOST = "network_unknown_host"


def _few(names: list[str]) -> str:
    return f"{', '.join(names[:5])}{', …' if len(names) > 5 else ''}"


def job_reader(problem: str) -> Note:
    return Note(code=JOB_READER, text=problem)


def summaries_not_used(why: str, hosts: list[str]) -> Note:
    n = len(hosts)
    return Note(
        code=SUMMARIES_NOT_USED,
        text=f"{n} host summar{'y' if n == 1 else 'ies'} not used ({why}): analysed from samples ({_few(hosts)})",
    )


def host_not_analysed(name: str, e: Exception) -> Note:
    return Note(
        code=HOST_NOT_ANALYSED,
        text=f"host={name}: left out: could not analyse its recording ({type(e).__name__}: {e})",
        subject=name,
    )


def host_no_checkpoints(name: str) -> Note:
    return Note(
        code=HOST_NO_CHECKPOINTS,
        text=f"host={name}: no checkpoint windows (no markers, no write bursts): the job's figures are from the other hosts",
        subject=name,
    )


def checkpoint_notes(c: JobCheckpoint) -> list[Note]:
    """A checkpoint not seen on every host, not ended on some, with a host's devices unknown, or
    with a host's network bytes unknown where another host's are known."""
    out = []
    if c.missing_hosts:
        out.append(Note(code=CHECKPOINT_NOT_SEEN, text=f"{c.label}: not seen on host(s) {', '.join(c.missing_hosts)}"))
    if c.unfinished_hosts:
        out.append(
            Note(
                code=CHECKPOINT_UNFINISHED,
                text=f"{c.label}: no end on host(s) {', '.join(c.unfinished_hosts)} (still saving when "
                "the recording ended): left out of the stall and the spread",
            )
        )
    for h in c.device_unknown_hosts:
        why = "; ".join(u["reason"] for u in c.per_host[h].device_unknown)
        out.append(
            Note(
                code=DEVICE_UNKNOWN_HOST,
                text=f"{c.label}: device figures on host {h} unknown, and so the job's device bytes: {why}",
                subject=h,
            )
        )
    if len(c.network_unknown_hosts) < c.hosts:  # some node has network figures: say which have none
        moved = "rx_bytes" if c.kind == "load" else "tx_bytes"
        for h in c.network_unknown_hosts:
            out.append(
                Note(
                    code=NETWORK_UNKNOWN_HOST,
                    text=f"{c.label}: network bytes on host {h} unknown, and so the job's: "
                    f"{c.per_host[h].network.unknown.get(moved, 'unknown')}",
                    subject=h,
                )
            )
    return out


def throughput_notes(tp: JobThroughput | None) -> list[Note]:
    if tp is None or not tp.hosts_without_devices:
        return []
    left = tp.hosts_without_devices
    return [
        Note(
            code=HOSTS_WITHOUT_DEVICES,
            text=f"{len(left)} host(s) without device samples, not in the job's throughput: {_few(left)}",
        )
    ]
