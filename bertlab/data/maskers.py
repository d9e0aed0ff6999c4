"""Maskers: which positions of an instance the masked LM predicts, and what it sees there.

`Masker` is Google's `create_masked_lm_predictions` (15% of tokens; 80% [MASK] / 10% random / 10%
kept; whole-word option), every probability a `DataConfig` field; `SpanMasker` is SpanBERT's (Joshi
et al. 2019): spans of whole words; `SpanBoundaryMasker` the same with a gap between any two spans,
for the span-boundary objective. An `Objective` names its masker (`Objective.masker`), found in
`MASKERS`; `register_masker` adds one.

One deliberate departure from Google: the 10% random replacement draws from the vocabulary *minus*
the special tokens (see bertlab.data.pretraining_data's docstring and `DataConfig.random_token_prob`).

Imports numpy, bertlab.data.data_config and bertlab.tokenizer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

from bertlab.data.data_config import DataConfig
from bertlab.tokenizer import BertTokenizer

KIND_NONE, KIND_MASK, KIND_RANDOM, KIND_KEEP = 0, 1, 2, 3
KIND_NAMES = {KIND_NONE: "", KIND_MASK: "mask", KIND_RANDOM: "random", KIND_KEEP: "keep"}


def num_to_predict(num_tokens: int, config: DataConfig) -> int:
    """How many of an instance's `num_tokens` tokens ([CLS] and [SEP] included, as Google's script
    counts) are chosen for the masked LM: `masked_lm_prob` of them, rounded (at least 1), at most
    `max_predictions_per_seq`. With whole-word masking fewer may be chosen (a word that would go past
    this number is skipped)."""
    return min(config.max_predictions_per_seq, max(1, int(round(num_tokens * config.masked_lm_prob))))


class Masker:
    """Google's `create_masked_lm_predictions`, with every probability a config field."""

    def __init__(self, tokenizer: BertTokenizer, config: DataConfig):
        self.config = config
        self.cls_id, self.sep_id, self.mask_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id
        size = max(tokenizer.vocab.values()) + 1
        self.continuation = np.zeros(size, dtype=bool)
        for tok, i in tokenizer.vocab.items():
            self.continuation[i] = tok.startswith("##")
        # the random 10%: the whole vocabulary except the special tokens (Google: the whole vocabulary;
        # see `DataConfig.random_token_prob`)
        specials = tokenizer.special_ids
        self.random_pool = [i for i in range(size) if i not in specials]
        self.keep_share = config.keep_token_prob / (1.0 - config.mask_token_prob) if config.mask_token_prob < 1 else 0.0

    def __call__(self, ids: Sequence[int], rng: random.Random) -> tuple[list[int], list[int], list[int], list[int]]:
        """Returns (masked ids, positions, original ids at those positions, kinds)."""
        cfg = self.config
        cand: list[list[int]] = []
        for i, t in enumerate(ids):
            if t == self.cls_id or t == self.sep_id:
                continue
            if cfg.whole_word_mask and cand and self.continuation[t]:
                cand[-1].append(i)
            else:
                cand.append([i])
        rng.shuffle(cand)
        out = list(ids)
        target = num_to_predict(len(ids), cfg)
        chosen: list[tuple[int, int, int]] = []
        covered: set[int] = set()
        for index_set in cand:
            if len(chosen) >= target:
                break
            if len(chosen) + len(index_set) > target:
                continue
            if any(i in covered for i in index_set):
                continue
            for i in index_set:
                covered.add(i)
                if rng.random() < cfg.mask_token_prob:
                    out[i], kind = self.mask_id, KIND_MASK
                elif rng.random() < self.keep_share:
                    kind = KIND_KEEP
                else:
                    out[i], kind = self.random_pool[rng.randint(0, len(self.random_pool) - 1)], KIND_RANDOM
                chosen.append((i, ids[i], kind))
        chosen.sort()
        return out, [c[0] for c in chosen], [c[1] for c in chosen], [c[2] for c in chosen]


# Maskers by the name an Objective gives (`Objective.masker`): each is made from the tokenizer and
# the data config, and called on an instance's ids with an RNG like `Masker`.
MaskerFactory = Callable[[BertTokenizer, DataConfig], Callable[..., tuple[list[int], list[int], list[int], list[int]]]]
MASKERS: dict[str, MaskerFactory] = {"bert": Masker}


def register_masker(name: str, factory: MaskerFactory) -> None:
    """Add a masker an `Objective` can name (e.g. span masking)."""
    MASKERS[name] = factory


