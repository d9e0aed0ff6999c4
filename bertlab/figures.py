"""Plotly figures of what BERT does, and ways to export them.

Owns the plots the app draws (probability bars, attention heatmaps and line views, the layers x
heads grid, head statistics, learning curves), the colours and layout every figure shares, and
their export (HTML always; PNG/SVG through kaleido
when installed, else plotly's own camera button). Figures take plain data (tokens, numpy arrays,
inference results) and return `plotly.graph_objects.Figure`; nothing here runs the model. The
paper's diagrams (Figure 2, the architecture, a masked example) are bertlab.diagrams'.

Imports numpy, plotly and bertlab types; bertviz lazily; never streamlit.
"""

from __future__ import annotations

import importlib.util
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.attention import HEAD_STATS, HeadStats, head_label
from bertlab.errors import InputError
from bertlab.inference import Candidate, Inspection, LayerGuess

log = logging.getLogger(__name__)

# Colours: one meaning each, the same on every page.
BLUE = "#3b6fb6"
ORANGE = "#e8853d"
GREY = "#9aa0a6"
FONT = dict(family="Inter, Source Sans Pro, Helvetica, Arial, sans-serif", size=13)


def style_figure(fig: go.Figure, title: str = "", height: int | None = None, **kw: Any) -> go.Figure:
    """The look every figure shares: title top left, the app font, white background, tight margins."""
    fig.update_layout(
        # Titles sit at the very top of the figure, above any tick labels drawn on top.
        title=dict(
            text=title, x=0, xanchor="left", y=1, yref="container", yanchor="top", pad=dict(t=8), font=dict(size=15)
        )
        if title
        else None,
        font=FONT,
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
        plot_bgcolor="white",
        paper_bgcolor="white",
        **({"height": height} if height else {}),
        **kw,
    )
    return fig


# --------------------------------------------------------------------------------------
# Fill-mask
# --------------------------------------------------------------------------------------
def percent(p: float) -> str:
    """0.4213 -> '42%', 0.0123 -> '1.2%', 0.000123 -> '0.012%': enough digits to tell small ones apart."""
    if p >= 0.1:
        return f"{p:.0%}"
    if p >= 0.01:
        return f"{p:.1%}"
    if p >= 0.0001:
        return f"{p * 100:.2g}%"
    return "<0.01%"


def _tick_format(top: float) -> str:
    """Enough decimals that axis ticks differ, even for an untrained model's tiny probabilities."""
    for digits, limit in ((0, 0.1), (1, 0.01), (2, 0.001)):
        if top >= limit:
            return f".{digits}%"
    return ".3%"


def probability_bar(candidates: Sequence[Candidate], whole_words: bool = True, title: str = "") -> go.Figure:
    """Horizontal bars of the top-k answers for one [MASK], most likely on top."""
    labels = [(c.word if whole_words else c.token) for c in candidates]
    labels = _unique_labels(labels)
    scores = [c.score for c in candidates]
    fig = go.Figure(
        go.Bar(
            x=scores[::-1],
            y=labels[::-1],
            orientation="h",
            marker_color=BLUE,
            text=[percent(s) for s in scores[::-1]],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.3%}<extra></extra>",
        )
    )
    top = max(scores) if scores else 1.0
    fig.update_xaxes(
        range=[0, min(1.0, top * 1.2) or 1.0], tickformat=_tick_format(top), showgrid=True, gridcolor="#eee"
    )
    fig.update_yaxes(automargin=True)
    return style_figure(fig, title, height=60 + 28 * len(candidates))


