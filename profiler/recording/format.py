"""The recording's names on disk (format v1, docs/recording-format.md), shared by the writer
and the reader.

    meta.json                                        written at start, rewritten at the end
    events.jsonl                                     one JSON object a line, appended with O_APPEND
    samples/<collector>/part-AAAAAA-BBBBBB.parquet   complete Parquet files, parts AAAAAA..BBBBBB
    samples/<collector>/part-AAAAAA-open.arrows      an Arrow IPC stream of the flushes since part
                                                     AAAAAA, one record batch each; it becomes a
                                                     Parquet part every 16 flushes and at the end,
                                                     so only a killed recorder leaves one
"""

from __future__ import annotations

SCHEMA_VERSION = 1
FORMAT_NAME = "ckprof-recording"
META = "meta.json"
EVENTS = "events.jsonl"
SAMPLES = "samples"
PART_PREFIX = "part-"
# the `id` of the file tracker's events (file_durable ...) for files the file activity saw written,
# not named by any marker: the analysis gives each to the file-level save holding it
FILE_ACTIVITY_ID = "file_activity"


def part_name(first: int, last: int) -> str:
    return f"{PART_PREFIX}{first:06d}-{last:06d}.parquet"


def parse_part_name(name: str) -> tuple[int, int] | None:
    if not (name.startswith(PART_PREFIX) and name.endswith(".parquet")):
        return None
    try:
        a, b = name[len(PART_PREFIX) : -len(".parquet")].split("-")
        return int(a), int(b)
    except ValueError:
        return None


STREAM_SUFFIX = "-open.arrows"


def stream_name(first: int) -> str:
    return f"{PART_PREFIX}{first:06d}{STREAM_SUFFIX}"


def parse_stream_name(name: str) -> int | None:
    """The first part an open stream holds (`part-AAAAAA-open.arrows`), or None."""
    if not (name.startswith(PART_PREFIX) and name.endswith(STREAM_SUFFIX)):
        return None
    digits = name[len(PART_PREFIX) : -len(STREAM_SUFFIX)]
    return int(digits) if digits.isdigit() else None


def event_problem(ev: object) -> str | None:
    """Why a parsed events.jsonl line is not an event (docs/recording-format.md), or None: an
    event is a JSON object with an integer `t_ns` (CLOCK_MONOTONIC) and an `event` name."""
    if not isinstance(ev, dict):
        return f"a JSON {type(ev).__name__}, not an object"
    t = ev.get("t_ns")
    if isinstance(t, bool) or not isinstance(t, int):
        return "no integer t_ns"
    if not isinstance(ev.get("event"), str):
        return "no event name"
    return None
