"""Plotly figures of what BERT does, and ways to export them.

Owns every picture the app draws (probability bars, attention heatmaps and line views, the
layers x heads grid, head statistics, the paper's Figure 2 input diagram, the architecture
picture, the masked pretraining example) and their export (HTML always; PNG/SVG through kaleido
when installed, else plotly's own camera button). Figures take plain data (tokens, numpy arrays,
inference results) and return `plotly.graph_objects.Figure`; nothing here runs the model.

Imports numpy, plotly and bertlab types; bertviz lazily; never streamlit.
"""

from __future__ import annotations

import html
import importlib.util
import logging
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.attention import HEAD_STATS, HeadStats, head_label
from bertlab.config import BertConfig
from bertlab.errors import InputError
from bertlab.inference import Candidate, Inspection, LayerGuess

log = logging.getLogger(__name__)

# Colours: one meaning each, the same on every page.
BLUE = "#3b6fb6"
ORANGE = "#e8853d"
GREY = "#9aa0a6"
TOKEN_YELLOW = "#fde9a9"  # Figure 2: token embeddings
SEGMENT_GREEN = "#cfe8c4"  # Figure 2: segment embeddings
POSITION_GREY = "#e3e3e3"  # Figure 2: position embeddings
SEGMENT_A = "#e8f0fb"
SEGMENT_B = "#fdeede"
KIND_COLOURS = {"mask": "#d64545", "random": "#e8a33d", "keep": "#3b8f5a"}
KIND_LABELS = {"mask": "→ [MASK] (80%)", "random": "→ random token (10%)", "keep": "kept as is (10%)"}
FONT = dict(family="Inter, Source Sans Pro, Helvetica, Arial, sans-serif", size=13)


def _layout(fig: go.Figure, title: str = "", height: int | None = None, **kw) -> go.Figure:
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
    return _layout(fig, title, height=60 + 28 * len(candidates))


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
    _layout(fig, title, height=100 + 46 * len(guesses))
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
    return _layout(fig, f"How sure each layer is of the final answer '{word}'", height=300)


def comparison_bar(rows: Sequence[dict], title: str = "") -> go.Figure:
    """Grouped bars: probability with all heads vs with some heads off (from `AblationComparison.fill_rows`)."""
    labels = _unique_labels([r["token"] for r in rows])
    fig = go.Figure()
    for key, colour in (("all heads", BLUE), ("heads off", ORANGE)):
        values = [0.0 if np.isnan(r[key]) else r[key] for r in rows]
        fig.add_bar(
            x=labels,
            y=values,
            name=key,
            marker_color=colour,
            text=["" if np.isnan(r[key]) else percent(r[key]) for r in rows],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{x}: %{y:.2%}<extra>" + key + "</extra>",
        )
    top = max([0.0] + [r[k] for r in rows for k in ("all heads", "heads off") if not np.isnan(r[k])])
    fig.update_yaxes(tickformat=_tick_format(top), rangemode="tozero", showgrid=True, gridcolor="#eee")
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"))
    _layout(fig, title, height=360)
    fig.update_layout(margin=dict(t=70))
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
    return _layout(fig, title, height=110)


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------
def _token_ticks(tokens: Sequence[str]) -> dict:
    # Numeric axes with tick labels: categorical axes would merge repeated tokens ("the", "the").
    return dict(tickmode="array", tickvals=list(range(len(tokens))), ticktext=list(tokens))


def attention_heatmap(tokens: Sequence[str], matrix: np.ndarray, title: str = "", off: bool = False) -> go.Figure:
    """One head's (T, T) attention: row = the token attending, column = the token attended to."""
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
            zmax=max(0.05, float(np.nanmax(m))) if m.size else 1,  # darkest = this head's strongest weight
            colorbar=dict(title="weight", thickness=12),
            hovertemplate="%{customdata}: %{z:.3f}<extra></extra>",
        )
    )
    side = max(340, min(760, 24 * T + 170))
    fig.update_xaxes(**_token_ticks(tokens), tickangle=-60, side="top")
    fig.update_yaxes(**_token_ticks(tokens), autorange="reversed")
    if off:
        fig.add_annotation(
            text="switched off", x=(T - 1) / 2, y=(T - 1) / 2, showarrow=False, font=dict(size=18, color=GREY)
        )
    _layout(fig, title, height=side)
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
        for i, j in sel:
            xs += [0.0, 1.0, None]
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
    return _layout(fig, title, height=max(260, 22 * T + 60))


