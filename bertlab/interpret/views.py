"""Figures and shaded text for the interpretation results; the pages only place them.

Owns the plotly figures of attributions, attention rollout/flow, contextual similarity and PCA,
probing curves, head importance and pruning curves, and `shaded_tokens_html` (the sentence with
each token shaded by its score). Imports numpy, plotly, bertlab.figures (the shared look), bertlab.attention_figures and the
interpret result types; never streamlit.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.attention_figures import attention_heatmap
from bertlab.figures import style_figure
from bertlab.interpret.attribution import Attribution, shading
from bertlab.interpret.contextual import ContextualWord
from bertlab.interpret.heads import PruningCurve
from bertlab.interpret.probing import ProbeResult
from bertlab.interpret.rollout import AttentionMaps

POSITIVE, NEGATIVE = (22, 130, 60), (200, 40, 40)  # green raises the prediction, red lowers it
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


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
    x = list(range(len(attr.tokens)))
    fig = go.Figure()
    fig.add_bar(x=x, y=attr.integrated_gradients, name="integrated gradients", marker_color="#1f77b4")
    fig.add_bar(x=x, y=attr.gradient_x_input, name="gradient × input", marker_color="#ff7f0e")
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=attr.tokens, tickangle=-45)
    fig.update_yaxes(title=f"change in {attr.target}<br>from the baseline", zeroline=True, zerolinecolor="#999")
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
    raw = attention_heatmap(maps.tokens, maps.raw[layer], f"Raw attention, layer {layer + 1} (heads averaged)")
    roll = attention_heatmap(maps.tokens, maps.rollout[layer], f"Rollout, layers 1–{layer + 1} of {L}")
    return raw, roll


def flow_figure(maps: AttentionMaps, title: str = "") -> go.Figure:
    """How much reaches the output token from each input token: last-layer raw attention, rollout and flow."""
    p = maps.flow_position
    x = list(range(len(maps.tokens)))
    fig = go.Figure()
    fig.add_bar(x=x, y=maps.raw[-1, p], name="raw attention (last layer)", marker_color="#9ecae1")
    fig.add_bar(x=x, y=maps.rollout[-1, p], name="rollout", marker_color="#1f77b4")
    if maps.flow is not None:
        total = maps.flow.sum()
        fig.add_bar(
            x=x, y=maps.flow / total if total > 0 else maps.flow, name="flow (normalised)", marker_color="#d62728"
        )
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=maps.tokens, tickangle=-45)
    fig.update_yaxes(title=f"weight into {maps.tokens[p]!s}")
    return style_figure(fig, title, height=340, barmode="group", legend=dict(orientation="h", y=-0.35))


def similarity_figure(result: ContextualWord, title: str = "") -> go.Figure:
    """Self-similarity, anisotropy and the adjusted measure per layer (and within / across senses)."""
    layers = list(range(len(result.self_similarity)))
    fig = go.Figure()
    series = [
        ("self-similarity", result.self_similarity, "#1f77b4", "solid"),
        ("anisotropy (random words)", result.anisotropy, "#7f7f7f", "dot"),
        ("adjusted = self-similarity − anisotropy", result.adjusted_self_similarity, "#2ca02c", "solid"),
    ]
    if not np.isnan(result.within_sense).all():
        series += [
            ("same sense", result.within_sense, "#9467bd", "dash"),
            ("other sense", result.across_sense, "#d62728", "dash"),
        ]
    for name, values, colour, dash in series:
        fig.add_scatter(x=layers, y=values, name=name, mode="lines+markers", line=dict(color=colour, dash=dash))
    fig.update_xaxes(title="layer (0 = embeddings)", tickmode="array", tickvals=layers)
    fig.update_yaxes(title="mean cosine similarity")
    return style_figure(fig, title, height=380, legend=dict(orientation="h", y=-0.3))


def _shortened(text: str, limit: int) -> str:
    """`text` cut at a word boundary to at most about `limit` characters, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,;:") + "…"


