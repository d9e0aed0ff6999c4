"""What the "Why it answered" page draws: a sentence shaded by its attribution scores, the scores as bars and
how to read them against the baseline, attention rollout and flow, and a fine-tuned classifier's answers to
a labelled file (the confusion matrix, a picker's labels, table rows). The pages only place them.

Imports numpy, plotly, bertlab.figures.answers (the shared look), bertlab.figures.attention, bertlab.formatting,
bertlab.finetune (answers, task labels) and the interpret result types (attribution, rollout); never
streamlit.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bertlab.figures.answers import plotly_text, style_figure
from bertlab.figures.attention import CAP_PERCENTILE, attention_heatmap, heatmap_cap
from bertlab.finetune.answers import ExampleAnswer, FileAnswers
from bertlab.finetune.tasks import label_text
from bertlab.formatting import shortened
from bertlab.interpret.attribution import Attribution, shading
from bertlab.interpret.rollout import AttentionMaps

POSITIVE, NEGATIVE = (22, 130, 60), (200, 40, 40)  # green raises the prediction, red lowers it


def shaded_tokens_html(tokens: Sequence[str], scores: Sequence[float]) -> str:
    """The tokens as inline boxes, green for positive and red for negative scores, darker = larger |score|."""
    parts = []
    for tok, s in zip(tokens, shading(np.asarray(scores, dtype=np.float64)), strict=True):
        r, g, b = POSITIVE if s >= 0 else NEGATIVE
        alpha = min(1.0, abs(float(s))) * 0.75
        text = "#000" if alpha < 0.45 else "#fff"
        parts.append(
            f'<span title="{float(s):+.2f}" style="background: rgba({r},{g},{b},{alpha:.2f}); color: {text}; '
            f'padding: 2px 5px; margin: 2px; border-radius: 4px; display: inline-block; font-family: monospace">'
            f"{html.escape(tok)}</span>"
        )
    return '<div style="line-height: 2.2">' + "".join(parts) + "</div>"


def attribution_figure(attr: Attribution, title: str = "") -> go.Figure:
    """Both methods' score per token, side by side as bars."""
    x = list(range(len(attr.pieces)))
    fig = go.Figure()
    fig.add_bar(x=x, y=attr.integrated_gradients, name="integrated gradients", marker_color="#1f77b4")
    fig.add_bar(x=x, y=attr.gradient_x_input, name="gradient × input", marker_color="#ff7f0e")
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=[plotly_text(t) for t in attr.pieces], tickangle=-45)
    fig.update_yaxes(
        title=f"change in {plotly_text(attr.target)}<br>from the baseline", zeroline=True, zerolinecolor="#999"
    )
    return style_figure(fig, title, height=360, barmode="group", legend=dict(orientation="h", y=-0.35))


def baseline_reading(attr: Attribution) -> str:
    """How to read the scores when the baseline scores as high as the input or higher (""
    otherwise): they explain the difference from the baseline, so a red word then means "further
    from the baseline's answer", not "evidence against the answer" (an all-[PAD] pair scores
    higher on IsNext than most real pairs). Also when the two score almost alike: then every score is
    near zero and says little."""
    if abs(attr.difference) < max(1e-3, 0.05 * abs(attr.prediction)):
        return (
            f"The input scores {attr.prediction:.3f} and the baseline {attr.baseline_prediction:.3f}, almost alike: "
            f"the words together move {attr.target} hardly at all away from the [PAD]-only input's, so every score "
            "is near zero and their colours say little."
        )
    if attr.baseline_prediction < attr.prediction:
        return ""
    return (
        f"Read the colours against the baseline: it scores {attr.baseline_prediction:.3f}, as high as the input "
        f"({attr.prediction:.3f}) or higher, so the words together *lower* {attr.target} from it by "
        f"{attr.baseline_prediction - attr.prediction:.3f}. Red marks a word that pulls the answer down from the "
        "baseline's, not evidence against the answer: the model already gives the [PAD]-only input that high a "
        "score, so these scores do not show what makes it sure."
    )


def raw_and_rollout_figures(maps: AttentionMaps, layer: int) -> tuple[go.Figure, go.Figure]:
    """The layer's head-averaged raw attention, and the rollout up to and including that layer."""
    L = maps.raw.shape[0]
    raw = attention_heatmap(maps.pieces, maps.raw[layer], f"Raw attention, layer {layer + 1} (heads averaged)")
    roll = attention_heatmap(maps.pieces, maps.rollout[layer], f"Rollout, layers 1–{layer + 1} of {L}")
    return raw, roll


