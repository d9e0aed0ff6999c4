"""bertlab/formatting.py: durations as people read them; text and errors safe on one terminal line."""

import math

from bertlab.formatting import format_duration, one_line, printable


def test_durations():
    assert format_duration(7) == "7 s"
    assert format_duration(95) == "1 min 35 s"
    assert format_duration(5400) == "1 h 30 min"
    assert format_duration(3900) == "1 h 05 min"
    assert format_duration(-3) == "0 s"
    assert format_duration(None) == "?" and format_duration(math.nan) == "?" and format_duration(math.inf) == "?"


def test_printable_escapes_control_and_format_characters():
    assert printable("plain text, tab\tkept") == "plain text, tab\tkept"
    assert printable("red \x1b[31mtext\x1b[0m\r\n") == "red \\x1b[31mtext\\x1b[0m\\x0d\\x0a"
    assert printable("a\u202eb\u200bc\x7f") == "a\\u202eb\\u200bc\\x7f"
    assert printable("café, naïve, 東京") == "café, naïve, 東京"


def test_one_line_folds_an_error_and_escapes_it():
    assert one_line(ValueError("bad value\n  on two lines\x1b[2J")) == "bad value on two lines\\x1b[2J"
    assert one_line(RuntimeError()) == "RuntimeError"
