"""bertlab/formatting.py: durations as people read them."""

import math

from bertlab.formatting import format_duration


def test_durations():
    assert format_duration(7) == "7 s"
    assert format_duration(95) == "1 min 35 s"
    assert format_duration(5400) == "1 h 30 min"
    assert format_duration(3900) == "1 h 05 min"
    assert format_duration(-3) == "0 s"
    assert format_duration(None) == "?" and format_duration(math.nan) == "?" and format_duration(math.inf) == "?"
