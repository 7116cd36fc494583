"""nvme-cli output that is JSON in form but not readable as JSON for another reason than its syntax
(found by the type checker: the error path read `.msg`, which only a JSONDecodeError has)."""

import pytest

from ckprof.collectors.nvme_parse import ParseError, load_json_or_text


def test_json_with_an_integer_past_pythons_digit_limit_is_a_parse_error():
    # CPython refuses to read an integer of more than 4300 digits (sys.set_int_max_str_digits):
    # a ValueError that is not a JSONDecodeError. It must be the one-line ParseError, not a crash.
    text = '{"data_units_written": ' + "9" * 5000 + "}"
    with pytest.raises(ParseError, match="unreadable JSON"):
        load_json_or_text(text)


def test_json_syntax_error_still_says_where():
    with pytest.raises(ParseError, match=r"unreadable JSON \(.* at line 2\)"):
        load_json_or_text('{"a": 1,\n "b": }')
