"""Quantities as users type them: one parser each, in ckprof.units."""

import pytest

from ckprof.errors import UsageError
from ckprof.units import fmt_bytes, parse_duration, parse_interval, parse_size


@pytest.mark.parametrize("text,seconds", [("100ms", 0.1), ("2", 2.0), ("10Hz", 0.1), ("0.5s", 0.5)])
def test_interval(text, seconds):
    assert parse_interval(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text,seconds", [("3h", 10800), ("90min", 5400), ("2d", 172800), ("3600", 3600)])
def test_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text,n", [("4GiB", 4 << 30), ("512MB", 512_000_000), ("1000", 1000)])
def test_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize(
    "parse,text",
    [
        (parse_interval, "fast"),
        (parse_interval, "0"),
        (parse_duration, "3 weeks"),
        (parse_duration, "0h"),
        (parse_size, "lots"),
    ],
)
def test_bad_input_is_a_usage_error(parse, text):
    with pytest.raises(UsageError):
        parse(text)


def test_fmt_bytes_says_its_unit():
    assert fmt_bytes(1 << 30) == "1.00 GiB" and fmt_bytes(512) == "512 B"
