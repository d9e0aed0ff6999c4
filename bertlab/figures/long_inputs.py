"""Plotly figures for long inputs: a pattern's picture (which query-key pairs it computes), one head's
pooled attention on a long text, and cost against length beside n and n^2.

Takes `PatternPicture` (bertlab.patterns.describe), `LongAttention` (bertlab.attention) and
rows of a cost table; returns plotly figures. Nothing here runs a model. Never imports streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bertlab.attention import LongAttention
from bertlab.figures.answers import style_figure
from bertlab.patterns.describe import PatternPicture

# white only where nothing is computed: a global token's row in a 16-token tile is 1/16 of its pairs, still seen
SHARE_SCALE = [[0.0, "#ffffff"], [1e-6, "#9ecae1"], [0.25, "#4292c6"], [1.0, "#08306b"]]
PATTERN_NAMES = {"full": "full attention", "window": "sliding window", "bigbird": "BigBird blocks"}


def _token_axis(n: int, pool: int) -> list[int]:
    return [i * pool for i in range(n)]  # a tile's first token


def pattern_figure(picture: PatternPicture, title: str = "") -> go.Figure:
    """The T x T map of pairs a pattern computes, a tile's share of its pairs as its shade."""
    n = picture.density.shape[0]
    axis = _token_axis(n, picture.pool)
    fig = go.Figure(
        go.Heatmap(
            z=picture.density,
            x=axis,
            y=axis,
            colorscale=SHARE_SCALE,
            zmin=0,
            zmax=1,
            colorbar=dict(thickness=12, tickformat=".0%", title="pairs computed"),
            hovertemplate="queries from token %{y}<br>keys from token %{x}<br>%{z:.0%} of the pairs<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="query (the token reading)")
    fig.update_xaxes(title="key (the token read)")
    name = PATTERN_NAMES.get(picture.pattern, picture.pattern)
    tiles = f"; a tile is {picture.pool}x{picture.pool} tokens" if picture.pool > 1 else ""
    default = f"{name}, {picture.length:,} tokens: {picture.share:.1%} of the T² pairs{tiles}"
    return style_figure(fig, title or default, height=520)


def long_attention_figure(att: LongAttention, layer: int, head: int, log_scale: bool = True) -> go.Figure:
    """One head's pooled attention on a long text (layer and head from 0); log shading shows the faint band."""
    L, A = att.maps.shape[:2]
    if not (0 <= layer < L and 0 <= head < A):
        raise ValueError(f"layer {layer}, head {head} outside {L} layers of {A} heads")
    z = att.maps[layer, head]
    shown = np.log10(np.maximum(z, 1e-6)) if log_scale else z
    labels = [att.tile_label(i) for i in range(z.shape[0])]
    fig = go.Figure(
        go.Heatmap(
            z=shown,
            x=_token_axis(z.shape[1], att.pool),
            y=_token_axis(z.shape[0], att.pool),
            customdata=np.broadcast_to(np.array(labels, dtype=object)[:, None], z.shape),
            text=np.round(z, 4),
            colorscale="Viridis",
            zmin=-4 if log_scale else 0,
            zmax=0 if log_scale else float(z.max()),
            colorbar=dict(thickness=12, title="log10 weight" if log_scale else "weight"),
            hovertemplate="%{customdata}<br>keys from token %{x}<br>weight %{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title="query (a tile's first token)")
    fig.update_xaxes(title="key (a tile's first token)")
    tiles = f" (tiles of {att.pool} tokens)" if att.pool > 1 else ""
    return style_figure(fig, f"Layer {layer + 1}, head {head + 1}: {att.length:,} tokens{tiles}", height=520)


def cost_figure(rows: Sequence[dict], metric: str, unit: str, title: str, variant: str = "setting") -> go.Figure:
    """Cost against length on log-log axes, one line per variant, with n and n² through the first point.

    rows: dicts with `variant` (its name), "length" and `metric` (bench/results/long_inputs.csv's rows)."""
    fig = go.Figure()
    rows = [r for r in rows if isinstance(r.get(metric), int | float)]
    for v in dict.fromkeys(r[variant] for r in rows):
        pts = sorted((r["length"], r[metric]) for r in rows if r[variant] == v)
        if pts:
            fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=v))
    pts = sorted((r["length"], r[metric]) for r in rows)
    if pts:
        x0, y0 = min(pts)
        xs = sorted({p[0] for p in pts})
        for power, name in ((1, "∝ n"), (2, "∝ n²")):
            ys = [y0 * (x / x0) ** power for x in xs]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, line=dict(dash="dot", color="grey")))
    fig.update_xaxes(type="log", title="tokens in the input")
    fig.update_yaxes(type="log", title=unit)
    return style_figure(fig, title, height=420)