def make_masker(tokenizer: BertTokenizer, config: DataConfig):
    """The masker of the config's objective, or None for an objective that masks nothing."""
    name = config.objective_spec.masker
    return None if name is None else MASKERS[name](tokenizer, config)


SPAN_GEOMETRIC_P = 0.2  # SpanBERT: span length in words ~ Geometric(0.2), mean 5 ...
SPAN_MAX_WORDS = 10  # ... clipped at 10 words (mean 3.8)


class SpanMasker(Masker):
    """SpanBERT's masking (Joshi et al. 2019, §3.1): spans of whole words, each span's length in
    words drawn from Geometric(0.2) clipped at 10 and its start a random word, until the share of
    tokens `masked_lm_prob` asks (`num_to_predict`, so never past `max_predictions_per_seq`). The
    80/10/10 choice is made per span, as in the paper: all its tokens [MASK], all random, or all kept.

    A span stays inside its segment ([CLS] and [SEP] are never chosen). A span longer than what is
    left of the budget is cut to the words that fit; attempts are bounded, so a short sequence may end
    with fewer masked tokens than the budget, as Google's masker may.
    """

    def _words(self, ids: Sequence[int]) -> list[list[list[int]]]:
        """Segments, each a list of words, each the positions of its WordPieces."""
        segments: list[list[list[int]]] = [[]]
        for i, t in enumerate(ids):
            if t == self.cls_id or t == self.sep_id:
                if segments[-1]:
                    segments.append([])
                continue
            if segments[-1] and self.continuation[t]:
                segments[-1][-1].append(i)
            else:
                segments[-1].append([i])
        return [s for s in segments if s]

    @staticmethod
    def span_length(rng: random.Random) -> int:
        """Words in one span: Geometric(SPAN_GEOMETRIC_P) on 1, 2, ..., clipped at SPAN_MAX_WORDS."""
        length = 1
        while length < SPAN_MAX_WORDS and rng.random() >= SPAN_GEOMETRIC_P:
            length += 1
        return length

    def __call__(self, ids: Sequence[int], rng: random.Random) -> tuple[list[int], list[int], list[int], list[int]]:
        cfg = self.config
        segments = self._words(ids)
        target = num_to_predict(len(ids), cfg)
        out = list(ids)
        chosen: list[tuple[int, int, int]] = []
        covered: set[int] = set()
        for _ in range(8 * max(1, target)):
            if len(chosen) >= target or not segments:
                break
            words = segments[rng.randrange(len(segments))]
            start = rng.randrange(len(words))
            span = words[start : start + self.span_length(rng)]
            positions: list[int] = []
            for word in span:  # whole words only, as many as the budget leaves room for
                if len(chosen) + len(positions) + len(word) > target:
                    break
                positions.extend(word)
            if not positions or self._collides(positions, covered):
                continue
            r = rng.random()
            kind = (
                KIND_MASK
                if r < cfg.mask_token_prob
                else KIND_KEEP
                if r < cfg.mask_token_prob + cfg.keep_token_prob
                else KIND_RANDOM
            )
            for i in positions:
                covered.add(i)
                if kind == KIND_MASK:
                    out[i] = self.mask_id
                elif kind == KIND_RANDOM:
                    out[i] = self.random_pool[rng.randint(0, len(self.random_pool) - 1)]
                chosen.append((i, ids[i], kind))
        chosen.sort()
        return out, [c[0] for c in chosen], [c[1] for c in chosen], [c[2] for c in chosen]

    @staticmethod
    def _collides(positions: list[int], covered: set[int]) -> bool:
        """Whether a candidate span (ascending, contiguous positions) overlaps a span already chosen."""
        return any(i in covered for i in positions)


class SpanBoundaryMasker(SpanMasker):
    """SpanMasker with one rule more: a span never touches another one (at least one unmasked
    token lies between any two), so that the spans can be read back from the labels alone, as
    runs of consecutive labelled positions, and each span's boundary tokens x_{s-1} and x_{e+1}
    are unmasked: what the span-boundary objective (bertlab.losses.span_boundaries) predicts from.
    SpanBERT's own masker lets spans touch; the gap costs a few candidate spans, which later
    attempts replace (the budget is met as closely as SpanMasker's)."""

    @staticmethod
    def _collides(positions: list[int], covered: set[int]) -> bool:
        return any(i in covered for i in range(positions[0] - 1, positions[-1] + 2))


MASKERS["span"] = SpanMasker
MASKERS["span_sbo"] = SpanBoundaryMasker
