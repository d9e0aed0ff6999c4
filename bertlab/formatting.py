"""How numbers and text read to people: durations, counts as people write them ('40M'), text or an
error made safe for one line of a terminal, and text shortened to fit a label. Used by the CLI, the
trainer's progress bar, run logs, the model catalog and the pages alike, so a time or an error reads the
same everywhere.

Standard library only.
"""

from __future__ import annotations

import math
import unicodedata


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


def parse_count(text: str) -> int:
    """'40M', '500k', '2.5e6' or '4000000' -> the integer. Raises ValueError on anything else."""
    text = text.strip()
    scale = {"k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if scale != 1 else text) * scale)


def printable(text: str) -> str:
    """`text` safe to echo on a terminal: control and format characters (Unicode categories Cc
    and Cf: escape sequences, carriage returns, bidi overrides, zero-width marks) but tab are
    shown as `\\x1b` / `\\u202e` escapes instead of acting on the terminal."""
    out = []
    for ch in text:
        if ch != "\t" and unicodedata.category(ch) in ("Cc", "Cf"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def one_line(exc: BaseException) -> str:
    """An error's message on one line (white space folded), safe to print: its type when it has none."""
    return printable(" ".join(str(exc).split()) or type(exc).__name__)


def shortened(text: str, limit: int) -> str:
    """`text` cut at a word boundary to at most about `limit` characters, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:") + "…"


def human_bytes(n: float) -> str:
    """A size in bytes for people: "812 KiB", "1.5 GiB"."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit in ("bytes", "KiB") or abs(n) >= 100 else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # not reached
