"""What attention heads do: per-head statistics, sample averages, and switching heads off.

Statistics follow Clark et al. 2019, "What Does BERT Look At?": for every head, the attention
mass that tokens give to [CLS], to [SEP], to punctuation, to the previous and next token and to
themselves, and the entropy of each token's attention distribution. They are computed on one
input or averaged over a sample of sentences (`SAMPLE_PAIRS`, a small built-in list).

Head ablation (Michel et al. 2019, "Are Sixteen Heads Really Better than One?") uses a
head_mask (L, A): 1 keeps a head, 0 switches it off. `compare_ablation` runs fill-mask and NSP
with and without the mask so one sees what the heads were doing.

A long text's attention (`long_attention`, for windowed long models): every head's map averaged over
tiles, so that it fits a figure and never needs the T x T matrix; a sparse model's kernel pools as it
goes (bertlab.patterns.kernel.attention_map); a full-attention model's map is read whole (up to
FULL_MAP_LIMIT tokens) and pooled after. Beside it, the pattern's picture (bertlab.patterns.describe).

Imports numpy, torch, bertlab.errors, bertlab.inference (types), bertlab.models.registry (head names) and
bertlab.patterns.describe; never streamlit.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from bertlab.errors import InputError
from bertlab.inference import FillMaskResult, LoadedModel, NSPResult
from bertlab.models.registry import heads_in_words
from bertlab.patterns.describe import PatternPicture, pattern_picture, pool_for

log = logging.getLogger(__name__)

# name -> (short label, what it measures). Order is the order the app shows them.
HEAD_STATS: dict[str, tuple[str, str]] = {
    "cls": ("→ [CLS]", "share of attention that goes to the [CLS] token"),
    "sep": ("→ [SEP]", "share of attention that goes to [SEP] tokens (Clark et al.: a 'no-op' for many heads)"),
    "punct": ("→ punctuation", "share of attention that goes to periods and commas and other punctuation"),
    "prev": ("→ previous token", "share of attention each token gives to the token just before it"),
    "next": ("→ next token", "share of attention each token gives to the token just after it"),
    "self": ("→ itself", "share of attention each token gives to itself"),
    "entropy": ("entropy (bits)", "how spread out each token's attention is: 0 = all on one token, log2(T) = uniform"),
}
SHARE_STATS = ("cls", "sep", "punct", "prev", "next", "self")

# Sentence pairs for sample averages: everyday English, as segment A and segment B.
SAMPLE_PAIRS: tuple[tuple[str, str], ...] = (
    ("The cat sat on the mat.", "It was warm in the sun."),
    ("She opened the door and walked in.", "The room was dark and quiet."),
    ("Paris is the capital of France.", "It is famous for the Eiffel Tower."),
    ("The children played in the park all afternoon.", "Their parents watched from a bench."),
    ("He bought a new car last week.", "It is red, fast, and very expensive."),
    ("Water boils at one hundred degrees.", "At the top of a mountain it boils sooner."),
    ("The meeting was moved to Friday.", "Nobody could come on Thursday."),
    ("I forgot my umbrella at home.", "Of course, it started to rain."),
    ("The river flows through the old town.", "Several bridges cross it."),
    ("My sister plays the piano.", "She practises every evening after dinner."),
    ("The train was late again this morning.", "Many people missed their flights."),
    ("They planted tomatoes in the garden.", "By August the plants were taller than the fence."),
    ("The museum opens at nine.", "Tickets can be bought at the door."),
    ("A storm hit the coast last night.", "Trees fell and the power went out."),
    ("The book was better than the film.", "The film left out the best chapters."),
    ("We walked along the beach at sunset.", "The sky turned orange, then purple."),
)


# --------------------------------------------------------------------------------------
# Per-head statistics
# --------------------------------------------------------------------------------------
def is_punctuation(token: str) -> bool:
    """True for WordPiece tokens made only of punctuation characters (e.g. '.', ',', '##.')."""
    core = token[2:] if token.startswith("##") else token
    return bool(core) and all(unicodedata.category(ch).startswith("P") for ch in core)


def token_roles(tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """Boolean (T,) masks of which positions are [CLS], [SEP] and punctuation."""
    return {
        "cls": np.array([t == "[CLS]" for t in tokens], dtype=bool),
        "sep": np.array([t == "[SEP]" for t in tokens], dtype=bool),
        "punct": np.array([is_punctuation(t) for t in tokens], dtype=bool),
    }


def _stat_sums(attentions: np.ndarray, tokens: Sequence[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-head sums over query tokens of every statistic, and the number of rows that count.

    Args:
        attentions: (L, A, T, T) attention probabilities, rows summing to 1 (0 for heads off).

    Returns:
        sums: name -> (L, A) float64, summed over the query tokens that have a "neighbour" for the
            statistic (every token for most; T-1 tokens for prev/next).
        counts: name -> (L, A) number of rows summed (0 for heads that are switched off).
    """
    att = np.asarray(attentions, dtype=np.float64)
    if att.ndim != 4 or att.shape[-1] != att.shape[-2]:
        raise InputError(f"attentions must be (L, A, T, T), got shape {att.shape}")
    L, A, T, _ = att.shape
    if len(tokens) != T:
        raise InputError(f"{len(tokens)} tokens but attention maps over {T} positions")
    live = att.sum(-1) > 0.5  # (L, A, T) rows of heads that are on
    roles = token_roles(tokens)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    rows = live.sum(-1).astype(np.float64)  # (L, A)
    for name in ("cls", "sep", "punct"):
        sums[name] = att[..., roles[name]].sum(-1).sum(-1)  # (L, A)
        counts[name] = rows
    idx = np.arange(T)
    sums["self"] = att[:, :, idx, idx].sum(-1)
    counts["self"] = rows
    if T > 1:
        sums["prev"] = att[:, :, idx[1:], idx[:-1]].sum(-1)  # token i -> i-1, for i >= 1
        sums["next"] = att[:, :, idx[:-1], idx[1:]].sum(-1)  # token i -> i+1, for i < T-1
        counts["prev"] = live[:, :, 1:].sum(-1).astype(np.float64)
        counts["next"] = live[:, :, :-1].sum(-1).astype(np.float64)
    else:
        sums["prev"] = sums["next"] = np.zeros((L, A))
        counts["prev"] = counts["next"] = np.zeros((L, A))
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(att > 0, att * np.log2(np.where(att > 0, att, 1.0)), 0.0)
    sums["entropy"] = (-plogp.sum(-1) * live).sum(-1)
    counts["entropy"] = rows
    return sums, counts


