"""What the "What each layer knows" page draws: one word's contextual similarity and PCA across layers and
the notes that say how to read them, probing curves and their summary, the nearest words in a corpus, and
feed-forward neuron factors. The pages only place them.

Imports numpy, plotly, bertlab.figures.answers (the shared look), bertlab.formatting and the interpret
result types (contextual, probing, neighbours, neurons); never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.figures.answers import plotly_text, style_figure
from bertlab.formatting import shortened
from bertlab.interpret.contextual import ContextualWord
from bertlab.interpret.neighbours import CorpusIndex, NeighbourResult, same_word_ceiling
from bertlab.interpret.neurons import NeuronFactors
from bertlab.interpret.probing import ProbeResult

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def similarity_figure(result: ContextualWord, title: str = "") -> go.Figure:
    """Self-similarity, anisotropy and the adjusted measure per layer (and within / across senses)."""
    layers = list(range(len(result.self_similarity)))
    fig = go.Figure()
    series = [
        ("self-similarity", result.self_similarity, "#1f77b4", "solid"),
        ("anisotropy (random words)", result.anisotropy, "#7f7f7f", "dot"),
        ("adjusted = self-similarity − anisotropy", result.adjusted_self_similarity, "#2ca02c", "solid"),
        ("same sense", result.within_sense, "#9467bd", "dash"),
        ("other sense", result.across_sense, "#d62728", "dash"),
    ]
    for name, values, colour, dash in series:
        if np.isnan(values).all():  # no senses given, or no pair of that kind
            continue
        fig.add_scatter(x=layers, y=values, name=name, mode="lines+markers", line=dict(color=colour, dash=dash))
    fig.update_xaxes(title="layer (0 = embeddings)", tickmode="array", tickvals=layers)
    fig.update_yaxes(title="mean cosine similarity")
    return style_figure(fig, title, height=380, legend=dict(orientation="h", y=-0.3))


def _sentence_numbers(numbers: Sequence[int]) -> str:
    """[1, 3] -> 'sentences 1 and 3'; [2] -> 'sentence 2'; [1, 2, 5] -> 'sentences 1, 2 and 5' (1-based in)."""
    n = [str(k) for k in numbers]
    if len(n) == 1:
        return f"sentence {n[0]}"
    return f"sentences {', '.join(n[:-1])} and {n[-1]}"


def pca_caption(result: ContextualWord, layers: Sequence[int]) -> str:
    """How to read the PCA panels: the variance each shown layer keeps, or that its dots are one point."""
    parts = []
    for i in layers:
        kept = float(result.explained[i].sum())
        parts.append(f"layer {i}: {kept:.0%}" if kept > 0 else f"layer {i}: none, every vector the same, one dot")
    return (
        "Each dot is the word in one sentence, projected on the two main directions of that layer's vectors "
        f"(PCA, fitted per layer; share of the variance kept: {'; '.join(parts)}). Layer 0 is the input "
        "embeddings: the word's token + segment + position vectors and nothing of its context, so sentences "
        "where it stands at the same position give one dot, drawn on top of each other."
    )


def layer0_note(result: ContextualWord) -> str:
    """Why layer 0 can look sense-aware: the same word at the same position has the same layer-0 vector."""
    text = (
        "**Layer 0 is not context.** There the word's vector is its token embedding plus the embedding of its "
        "position (and segment): nothing of the sentence around it. So wherever the word stands at the same "
        "position in two sentences, its layer-0 vectors are identical (cosine 1), and any comparison holding "
        "such a pair reads high at layer 0 for that reason alone."
    )
    groups = result.identical_at_layer_0()
    if not groups:
        return text + " Here no two sentences have it at the same position."
    occ = result.occurrences
    named = [
        f"{_sentence_numbers(sorted({occ[k].sentence_index + 1 for k in g}))} (position {occ[g[0]].token_positions[0]})"
        for g in groups
    ]
    text += f" Here that is {'; '.join(named)}, counting [CLS] as position 0."
    pairs = [(a, b) for g in groups for i, a in enumerate(g) for b in g[i + 1 :]]
    senses = [(occ[a].sense, occ[b].sense) for a, b in pairs if occ[a].sense and occ[b].sense]
    if senses and all(x == y for x, y in senses) and result.within_sense[0] > result.across_sense[0]:
        text += (
            " Those are same-sense pairs, which is why 'same sense' reads above 'other sense' at layer 0: "
            "position, not meaning. From layer 1 on, the context is mixed in."
        )
    return text


def sense_note(result: ContextualWord) -> str:
    """Which sentences have no sense and so stay out of 'same sense' / 'other sense', and which of the
    two has no pair to compare ("" when no sense is given, or every sentence has one and both curves exist)."""
    if not any(o.sense for o in result.occurrences):
        return ""
    parts = []
    if missing := result.unlabelled_sentences:
        one = len(missing) == 1
        parts.append(
            f"{_sentence_numbers([k + 1 for k in missing]).capitalize()} {'has' if one else 'have'} no sense "
            f"('sense: sentence' gives one), so {'it is' if one else 'they are'} left out of 'same sense' and "
            f"'other sense'; the dots and the self-similarity still include {'it' if one else 'them'}."
        )
    if np.isnan(result.within_sense).all():
        parts.append("No sense has two sentences, so there is no 'same sense' to show.")
    if np.isnan(result.across_sense).all():
        parts.append("Only one sense is named, so there is no 'other sense' to show.")
    return " ".join(parts)


def pieces_note(result: ContextualWord) -> str:
    """How the tokenizer cut the word, when it is more than one piece ("" otherwise)."""
    pieces = result.occurrences[0].pieces
    if len(pieces) < 2:
        return ""
    return (
        f"The tokenizer reads “{result.word}” as {len(pieces)} pieces, {' · '.join(pieces)} (punctuation is always "
        "a word of its own, and a long word is cut into pieces): its vector in a sentence is the mean of "
        "its pieces' vectors."
    )


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
            label = f"{s + 1}" + (f" ({occ.sense})" if occ.sense else "") + f": {shortened(occ.sentence, 40)}"
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
    """Two panels per layer and task: accuracy above always answering the commonest tag (in points,
    ± the noise floor; 0 = no better than the baseline) and macro-F1 (every tag counts alike).

    A task whose tags are mostly one tag (NER: O) has a high accuracy that says nothing; the left
    panel puts it at zero. The centre of gravity, where reported, is a marker on the task's curve
    named in the legend: no text inside the plot, so no labels to collide or be struck through."""
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=("Accuracy above always answering the commonest tag", "Macro-F1 (every tag counts alike)"),
    )
    layers = sorted({layer for r in results for layer in r.layers})
    if layers:
        fig.add_scatter(
            x=[layers[0], layers[-1]],
            y=[0, 0],
            name="0 = always the commonest tag",
            mode="lines",
            line=dict(color="#7f7f7f", dash="dot", width=1),
            hoverinfo="skip",
            row=1,
            col=1,
        )
    for k, r in enumerate(results):
        colour = COLOURS[k % len(COLOURS)]
        tag = f" ({r.commonest_tag})" if r.commonest_tag else ""
        verdict = "" if r.beats_majority else ": no better than the commonest tag"
        points = [100 * g for g in r.gain_over_majority]
        fig.add_scatter(
            x=r.layers,
            y=points,
            error_y=dict(type="constant", value=100 * r.noise_floor, color=colour, thickness=1, width=4),
            name=f"{r.task}{verdict}",
            legendgroup=r.task,
            mode="lines+markers",
            line=dict(color=colour),
            customdata=np.column_stack([r.accuracy, [r.majority] * len(r.layers)]),
            hovertemplate=f"{r.task}, layer %{{x}}: %{{customdata[0]:.1%}}, commonest tag{tag} "
            "%{customdata[1]:.1%}: %{y:+.2f} points<extra></extra>",
            row=1,
            col=1,
        )
        fig.add_scatter(
            x=r.layers,
            y=r.macro_f1,
            name=f"{r.task} macro-F1",
            legendgroup=r.task,
            showlegend=False,
            mode="lines+markers",
            line=dict(color=colour),
            hovertemplate=f"{r.task}, layer %{{x}}: macro-F1 %{{y:.3f}}<extra></extra>",
            row=1,
            col=2,
        )
        cog = r.reported_centre_of_gravity
        if cog is not None:
            fig.add_scatter(
                x=[cog],
                y=[float(np.interp(cog, r.layers, points))],
                name=f"{r.task} centre of gravity {cog:.2f}",
                legendgroup=r.task,
                mode="markers",
                marker=dict(symbol="diamond", size=13, color="white", line=dict(color=colour, width=2)),
                hovertemplate=f"{r.task}: centre of gravity {cog:.2f}<extra></extra>",
                row=1,
                col=1,
            )
    fig.update_xaxes(title="layer (0 = embeddings)", tickmode="array", tickvals=layers)
    fig.update_yaxes(title="points above the commonest tag", zeroline=False, row=1, col=1)
    fig.update_yaxes(title="macro-F1", range=[0, 1.02], row=1, col=2)
    style_figure(fig, title, height=440, legend=dict(orientation="h", y=-0.3, yanchor="top"))
    fig.update_annotations(font=dict(size=13))  # the panel titles
    return fig


def probe_summary(r: ProbeResult) -> str:
    """One task's probing result in words: what the best layer adds over always answering the commonest
    tag (or that it adds nothing), its macro-F1, and the centre of gravity only where there is a gain."""
    best = r.best_layer
    tag = f" ({r.commonest_tag})" if r.commonest_tag else ""
    noise = f"±{100 * r.noise_floor:.1f} points on {r.eval_words:,} words"
    f1_lo, f1_hi = min(r.macro_f1), max(r.macro_f1)
    f1 = f"{f1_lo:.2f}" if f"{f1_lo:.2f}" == f"{f1_hi:.2f}" else f"{f1_lo:.2f}–{f1_hi:.2f}"
    data = (
        f"{r.train_words:,} training and {r.eval_words:,} evaluation words "
        f"({r.data.get('train', '?')} → {r.data.get('eval', '?')})"
    )
    if not r.beats_majority:
        return (
            f"**{r.task}: no better than always answering the commonest tag{tag}**, which scores {r.majority:.1%}. "
            f"The best layer ({r.layers[best]}) scores {r.accuracy[best]:.1%}, "
            f"{100 * (r.accuracy[best] - r.majority):+.2f} points, within the noise ({noise}); its macro-F1 is only "
            f"{f1} (always answering the commonest tag would score about {r.majority_macro_f1:.2f}): it finds a few of "
            f"the other tags but adds nothing to the accuracy, so there is no centre of gravity to give. {data}."
        )
    text = (
        f"**{r.task}**: best at layer {r.layers[best]} ({r.accuracy[best]:.1%}), "
        f"{100 * (r.accuracy[best] - r.majority):.1f} points above always answering the commonest tag{tag} "
        f"({r.majority:.1%}); macro-F1 {f1}. "
    )
    gain, cog = r.gain_over_embeddings, r.reported_centre_of_gravity
    if cog is not None:
        text += (
            f"Centre of gravity {cog:.2f}: the later layers add {100 * gain:.1f} points over the embeddings "
            f"(layer 0: {r.accuracy[0]:.1%}; noise {noise}). "
        )
    elif gain is not None and abs(gain) <= r.noise_floor:
        text += (
            f"No centre of gravity: the later layers add {100 * gain:+.2f} points over the embeddings, within the "
            f"noise ({noise}), so the embeddings already hold what the probe reads. "
        )
    return text + f"{data}."


# --- nearest words in a corpus ------------------------------------------------------------
_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_{}[]<>()#+-.!|$~"})


def _md(text: str) -> str:
    """`text` shown as it is in markdown (no emphasis, links or maths made of its characters)."""
    return text.translate(_MARKDOWN_SPECIAL)


def neighbours_figure(result: NeighbourResult, title: str = "") -> go.Figure:
    """The share of the k nearest corpus words that are the query's own word, at every layer, under the
    most the corpus allows (the word may occur fewer than k times)."""
    layers = list(range(len(result.same_word_share)))
    fig = go.Figure()
    fig.add_scatter(
        x=layers,
        y=[100 * v for v in result.same_word_share],
        name=f"“{result.word}” among the {result.k} nearest",
        mode="lines+markers",
        line=dict(color="#1f77b4"),
        hovertemplate="layer %{x}: %{y:.0f}%<extra></extra>",
    )
    if result.occurrences:  # a word found nowhere else in the corpus has no line to draw (nearest_notes says so)
        ceiling = 100 * same_word_ceiling(result)
        fig.add_scatter(
            x=layers,
            y=[ceiling] * len(layers),
            name=f"the most possible here ({result.occurrences} other “{result.word}” in the corpus)",
            mode="lines",
            line=dict(color="#7f7f7f", dash="dot"),
            hoverinfo="skip",
        )
    fig.update_xaxes(title="layer (0 = embeddings)", tickmode="array", tickvals=layers)
    fig.update_yaxes(title="same word, % of the nearest", range=[-5, 105])
    return style_figure(fig, title, height=340, legend=dict(orientation="h", y=-0.35))


def _em(text: str) -> str:
    """A word in italics, whatever it is: markdown's *…* is no emphasis round punctuation beside a letter."""
    return f"<i>{_md(text)}</i>"