def head_grid(
    attentions: np.ndarray,
    tokens: Sequence[str],
    off: Sequence[tuple[int, int]] = (),
    title: str = "",
) -> go.Figure:
    """Every head at once: an L x A grid of small attention maps (small multiples).

    Drawn as one tiled heatmap (fast for BERT-base's 144 heads); gaps between tiles are blank and
    heads switched off show as empty tiles with a cross.
    """
    att = np.asarray(attentions, dtype=float)
    if att.ndim != 4:
        raise InputError(f"attentions must be (L, A, T, T), got {att.shape}")
    L, A, T, _ = att.shape
    step = T + 1
    z = np.full((L * step - 1, A * step - 1), np.nan)
    custom = np.full(z.shape, "", dtype=object)
    off_set = set(off)
    for layer in range(L):
        for head in range(A):
            r, c = layer * step, head * step
            if (layer, head) in off_set:
                continue
            z[r : r + T, c : c + T] = att[layer, head]
            name = head_label(layer, head)
            for i in range(T):
                for j in range(T):
                    custom[r + i, c + j] = f"{name}: {tokens[i]} → {tokens[j]}"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            customdata=custom,
            colorscale="Blues",
            zmin=0,
            zmax=_max_or(z, 1.0),  # one scale for every tile, so heads compare
            hovertemplate="%{customdata}: %{z:.2f}<extra></extra>",
            hoverongaps=False,
            colorbar=dict(title="weight", thickness=12),
        )
    )
    for layer, head in off_set:
        r, c = layer * step, head * step
        fig.add_shape(
            type="line", x0=c - 0.5, y0=r - 0.5, x1=c + T - 0.5, y1=r + T - 0.5, line=dict(color=GREY, width=1)
        )
        fig.add_shape(
            type="line", x0=c - 0.5, y0=r + T - 0.5, x1=c + T - 0.5, y1=r - 0.5, line=dict(color=GREY, width=1)
        )
    centres = [i * step + (T - 1) / 2 for i in range(max(L, A))]
    fig.update_xaxes(
        tickvals=centres[:A], ticktext=[f"head {h + 1}" for h in range(A)], side="top", showgrid=False, zeroline=False
    )
    fig.update_yaxes(
        tickvals=centres[:L],
        ticktext=[f"layer {x + 1}" for x in range(L)],
        autorange="reversed",
        showgrid=False,
        zeroline=False,
        scaleanchor="x",
    )
    cell = max(70, min(150, 900 // max(A, 1)))
    return _layout(fig, title, height=min(1400, 90 + cell * L))


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
    return _layout(fig, title or HEAD_STATS[name][0], height=max(220, 60 + 34 * L))


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
                showscale=False,
                hovertemplate=f"{HEAD_STATS[name][0]}<br>layer %{{y}}, head %{{x}}: %{{z:.2f}}<extra></extra>",
                xgap=1,
                ygap=1,
            ),
            row=1,
            col=k,
        )
        fig.update_yaxes(autorange="reversed", showticklabels=(k == 1), row=1, col=k, tickvals=list(range(1, L + 1)),
                         title_text="layer" if k == 1 else None)
        # head numbers under every panel (every head when they fit, else first / middle / last)
        ticks = list(range(1, A + 1)) if A <= 8 else sorted({1, (A + 1) // 2, A})
        fig.update_xaxes(tickvals=ticks, tickfont_size=9, row=1, col=k, title_text="head" if k == 1 else None)
    fig.update_annotations(font_size=12)
    _layout(fig, title, height=max(200, 100 + 22 * L))
    fig.update_layout(margin=dict(t=60 if title else 30))
    return fig


def _max_or(values: np.ndarray, default: float) -> float:
    """Largest finite value (colour scales start at 0, so small differences do not look big)."""
    finite = np.asarray(values, dtype=float)[np.isfinite(values)]
    return float(finite.max()) if finite.size and finite.max() > 0 else default


# --------------------------------------------------------------------------------------
# The input: the paper's Figure 2
# --------------------------------------------------------------------------------------
def input_embeddings_figure(
    tokens: Sequence[str], segment_ids: Sequence[int], per_row: int = 16, title: str = ""
) -> go.Figure:
    """BERT's input as in the paper's Figure 2: token + segment + position embeddings per token.

    Long inputs wrap onto several bands of `per_row` tokens.
    """
    T = len(tokens)
    if len(segment_ids) != T:
        raise InputError(f"{T} tokens but {len(segment_ids)} segment ids")
    bands = max(1, -(-T // per_row))
    cols = min(T, per_row)
    row_h, gap, band_gap = 1.0, 0.55, 1.0
    band_height = 4 * row_h + 3 * gap + band_gap
    w, xgap = 1.0, 0.14
    fig = go.Figure()
    shapes, notes = [], []
    labels = ("Input", "Token<br>Embeddings", "Segment<br>Embeddings", "Position<br>Embeddings")
    fills = ("white", TOKEN_YELLOW, SEGMENT_GREEN, POSITION_GREY)
    for band in range(bands):
        top = -band * band_height
        for r, label in enumerate(labels):
            y = top - r * (row_h + gap)
            notes.append(
                dict(
                    x=-0.25,
                    y=y - row_h / 2,
                    text=f"<b>{label}</b>",
                    xanchor="right",
                    showarrow=False,
                    font=dict(size=12),
                )
            )
        for k in range(cols):
            i = band * per_row + k
            if i >= T:
                break
            x0 = k * (w + xgap)
            tok, seg = tokens[i], segment_ids[i]
            seg_name = "A" if seg == 0 else "B"
            texts = (
                html.escape(tok),
                f"E<sub>{html.escape(tok)}</sub>",
                f"E<sub>{seg_name}</sub>",
                f"E<sub>{i}</sub>",
            )
            for r, (fill, text) in enumerate(zip(fills, texts, strict=False)):
                y1 = top - r * (row_h + gap)
                border = "#555" if r else ("#c0392b" if tok in ("[CLS]", "[SEP]") else "#555")
                shapes.append(
                    dict(
                        type="rect",
                        x0=x0,
                        x1=x0 + w,
                        y0=y1 - row_h,
                        y1=y1,
                        fillcolor=fill,
                        line=dict(color=border, width=1.2),
                        layer="below",
                    )
                )
                size = 12 if len(tok) <= 7 else (10 if len(tok) <= 10 else 8)
                notes.append(dict(x=x0 + w / 2, y=y1 - row_h / 2, text=text, showarrow=False, font=dict(size=size)))
                if r >= 2:
                    notes.append(
                        dict(x=x0 + w / 2, y=y1 + gap / 2, text="<b>+</b>", showarrow=False, font=dict(size=14))
                    )
    fig.update_layout(shapes=shapes, annotations=notes)
    fig.add_trace(
        go.Scatter(
            x=[-2.2, cols * (w + xgap)],
            y=[0.2, -bands * band_height + band_gap],
            mode="markers",
            marker=dict(opacity=0),
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.update_xaxes(visible=False, range=[-2.3, cols * (w + xgap) + 0.05])
    fig.update_yaxes(visible=False, range=[-bands * band_height + band_gap - 0.1, 0.3])
    return _layout(fig, title, height=int(40 + 210 * bands))


# --------------------------------------------------------------------------------------
# The architecture
# --------------------------------------------------------------------------------------
def architecture_figure(config: BertConfig, title: str = "") -> go.Figure:
    """A picture of BERT for this config, bottom to top as in the paper's Figure 1: input tokens ->
    embeddings -> L encoder layers -> outputs C, T1..Tn -> the NSP and masked-LM heads."""
    c = config
    fig = go.Figure()
    shapes, notes = [], []

    def box(x0, y0, x1, y1, fill, text, size=11, line="#555", colour="#222"):
        shapes.append(
            dict(
                type="rect", x0=x0, y0=y0, x1=x1, y1=y1, fillcolor=fill, line=dict(color=line, width=1.2), layer="below"
            )
        )
        if text:
            notes.append(
                dict(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=text, showarrow=False, font=dict(size=size, color=colour))
            )

    def arrow(x, y0, y1):
        notes.append(
            dict(
                x=x,
                y=y1,
                ax=x,
                ay=y0,
                xref="x",
                yref="y",
                axref="x",
                ayref="y",
                text="",
                showarrow=True,
                arrowhead=2,
                arrowsize=1,
                arrowwidth=1.4,
                arrowcolor="#555",
            )
        )

    inputs = ["[CLS]", "the", "cat", "[MASK]", "[SEP]", "it", "slept", "[SEP]"]
    n, span = len(inputs), 10.0
    xs = [0.55 + i * (span - 1.1) / (n - 1) for i in range(n)]
    for x, t in zip(xs, inputs, strict=False):
        special = t in ("[CLS]", "[SEP]", "[MASK]")
        box(x - 0.56, 0, x + 0.56, 0.6, "#f1f1f1" if special else "white", t, size=10)
    notes.append(
        dict(
            x=span / 2,
            y=-0.35,
            text="input: [CLS] sentence A [SEP] sentence B [SEP]",
            showarrow=False,
            font=dict(size=10, color="#666"),
        )
    )
    arrow(span / 2, 0.65, 1.05)
    box(0, 1.1, span, 1.8, TOKEN_YELLOW, "<b>Embeddings</b>: token + segment + position", size=11)
    y = 2.35
    shown = list(range(c.num_layers)) if c.num_layers <= 4 else [0, 1, None, c.num_layers - 1]
    for idx in shown:
        arrow(span / 2, y - 0.5, y - 0.03)
        if idx is None:
            notes.append(
                dict(
                    x=span / 2,
                    y=y + 0.2,
                    text=f"⋮ {c.num_layers - 3} more layers ⋮",
                    showarrow=False,
                    font=dict(size=11, color="#555"),
                )
            )
            y += 0.95
            continue
        box(0, y, span, y + 1.45, "#eef3fb", "", line=BLUE)
        notes.append(
            dict(
                x=0.12,
                y=y + 1.25,
                text=f"<b>Encoder layer {idx + 1}</b>",
                xanchor="left",
                showarrow=False,
                font=dict(size=11, color=BLUE),
            )
        )
        notes.append(
            dict(
                x=span - 0.12,
                y=y + 1.25,
                text="add & norm after each",
                xanchor="right",
                showarrow=False,
                font=dict(size=9, color="#777"),
            )
        )
        direction = "" if c.attention_direction == "bidirectional" else " (left-to-right)"
        box(
            0.25,
            y + 0.15,
            4.85,
            y + 0.98,
            "white",
            f"Self-attention{direction}<br>{c.num_heads} heads × {c.head_size}",
            size=10,
        )
        box(
            5.15,
            y + 0.15,
            span - 0.25,
            y + 0.98,
            "white",
            f"Feed-forward<br>{c.hidden_size} → {c.intermediate_size} → {c.hidden_size}",
            size=10,
        )
        y += 2.0
    arrow(span / 2, y - 0.5, y - 0.03)
    outs = ["C"] + [f"T<sub>{i}</sub>" for i in range(1, n)]
    for x, t in zip(xs, outs, strict=False):
        box(x - 0.56, y, x + 0.56, y + 0.6, "#dfe9f7" if t == "C" else "#f7f7f7", t, size=10)
    y_head = y + 1.15
    arrow(xs[0], y + 0.65, y_head - 0.03)
    arrow(xs[3], y + 0.65, y_head - 0.03)
    box(0, y_head, 3.3, y_head + 0.75, "#fbe3d0", "<b>NSP</b>: IsNext?" if c.use_nsp_head else "no NSP head", size=11)
    box(3.6, y_head, span, y_head + 0.75, "#fbe3d0", f"<b>Masked LM</b>: which of {c.vocab_size:,}?", size=11)
    top = y_head + 0.85
    fig.update_layout(shapes=shapes, annotations=notes)
    fig.add_trace(
        go.Scatter(
            x=[0, span], y=[-0.5, top], mode="markers", marker=dict(opacity=0), hoverinfo="skip", showlegend=False
        )
    )
    fig.update_xaxes(visible=False, range=[-0.15, span + 0.15], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-0.55, top], fixedrange=True)
    title = title or f"BERT with L = {c.num_layers} layers, H = {c.hidden_size}, A = {c.num_heads} heads"
    return _layout(fig, title, height=int(48 * (top + 0.6)) + 40)


# --------------------------------------------------------------------------------------
# A pretraining example, token by token
# --------------------------------------------------------------------------------------
def example_html(
    tokens: Sequence[str],
    original_tokens: Sequence[str],
    kinds: Sequence[str],
    segment_ids: Sequence[int],
) -> str:
    """HTML chips for a pretraining instance: segment A/B shading, chosen positions coloured by
    what they became, the original token under each changed one. Self-contained (inline CSS)."""
    if not (len(tokens) == len(original_tokens) == len(kinds) == len(segment_ids)):
        raise InputError("tokens, original_tokens, kinds and segment_ids must have the same length")
    chips = []
    for i, (tok, orig, kind, seg) in enumerate(zip(tokens, original_tokens, kinds, segment_ids, strict=False)):
        bg = SEGMENT_A if seg == 0 else SEGMENT_B
        colour = KIND_COLOURS.get(kind)
        border = f"2px solid {colour}" if colour else "1px solid #ccc"
        top = f"<span style='font-weight:600;color:{colour}'>{html.escape(tok)}</span>" if colour else html.escape(tok)
        under = html.escape(orig) if kind else "&nbsp;"
        title = f"position {i}, segment {'A' if seg == 0 else 'B'}" + (
            f": was '{orig}', {KIND_LABELS[kind]}" if kind else ""
        )
        chips.append(
            f'<span title="{html.escape(title)}" style=\'display:inline-flex;flex-direction:column;align-items:center;'
            f"margin:2px;padding:2px 5px;border-radius:6px;background:{bg};border:{border};font-family:monospace;font-size:14px'>"
            f"{top}<span style='font-size:10px;color:#666'>{under}</span></span>"
        )
    return "<div style='line-height:2.1'>" + "".join(chips) + "</div>"


def legend_html() -> str:
    """The colour key for `example_html`."""
    items = [
        f"<span style='background:{SEGMENT_A};padding:2px 8px;border-radius:6px'>segment A</span>",
        f"<span style='background:{SEGMENT_B};padding:2px 8px;border-radius:6px'>segment B</span>",
    ]
    items += [
        f"<span style='border:2px solid {c};padding:1px 8px;border-radius:6px;color:{c}'>{KIND_LABELS[k]}</span>"
        for k, c in KIND_COLOURS.items()
    ]
    return "<div style='display:flex;gap:10px;flex-wrap:wrap;font-size:13px'>" + "".join(items) + "</div>"


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
    line at `marker_step` (the snapshot being looked at)."""
    pts = [c for c in curve if c.get("tokens")]
    if not pts:
        raise InputError("no held-out evaluations to draw")
    fig = go.Figure()
    x = [c["tokens"] for c in pts]
    hover = "step %{customdata:,}<br>%{x:.3s} tokens<br>%{y:.1%}<extra>%{fullData.name}</extra>"
    steps = [c["step"] for c in pts]
    fig.add_trace(go.Scatter(x=x, y=[c.get("mlm_acc") for c in pts], name="masked-LM accuracy", mode="lines+markers",
                             line=dict(color=BLUE, width=2), marker=dict(size=5), customdata=steps, hovertemplate=hover))
    if any(c.get("nsp_acc") is not None for c in pts):
        fig.add_trace(go.Scatter(x=x, y=[c.get("nsp_acc") for c in pts], name="NSP accuracy", mode="lines+markers",
                                 line=dict(color=ORANGE, width=2), marker=dict(size=5), customdata=steps,
                                 hovertemplate=hover))
    if marker_step is not None:
        at = min(pts, key=lambda c: abs(c["step"] - marker_step))
        fig.add_vline(x=at["tokens"], line=dict(color=GREY, dash="dash"),
                      annotation_text=f"step {marker_step:,}", annotation_position="top left")
    fig.update_xaxes(type="log", title="input tokens seen (log scale)", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(title="held-out accuracy", tickformat=".0%", rangemode="tozero", showgrid=True, gridcolor="#eee")
    return _layout(fig, title, height=340, legend=dict(orientation="h", y=-0.3))
