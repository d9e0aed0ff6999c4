"""Plotly figures of attention: one head's map and line view, the layers x heads grid, head
statistics, and bertviz's views.

Figures take plain data (tokens, numpy arrays, inference results) and return
`plotly.graph_objects.Figure`; nothing here runs the model. The shared look (colours, layout,
`style_figure`) and the answers' figures are bertlab.figures'.

Imports numpy, plotly, bertlab.figures and bertlab types; bertviz lazily; never streamlit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.attention import HEAD_STATS, HeadStats, head_label
from bertlab.errors import InputError
from bertlab.figures import BLUE, GREY, style_figure
from bertlab.inference import Inspection

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------
def _token_ticks(tokens: Sequence[str]) -> dict:
    # Numeric axes with tick labels: categorical axes would merge repeated tokens ("the", "the").
    return dict(tickmode="array", tickvals=list(range(len(tokens))), ticktext=list(tokens))


def weight_colorbar(zmax: float, tokens: int, mark_uniform: bool) -> dict:
    """A colour bar for attention weights; with `mark_uniform`, a tick at 1/n (n tokens), the
    weight every token gets from a head that looks everywhere alike."""
    bar: dict = dict(title="weight", thickness=12)
    if mark_uniform and tokens > 0 and 1 / tokens < zmax:
        ticks = [0.0, 1 / tokens] + [v for v in (0.25, 0.5, 0.75, 1.0) if v <= zmax and v - 1 / tokens > 0.08]
        bar |= dict(
            tickmode="array",
            tickvals=ticks,
            ticktext=["0", f"uniform 1/{tokens}"] + [f"{v:g}" for v in ticks[2:]],
        )
    return bar


def attention_heatmap(
    tokens: Sequence[str],
    matrix: np.ndarray,
    title: str = "",
    off: bool = False,
    zmax: float | None = None,
    mark_uniform: bool = False,
) -> go.Figure:
    """One head's (T, T) attention: row = the token attending, column = the token attended to.

    `zmax` None scales the colours to this head's strongest weight (detail within one head); give
    1.0 where heads or training steps are compared, so the same colour means the same weight.
    `mark_uniform` labels 1/T on the colour bar: the weight of a head that has learned nothing."""
    m = np.asarray(matrix, dtype=float)
    T = len(tokens)
    if m.shape != (T, T):
        raise InputError(f"attention matrix has shape {m.shape} but there are {T} tokens")
    hover = [[f"{tokens[i]} → {tokens[j]}" for j in range(T)] for i in range(T)]
    fig = go.Figure(
        go.Heatmap(
            z=m,
            x=list(range(T)),
            y=list(range(T)),
            customdata=hover,
            colorscale="Blues",
            zmin=0,
            zmax=zmax or (max(0.05, float(np.nanmax(m))) if m.size else 1),
            colorbar=weight_colorbar(zmax or 1.0, T, mark_uniform),
            hovertemplate="%{customdata}: %{z:.3f}<extra></extra>",
        )
    )
    side = max(340, min(760, 24 * T + 170))
    fig.update_xaxes(**_token_ticks(tokens), tickangle=-90, side="top")  # upright words never run into each other
    fig.update_yaxes(**_token_ticks(tokens), autorange="reversed")
    if off:
        fig.add_annotation(
            text="switched off", x=(T - 1) / 2, y=(T - 1) / 2, showarrow=False, font=dict(size=18, color=GREY)
        )
    style_figure(fig, title, height=side)
    fig.update_layout(margin=dict(t=(40 if title else 10) + 6 * max((len(t) for t in tokens), default=1)))
    return fig


def attention_lines(
    tokens: Sequence[str], matrix: np.ndarray, title: str = "", colour: str = BLUE, threshold: float = 0.02
) -> go.Figure:
    """bertviz-style head view drawn with plotly: tokens left and right, a line for each weight.

    Works offline (no JavaScript from the web), unlike bertviz's own view. Line opacity and width
    follow the weight; weights under `threshold` are not drawn.
    """
    m = np.asarray(matrix, dtype=float)
    T = len(tokens)
    if m.shape != (T, T):
        raise InputError(f"attention matrix has shape {m.shape} but there are {T} tokens")
    fig = go.Figure()
    bins = np.linspace(threshold, 1.0, 9)
    for lo, hi in zip(bins[:-1], bins[1:], strict=False):
        xs: list[float | None] = []
        ys: list[float | None] = []
        sel = np.argwhere((m >= lo) & ((m < hi) | (hi == 1.0)))
        for i, j in sel:  # lines stop short of the words at x = 0 and 1
            xs += [0.08, 0.92, None]
            ys += [float(i), float(j), None]
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
    strongest = m.argmax(1)
    hover = [f"{tokens[i]} attends most to {tokens[strongest[i]]} ({m[i, strongest[i]]:.2f})" for i in range(T)]
    fig.add_trace(
        go.Scatter(
            x=[0] * T,
            y=list(range(T)),
            mode="text",
            text=list(tokens),
            textposition="middle left",
            hovertext=hover,
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[1] * T,
            y=list(range(T)),
            mode="text",
            text=list(tokens),
            textposition="middle right",
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.update_xaxes(visible=False, range=[-0.9, 1.9])
    fig.update_yaxes(visible=False, autorange="reversed")
    return style_figure(fig, title, height=max(260, 22 * T + 60))


def _tiles(att: np.ndarray, tokens: Sequence[str], off: set[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The L x A grid of (T, T) maps as one array, a blank row and column between tiles and NaN
    for heads switched off, with each cell's hover text ('L1-H2: the → cat')."""
    L, A, T, _ = att.shape
    step = T + 1
    z = np.full((L * step - 1, A * step - 1), np.nan)
    custom = np.full(z.shape, "", dtype=object)
    for layer in range(L):
        for head in range(A):
            r, c = layer * step, head * step
            if (layer, head) in off:
                continue
            z[r : r + T, c : c + T] = att[layer, head]
            name = head_label(layer, head)
            for i in range(T):
                for j in range(T):
                    custom[r + i, c + j] = f"{name}: {tokens[i]} → {tokens[j]}"
    return z, custom


