"""What switching attention heads off changed, as the Attention page writes it beside P(IsNext): the
probability before and after, the change in percentage points, and for a sure answer the change in
log-odds (`probability_change`).

Standard library only; never streamlit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ProbabilityChange:
    """A probability before and after switching heads off, as the page writes them.

    Both are rounded to 0.1% first and the change is taken between the rounded numbers, so it
    always agrees with what the reader sees (99.8% -> 99.7% is '-0.1 points', never '-0.0')."""

    before: str  # '99.8%'
    after: str  # '99.7%'
    delta: str  # '-0.1 points'; '±0.0 points' when the rounded numbers are equal
    arrow: Literal["auto", "off"]  # 'off' for no change: no ↑ or ↓ beside '±0.0'
    # for a sure answer (under 1% or over 99% either side), the change in log-odds, which a probability
    # that close to 0 or 100% hides: 'log-odds 8.52 → 7.10 (−1.42)'; '' otherwise
    odds: str = ""


def _log_odds(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)  # a float32 softmax can round to exactly 0 or 1
    return math.log(p / (1 - p))


def probability_change(before: float, after: float) -> ProbabilityChange:
    """`before` and `after` (probabilities in [0, 1]) and the change between them in percentage points;
    where either is sure (under 1% or over 99%), the change in log-odds too."""
    b, a = float(f"{before * 100:.1f}"), float(f"{after * 100:.1f}")
    points = round(a - b, 1)
    odds = ""
    if not all(0.01 <= p <= 0.99 for p in (before, after)):
        lb, la = _log_odds(before), _log_odds(after)
        odds = f"log-odds {lb:.2f} → {la:.2f} ({la - lb:+.2f})".replace(" -", " −").replace("(-", "(−")
    if points == 0:
        return ProbabilityChange(f"{b:.1f}%", f"{a:.1f}%", "±0.0 points", "off", odds)
    return ProbabilityChange(f"{b:.1f}%", f"{a:.1f}%", f"{points:+.1f} points", "auto", odds)
