"""Plotly figures of what BERT does, and ways to export them.

Owns the plots of answers the app draws (probability bars, answers by layer, NSP, replaced tokens, learning
curves), the colours and layout every figure shares, and their export (HTML always; PNG/SVG through kaleido
when installed, else plotly's own camera button). Figures take plain data (tokens, numpy arrays,
inference results) and return `plotly.graph_objects.Figure`; nothing here runs the model. The
paper's diagrams (Figure 2, the architecture, a masked example) are bertlab.figures.diagrams', and the
attention figures bertlab.figures.attention'.

Imports numpy, plotly and bertlab types; bertviz lazily; never streamlit.
"""

from __future__ import annotations

import html
import importlib.util
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from bertlab.errors import InputError
from bertlab.inference import Candidate, LayerGuess

log = logging.getLogger(__name__)

# Colours: one meaning each, the same on every page.
BLUE = "#3b6fb6"
ORANGE = "#e8853d"
GREY = "#9aa0a6"
FONT = dict(family="Inter, Source Sans Pro, Helvetica, Arial, sans-serif", size=13)


def plotly_text(text: str) -> str:
    """`text` as plotly draws it letter for letter. Plotly reads a few HTML tags in its labels, titles and
    hovers ('<s>' strikes through, '<b>' bolds), so RoBERTa's <s> and </s> would vanish from a tick;
    '<', '>' and '&' become the entities plotly draws as the characters."""
    return html.escape(text, quote=False)


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
        return f"{p * 100:#.2g}%"  # '#' keeps a trailing zero: 0.0010 -> '0.10%' beside '0.085%', not '0.1%'
    return "<0.01%"


def _tick_format(top: float) -> str:
    """Enough decimals that axis ticks differ, even for an untrained model's tiny probabilities."""
    for digits, limit in ((0, 0.1), (1, 0.01), (2, 0.001)):
        if top >= limit:
            return f".{digits}%"
    return ".3%"


def probability_bar(candidates: Sequence[Candidate], whole_words: bool = True, title: str = "") -> go.Figure:
    """Horizontal bars of the top-k answers for one [MASK], most likely on top."""
    labels = [plotly_text(c.word if whole_words else c.piece) for c in candidates]
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
            text[r][j] = f"{plotly_text(c.word if whole_words else c.piece)}<br>{percent(c.score)}"
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
            colorbar=dict(title=dict(text="p", side="right"), tickformat=".0%", thickness=12),
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
    word = plotly_text(word)
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


