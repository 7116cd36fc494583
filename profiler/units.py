"""Parsing and printing quantities with their units: one place, so every figure says its unit."""

from __future__ import annotations

import re

from .errors import UsageError

GIB = 1024**3  # bytes in a GiB: every GiB/s and J/GiB ckprof prints

_SIZE = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_interval(text: str) -> float:
    """'100ms', '0.5s', '2', '10Hz' → seconds."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|us|hz)?\s*", str(text), re.I)
    if not m:
        raise UsageError(f"bad interval {text!r}: use e.g. 100ms, 0.5s or 10Hz")
    v, unit = float(m.group(1)), (m.group(2) or "s").lower()
    seconds = {"ms": v / 1000, "us": v / 1e6, "s": v, "hz": (1 / v) if v else 0}[unit]
    if seconds <= 0:
        raise UsageError(f"bad interval {text!r}: must be more than 0")
    return seconds


_DURATION_S = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400, "days": 86400}


def parse_duration(text: str) -> float:
    """'3h', '90min', '2d', '3600' (seconds) → seconds: long spans such as an MTBF."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in {"", *_DURATION_S}:
        raise UsageError(f"bad duration {text!r}: use e.g. 3h, 90min, 2d or seconds")
    v = float(m.group(1)) * _DURATION_S.get(m.group(2).lower(), 1)
    if v <= 0:
        raise UsageError(f"bad duration {text!r}: must be more than 0")
    return v


def click_callback(parse):
    """A click option callback that parses with `parse` and reports a bad value as click does."""
    import click

    def callback(ctx, param, value):
        if value is None:
            return None
        try:
            return parse(value)
        except UsageError as e:
            raise click.BadParameter(str(e)) from None

    return callback


def parse_size(text: str) -> int:
    """'4GiB', '512MB', '1000' → bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _SIZE:
        raise UsageError(f"bad size {text!r}: use e.g. 4GiB, 512MiB or 1000000")
    n = float(m.group(1)) * _SIZE[m.group(2).lower()]
    if n == float("inf"):  # more digits than a double holds: int() would raise OverflowError
        raise UsageError(f"bad size {text!r}: too large")
    return int(n)


def fmt_bytes(n: float) -> str:
    """Binary units, as storage people read them: 1.00 GiB."""
    if n is None:
        return "n/a"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} PiB"


def fmt_seconds(s: float) -> str:
    if s is None:
        return "n/a"
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"