def neighbours_reading(result: NeighbourResult, layer: int) -> str:
    """What the nearest words at `layer` are, in a sentence: how many are the word itself (in any case)
    and which words the others are (commonest first), as markdown with inline HTML."""
    near = result.layers[layer]
    same = sum(n.same_word for n in near)
    where = "the embeddings (layer 0)" if layer == 0 else f"layer {layer}"
    others = [(w, c) for w, c in result.word_counts(layer, top=len(near)) if w.casefold() != result.word.casefold()]
    listed = ", ".join(_em(w) + (f" ×{c}" if c > 1 else "") for w, c in others[:8])
    text = f"At {where}, **{same} of the {len(near)}** nearest words are {_em(result.word)} itself"
    if others:
        return text + f"; the others: {listed}" + (", …" if len(others) > 8 else ".")
    return text + "."


def index_caption(index: CorpusIndex) -> str:
    """'1,000 sentences, 25,963 words, 63 MB of vectors.'"""
    mb = index.megabytes
    size = f"{mb:.0f} MB" if mb >= 10 else f"{mb:.1f} MB" if mb >= 0.1 else "under 0.1 MB"
    n = len(index.sentences)
    return f"{n:,} sentence{'s' if n != 1 else ''}, {len(index.words):,} words, {size} of vectors."