def capped_maps_note(maps: AttentionMaps, layer: int) -> str:
    """A caption for `raw_and_rollout_figures` when either map's colours stop at a cap (long inputs,
    where one strong cell would leave the rest white; see bertlab.figures.attention.heatmap_cap), else ""."""
    capped = [
        name
        for name, m in (("raw attention", maps.raw[layer]), ("rollout", maps.rollout[layer]))
        if heatmap_cap(m) is not None
    ]
    if not capped:
        return ""
    return (
        f"The {' and '.join(capped)} {'maps’' if len(capped) > 1 else 'map’s'} colours stop at the "
        f"{CAP_PERCENTILE}th-percentile weight: with {len(maps.tokens)} tokens sharing each row, a scale up to "
        "the strongest cell would leave the rest white. Cells above it share the darkest colour; hover one for its weight."
    )


def flow_figure(maps: AttentionMaps, title: str | None = None) -> go.Figure:
    """How much reaches the output token from each input token: last-layer raw attention, rollout and flow;
    `title` None names the output token ('What reaches <mask> after the last layer')."""
    p = maps.flow_position
    if title is None:
        title = f"What reaches {plotly_text(maps.pieces[p])} after the last layer"
    x = list(range(len(maps.pieces)))
    fig = go.Figure()
    fig.add_bar(x=x, y=maps.raw[-1, p], name="raw attention (last layer)", marker_color="#9ecae1")
    fig.add_bar(x=x, y=maps.rollout[-1, p], name="rollout", marker_color="#1f77b4")
    if maps.flow is not None:
        total = maps.flow.sum()
        fig.add_bar(
            x=x, y=maps.flow / total if total > 0 else maps.flow, name="flow (normalised)", marker_color="#d62728"
        )
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=[plotly_text(t) for t in maps.pieces], tickangle=-45)
    fig.update_yaxes(title=f"weight into {plotly_text(maps.pieces[p])}")
    return style_figure(fig, title, height=340, barmode="group", legend=dict(orientation="h", y=-0.35))


# --- a fine-tuned classifier's answers to a labelled file -------------------------------------
def confusion_figure(answers: FileAnswers, title: str = "") -> go.Figure:
    """Gold label (rows) against the model's answer (columns): counts, and each row's share."""
    counts = np.array(answers.confusion(), dtype=float)
    share = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    labels = [label_text(answers.task, label) for label in answers.labels]  # '1 (positive)', not '1'
    text = [
        [f"{int(c):,}<br>{s:.0%}" for c, s in zip(row_c, row_s, strict=True)]
        for row_c, row_s in zip(counts, share, strict=True)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=share,
            x=labels,
            y=labels,
            text=text,
            texttemplate="%{text}",
            colorscale="Blues",
            zmin=0,
            zmax=1,
            showscale=False,
            hovertemplate="gold %{y}, answered %{x}: %{text}<extra></extra>",
        )
    )
    fig.update_xaxes(title="the model's answer", side="top", type="category")
    fig.update_yaxes(title="gold label", autorange="reversed", type="category")
    fig = style_figure(fig, title, height=140 + 60 * len(labels))
    # the answer axis sits on top, where a title would cover it: the title goes above, with room
    return fig.update_layout(margin=dict(t=110 if title else 70))


def answer_label(a: ExampleAnswer, limit: int = 90) -> str:
    """How an example is offered in a picker: number, gold → answer (sureness), the start of its text."""
    mark = "✓" if a.correct else "✗"
    text = a.text_a + (f" ‖ {a.text_b}" if a.text_b else "")
    return f"#{a.index + 1} {mark} gold {a.gold} → {a.predicted} ({a.confidence:.0%}) · {shortened(text, limit)}"


def answer_rows(rows: Sequence[ExampleAnswer]) -> list[dict]:
    """The picked answers as table rows."""
    return [
        {
            "#": a.index + 1,
            "gold": a.gold,
            "answer": a.predicted,
            "sure": f"{a.confidence:.0%}",
            "right?": "✓" if a.correct else "✗",
            "text": a.text_a + (f" ‖ {a.text_b}" if a.text_b else ""),
        }
        for a in rows
    ]