def _unique_labels(labels: Sequence[str]) -> list[str]:
    """Plotly merges equal category labels; make repeats distinct with invisible padding."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen.get(label, 0)
        seen[label] = n + 1
        out.append(label + "\u200b" * n)
    return out


def layer_predictions_figure(guesses: Sequence[LayerGuess], whole_words: bool = True, title: str = "") -> go.Figure:
    """What the MLM head reads out of every layer at one position: rows = layers, columns = rank.

    Layer 0 is the embedding output; the top row is the last layer, i.e. the model's answer.
    Cell colour is the probability; cell text is the word.
    """
    if not guesses:
        raise InputError("no layer predictions to draw")
    k = max(len(g.candidates) for g in guesses)
    z = np.full((len(guesses), k), np.nan)
    text = [["" for _ in range(k)] for _ in guesses]
    for r, g in enumerate(guesses):
        for j, c in enumerate(g.candidates):
            z[r, j] = c.score
            text[r][j] = f"{c.word if whole_words else c.token}<br>{percent(c.score)}"
    ylabels = ["embeddings" if g.layer == 0 else f"layer {g.layer}" for g in guesses]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(1, k + 1)),
            y=list(range(len(guesses))),
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=12),
            colorscale="Blues",
            zmin=0,
            zmax=max(0.05, float(np.nanmax(z))) if np.isfinite(z).any() else 1,
            colorbar=dict(title="p", tickformat=".0%", thickness=12),
            hovertemplate="%{customdata}, rank %{x}: %{text}<extra></extra>",
            customdata=[[ylabels[r]] * k for r in range(len(guesses))],
            xgap=2,
            ygap=2,
        )
    )
    fig.update_xaxes(tickvals=list(range(1, k + 1)), ticktext=[f"#{r}" for r in range(1, k + 1)], side="top")
    fig.update_yaxes(tickvals=list(range(len(guesses))), ticktext=ylabels)
    style_figure(fig, title, height=100 + 46 * len(guesses))
    fig.update_layout(margin=dict(t=70 if title else 30))
    return fig


def answer_by_layer(guesses: Sequence[LayerGuess], token_id: int) -> list[float | None]:
    """The probability each layer gives `token_id` (None where it is not in that layer's top-k)."""
    out: list[float | None] = []
    for g in guesses:
        match = [c.score for c in g.candidates if c.token_id == token_id]
        out.append(match[0] if match else None)
    return out


def answer_trajectory_figure(guesses: Sequence[LayerGuess], token_id: int, word: str) -> go.Figure:
    """Line: the final answer's probability at every layer (0 where it is outside the top-k)."""
    probs = answer_by_layer(guesses, token_id)
    x = [g.layer for g in guesses]
    y = [p if p is not None else 0.0 for p in probs]
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=y,
            mode="lines+markers",
            line=dict(color=ORANGE, width=3),
            marker=dict(size=9),
            hovertemplate="layer %{x}: %{y:.2%}<extra></extra>",
            name=word,
        )
    )
    fig.update_xaxes(title="layer (0 = embeddings)", tickvals=x, showgrid=True, gridcolor="#eee", zeroline=False)
    fig.update_yaxes(
        title=f"P({word})",
        tickformat=_tick_format(max(y) if y else 1.0),
        rangemode="tozero",
        showgrid=True,
        gridcolor="#eee",
    )
    return style_figure(fig, f"How sure each layer is of the final answer '{word}'", height=300)


