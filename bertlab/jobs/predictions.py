"""What the Jobs page's "Try it" panel draws of a fine-tuned model's prediction: the probability of each
label as bars, a tagged sentence, an answer span in its context.

Imports plotly, bertlab.figures.answers (colours, percentages) and bertlab.finetune.tasks (label names);
never streamlit.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import plotly.graph_objects as go

from bertlab.figures.answers import BLUE, FONT, ORANGE, percent
from bertlab.finetune.tasks import label_text

_TAG_COLOURS = ["#e8f0fb", "#fdeede", "#e6f4ea", "#fef7e0", "#f3e8fd", "#fce8e6", "#e0f7fa", "#eceff1"]


def probabilities_figure(
    probabilities: dict, predicted: str | None = None, title: str = "", task: str | None = None
) -> go.Figure:
    """Horizontal bars of P(label), the predicted label highlighted, most likely on top."""
    items = sorted(probabilities.items(), key=lambda kv: kv[1], reverse=True)
    labels = [label_text(task, k) for k, _ in items]
    predicted = label_text(task, predicted) if predicted is not None else None
    scores = [float(v) for _, v in items]
    colours = [ORANGE if lab == str(predicted) else BLUE for lab in labels]
    fig = go.Figure(
        go.Bar(
            x=scores[::-1],
            y=labels[::-1],
            orientation="h",
            marker_color=colours[::-1],
            text=[percent(s) for s in scores[::-1]],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.2%}<extra></extra>",
        )
    )
    fig.update_xaxes(range=[0, 1.12], tickformat=".0%", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(automargin=True, type="category")  # labels like "0"/"1" are names, not numbers
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
        font=FONT,
        height=70 + 30 * len(labels),
        plot_bgcolor="white",
        paper_bgcolor="white",
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
    )
    return fig


def tags_html(tokens: Sequence[str], tags: Sequence[str]) -> str:
    """Words with their tag underneath, one colour per tag type ('O' plain)."""
    kinds: dict[str, str] = {}
    cells = []
    for tok, tag in zip(tokens, tags, strict=False):
        kind = re.sub(r"^[BI]-", "", str(tag))
        if kind not in ("O", "") and kind not in kinds:
            kinds[kind] = _TAG_COLOURS[len(kinds) % len(_TAG_COLOURS)]
        bg = kinds.get(kind, "transparent")
        cells.append(
            f"<span style='display:inline-block;text-align:center;margin:2px 3px;padding:2px 6px;border-radius:6px;"
            f"background:{bg}'><span style='font-size:15px'>{html.escape(str(tok))}</span><br>"
            f"<span style='font-size:11px;color:#555'>{html.escape(str(tag))}</span></span>"
        )
    return "<div style='line-height:1.3'>" + "".join(cells) + "</div>"


def answer_html(context: str, start: int | None, end: int | None) -> str:
    """The context with the answer span [start, end) highlighted (character offsets)."""
    if start is None or end is None or not (0 <= start <= end <= len(context)):
        return f"<div style='line-height:1.6'>{html.escape(context)}</div>"
    return (
        "<div style='line-height:1.6'>"
        + html.escape(context[:start])
        + f"<mark style='background:#fde9a9;padding:1px 3px;border-radius:4px;font-weight:600'>{html.escape(context[start:end])}</mark>"
        + html.escape(context[end:])
        + "</div>"
    )
