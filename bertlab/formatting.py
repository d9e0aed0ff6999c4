"""How numbers read to people: durations. Used by the CLI, the trainer's progress bar, the model
catalog and the pages alike, so a time reads the same everywhere.

Standard library only.
"""

from __future__ import annotations

import math


def format_duration(seconds: float | None) -> str:
    """5400 -> '1 h 30 min'; 95 -> '1 min 35 s'; 7 -> '7 s'; None or not finite -> '?'."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h} h {m:02d} min"
    if m:
        return f"{m} min {s:02d} s"
    return f"{s} s"