def pca_figure(result: ContextualWord, layers: Sequence[int] | None = None) -> go.Figure:
    """One PCA scatter per layer, each occurrence a dot coloured by its sentence (its marker by its sense)."""
    chosen = list(layers) if layers is not None else list(range(result.projection.shape[0]))
    fig = make_subplots(rows=1, cols=len(chosen), subplot_titles=[f"layer {i}" for i in chosen])
    by_sentence: dict[int, list[int]] = {}
    for k, occ in enumerate(result.occurrences):
        by_sentence.setdefault(occ.sentence_index, []).append(k)
    senses = list(dict.fromkeys(o.sense for o in result.occurrences))
    symbols = ("circle", "diamond", "square", "triangle-up", "x", "star")
    for col, layer in enumerate(chosen, start=1):
        for s, ks in by_sentence.items():
            occ = result.occurrences[ks[0]]
            label = f"{s + 1}" + (f" ({occ.sense})" if occ.sense else "") + f": {_shortened(occ.sentence, 40)}"
            fig.add_scatter(
                x=result.projection[layer, ks, 0],
                y=result.projection[layer, ks, 1],
                mode="markers",
                marker=dict(
                    size=11,
                    color=COLOURS[s % len(COLOURS)],
                    symbol=symbols[senses.index(occ.sense) % len(symbols)],
                    line=dict(width=1, color="white"),
                ),
                name=label,
                legendgroup=str(s),
                showlegend=col == 1,
                hovertext=[result.occurrences[k].sentence for k in ks],
                hoverinfo="text",
                row=1,
                col=col,
            )
        fig.update_xaxes(showticklabels=False, zeroline=False, row=1, col=col)
        fig.update_yaxes(showticklabels=False, zeroline=False, row=1, col=col)
    style_figure(fig, "", height=340, legend=dict(orientation="h", y=-0.12))
    fig.update_layout(margin=dict(t=36))
    return fig


def probe_figure(results: Sequence[ProbeResult], title: str = "") -> go.Figure:
    """Probe accuracy per layer for each task, with its majority baseline and centre of gravity."""
    fig = go.Figure()
    for k, r in enumerate(results):
        colour = COLOURS[k % len(COLOURS)]
        fig.add_scatter(
            x=r.layers, y=r.accuracy, name=f"{r.task} accuracy", mode="lines+markers", line=dict(color=colour)
        )
        fig.add_scatter(
            x=[r.layers[0], r.layers[-1]],
            y=[r.majority] * 2,
            name=f"{r.task}: always the commonest tag",
            mode="lines",
            line=dict(color=colour, dash="dot", width=1),
        )
        if r.centre_of_gravity is not None:
            fig.add_vline(
                x=r.centre_of_gravity,
                line=dict(color=colour, dash="dash"),
                annotation_text=f"{r.task} centre of gravity {r.centre_of_gravity:.2f}",
                annotation_position="top left" if k % 2 else "top right",
            )
    layers = sorted({layer for r in results for layer in r.layers})
    fig.update_xaxes(title="layer (0 = embeddings)", tickmode="array", tickvals=layers)
    fig.update_yaxes(title="probe accuracy", tickformat=".0%")
    return style_figure(fig, title, height=400, legend=dict(orientation="h", y=-0.25))


def importance_figure(scores: np.ndarray, title: str = "") -> go.Figure:
    """(L, A) head importance as a heatmap, layer 1 on top."""
    s = np.asarray(scores, dtype=np.float64)
    L, A = s.shape
    fig = go.Figure(
        go.Heatmap(
            z=s,
            x=[f"head {a + 1}" for a in range(A)],
            y=[f"layer {i + 1}" for i in range(L)],
            colorscale="Oranges",
            zmin=0,
            colorbar=dict(title=dict(text="importance", side="right"), thickness=12),
            hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
            text=np.round(s, 2),
            texttemplate="%{text}" if L * A <= 64 else None,
        )
    )
    fig.update_yaxes(autorange="reversed")
    return style_figure(fig, title, height=max(260, 40 * L + 120))


def pruning_figure(curve: PruningCurve, metric: str = "accuracy", title: str = "") -> go.Figure:
    """Accuracy against the share of heads pruned: least important first, and random orders (mean and range)."""
    share = curve.share
    fig = go.Figure()
    fig.add_scatter(
        x=share + share[::-1],
        y=curve.random_max + curve.random_min[::-1],
        fill="toself",
        mode="lines",
        fillcolor="rgba(127,127,127,0.18)",
        line=dict(width=0),
        name=f"random orders (range of {curve.random_orders})",
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=share, y=curve.random, name="random order (mean)", mode="lines+markers", line=dict(color="#7f7f7f")
    )
    fig.add_scatter(
        x=share, y=curve.by_importance, name="least important first", mode="lines+markers", line=dict(color="#d62728")
    )
    fig.update_xaxes(title="share of heads pruned", tickformat=".0%")
    fig.update_yaxes(title=metric, tickformat=".0%")
    return style_figure(fig, title, height=380, legend=dict(orientation="h", y=-0.3))
