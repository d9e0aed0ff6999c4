"""The official metric of each fine-tuning task, written out so every step can be read and tested.

GLUE: accuracy, F1 (positive class), Matthews correlation (CoLA), Pearson / Spearman (STS-B).
Tagging: token accuracy (UPOS) and entity-level F1 over BIO spans (conlleval / seqeval default
semantics: an entity is an exact (type, start, end) match). SQuAD v1.1: exact match and F1 with
the official answer normalisation, maximised over the gold answers.

Every score is a fraction in [0, 1] (the papers print them x100). Imports the standard library only.
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Sequence

from bertlab.errors import InputError


def _same_length(a: Sequence, b: Sequence) -> None:
    if len(a) != len(b):
        raise InputError(f"{len(a)} predictions but {len(b)} gold labels; they must pair up one to one")
    if not a:
        raise InputError("no predictions to score")


# --------------------------------------------------------------------------------------
# Classification and regression (GLUE)
# --------------------------------------------------------------------------------------
def accuracy(predictions: Sequence, golds: Sequence) -> float:
    """Fraction of predictions equal to the gold label."""
    _same_length(predictions, golds)
    return sum(p == g for p, g in zip(predictions, golds, strict=False)) / len(golds)


def f1_binary(predictions: Sequence, golds: Sequence, positive: object = "1") -> float:
    """F1 of the positive class (MRPC's official F1: positive = paraphrase); 0 when undefined."""
    _same_length(predictions, golds)
    tp = sum(p == positive and g == positive for p, g in zip(predictions, golds, strict=False))
    fp = sum(p == positive and g != positive for p, g in zip(predictions, golds, strict=False))
    fn = sum(p != positive and g == positive for p, g in zip(predictions, golds, strict=False))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def matthews_corrcoef(predictions: Sequence, golds: Sequence) -> float:
    """Matthews correlation (multi-class form, equal to sklearn's); 0 when a marginal is constant."""
    _same_length(predictions, golds)
    n = len(golds)
    pred_count = collections.Counter(predictions)
    gold_count = collections.Counter(golds)
    correct = sum(p == g for p, g in zip(predictions, golds, strict=False))
    classes = set(pred_count) | set(gold_count)
    cov_pg = correct * n - sum(pred_count[c] * gold_count[c] for c in classes)
    cov_pp = n * n - sum(v * v for v in pred_count.values())
    cov_gg = n * n - sum(v * v for v in gold_count.values())
    if cov_pp == 0 or cov_gg == 0:
        return 0.0
    return cov_pg / math.sqrt(cov_pp * cov_gg)


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson correlation; 0 when either side is constant."""
    _same_length(xs, ys)
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return 0.0
    return sxy / math.sqrt(sxx * syy)


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the average of the ranks they span (as scipy.stats.rankdata)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman rank correlation: Pearson on the (tie-averaged) ranks."""
    _same_length(xs, ys)
    return pearson(_ranks(xs), _ranks(ys))


# --------------------------------------------------------------------------------------
# Tagging
# --------------------------------------------------------------------------------------
def token_accuracy(predictions: Sequence[Sequence[str]], golds: Sequence[Sequence[str]]) -> float:
    """Accuracy over every word of every sentence (UPOS accuracy)."""
    _same_length(predictions, golds)
    flat_p, flat_g = [], []
    for i, (p, g) in enumerate(zip(predictions, golds, strict=False)):
        if len(p) != len(g):
            raise InputError(f"sentence {i}: {len(p)} predicted tags for {len(g)} words")
        flat_p.extend(p)
        flat_g.extend(g)
    return accuracy(flat_p, flat_g)


def bio_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entity spans (type, first word, last word) of one BIO-tagged sentence.

    conlleval semantics, as seqeval's default mode: an entity starts at B-X, or at I-X that does
    not continue an entity of type X (after O or another type); it ends before O, B-, or a
    change of type. E.g. ["B-PER", "I-PER", "O", "I-LOC"] -> [("PER", 0, 1), ("LOC", 3, 3)].
    """
    entities = []
    current: list | None = None  # [type, start, end]
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, kind = tag.partition("-")
        if prefix not in ("B", "I") or not kind:
            prefix, kind = "O", ""
        continues = prefix == "I" and current is not None and current[0] == kind
        if current is not None and not continues:
            entities.append(tuple(current))
            current = None
        if prefix == "B" or (prefix == "I" and not continues):
            current = [kind, i, i]
        elif continues:
            current[2] = i
    return entities


def entity_f1(predictions: Sequence[Sequence[str]], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro precision / recall / F1 over exact entity matches (same type, same first and last word)."""
    _same_length(predictions, golds)
    tp = n_pred = n_gold = 0
    for p, g in zip(predictions, golds, strict=False):
        pe, ge = set(bio_entities(p)), set(bio_entities(g))
        tp += len(pe & ge)
        n_pred += len(pe)
        n_gold += len(ge)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


# --------------------------------------------------------------------------------------
# SQuAD v1.1 (the official evaluate-v1.1.py semantics)
# --------------------------------------------------------------------------------------
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 between the normalised answers."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Sequence[str], gold_answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean exact match and F1, each the max over a question's gold answers."""
    _same_length(predictions, gold_answers)
    em = f1 = 0.0
    for i, (pred, golds) in enumerate(zip(predictions, gold_answers, strict=False)):
        if not golds:
            raise InputError(f"question {i} has no gold answer; SQuAD v1.1 scoring needs at least one")
        em += max(squad_exact_match(pred, g) for g in golds)
        f1 += max(squad_f1(pred, g) for g in golds)
    n = len(predictions)
    return {"exact_match": em / n, "f1": f1 / n}