def replaced_tokens_figure(
    tokens: Sequence[str],
    p_replaced: Sequence[float],
    replaced: Sequence[bool],
    original_tokens: Sequence[str],
    special: Sequence[bool],
    title: str = "",
) -> go.Figure:
    """ELECTRA's discriminator on one sentence: a bar of P(replaced) for every token (specials left
    out), orange where the generator really replaced the token (its label names the one it replaced),
    blue where the token is the sentence's own; a dashed line at 50%, above which the discriminator
    calls a token replaced. Plain data, so any caller can draw it (bertlab.interpret.replaced's
    `ReplacedTokens` fields)."""
    keep = [i for i, s in enumerate(special) if not s]
    if not keep:
        raise InputError("no tokens to draw: the sentence has only special tokens")
    labels = _unique_labels(
        [f"<b>{tokens[i]}</b><br>(was {original_tokens[i]})" if replaced[i] else tokens[i] for i in keep]
    )
    probs = [float(p_replaced[i]) for i in keep]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=probs,
            marker_color=[ORANGE if replaced[i] else BLUE for i in keep],
            text=[percent(p) for p in probs],
            textposition="outside",
            cliponaxis=False,
            customdata=["replaced by the generator" if replaced[i] else "the sentence's own" for i in keep],
            hovertemplate="%{x}: P(replaced) %{y:.1%} · %{customdata}<extra></extra>",
        )
    )
    fig.add_hline(y=0.5, line=dict(color=GREY, dash="dash"), annotation_text="50%", annotation_position="top left")
    fig.update_yaxes(range=[0, 1.12], tickformat=".0%", title="P(replaced)", showgrid=True, gridcolor="#eee")
    fig.update_xaxes(tickangle=0 if len(keep) <= 14 else -45, automargin=True)
    return style_figure(fig, title, height=360)


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
    # each number on the outer side of its dot (the smaller one's left, the larger one's right), so that two
    # close dots' numbers do not print over each other ("2.2%2.6%"); under a dot near 0, whose left is the words
    top = max([0.0] + [v for c in changes for v in (c.before, c.after) if v == v])
    first = [not (c.after < c.before) for c in changes]  # 'before' is the smaller (or alone, or level)
    for key, name, colour, left in (
        ("before", "all heads", BLUE, first),
        ("after", "heads off", ORANGE, [not f for f in first]),
    ):
        values = [getattr(c, key) for c in changes]
        sides = [
            ("bottom center" if v < 0.15 * top else "middle left") if lf else "middle right"  # NaN: no number
            for v, lf in zip(values, left, strict=True)
        ]
        fig.add_trace(
            go.Scatter(
                x=[v if v == v else None for v in values],
                y=list(range(len(changes))),
                mode="markers+text",
                name=name,
                marker=dict(color=colour, size=11),
                text=[percent(v) if v == v else "" for v in values],
                textposition=sides,
                cliponaxis=False,
                textfont=dict(size=11, color=colour),
                hovertemplate="%{y}: %{x:.2%}<extra>" + name + "</extra>",
            )
        )
    fig.update_xaxes(
        title="probability", tickformat=_tick_format(top), range=[0, top * 1.2 + 1e-9], showgrid=True, gridcolor="#eee"
    )
    fig.update_yaxes(tickvals=list(range(len(changes))), ticktext=labels, autorange="reversed", tickfont=dict(size=14))
    style_figure(fig, title, height=max(220, 90 + 38 * len(changes)))
    fig.update_layout(legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"), margin=dict(t=60))
    return fig


def nsp_figure(is_next_prob: float, title: str = "", labels: tuple[str, str] = ("IsNext", "NotNext")) -> go.Figure:
    """One stacked bar: P(IsNext) and P(NotNext); `labels` names the two for another sentence-pair
    head (ALBERT's sentence order: "In order", "Swapped")."""
    fig = go.Figure()
    yes, no = labels
    for label, value, colour in ((yes, is_next_prob, BLUE), (no, 1 - is_next_prob, ORANGE)):
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
# Learning curves (Watch it learn, the Home page's model card)
# --------------------------------------------------------------------------------------
STAGE_LABEL_SHARE = 0.12  # a "stage N starts" label is about this share of the plot's width


def _log_span(pts: list[dict]) -> float:
    """Decades of tokens the curve spans (at least one)."""
    tokens = [c["tokens"] for c in pts if c.get("tokens")]
    return max(1.0, math.log10(max(tokens) / min(tokens))) if tokens else 1.0


def _label_rows(xs: list[float], span: float) -> list[int]:
    """A row per label so that labels closer than STAGE_LABEL_SHARE of the axis do not overlap: row 0 just
    above the plot, rows 1, 2, ... stacked above it (stages that start close together on a log axis, e.g.
    the shipped model's stages 3 and 4 at 53M and 85M tokens), never inside it, where the curves run."""
    rows: list[int] = []
    last_x: dict[int, float] = {}
    for x in xs:
        row = 0
        while row in last_x and abs(x - last_x[row]) < STAGE_LABEL_SHARE * span:
            row += 1
        last_x[row] = x
        rows.append(row)
    return rows


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
    starts = [c for prev, c in zip(pts, pts[1:], strict=False) if c.get("stage", 1) != prev.get("stage", 1)]
    for c, row in zip(starts, _label_rows([math.log10(c["tokens"]) for c in starts], _log_span(pts)), strict=True):
        fig.add_vline(x=c["tokens"], line=dict(color=GREY, dash="dot"))  # where a continued run took over
        fig.add_annotation(  # by hand: on a log axis an annotation's x is log10 of the value
            x=math.log10(c["tokens"]), y=1, yref="paper", text=f"stage {c['stage']} starts", showarrow=False,
            xanchor="right", yanchor="bottom", yshift=15 * row, font=dict(size=11, color="#5f6368"),
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
    fig = style_figure(fig, title, height=340, legend=dict(orientation="h", y=-0.3))
    if starts:  # the labels above the plot need room: a line a row, above the title if there is one
        rows = max(_label_rows([math.log10(c["tokens"]) for c in starts], _log_span(pts))) + 1
        fig.update_layout(margin=dict(t=(60 if title else 12) + 15 * rows))
    return fig