def answer_change_figure(changes: Sequence[Any], focus: str | None = None, title: str = "") -> go.Figure:
    """One row per answer word (from `explore.answer_changes`): a dot at its probability with all
    heads, a dot with the heads off, an arrow from one to the other, so what happened to each word
    reads along its own row; the `focus` word in bold."""
    fig = go.Figure()
    words = [c.word for c in changes]
    labels = [f"<b>{w}</b>" if w == focus else w for w in _unique_labels(words)]
    for row, c in enumerate(changes):
        if c.before == c.before and c.after == c.after:  # both known (NaN != NaN)
            fig.add_annotation(
                x=c.after, y=row, ax=c.before, ay=row, xref="x", yref="y", axref="x", ayref="y",
                showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1.5, arrowcolor=GREY, text="",
            )  # fmt: skip
    for key, name, colour in (("before", "all heads", BLUE), ("after", "heads off", ORANGE)):
        values = [getattr(c, key) for c in changes]
        fig.add_trace(
            go.Scatter(
                x=[v if v == v else None for v in values],
                y=list(range(len(changes))),
                mode="markers+text",
                name=name,
                marker=dict(color=colour, size=11),
                text=[percent(v) if v == v else "" for v in values],
                textposition="top center",
                textfont=dict(size=11, color=colour),
                hovertemplate="%{y}: %{x:.2%}<extra>" + name + "</extra>",
            )
        )
    top = max([0.0] + [v for c in changes for v in (c.before, c.after) if v == v])
    fig.update_xaxes(
        title="probability", tickformat=_tick_format(top), range=[0, top * 1.12 + 1e-9], showgrid=True, gridcolor="#eee"
    )
    fig.update_yaxes(tickvals=list(range(len(changes))), ticktext=labels, autorange="reversed", tickfont=dict(size=14))
    style_figure(fig, title, height=max(220, 90 + 38 * len(changes)))
    fig.update_layout(legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"), margin=dict(t=60))
    return fig


def nsp_figure(is_next_prob: float, title: str = "") -> go.Figure:
    """One stacked bar: P(IsNext) and P(NotNext)."""
    fig = go.Figure()
    for label, value, colour in (("IsNext", is_next_prob, BLUE), ("NotNext", 1 - is_next_prob, ORANGE)):
        fig.add_bar(
            x=[value],
            y=[""],
            orientation="h",
            name=label,
            marker_color=colour,
            text=[f"{label} {value:.1%}"],
            textposition="inside",
            insidetextanchor="middle",
            hovertemplate=f"{label}: %{{x:.2%}}<extra></extra>",
        )
    fig.update_layout(barmode="stack", showlegend=False)
    fig.update_xaxes(range=[0, 1], tickformat=".0%", showgrid=False)
    fig.update_yaxes(visible=False)
    return style_figure(fig, title, height=110)


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
# Export
# --------------------------------------------------------------------------------------
def image_export_available() -> bool:
    """True when kaleido is installed, so PNG/SVG files can be written on the server."""
    return importlib.util.find_spec("kaleido") is not None


def to_html(fig: go.Figure) -> str:
    """A standalone HTML file of the figure with plotly.js inlined, so it opens offline."""
    return fig.to_html(full_html=True, include_plotlyjs=True)


def to_image(fig: go.Figure, fmt: str = "png", scale: float = 2.0) -> bytes:
    """PNG or SVG bytes of the figure through kaleido.

    Raises:
        InputError: unknown format, or kaleido not installed (use the camera button or HTML).
    """
    if fmt not in ("png", "svg"):
        raise InputError(f"image format must be 'png' or 'svg', got {fmt!r}")
    if not image_export_available():
        raise InputError(
            "PNG/SVG export needs the kaleido package (pip install kaleido); "
            "use the camera button on the figure, or download HTML"
        )
    return fig.to_image(format=fmt, scale=scale)


def plotly_config(filename: str = "bertlab-figure", fmt: str = "png") -> dict:
    """Config for plotly's mode bar: its camera button saves `fmt` ('png' or 'svg') in the browser."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": fmt if fmt in ("png", "svg") else "png", "filename": filename, "scale": 2},
    }


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


# --------------------------------------------------------------------------------------
# Learning curves (Watch it learn, the Home page's model card)
# --------------------------------------------------------------------------------------
def learning_curve_figure(curve: Sequence[dict], marker_step: int | None = None, title: str = "") -> go.Figure:
    """Held-out masked-LM and NSP accuracy against input tokens seen (log axis), with a vertical
    line at `marker_step` (the snapshot being looked at) and a dotted one where each later
    pretraining stage (a run continued from the model so far) begins."""
    pts = [c for c in curve if c.get("tokens")]
    if not pts:
        raise InputError("no held-out evaluations to draw")
    fig = go.Figure()
    x = [c["tokens"] for c in pts]
    hover = "step %{customdata:,}<br>%{x:.3s} tokens<br>%{y:.1%}<extra>%{fullData.name}</extra>"
    steps = [c["step"] for c in pts]
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[c.get("mlm_acc") for c in pts],
            name="masked-LM accuracy",
            mode="lines+markers",
            line=dict(color=BLUE, width=2),
            marker=dict(size=5),
            customdata=steps,
            hovertemplate=hover,
        )
    )
    if any(c.get("nsp_acc") is not None for c in pts):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[c.get("nsp_acc") for c in pts],
                name="NSP accuracy",
                mode="lines+markers",
                line=dict(color=ORANGE, width=2),
                marker=dict(size=5),
                customdata=steps,
                hovertemplate=hover,
            )
        )
    for prev, c in zip(pts, pts[1:], strict=False):  # where a continued run (a new stage) took over
        if c.get("stage", 1) != prev.get("stage", 1):
            fig.add_vline(x=c["tokens"], line=dict(color=GREY, dash="dot"))
            fig.add_annotation(  # by hand: on a log axis an annotation's x is log10 of the value
                x=math.log10(c["tokens"]), y=1, yref="paper", text=f"stage {c['stage']} starts", showarrow=False,
                xanchor="right", yanchor="bottom", font=dict(size=11, color="#5f6368"),
            )  # fmt: skip
    if marker_step is not None:
        at = min(pts, key=lambda c: abs(c["step"] - marker_step))
        fig.add_vline(x=at["tokens"], line=dict(color=GREY, dash="dash"))
        fig.add_annotation(
            x=math.log10(at["tokens"]), y=0, yref="paper", text=f"step {marker_step:,}", showarrow=False,
            xanchor="right", yanchor="bottom", font=dict(size=11, color="#5f6368"),
        )  # fmt: skip
    fig.update_xaxes(type="log", title="input tokens seen (log scale)", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(title="held-out accuracy", tickformat=".0%", rangemode="tozero", showgrid=True, gridcolor="#eee")
    return style_figure(fig, title, height=340, legend=dict(orientation="h", y=-0.3))
