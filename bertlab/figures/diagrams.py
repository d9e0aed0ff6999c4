"""The paper's diagrams, drawn from a config or an example: Figure 2's input embeddings (and which
tokens of a long input it draws), the architecture of Figure 1 for a given size, and a masked
pretraining example as HTML chips.

Imports plotly, bertlab.config / errors and bertlab.figures.answers (shared colours and layout); never
streamlit.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

import plotly.graph_objects as go

from bertlab.config import BertConfig
from bertlab.errors import InputError
from bertlab.figures.answers import BLUE, style_figure

TOKEN_YELLOW = "#fde9a9"  # Figure 2: token embeddings
SEGMENT_GREEN = "#cfe8c4"  # Figure 2: segment embeddings
POSITION_GREY = "#e3e3e3"  # Figure 2: position embeddings
SEGMENT_A = "#e8f0fb"
SEGMENT_B = "#fdeede"
KIND_COLOURS = {"mask": "#d64545", "random": "#e8a33d", "keep": "#3b8f5a"}
KIND_LABELS = {"mask": "→ [MASK] (80%)", "random": "→ random token (10%)", "keep": "kept as is (10%)"}


# --------------------------------------------------------------------------------------
# The input: the paper's Figure 2
# --------------------------------------------------------------------------------------
FIGURE2_ENDS = 3  # tokens drawn at each end of a long segment: [CLS] or a [SEP] and two words beside it


@dataclass(frozen=True)
class InputColumn:
    """One column of Figure 2: the token at position `start`, or an ellipsis box standing for
    positions `start` to `stop - 1` (all of one segment) that are left out of the drawing."""

    start: int
    stop: int
    segment: int

    @property
    def is_gap(self) -> bool:
        return self.stop - self.start > 1


@dataclass(frozen=True)
class Figure2Columns:
    """What Figure 2 draws of an input of `total` tokens: its columns, left to right."""

    columns: tuple[InputColumn, ...]
    total: int

    @property
    def left_out(self) -> int:
        """Tokens inside ellipsis boxes, not drawn one by one."""
        return sum(c.stop - c.start for c in self.columns if c.is_gap)

    @property
    def shown(self) -> int:
        return self.total - self.left_out


def figure2_columns(segment_ids: Sequence[int], ends: int | None = FIGURE2_ENDS) -> Figure2Columns:
    """The tokens Figure 2 draws: of each segment (a run of equal segment ids) longer than
    2 * `ends` + 1 tokens, the first and last `ends`, with one ellipsis box between them; so
    [CLS] and each [SEP] stay, at their real positions. `ends` None draws every token."""
    if ends is not None and ends < 1:
        raise InputError(f"ends must be at least 1 (or None for every token), got {ends}")
    columns: list[InputColumn] = []
    start = 0
    for segment, run in groupby(segment_ids):
        stop = start + len(list(run))
        if ends is None or stop - start <= 2 * ends + 1:
            columns += [InputColumn(i, i + 1, segment) for i in range(start, stop)]
        else:
            columns += [InputColumn(i, i + 1, segment) for i in range(start, start + ends)]
            columns.append(InputColumn(start + ends, stop - ends, segment))
            columns += [InputColumn(i, i + 1, segment) for i in range(stop - ends, stop)]
        start = stop
    return Figure2Columns(tuple(columns), start)


def input_embeddings_figure(
    tokens: Sequence[str],
    segment_ids: Sequence[int],
    per_row: int = 16,
    title: str = "",
    ends: int | None = FIGURE2_ENDS,
) -> go.Figure:
    """BERT's input as in the paper's Figure 2: token + segment + position embeddings per token.

    A long segment is drawn as its first and last `ends` tokens with an ellipsis box for the rest
    (see `figure2_columns`; a 512-token pair drew 8,000 px of boxes); the position embeddings
    keep their real numbers. Columns beyond `per_row` wrap onto further bands.
    """
    T = len(tokens)
    if len(segment_ids) != T:
        raise InputError(f"{T} tokens but {len(segment_ids)} segment ids")
    columns = figure2_columns(segment_ids, ends).columns
    bands = max(1, -(-len(columns) // per_row))
    cols = min(len(columns), per_row)
    row_h, gap, band_gap = 1.0, 0.55, 1.0
    band_height = 4 * row_h + 3 * gap + band_gap
    w, xgap = 1.0, 0.14
    fig = go.Figure()
    shapes, notes = [], []
    labels = ("Input", "Token<br>Embeddings", "Segment<br>Embeddings", "Position<br>Embeddings")
    fills = ("white", TOKEN_YELLOW, SEGMENT_GREEN, POSITION_GREY)
    for band in range(bands):
        top = -band * band_height
        notes += _row_labels(labels, top, row_h, gap)
        for k, column in enumerate(columns[band * per_row : (band + 1) * per_row]):
            x0 = k * (w + xgap)
            texts, sizes, special = _column_texts(column, tokens)
            for r, (fill, text, size) in enumerate(zip(fills, texts, sizes, strict=True)):
                y1 = top - r * (row_h + gap)
                border = "#c0392b" if special and not r else "#555"
                shapes.append(
                    dict(
                        type="rect",
                        x0=x0,
                        x1=x0 + w,
                        y0=y1 - row_h,
                        y1=y1,
                        fillcolor="white" if column.is_gap and r != 2 else fill,
                        line=dict(color=border, width=1.2, dash="dot" if column.is_gap else "solid"),
                        layer="below",
                    )
                )
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
    return style_figure(fig, title, height=int(40 + 210 * bands))


def _column_texts(column: InputColumn, tokens: Sequence[str]) -> tuple[tuple[str, ...], tuple[int, ...], bool]:
    """A column's four texts (input, token, segment and position embedding), their font sizes,
    and whether it is [CLS] or [SEP] (drawn with a red border)."""
    seg_name = "A" if column.segment == 0 else "B"
    if column.is_gap:  # the segment embedding is the same for every token left out; the positions run on
        left_out = column.stop - column.start
        return (
            (
                "⋯",
                f"<i>{left_out} more</i>",
                f"E<sub>{seg_name}</sub>",
                f"E<sub>{column.start}–{column.stop - 1}</sub>",
            ),
            (14, 9, 12, 9),
            False,
        )
    i = column.start
    tok = tokens[i]
    # a subscript '.' or ',' is a speck under the E: punctuation is quoted so it reads as a token
    sub = tok if any(ch.isalnum() for ch in tok) else f"'{tok}'"
    texts = (
        html.escape(tok, quote=False),
        f"E<sub>{html.escape(sub, quote=False)}</sub>",
        f"E<sub>{seg_name}</sub>",
        f"E<sub>{i}</sub>",
    )
    size = 12 if len(tok) <= 7 else (10 if len(tok) <= 10 else 8)
    return texts, (size,) * 4, tok in ("[CLS]", "[SEP]")


def _row_labels(labels: Sequence[str], top: float, row_h: float, gap: float) -> list[dict]:
    """The names of a band's rows (Input, Token / Segment / Position Embeddings), left of the band."""
    return [
        dict(
            x=-0.25,
            y=top - r * (row_h + gap) - row_h / 2,
            text=f"<b>{label}</b>",
            xanchor="right",
            showarrow=False,
            font=dict(size=12),
        )
        for r, label in enumerate(labels)
    ]