def nearest_notes(result: NeighbourResult, pieces: int, asked: int) -> list[str]:
    """What a reader should know about this search: a word read as several WordPieces (their mean), one
    found nowhere else in the corpus, fewer other words than asked for."""
    notes = []
    if pieces > 1:
        notes.append(
            f"“{result.word}” is {pieces} WordPieces for this model: its vector is their mean, and a rare word's "
            "pieces say more about its spelling than its meaning."
        )
    if not result.occurrences:
        notes.append(f"“{result.word}” is nowhere else in this corpus: none of the nearest can be the word itself.")
    if result.k < asked:
        notes.append(f"The corpus has only {result.k} other words: all of them are shown, not {asked}.")
    return notes


def neighbour_lines(result: NeighbourResult, layer: int, context: int = 70) -> list[str]:
    """One markdown line a neighbour: its similarity and its sentence around it, the word in bold (HTML:
    '**,**' beside a letter is no bold in markdown), cut to about `context` characters either side."""
    lines = []
    for n in result.layers[layer]:
        before = n.before if len(n.before) <= context else "…" + n.before[-context:].split(" ", 1)[-1]
        after = n.after if len(n.after) <= context else n.after[:context].rsplit(" ", 1)[0] + "…"
        lines.append(f"`{n.similarity:.2f}` {_md(before)}<b>{_md(n.text)}</b>{_md(after)}")
    return lines


