"""Plotly figures of one attention head: its map (`attention_heatmap`) and line view (`attention_lines`),
bertviz's views, and what the other attention figures share: how much of a long input they draw
(`TokenWindow`), token ticks, and the colour scale of weights (`heatmap_cap`, `weight_colorbar`).
Every head at once is bertlab.figures.attention_grid's; head statistics bertlab.figures.head_stats';
the change beside P(IsNext) when heads are switched off bertlab.figures.head_ablation's.

Figures take plain data (tokens, numpy arrays, inference results) and return
`plotly.graph_objects.Figure`; nothing here runs the model. They stay small on 512-token inputs:
the line view draws a window of tokens, heatmaps send float32 and drop per-cell hover strings when
large; on long inputs one head's map caps its colour scale (`heatmap_cap`, said in
`heatmap_cap_note`). The shared look (colours, layout, `style_figure`) and the answers' figures
are bertlab.figures.answers'.

Imports numpy, plotly, bertlab.figures.answers and bertlab types; bertviz lazily; never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from bertlab.errors import InputError
from bertlab.figures.answers import BLUE, GREY, ORANGE, plotly_text, style_figure
from bertlab.inference import Inspection

# Long inputs: a 512-token grid of 16 heads was 128 MB of figure JSON and froze the browser.
WINDOW_TOKENS = 64  # most tokens the lines view and the head grid draw; more are too small to read
HOVER_CELLS = 20_000  # above this many cells a heatmap hovers with numbers, not a string per cell
MAX_TICK_LABELS = 40  # token names that fit along an axis without running into each other
SPECIAL_TOKENS = ("[CLS]", "[SEP]")
# On "Blues" a weight under a quarter of the scale's top is all but white: the grid's per-head scale
# and the heatmap's cap both start where what matters would be drawn that pale.
PALE = 0.25
CAP_PERCENTILE = 99  # the heatmap's cap on long inputs: all but the strongest 1% of cells keep their shade


@dataclass(frozen=True)
class TokenWindow:
    """The consecutive tokens a figure draws: positions `start` to `stop - 1` of `total`.

    Positions count from 0 ([CLS]), as everywhere in the app."""

    start: int
    stop: int
    total: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def is_whole(self) -> bool:
        return self.start == 0 and self.stop == self.total

    def tokens(self, tokens: Sequence[str]) -> list[str]:
        return list(tokens[self.start : self.stop])

    def maps(self, attentions: np.ndarray) -> np.ndarray:
        """(..., T, T) -> (..., n, n): the weights among the tokens shown."""
        return np.asarray(attentions)[..., self.start : self.stop, self.start : self.stop]

    def describe(self) -> str:
        """'tokens 0–63 of 512', or 'all 12 tokens'."""
        if self.is_whole:
            return f"all {self.total} tokens"
        return f"tokens {self.start}–{self.stop - 1} of {self.total}"


def token_window(total: int, start: int = 0, size: int = WINDOW_TOKENS) -> TokenWindow:
    """At most `size` consecutive tokens from `start` (moved back so that the window stays full)."""
    if total < 0 or size < 1:
        raise InputError(f"need total >= 0 tokens and a window of at least 1, got {total} and {size}")
    size = min(size, total)
    start = min(max(0, start), total - size)
    return TokenWindow(start, start + size, total)


def titled(title: str, window: TokenWindow) -> str:
    """The title, with the tokens drawn on a second line when they are not all of them."""
    if window.is_whole or not title:
        return title
    return f"{title}<br><span style='font-size:12px;color:{GREY}'>{window.describe()}</span>"


def title_room(title: str, window: TokenWindow) -> int:
    """Pixels above the plot for the title (and its second line)."""
    return 0 if not title else (40 if window.is_whole else 58)


def _tick_step(count: int, labels: int = MAX_TICK_LABELS) -> int:
    """A round step (1, 2, 5, 10, 20, 25, 50, ...) that names at most `labels` of `count` tokens."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500):
        if -(-count // step) <= labels:
            return step
    return -(-count // labels)


def _token_ticks(tokens: Sequence[str], first: int = 0) -> dict:
    """Tick labels for tokens at positions first, first + 1, ...

    Numeric axes with tick labels: categorical axes would merge repeated tokens ("the", "the").
    With more than MAX_TICK_LABELS tokens, every k-th token and each [CLS] / [SEP] is named, with
    its position, since the reader can no longer count along the axis."""
    T = len(tokens)
    if T <= MAX_TICK_LABELS:
        return dict(tickmode="array", tickvals=list(range(first, first + T)), ticktext=[plotly_text(t) for t in tokens])
    step = _tick_step(T)
    special: list[int] = []
    for i, t in enumerate(tokens):  # the first of two [SEP]s a few tokens apart: their names would overlap
        if t in SPECIAL_TOKENS and all(abs(i - s) * 2 >= step for s in special):
            special.append(i)
    regular = [i for i in range(0, T, step) if all(abs(i - s) * 2 >= step for s in special)]
    picked = sorted(set(regular) | set(special))
    return dict(
        tickmode="array",
        tickvals=[first + i for i in picked],
        ticktext=[f"{plotly_text(tokens[i])} ({first + i})" for i in picked],
    )


def washed_out(typical: float, strongest: float) -> bool:
    """Whether `typical` is drawn all but white on a colour scale from 0 to `strongest`."""
    return typical < PALE * strongest


def heatmap_cap(matrix: np.ndarray) -> float | None:
    """Where one head's colour scale should stop, or None to run it to the head's strongest weight.

    Each row of attention sums to 1, so on a 300-token input most weights are near 1/300 while one
    cell (often [CLS] or [SEP]) may hold 0.9: scaled to that cell, the map is white. Then the scale
    is capped at the head's CAP_PERCENTILE-th percentile weight, and the strongest cells share its
    darkest blue. Only when that weight would be pale (under PALE of the strongest, as
    `suggested_grid_scale` asks of heads) and above uniform (1/T): below it, the head's attention
    sits on so few cells that the uncapped scale shows them. Short inputs keep the uncapped scale
    (bertlab-mini's 21-token default: every head's 99th percentile is 0.45-1 of its strongest).

    Args:
        matrix: (T, T) float attention weights, rows summing to 1 (NaN read as 0).
    """
    m = np.nan_to_num(np.asarray(matrix, dtype=float))
    if not m.size:
        return None
    cap = float(np.percentile(m, CAP_PERCENTILE))
    return cap if 1 / m.shape[-1] < cap and washed_out(cap, float(m.max())) else None


def heatmap_cap_note(matrix: np.ndarray, tokens: int) -> str:
    """What a capped one-head heatmap's colours mean, as a caption ("" when `heatmap_cap` leaves the
    scale to the head's strongest weight)."""
    cap = heatmap_cap(matrix)
    if cap is None:
        return ""
    return (
        f"Colours stop at **{cap:.2g}**, the {CAP_PERCENTILE}th percentile of this head's weights: each "
        f"row shares 1 among {tokens} tokens, so most weights are near 1/{tokens}, and on a "
        f"scale up to its strongest ({float(np.nanmax(matrix)):.2f}) the map would be all but white. The cells "
        "above the cap all get the darkest blue; hover a cell for its weight."
    )


def weight_colorbar(zmax: float, tokens: int, mark_uniform: bool, capped: bool = False) -> dict:
    """A colour bar for attention weights; with `mark_uniform`, a tick at 1/n (n tokens), the
    weight every token gets from a head that looks everywhere alike. `capped`: the scale stops at
    `zmax` (see `heatmap_cap`): the title says so and the top tick names it ('≥ 0.019')."""
    if capped:
        title = f"weight, capped at the {CAP_PERCENTILE}th percentile"
        middle = (1 / tokens, f"uniform 1/{tokens}") if mark_uniform and 0 < 1 / tokens < 0.8 * zmax else None
        middle = middle or (zmax / 2, f"{zmax / 2:.2g}")
        return dict(
            title=dict(text=title, side="right"),
            thickness=12,
            tickmode="array",
            tickvals=[0.0, middle[0], zmax],
            ticktext=["0", middle[1], f"≥ {zmax:.2g}"],
        )
    bar: dict = dict(
        title=dict(text="weight", side="right"), thickness=12
    )  # beside the bar: on top it met the top tick
    if mark_uniform and tokens > 0 and 1 / tokens < zmax:
        ticks = [0.0, 1 / tokens] + [v for v in (0.25, 0.5, 0.75, 1.0) if v <= zmax and v - 1 / tokens > 0.08]
        bar |= dict(
            tickmode="array",
            tickvals=ticks,
            ticktext=["0", f"uniform 1/{tokens}"] + [f"{v:g}" for v in ticks[2:]],
        )
    return bar


def scale_top(values: np.ndarray, default: float) -> float:
    """Largest finite value (colour scales start at 0, so small differences do not look big)."""
    finite = np.asarray(values, dtype=float)[np.isfinite(values)]
    return float(finite.max()) if finite.size and finite.max() > 0 else default


def attention_heatmap(
    tokens: Sequence[str],
    matrix: np.ndarray,
    title: str = "",
    off: bool = False,
    zmax: float | None = None,
    mark_uniform: bool = False,
    window: TokenWindow | None = None,
) -> go.Figure:
    """One head's (T, T) attention: row = the token attending, column = the token attended to.

    `zmax` None scales the colours to this head's strongest weight (detail within one head), or on
    long inputs, where that leaves the map white, to the cap `heatmap_cap` picks (the colour bar
    says so; the hover always shows the true weight); give 1.0 where heads or training steps are
    compared, so the same colour means the same weight.
    `mark_uniform` labels 1/T on the colour bar: the weight of a head that has learned nothing.
    A `window` that is not the whole input is outlined: the tokens the figures beside this one show.

    Long inputs stay light: the weights travel as float32, and above HOVER_CELLS cells the hover
    names positions instead of carrying a 'the → cat' string for every cell."""
    m = np.asarray(matrix, dtype=float)
    T = len(tokens)
    if m.shape != (T, T):
        raise InputError(f"attention matrix has shape {m.shape} but there are {T} tokens")
    if T * T <= HOVER_CELLS:
        hover: dict = dict(
            customdata=[[f"{plotly_text(tokens[i])} → {plotly_text(tokens[j])}" for j in range(T)] for i in range(T)],
            hovertemplate="%{customdata}: %{z:.3f}<extra></extra>",
        )
    else:
        hover = dict(hovertemplate="token %{y} → token %{x}: %{z:.3f}<extra></extra>")
    cap = None if zmax else heatmap_cap(m)
    top = zmax or cap or (max(0.05, float(np.nanmax(m))) if m.size else 1.0)
    fig = go.Figure(
        go.Heatmap(
            z=m.astype(np.float32),  # float32: half the bytes of float64, and more digits than the hover shows
            x=np.arange(T),
            y=np.arange(T),
            colorscale="Blues",
            zmin=0,
            zmax=top,
            colorbar=weight_colorbar(top, T, mark_uniform, capped=cap is not None),
            **hover,
        )
    )
    side = max(340, min(760, 24 * T + 170))
    ticks = _token_ticks(tokens)
    fig.update_xaxes(**ticks, tickangle=-90, side="top")  # upright words never run into each other
    fig.update_yaxes(**ticks, autorange="reversed")
    if window is not None and not window.is_whole:
        lo, hi = window.start - 0.5, window.stop - 0.5
        fig.add_shape(type="rect", x0=lo, x1=hi, y0=lo, y1=hi, line=dict(color=ORANGE, width=2, dash="dot"))
    if off:
        fig.add_annotation(
            text="switched off", x=(T - 1) / 2, y=(T - 1) / 2, showarrow=False, font=dict(size=18, color=GREY)
        )
    style_figure(fig, title, height=side)
    longest = max((len(t) for t in tokens), default=1)
    fig.update_layout(margin=dict(t=(40 if title else 10) + 6 * longest))
    return fig


def attention_lines(
    tokens: Sequence[str],
    matrix: np.ndarray,
    title: str = "",
    colour: str = BLUE,
    threshold: float = 0.02,
    window: TokenWindow | None = None,
) -> go.Figure:
    """bertviz-style head view drawn with plotly: tokens left and right, a line for each weight.

    Works offline (no JavaScript from the web), unlike bertviz's own view. Line opacity and width
    follow the weight; weights under `threshold` are not drawn. Draws the tokens of `window`
    (default: the first WINDOW_TOKENS) and the weights among them; the hover still names the token
    each one attends to most in the whole input.
    """
    m = np.asarray(matrix, dtype=float)
    T = len(tokens)
    if m.shape != (T, T):
        raise InputError(f"attention matrix has shape {m.shape} but there are {T} tokens")
    window = window or token_window(T)
    first, shown = window.start, [plotly_text(t) for t in window.tokens(tokens)]
    n = len(shown)
    fig = go.Figure()
    bins = np.linspace(threshold, 1.0, 9)
    part = window.maps(m)
    for lo, hi in zip(bins[:-1], bins[1:], strict=False):
        xs: list[float | None] = []
        ys: list[float | None] = []
        sel = np.argwhere((part >= lo) & ((part < hi) | (hi == 1.0)))
        for i, j in sel:  # lines stop short of the words at x = 0 and 1
            xs += [0.08, 0.92, None]
            ys += [float(first + i), float(first + j), None]
        if xs:
            level = (lo + hi) / 2
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line=dict(color=colour, width=0.5 + 4 * level),
                    opacity=min(1.0, 0.15 + level),
                    hoverinfo="skip",
                    showlegend=False,
                )
            )
    rows = range(window.start, window.stop)
    strongest = m[window.start : window.stop].argmax(1) if n else np.zeros(0, dtype=int)
    hover = [
        f"{plotly_text(tokens[i])} ({i}) attends most to {plotly_text(tokens[j])} ({j}): {m[i, j]:.2f}"
        for i, j in zip(rows, strongest, strict=True)
    ]
    dense = n > 24  # smaller words and rows, so 64 tokens take about the height of the heatmap beside
    font = dict(size=10) if dense else None
    for x, side, text_hover in ((0, "middle left", hover), (1, "middle right", None)):
        fig.add_trace(
            go.Scatter(
                x=[x] * n,
                y=list(rows),
                mode="text",
                text=shown,
                textposition=side,
                textfont=font,
                hovertext=text_hover,
                hoverinfo="text" if text_hover else "skip",
                showlegend=False,
            )
        )
    fig.update_xaxes(visible=False, range=[-0.9, 1.9])
    # an explicit range: autorange left a band of empty space above long inputs
    fig.update_yaxes(visible=False, range=[window.stop - 0.5, window.start - 0.5])
    style_figure(fig, titled(title, window), height=max(260, (12 if dense else 22) * n + 60))
    if title and not window.is_whole:
        fig.update_layout(margin=dict(t=title_room(title, window)))
    return fig


