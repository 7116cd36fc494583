"""The recording's names on disk (format v1, docs/recording-format.md), shared by the writer
and the reader.

    meta.json                                        written at start, rewritten at the end
    events.jsonl                                     one JSON object a line, appended with O_APPEND
    samples/<collector>/part-AAAAAA-BBBBBB.parquet   complete Parquet files, parts AAAAAA..BBBBBB
    .ckprof-reserve                                  deleted at the end; left by a killed recorder
"""
from __future__ import annotations

SCHEMA_VERSION = 1
FORMAT_NAME = "ckprof-recording"
META = "meta.json"
EVENTS = "events.jsonl"
SAMPLES = "samples"
RESERVE = ".ckprof-reserve"  # room for the final meta.json on a disk that fills up (writer.py)
PART_PREFIX = "part-"


def part_name(first: int, last: int) -> str:
    return f"{PART_PREFIX}{first:06d}-{last:06d}.parquet"


def parse_part_name(name: str) -> tuple[int, int] | None:
    if not (name.startswith(PART_PREFIX) and name.endswith(".parquet")):
        return None
    try:
        a, b = name[len(PART_PREFIX):-len(".parquet")].split("-")
        return int(a), int(b)
    except ValueError:
        return None
