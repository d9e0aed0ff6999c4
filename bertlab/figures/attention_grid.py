"""Every attention head at once: the layers x heads grid of small attention maps (`head_grid`) and the
colour scale that suits it (`suggested_grid_scale`).

Takes plain data (tokens, numpy arrays) and returns a plotly figure; nothing here runs the model. Each
tile draws a window of tokens (bertlab.figures.attention's `TokenWindow`), so a 512-token input stays a
few MB, not 128.

Imports numpy, plotly, bertlab.attention (head names), bertlab.figures.answers (the shared look) and
bertlab.figures.attention (the window and colour scale of weights); never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import plotly.graph_objects as go

from bertlab.attention import head_label
from bertlab.errors import InputError
from bertlab.figures.answers import GREY, plotly_text, style_figure
from bertlab.figures.attention import (
    HOVER_CELLS,
    TokenWindow,
    scale_top,
    title_room,
    titled,
    token_window,
    washed_out,
    weight_colorbar,
)

GridScale = Literal["shared", "per_head"]


def suggested_grid_scale(attentions: np.ndarray) -> GridScale:
    """'per_head' where one colour scale would leave most heads white, else 'shared'.

    On long inputs most heads spread their attention over hundreds of tokens (weights near 1/T)
    while a few still put almost all of it on one token; on one 0-to-strongest scale, the first
    kind all but vanish. The test: half the heads never reach PALE (a quarter) of the strongest
    weight. Heads switched off (all zeros) do not count. One head's heatmap: `heatmap_cap`.
    """
    att = np.asarray(attentions, dtype=float)
    if att.ndim != 4:
        raise InputError(f"attentions must be (L, A, T, T), got {att.shape}")
    peaks = np.nan_to_num(att).reshape(att.shape[0] * att.shape[1], -1).max(1, initial=0.0)
    peaks = peaks[peaks > 0]
    if not peaks.size:
        return "shared"
    return "per_head" if washed_out(float(np.median(peaks)), float(peaks.max())) else "shared"


def _tiles(
    att: np.ndarray, tokens: Sequence[str], off: set[tuple[int, int]], per_head: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """The L x A grid of (T, T) maps as one float32 array, a blank row and column between tiles and
    NaN for heads switched off; each map divided by its own strongest weight when `per_head`.
    With each cell's hover text ('L1-H2: the → cat') when the grid is small enough to carry it."""
    L, A, T, _ = att.shape
    step = T + 1
    z = np.full((L * step - 1, A * step - 1), np.nan, dtype=np.float32)
    custom = np.full(z.shape, "", dtype=object) if z.size <= HOVER_CELLS else None
    for layer in range(L):
        for head in range(A):
            r, c = layer * step, head * step
            if (layer, head) in off:
                continue
            tile = att[layer, head]
            peak = float(np.nanmax(tile)) if tile.size else 0.0
            z[r : r + T, c : c + T] = tile / peak if per_head and peak > 0 else tile
            if custom is None:
                continue
            name = head_label(layer, head)
            for i in range(T):
                for j in range(T):
                    weight = f" ({tile[i, j]:.2f})" if per_head else ""
                    custom[r + i, c + j] = f"{name}: {tokens[i]} → {tokens[j]}{weight}"
    return z, custom