# --- feed-forward neuron factors ------------------------------------------------------------
def factor_label(nf: NeuronFactors, factor: int) -> str:
    """'factor 2: the · was · and': a factor named by the tokens where it is strongest."""
    return f"factor {factor + 1}: {' · '.join(nf.strongest(factor, 3))}"  # '·': a comma may be a token


def factors_figure(nf: NeuronFactors, title: str = "") -> go.Figure:
    """Every factor (rows, strongest factor first) at every token (columns, in reading order)."""
    columns = [plotly_text(t) + "\u200b" * i for i, t in enumerate(nf.pieces)]  # invisible marks keep a repeat apart
    rows = [plotly_text(factor_label(nf, f)) for f in range(nf.strength.shape[0])]
    fig = go.Figure(
        go.Heatmap(
            z=nf.strength.numpy(),
            x=columns,
            y=rows,
            colorscale="Greens",
            zmin=0,
            zmax=1,
            colorbar=dict(title=dict(text="share of its peak", side="right"), thickness=12),
            hovertemplate="%{y}<br>token %{x}: %{z:.0%}<extra></extra>",
        )
    )
    fig.update_xaxes(tickangle=-60, type="category", tickfont=dict(size=11))
    fig.update_yaxes(autorange="reversed", type="category")
    return style_figure(fig, title, height=160 + 34 * len(rows))


def factor_heading(nf: NeuronFactors, factor: int) -> str:
    """A factor's heading as markdown: its name in bold (tokens shown as typed) and the neurons that carry it."""
    return f"**{_md(factor_label(nf, factor))}** · neurons {factor_neurons_text(nf, factor)}"


def factor_neurons_text(nf: NeuronFactors, factor: int) -> str:
    """The neurons that load most on a factor: 'L1 #768 16%, L1 #572 11%, …' (layer counted from 1)."""
    listed = ", ".join(f"L{layer} #{neuron} {share:.0%}" for layer, neuron, share in nf.neurons[factor])
    return listed or "spread thin (no neuron carries 1% of it)"