# --------------------------------------------------------------------------------------
# The architecture
# --------------------------------------------------------------------------------------
class _Canvas:
    """Boxes, arrows and labels in data coordinates, collected for one `update_layout`."""

    def __init__(self):
        self.shapes: list[dict] = []
        self.notes: list[dict] = []

    def box(self, x0, y0, x1, y1, fill, text, size=11, line="#555", colour="#222") -> None:
        self.shapes.append(
            dict(
                type="rect", x0=x0, y0=y0, x1=x1, y1=y1, fillcolor=fill, line=dict(color=line, width=1.2), layer="below"
            )
        )
        if text:
            self.note((x0 + x1) / 2, (y0 + y1) / 2, text, size=size, colour=colour)

    def note(self, x, y, text, size=11, colour="#222", **kw) -> None:
        self.notes.append(dict(x=x, y=y, text=text, showarrow=False, font=dict(size=size, color=colour), **kw))

    def arrow(self, x, y0, y1) -> None:
        self.notes.append(
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


_EXAMPLE_INPUT = ("[CLS]", "the", "cat", "[MASK]", "[SEP]", "it", "slept", "[SEP]")
_SPAN = 10.0  # width of the drawing in data units


def _token_xs(n: int) -> list[float]:
    return [0.55 + i * (_SPAN - 1.1) / (n - 1) for i in range(n)]


def _draw_input(canvas: _Canvas, xs: list[float]) -> None:
    """The example tokens, and the embeddings above them."""
    for x, t in zip(xs, _EXAMPLE_INPUT, strict=False):
        special = t in ("[CLS]", "[SEP]", "[MASK]")
        canvas.box(x - 0.56, 0, x + 0.56, 0.6, "#f1f1f1" if special else "white", t, size=10)
    canvas.note(_SPAN / 2, -0.35, "input: [CLS] sentence A [SEP] sentence B [SEP]", size=10, colour="#666")
    canvas.arrow(_SPAN / 2, 0.65, 1.05)
    canvas.box(0, 1.1, _SPAN, 1.8, TOKEN_YELLOW, "<b>Embeddings</b>: token + segment + position", size=11)


def _draw_layers(canvas: _Canvas, c: BertConfig, y: float) -> float:
    """The encoder layers from height `y` up (at most four drawn); returns the height above them."""
    shown = list(range(c.num_layers)) if c.num_layers <= 4 else [0, 1, None, c.num_layers - 1]
    direction = "" if c.attention_direction == "bidirectional" else " (left-to-right)"
    for idx in shown:
        canvas.arrow(_SPAN / 2, y - 0.5, y - 0.03)
        if idx is None:
            canvas.note(_SPAN / 2, y + 0.2, f"⋮ {c.num_layers - 3} more layers ⋮", size=11, colour="#555")
            y += 0.95
            continue
        canvas.box(0, y, _SPAN, y + 1.45, "#eef3fb", "", line=BLUE)
        canvas.note(0.12, y + 1.25, f"<b>Encoder layer {idx + 1}</b>", size=11, colour=BLUE, xanchor="left")
        canvas.note(_SPAN - 0.12, y + 1.25, "add & norm after each", size=9, colour="#777", xanchor="right")
        canvas.box(
            0.25,
            y + 0.15,
            4.85,
            y + 0.98,
            "white",
            f"Self-attention{direction}<br>{c.num_heads} heads × {c.head_size}",
            size=10,
        )
        canvas.box(
            5.15,
            y + 0.15,
            _SPAN - 0.25,
            y + 0.98,
            "white",
            f"Feed-forward<br>{c.hidden_size} → {c.intermediate_size} → {c.hidden_size}",
            size=10,
        )
        y += 2.0
    return y


def _draw_heads(canvas: _Canvas, c: BertConfig, xs: list[float], y: float) -> float:
    """The outputs C, T1..Tn at height `y` and the NSP and masked-LM heads; returns the top."""
    canvas.arrow(_SPAN / 2, y - 0.5, y - 0.03)
    outs = ["C"] + [f"T<sub>{i}</sub>" for i in range(1, len(xs))]
    for x, t in zip(xs, outs, strict=False):
        canvas.box(x - 0.56, y, x + 0.56, y + 0.6, "#dfe9f7" if t == "C" else "#f7f7f7", t, size=10)
    y_head = y + 1.15
    canvas.arrow(xs[0], y + 0.65, y_head - 0.03)
    canvas.arrow(xs[3], y + 0.65, y_head - 0.03)
    canvas.box(
        0, y_head, 3.3, y_head + 0.75, "#fbe3d0", "<b>NSP</b>: IsNext?" if c.use_nsp_head else "no NSP head", size=11
    )
    canvas.box(3.6, y_head, _SPAN, y_head + 0.75, "#fbe3d0", f"<b>Masked LM</b>: which of {c.vocab_size:,}?", size=11)
    return y_head + 0.85


def architecture_figure(config: BertConfig, title: str = "") -> go.Figure:
    """A picture of BERT for this config, bottom to top as in the paper's Figure 1: input tokens ->
    embeddings -> L encoder layers -> outputs C, T1..Tn -> the NSP and masked-LM heads."""
    c = config
    canvas = _Canvas()
    xs = _token_xs(len(_EXAMPLE_INPUT))
    _draw_input(canvas, xs)
    y = _draw_layers(canvas, c, 2.35)
    top = _draw_heads(canvas, c, xs, y)
    fig = go.Figure()
    fig.update_layout(shapes=canvas.shapes, annotations=canvas.notes)
    fig.add_trace(
        go.Scatter(
            x=[0, _SPAN], y=[-0.5, top], mode="markers", marker=dict(opacity=0), hoverinfo="skip", showlegend=False
        )
    )
    fig.update_xaxes(visible=False, range=[-0.15, _SPAN + 0.15], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-0.55, top], fixedrange=True)
    title = title or f"BERT with L = {c.num_layers} layers, H = {c.hidden_size}, A = {c.num_heads} heads"
    return style_figure(fig, title, height=int(48 * (top + 0.6)) + 40)


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