def head_grid(
    attentions: np.ndarray,
    tokens: Sequence[str],
    off: Sequence[tuple[int, int]] = (),
    title: str = "",
    zmax: float | None = None,
    mark_uniform: bool = False,
) -> go.Figure:
    """Every head at once: an L x A grid of small attention maps (small multiples).

    Drawn as one tiled heatmap (fast for BERT-base's 144 heads); gaps between tiles are blank and
    heads switched off show as empty tiles with a cross. `zmax`, `mark_uniform`: as
    `attention_heatmap` (None: the strongest weight of any head). When the tiles are big enough,
    the first column of tiles names its rows' tokens and the last row its columns'.
    """
    att = np.asarray(attentions, dtype=float)
    if att.ndim != 4:
        raise InputError(f"attentions must be (L, A, T, T), got {att.shape}")
    L, A, T, _ = att.shape
    step = T + 1
    off_set = set(off)
    z, custom = _tiles(att, tokens, off_set)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            customdata=custom,
            colorscale="Blues",
            zmin=0,
            zmax=zmax or _max_or(z, 1.0),  # one scale for every tile, so heads compare
            hovertemplate="%{customdata}: %{z:.2f}<extra></extra>",
            hoverongaps=False,
            colorbar=weight_colorbar(zmax or _max_or(z, 1.0), T, mark_uniform),
        )
    )
    for layer, head in off_set:  # a cross over each head switched off
        r, c = layer * step, head * step
        fig.add_shape(
            type="line", x0=c - 0.5, y0=r - 0.5, x1=c + T - 0.5, y1=r + T - 0.5, line=dict(color=GREY, width=1)
        )
        fig.add_shape(
            type="line", x0=c - 0.5, y0=r + T - 0.5, x1=c + T - 0.5, y1=r - 0.5, line=dict(color=GREY, width=1)
        )
    centres = [i * step + (T - 1) / 2 for i in range(max(L, A))]
    labelled = T <= 24 and max(L, A) <= 6  # token names fit beside tiles this big
    fig.update_xaxes(showgrid=False, zeroline=False, side="bottom")
    fig.update_yaxes(autorange="reversed", showgrid=False, zeroline=False)
    if not labelled:  # square tiles; labelled ones fill the width instead of leaving an empty band
        fig.update_yaxes(scaleanchor="x", constrain="domain")
    if labelled:  # tokens along the first tile column and under the last tile row; layers and heads as notes
        fig.update_yaxes(tickvals=list(range(T)), ticktext=list(tokens), tickfont_size=9)
        fig.update_xaxes(
            tickvals=[(A - 1) * step + j for j in range(T)], ticktext=list(tokens), tickfont_size=9, tickangle=-60
        )
        for layer in range(L):
            fig.add_annotation(
                text=f"layer {layer + 1}", x=-0.075, xref="paper", y=centres[layer], yref="y", xanchor="right",
                showarrow=False, textangle=-90, font=dict(size=11, color=GREY),
            )  # fmt: skip
    else:
        fig.update_xaxes(tickvals=centres[:A], ticktext=[f"head {h + 1}" for h in range(A)])
        fig.update_yaxes(tickvals=centres[:L], ticktext=[f"layer {x + 1}" for x in range(L)])
    for head in range(A):  # head names above the grid, below the title
        fig.add_annotation(
            text=f"head {head + 1}", x=centres[head], xref="x", y=1.0, yref="paper", yanchor="bottom",
            showarrow=False, font=dict(size=11, color=GREY),
        )  # fmt: skip
    # labelled tiles need ~18 px a token row; the page draws this grid full width
    cell = max(16 * T, 160) if labelled else max(70, min(150, 900 // max(A, 1)))
    style_figure(fig, title, height=min(1400, 110 + cell * L + (60 if labelled else 0)))
    fig.update_layout(margin=dict(t=(40 if title else 10) + 24, l=110 if labelled else 10))
    return fig


def stat_heatmap(stats: HeadStats, name: str, title: str = "") -> go.Figure:
    """One statistic for every head: an L x A heatmap with the value written in each cell."""
    if name not in stats.values:
        raise InputError(f"unknown statistic {name!r}; choose one of {', '.join(HEAD_STATS)}")
    v = stats.values[name]
    L, A = v.shape
    is_share = name != "entropy"
    text = [["off" if np.isnan(x) else (f"{x:.0%}" if is_share else f"{x:.2f}") for x in row] for row in v]
    fig = go.Figure(
        go.Heatmap(
            z=v,
            x=list(range(1, A + 1)),
            y=list(range(1, L + 1)),
            text=text,
            texttemplate="%{text}" if L * A <= 256 else None,
            colorscale="Viridis" if not is_share else "Blues",
            zmin=0,
            zmax=1 if is_share else _max_or(v, 1.0),
            colorbar=dict(thickness=12, tickformat=".0%" if is_share else ".1f"),
            hovertemplate="layer %{y}, head %{x}: %{text}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_xaxes(title="head", tickvals=list(range(1, A + 1)), side="top")
    fig.update_yaxes(title="layer", tickvals=list(range(1, L + 1)), autorange="reversed")
    return style_figure(fig, title or HEAD_STATS[name][0], height=max(220, 60 + 34 * L))


def stats_overview(stats: HeadStats, title: str = "") -> go.Figure:
    """All of Clark et al.'s statistics side by side, one small L x A map each."""
    names = list(HEAD_STATS)
    fig = make_subplots(
        rows=1, cols=len(names), subplot_titles=[HEAD_STATS[n][0] for n in names], horizontal_spacing=0.02
    )
    L, A = stats.shape
    for k, name in enumerate(names, 1):
        v = stats.values[name]
        share = name != "entropy"
        fig.add_trace(
            go.Heatmap(
                z=v,
                x=list(range(1, A + 1)),
                y=list(range(1, L + 1)),
                colorscale="Blues" if share else "Viridis",
                zmin=0,
                zmax=1 if share else _max_or(v, 1.0),
                # one bar for the shares (all 0-100%), one for the entropy (bits)
                showscale=(k == 1) or not share,
                colorbar=dict(
                    thickness=10,
                    len=1.0,
                    x=1.0 if share else 1.07,
                    title=dict(text="share" if share else "bits", side="top"),
                    tickformat=".0%" if share else ".1f",
                ),
                hovertemplate=f"{HEAD_STATS[name][0]}<br>layer %{{y}}, head %{{x}}: %{{z:.2f}}<extra></extra>",
                xgap=1,
                ygap=1,
            ),
            row=1,
            col=k,
        )
        fig.update_yaxes(
            autorange="reversed",
            showticklabels=(k == 1),
            row=1,
            col=k,
            tickvals=list(range(1, L + 1)),
            title_text="layer" if k == 1 else None,
        )
        # head numbers under every panel (every head when they fit, else first / middle / last)
        ticks = list(range(1, A + 1)) if A <= 8 else sorted({1, (A + 1) // 2, A})
        fig.update_xaxes(tickvals=ticks, tickfont_size=9, row=1, col=k, title_text="head" if k == 1 else None)
    fig.update_annotations(font_size=12)
    style_figure(fig, title, height=max(220, 110 + 22 * L))
    fig.update_layout(margin=dict(t=60 if title else 30, r=90))
    return fig


def _max_or(values: np.ndarray, default: float) -> float:
    """Largest finite value (colour scales start at 0, so small differences do not look big)."""
    finite = np.asarray(values, dtype=float)[np.isfinite(values)]
    return float(finite.max()) if finite.size and finite.max() > 0 else default


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