# --------------------------------------------------------------------------------------
# bertviz (an extra: it loads its JavaScript from the web)
# --------------------------------------------------------------------------------------
def bertviz_html(inspection: Inspection, view: str = "head") -> str:
    """bertviz's head view or model view of an inspection, as an HTML string.

    bertviz loads d3, jQuery and require.js from a CDN, so offline the view stays blank; draw
    `attention_lines` / `head_grid` beside it.

    Raises:
        InputError: unknown view, or bertviz not installed.
    """
    if view not in ("head", "model"):
        raise InputError(f"view must be 'head' or 'model', got {view!r}")
    try:
        import torch
        from bertviz import head_view, model_view
    except ImportError as exc:
        raise InputError(
            "bertviz is not installed (pip install bertviz); the plain views above show the same attention"
        ) from exc
    att = tuple(torch.from_numpy(np.ascontiguousarray(a))[None] for a in inspection.attentions)  # L x (1, A, T, T)
    kwargs = dict(html_action="return")
    if inspection.text_b is not None and 1 in inspection.segment_ids:
        kwargs["sentence_b_start"] = inspection.segment_ids.index(1)
    fn = head_view if view == "head" else model_view
    out = fn(att, list(inspection.tokens), **kwargs)
    return out.data if hasattr(out, "data") else str(out)