def head_grid(
    attentions: np.ndarray,
    tokens: Sequence[str],
    off: Sequence[tuple[int, int]] = (),
    title: str = "",
    zmax: float | None = None,
    mark_uniform: bool = False,
    scale: GridScale = "shared",
    window: TokenWindow | None = None,
    removed: Sequence[tuple[int, int]] = (),
) -> go.Figure:
    """Every head at once: an L x A grid of small attention maps (small multiples).

    Drawn as one tiled heatmap (fast for BERT-base's 144 heads); gaps between tiles are blank and
    heads switched off show as empty tiles with a cross. Heads `removed` from the model's weights
    (a pruned model: BertConfig.pruned_heads) show as grey tiles marked "removed": gone, not off. Each tile shows the tokens of `window`
    (default: the first WINDOW_TOKENS), so a 512-token input stays a few MB, not 128.

    `scale` 'shared': one colour scale for every tile, so heads compare; `zmax`, `mark_uniform` as
    `attention_heatmap` (None: the strongest weight of any head). 'per_head': each tile from 0 to
    its own strongest weight, so heads that spread their attention stay visible next to one that
    puts it all on one token (see `suggested_grid_scale`). When the tiles are big enough, the first
    column of tiles names its rows' tokens and the last row its columns'.
    """
    att = np.asarray(attentions, dtype=float)
    per_head = _per_head_scale(att, scale, zmax, mark_uniform)
    window = window or token_window(att.shape[-1])
    att, tokens = window.maps(att), [plotly_text(t) for t in window.tokens(tokens)]  # ticks and hovers
    L, A, T, _ = att.shape
    off_set, removed_set = set(off) - set(removed), set(removed)
    z, custom = _tiles(att, tokens, off_set | removed_set, per_head)
    fig = go.Figure(_grid_heatmap(z, custom, per_head, zmax, window.total, mark_uniform))
    _cross_out(fig, off_set, T)
    _grey_out(fig, removed_set, T)
    labelled = T <= 24 and max(L, A) <= 6  # token names fit beside tiles this big
    _label_tiles(fig, tokens, L, A, labelled)
    # labelled tiles need ~18 px a token row; the page draws this grid full width
    cell = max(16 * T, 160) if labelled else max(70, min(150, 900 // max(A, 1)))
    style_figure(fig, titled(title, window), height=min(1400, 110 + cell * L + (60 if labelled else 0)))
    fig.update_layout(margin=dict(t=(title_room(title, window) or 10) + 24, l=110 if labelled else 10))
    return fig


def _per_head_scale(att: np.ndarray, scale: GridScale, zmax: float | None, mark_uniform: bool) -> bool:
    """Whether each tile gets a colour scale of its own ('per_head'), once the arguments are checked: (L, A,
    T, T) attentions, a known scale, and no shared-scale options beside a per-head one."""
    if att.ndim != 4:
        raise InputError(f"attentions must be (L, A, T, T), got {att.shape}")
    if scale not in ("shared", "per_head"):
        raise InputError(f"scale must be 'shared' or 'per_head', got {scale!r}")
    per_head = scale == "per_head"
    if per_head and (zmax is not None or mark_uniform):
        raise InputError("zmax and mark_uniform are for one shared scale: leave them out with scale='per_head'")
    return per_head


def _grid_heatmap(
    z: np.ndarray, custom: np.ndarray | None, per_head: bool, zmax: float | None, total: int, mark_uniform: bool
) -> go.Heatmap:
    """The tiles (`_tiles`) as one heatmap: each from 0 to its own strongest weight (`per_head`), else on one
    scale to `zmax` (None: the strongest weight of any head); `total`, the input's tokens, for the uniform
    weight's tick."""
    if per_head:
        bar = dict(title="share of<br>the head's<br>strongest", thickness=12, tickformat=".0%")
        colour: dict = dict(zmax=1.0, colorbar=bar)
        what = "%{z:.0%} of the head's strongest"
    else:
        top = zmax or scale_top(z, 1.0)  # one scale for every tile, so heads compare
        colour = dict(zmax=top, colorbar=weight_colorbar(top, total, mark_uniform))
        what = "%{z:.2f}"
    return go.Heatmap(
        z=z,
        colorscale="Blues",
        zmin=0,
        hovertemplate=f"%{{customdata}}: {what}<extra></extra>"
        if custom is not None
        else f"weight {what}<extra></extra>",
        hoverongaps=False,
        **({"customdata": custom} if custom is not None else {}),
        **colour,
    )


def _cross_out(fig: go.Figure, off: set[tuple[int, int]], tokens: int) -> None:
    """A cross over the tile of each head switched off (tiles `tokens` wide, a blank row and column apart)."""
    step = tokens + 1
    for layer, head in off:
        r, c = layer * step, head * step
        fig.add_shape(
            type="line",
            x0=c - 0.5,
            y0=r - 0.5,
            x1=c + tokens - 0.5,
            y1=r + tokens - 0.5,
            line=dict(color=GREY, width=1),
        )
        fig.add_shape(
            type="line",
            x0=c - 0.5,
            y0=r + tokens - 0.5,
            x1=c + tokens - 0.5,
            y1=r - 0.5,
            line=dict(color=GREY, width=1),
        )


def _grey_out(fig: go.Figure, removed: set[tuple[int, int]], tokens: int) -> None:
    """A grey tile marked "removed" for each head pruned from the weights (tiles `tokens` wide)."""
    step = tokens + 1
    for layer, head in removed:
        r, c = layer * step, head * step
        fig.add_shape(
            type="rect", x0=c - 0.5, y0=r - 0.5, x1=c + tokens - 0.5, y1=r + tokens - 0.5,
            fillcolor="rgba(127,127,127,0.35)", line=dict(width=0), layer="above",
        )  # fmt: skip
        fig.add_annotation(
            text="removed", x=c + (tokens - 1) / 2, y=r + (tokens - 1) / 2, xref="x", yref="y",
            showarrow=False, font=dict(size=10, color="#404040"),
        )  # fmt: skip


def _label_tiles(fig: go.Figure, tokens: Sequence[str], layers: int, heads: int, labelled: bool) -> None:
    """The grid's axes: with `labelled`, tokens beside every row of tiles and under every column, and the
    layers as notes; else a layer's name beside each row and a head's under each column. Heads are named
    above the grid too."""
    T = len(tokens)
    step = T + 1
    centres = [i * step + (T - 1) / 2 for i in range(max(layers, heads))]
    fig.update_xaxes(showgrid=False, zeroline=False, side="bottom")
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False)
    if not labelled:  # square tiles; labelled ones fill the width instead of leaving an empty band
        fig.update_yaxes(scaleanchor="x", constrain="domain")
    if labelled:  # tokens beside every row of tiles and under every column; layers and heads as notes
        fig.update_yaxes(
            tickvals=[layer * step + i for layer in range(layers) for i in range(T)],
            ticktext=list(tokens) * layers,
            tickfont_size=9,
        )
        fig.update_xaxes(
            tickvals=[head * step + j for head in range(heads) for j in range(T)],
            ticktext=list(tokens) * heads,
            tickfont_size=9,
            tickangle=-60,
        )
        for layer in range(layers):
            fig.add_annotation(
                text=f"layer {layer + 1}", x=-0.075, xref="paper", y=centres[layer], yref="y", xanchor="right",
                showarrow=False, textangle=-90, font=dict(size=11, color=GREY),
            )  # fmt: skip
    else:
        fig.update_xaxes(tickvals=centres[:heads], ticktext=[f"head {h + 1}" for h in range(heads)])
        fig.update_yaxes(tickvals=centres[:layers], ticktext=[f"layer {x + 1}" for x in range(layers)])
    for head in range(heads):  # head names above the grid, below the title
        fig.add_annotation(
            text=f"head {head + 1}", x=centres[head], xref="x", y=1.0, yref="paper", yanchor="bottom",
            showarrow=False, font=dict(size=11, color=GREY),
        )  # fmt: skip