@dataclass
class HeadStats:
    """Per-head statistics, each an (L, A) float array; NaN for heads that were switched off.

    Attributes:
        values: name (a key of HEAD_STATS) -> (L, A).
        num_inputs: how many inputs were averaged.
        num_tokens: how many tokens in all.
    """

    values: dict[str, np.ndarray]
    num_inputs: int = 1
    num_tokens: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return next(iter(self.values.values())).shape

    def top_heads(self, name: str, k: int = 5, largest: bool = True) -> list[tuple[int, int, float]]:
        """The k heads with the largest (or smallest) value of `name`, as (layer, head, value), 0-based."""
        if name not in self.values:
            raise InputError(f"unknown statistic {name!r}; choose one of {', '.join(HEAD_STATS)}")
        v = self.values[name]
        flat = np.where(np.isnan(v), -np.inf if largest else np.inf, v).ravel()
        order = np.argsort(-flat if largest else flat, kind="stable")[:k]
        A = v.shape[1]
        return [(int(i // A), int(i % A), float(v.flat[i])) for i in order if np.isfinite(flat[i])]

    def rows(self) -> list[dict]:
        """One dict per head: layer and head (1-based, as people count them) and every statistic."""
        L, A = self.shape
        out = []
        for layer in range(L):
            for head in range(A):
                row = {"layer": layer + 1, "head": head + 1}
                for name in self.values:
                    row[name] = float(self.values[name][layer, head])
                out.append(row)
        return out


def head_statistics(attentions: np.ndarray, tokens: Sequence[str]) -> HeadStats:
    """Clark et al.'s per-head statistics for one input.

    Args:
        attentions: (L, A, T, T) float attention probabilities (`Inspection.attentions`).
        tokens: the T WordPiece tokens.

    Returns:
        HeadStats with shares in [0, 1] (averaged over query tokens) and entropy in bits.
    """
    sums, counts = _stat_sums(attentions, tokens)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = {name: np.where(counts[name] > 0, sums[name] / counts[name], np.nan) for name in HEAD_STATS}
    return HeadStats(values, 1, len(tokens))


def average_head_statistics(
    model: LoadedModel,
    pairs: Iterable[tuple[str, str | None]] = SAMPLE_PAIRS,
    head_mask: torch.Tensor | None = None,
) -> HeadStats:
    """Per-head statistics averaged over every token of a sample of inputs (token-weighted).

    Args:
        model: a loaded model.
        pairs: (sentence A, sentence B or None) inputs; the built-in sample by default.
        head_mask: (L, A) optional; heads switched off come out NaN.
    """
    total_sums: dict[str, np.ndarray] = {}
    total_counts: dict[str, np.ndarray] = {}
    n_inputs = n_tokens = 0
    for text_a, text_b in pairs:
        ins = model.inspect(text_a, text_b, head_mask=head_mask)
        sums, counts = _stat_sums(ins.attentions, ins.tokens)
        for name in HEAD_STATS:
            total_sums[name] = total_sums.get(name, 0) + sums[name]
            total_counts[name] = total_counts.get(name, 0) + counts[name]
        n_inputs += 1
        n_tokens += len(ins.tokens)
    if not n_inputs:
        raise InputError("no sentences to average over")
    with np.errstate(divide="ignore", invalid="ignore"):
        values = {
            name: np.where(total_counts[name] > 0, total_sums[name] / np.maximum(total_counts[name], 1), np.nan)
            for name in HEAD_STATS
        }
    return HeadStats(values, n_inputs, n_tokens)


# --------------------------------------------------------------------------------------
# Head masks
# --------------------------------------------------------------------------------------
_LABEL = re.compile(r"^\s*L?\s*(\d+)\s*[-:/.,·\s]\s*H?\s*(\d+)\s*$", re.IGNORECASE)


def head_label(layer: int, head: int) -> str:
    """0-based (layer, head) -> 'L1-H1', the 1-based name people use (Clark et al. say 'head 8-10')."""
    return f"L{layer + 1}-H{head + 1}"


def parse_head_label(text: str, num_layers: int, num_heads: int) -> tuple[int, int]:
    """'L2-H3', '2-3' or '2:3' (1-based) -> (1, 2) (0-based).

    Raises:
        InputError: not of that form, or outside the model's L x A heads.
    """
    m = _LABEL.match(text)
    if not m:
        raise InputError(f"{text!r} is not a head; write layer-head, 1-based, e.g. 'L2-H3' or '2-3'")
    layer, head = int(m.group(1)) - 1, int(m.group(2)) - 1
    _check_head(layer, head, num_layers, num_heads)
    return layer, head


def _check_head(layer: int, head: int, num_layers: int, num_heads: int) -> None:
    if not (0 <= layer < num_layers and 0 <= head < num_heads):
        raise InputError(
            f"head {head_label(layer, head)} does not exist; this model has layers 1-{num_layers} "
            f"and heads 1-{num_heads} in each"
        )


def make_head_mask(num_layers: int, num_heads: int, off: Iterable[tuple[int, int]] = ()) -> torch.Tensor:
    """(L, A) float32 head mask: 1 everywhere except the 0-based (layer, head) pairs in `off`."""
    mask = torch.ones(num_layers, num_heads, dtype=torch.float32)
    for layer, head in off:
        _check_head(layer, head, num_layers, num_heads)
        mask[layer, head] = 0.0
    return mask


def heads_off(mask: torch.Tensor | np.ndarray | None) -> list[tuple[int, int]]:
    """The 0-based (layer, head) pairs a head mask switches off, in order."""
    if mask is None:
        return []
    m = np.asarray(mask.detach().cpu() if isinstance(mask, torch.Tensor) else mask)
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(m == 0), strict=False)]


def all_heads(num_layers: int, num_heads: int) -> list[tuple[int, int]]:
    return [(layer, head) for layer in range(num_layers) for head in range(num_heads)]


# --------------------------------------------------------------------------------------
# Ablation: the same question with and without some heads
# --------------------------------------------------------------------------------------
@dataclass
class AblationComparison:
    """Fill-mask and NSP answers with all heads on (`*_base`) and with `off` heads switched off.

    Either pair may be None (no mask text given, or no NSP head / no sentence pair).
    """

    off: list[tuple[int, int]]
    fill_base: FillMaskResult | None = None
    fill_ablated: FillMaskResult | None = None
    nsp_base: NSPResult | None = None
    nsp_ablated: NSPResult | None = None
    notes: list[str] = field(default_factory=list)

    def fill_rows(self, mask_index: int = 0) -> list[dict]:
        """Per candidate word: probability with all heads and with the heads off, for one [MASK]."""
        if self.fill_base is None or self.fill_ablated is None:
            return []
        base = self.fill_base.masks[mask_index].candidates
        ablated = self.fill_ablated.masks[mask_index].candidates
        words: dict[str, list[float]] = {}
        for c in base:
            words.setdefault(c.token, [c.score, float("nan")])
        for c in ablated:
            words.setdefault(c.token, [float("nan"), float("nan")])[1] = c.score
        return [{"token": t, "all heads": b, "heads off": a} for t, (b, a) in words.items()]


def compare_ablation(
    model: LoadedModel,
    head_mask: torch.Tensor,
    mask_text: str | None = None,
    text_a: str | None = None,
    text_b: str | None = None,
    top_k: int = 5,
) -> AblationComparison:
    """Run fill-mask on `mask_text` and NSP on (`text_a`, `text_b`) with all heads, then with `head_mask`;
    a model without the head one of them needs gets a note saying what it has instead.

    Raises:
        InputError: from fill_mask (no [MASK], empty text) or a mask of the wrong shape.
    """
    model._head_mask(head_mask)  # the one shape check, before any work: InputError for a wrong shape
    out = AblationComparison(off=heads_off(head_mask))
    if mask_text is not None and mask_text.strip():
        if model.has_mlm:
            out.fill_base = model.fill_mask(mask_text, top_k=top_k, joint=False)
            out.fill_ablated = model.fill_mask(mask_text, top_k=top_k, joint=False, head_mask=head_mask)
        else:  # an ELECTRA discriminator: replaced-token detection, no masked LM
            out.notes.append(
                f"this checkpoint has no masked-LM head, so there is no fill-mask answer to compare; "
                f"it has {heads_in_words(model.heads, offer=True)}"
            )
    if text_a and text_b:
        if model.has_nsp:
            out.nsp_base = model.next_sentence(text_a, text_b)
            out.nsp_ablated = model.next_sentence(text_a, text_b, head_mask=head_mask)
        else:
            out.notes.append(
                "this checkpoint has no next-sentence head, so there is no NSP answer to compare; "
                f"it has {heads_in_words(model.heads, offer=True)}"
            )
    return out


# --------------------------------------------------------------------------------------
# Long inputs: every head's map averaged over tiles (issue #56)
# --------------------------------------------------------------------------------------
FULL_MAP_LIMIT = 1024  # a full-attention model's maps are read whole only up to this many tokens


@dataclass(frozen=True)
class LongAttention:
    """One text's attention maps, pooled."""

    tokens: list[str]  # as a page draws them (the tokenizer's readable_tokens)
    maps: np.ndarray  # (L, A, n, n): each row is a tile of `pool` queries, its mean attention per key tile
    pool: int  # tokens per tile side
    truncated: bool  # the text was longer than the model reads
    picture: PatternPicture  # the pairs the model's pattern computes for this length

    @property
    def length(self) -> int:
        return len(self.tokens)

    def tile_label(self, i: int) -> str:
        """Tile i's tokens, e.g. 'tokens 32-47: "the whale ..."'."""
        lo, hi = i * self.pool, min(self.length, (i + 1) * self.pool) - 1
        return f"tokens {lo}-{hi}: {' '.join(self.tokens[lo : min(hi + 1, lo + 4)])}…"


def long_attention(lm: LoadedModel, text: str, pool: int | None = None) -> LongAttention:
    """Every head's attention on `text`, averaged over pool x pool tiles (pool chosen to fit when None)."""
    lm._check_text(text)
    enc = lm.tokenizer.encode(text, max_length=lm.max_length)
    T = len(enc)
    pool = pool or pool_for(T)
    if pool < 1:
        raise InputError(f"pool must be a whole number of tokens, 1 or more, got {pool}")
    if not lm.config.sparse and T > FULL_MAP_LIMIT:
        raise InputError(
            f"{T:,} tokens under full attention would need {T * T * 4 / 2**20:,.0f} MiB per head for its map; "
            f"this view reads full attention up to {FULL_MAP_LIMIT:,} tokens: pick a windowed model"
        )
    ids = torch.tensor([enc.ids], device=lm.device)
    types = torch.tensor([enc.type_ids], device=lm.device)
    with torch.inference_mode():
        if lm.config.sparse:
            out = lm.model(ids, types, output_attentions=True, attention_pool=pool)
            maps = torch.stack(out.encoder.attentions, 0)[:, 0].float().cpu().numpy()
        else:
            out = lm.model(ids, types, output_attentions=True)
            maps = _pool(torch.stack(out.encoder.attentions, 0)[:, 0].float(), pool).cpu().numpy()
    tokens = lm.tokenizer.readable_tokens(enc.tokens)  # as drawn: RoBERTa's 'Ġmat' reads '␣mat'
    return LongAttention(tokens, maps, pool, enc.truncated, pattern_picture(lm.config, T, pool))


def _pool(maps: torch.Tensor, pool: int) -> torch.Tensor:
    """(L, A, T, T) -> (L, A, n, n): a tile's rows averaged, its keys summed (rows still sum to 1)."""
    L, A, T, _ = maps.shape
    n = math.ceil(T / pool)
    padded = torch.nn.functional.pad(maps, (0, n * pool - T, 0, n * pool - T))
    return padded.view(L, A, n, pool, n, pool).sum(-1).sum(-2) / pool
