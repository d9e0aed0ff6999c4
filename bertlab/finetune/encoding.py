"""Examples -> model inputs -> task answers, shared by training, evaluation and prediction.

- sentences / pairs: [CLS] A [SEP] (B [SEP]), longest-first truncation;
- tagging: words are split into pieces as they read inside the sentence (`tokenize_words`: RoBERTa's
  carry the space before each word, 'Ġcat'); the first piece of each word carries the word's
  label and the rest -100 (not scored); a sentence longer than the model accepts is cut into
  consecutive chunks of whole words, so every word is tagged;
- QA: [CLS] question [SEP] context window [SEP] (RoBERTa: <s> question </s></s> context </s>, the
  tokenizer's own pair template), windows `doc_stride` tokens apart over a long
  context; the answer is the best start <= end span (at most `max_answer_length` pieces) over all
  windows, scored in the window where its start token has the most context, and mapped back to
  the original context characters through the tokenizer's offsets.

Imports torch, bertlab.data.batching, bertlab.tokenizer, bertlab.errors and bertlab.finetune.data.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError
from bertlab.finetune.data import QAExample, SequenceExample, TaggingExample
from bertlab.tokenizer import BertTokenizer

IGNORE = -100  # label of tokens the loss and the metric skip


@dataclass
class Feature:
    """One model input row, and what is needed to map its outputs back onto its example."""

    input_ids: list[int]
    token_type_ids: list[int]
    example_index: int
    label: int | float | None = None  # sequence tasks
    token_labels: list[int] | None = None  # tagging: one per token, IGNORE where not scored
    word_starts: list[int] = field(default_factory=list)  # tagging: token index of each word's first piece
    word_offset: int = 0  # tagging: index of this chunk's first word in the sentence
    start_position: int = 0  # QA: answer tokens in this window (0 = [CLS]: not in it)
    end_position: int = 0
    token_to_char: list[tuple[int, int] | None] = field(default_factory=list)  # QA: context offsets
    max_context: list[bool] = field(default_factory=list)  # QA: this window gives the token most context
    truncated: bool = False


# --------------------------------------------------------------------------------------
# Sentences and pairs
# --------------------------------------------------------------------------------------
def encode_sequences(
    examples: Sequence[SequenceExample], tokenizer: BertTokenizer, max_length: int, label_to_id: dict[str, int] | None
) -> list[Feature]:
    """label_to_id None means regression (labels are floats)."""
    if not examples:
        return []
    texts_a = [e.text_a for e in examples]
    texts_b = [e.text_b or "" for e in examples] if examples[0].text_b is not None else None
    encodings = tokenizer.encode_batch(texts_a, texts_b, max_length=max_length, truncate=True)
    out = []
    for i, (ex, enc) in enumerate(zip(examples, encodings, strict=False)):
        label = None
        if ex.label is not None:
            label = float(ex.label) if label_to_id is None else label_to_id[ex.label]
        out.append(Feature(enc.ids, enc.type_ids, i, label=label, truncated=enc.truncated))
    return out


# --------------------------------------------------------------------------------------
# Tagging
# --------------------------------------------------------------------------------------
def encode_tagging(
    examples: Sequence[TaggingExample], tokenizer: BertTokenizer, max_length: int, label_to_id: dict[str, int] | None
) -> list[Feature]:
    """Label the first piece of each word; chunk sentences that do not fit."""
    room = max_length - 2
    if room < 1:
        raise InputError(f"max_length {max_length} leaves no room for words")
    flat = [w for ex in examples for w in ex.words]
    pieces = tokenizer.tokenize_words(flat) if flat else []
    out, k = [], 0
    for i, ex in enumerate(examples):
        word_pieces = []
        for _ in ex.words:
            ids = pieces[k] or [tokenizer.unk_id]  # a word the normaliser erases entirely
            word_pieces.append(ids[:room])
            k += 1
        start = 0
        while start < len(word_pieces) or (start == 0 and not word_pieces):
            ids, type_ids, labels, starts = [tokenizer.cls_id], [0], [IGNORE], []
            end = start
            while end < len(word_pieces) and len(ids) - 1 + len(word_pieces[end]) <= room:
                starts.append(len(ids))
                tag = ex.tags[end] if ex.tags else None
                labels.extend(
                    [label_to_id[tag] if (tag is not None and label_to_id) else IGNORE]
                    + [IGNORE] * (len(word_pieces[end]) - 1)
                )
                ids.extend(word_pieces[end])
                end += 1
            ids.append(tokenizer.sep_id)
            labels.append(IGNORE)
            type_ids = [0] * len(ids)
            out.append(
                Feature(
                    ids,
                    type_ids,
                    i,
                    token_labels=labels,
                    word_starts=starts,
                    word_offset=start,
                    truncated=start > 0 or end < len(word_pieces),
                )
            )
            if end == start:
                break
            start = end
    return out


def decode_tagging(
    examples: Sequence[TaggingExample],
    features: Sequence[Feature],
    logits: Sequence[torch.Tensor],
    labels: Sequence[str],
) -> list[list[str]]:
    """Per-word tags of each example from per-feature logits (T_i, C)."""
    tags = [[labels[0]] * len(ex.words) for ex in examples]
    for f, lg in zip(features, logits, strict=False):
        best = lg.argmax(-1).tolist()
        for j, pos in enumerate(f.word_starts):
            tags[f.example_index][f.word_offset + j] = labels[best[pos]]
    return tags


# --------------------------------------------------------------------------------------
# Question answering
# --------------------------------------------------------------------------------------
def _char_to_tokens(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """First and last context token overlapping characters [start, end)."""
    first = next((i for i, (s, e) in enumerate(offsets) if e > start), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end), None)
    if first is None or last is None or first > last:
        return None
    return first, last


def pair_template(tokenizer: BertTokenizer) -> tuple[list[int], list[int], list[int]]:
    """The special tokens the tokenizer puts before A, between A and B, and after B: ([CLS], [SEP], [SEP])
    for WordPiece, (<s>, </s></s>, </s>) for RoBERTa's byte-level BPE; read from its own pair encoding."""
    enc = tokenizer.encode("a", "b", truncate=False)
    seq = enc.sequence_ids
    a_end = max(i for i, s in enumerate(seq) if s == 0) + 1
    b_start = seq.index(1)
    b_end = max(i for i, s in enumerate(seq) if s == 1) + 1
    return enc.ids[: seq.index(0)], enc.ids[a_end:b_start], enc.ids[b_end:]


def encode_qa(
    examples: Sequence[QAExample],
    tokenizer: BertTokenizer,
    max_length: int,
    doc_stride: int,
    max_query_length: int,
    with_answers: bool,
) -> list[Feature]:
    """Windows of each context beside its question; answer positions from the first gold answer."""
    questions = tokenizer.tokenize_batch([e.question for e in examples]) if examples else []
    unique = list(dict.fromkeys(e.context for e in examples))
    encoded = tokenizer.encode_batch(unique, max_length=sys.maxsize, truncate=False) if unique else []
    # drop [CLS] and [SEP]: context pieces with their character offsets in the context
    context_tokens = {c: (enc.ids[1:-1], enc.offsets[1:-1]) for c, enc in zip(unique, encoded, strict=False)}
    head, middle, tail = pair_template(tokenizer)
    out = []
    for i, ex in enumerate(examples):
        q = questions[i][:max_query_length]
        ctx_ids, ctx_offsets = context_tokens[ex.context]
        room = max_length - len(q) - len(head) - len(middle) - len(tail)
        if room < 1:
            raise InputError(f"max_length {max_length} leaves no room for the context after a {len(q)}-piece question")
        windows = []
        start = 0
        while True:
            length = min(len(ctx_ids) - start, room)
            windows.append((start, length))
            if start + length >= len(ctx_ids):
                break
            start += min(length, doc_stride)
        answer_tokens = None
        if with_answers and ex.answers:
            text, char_start = ex.answers[0]
            answer_tokens = _char_to_tokens(ctx_offsets, char_start, char_start + len(text))
        prefix = head + q + middle
        for start, length in windows:
            ids = prefix + ctx_ids[start : start + length] + tail
            type_ids = [0] * len(prefix) + [1] * (length + len(tail))
            token_to_char: list[tuple[int, int] | None] = [None] * len(prefix)
            max_context = [False] * len(prefix)
            for t in range(start, start + length):
                token_to_char.append(tuple(ctx_offsets[t]))
                max_context.append(_is_max_context(windows, (start, length), t))
            token_to_char.extend([None] * len(tail))
            max_context.extend([False] * len(tail))
            s_pos = e_pos = 0
            if answer_tokens is not None:
                a, b = answer_tokens
                if start <= a and b < start + length:
                    s_pos, e_pos = len(prefix) + a - start, len(prefix) + b - start
            out.append(
                Feature(
                    ids,
                    type_ids,
                    i,
                    start_position=s_pos,
                    end_position=e_pos,
                    token_to_char=token_to_char,
                    max_context=max_context,
                    truncated=len(windows) > 1,
                )
            )
    return out


def _is_max_context(windows: list[tuple[int, int]], current: tuple[int, int], token: int) -> bool:
    """Google's rule: score = min(left context, right context) + 0.01 * window length."""
    best, best_window = -1.0, None
    for start, length in windows:
        end = start + length - 1
        if not start <= token <= end:
            continue
        score = min(token - start, end - token) + 0.01 * length
        if score > best:
            best, best_window = score, (start, length)
    return best_window == current


@dataclass
class SpanAnswer:
    """A QA answer: `text` is context[start:end]."""

    text: str
    start: int
    end: int
    score: float  # probability of this span among the n-best candidates


def decode_qa(
    examples: Sequence[QAExample],
    features: Sequence[Feature],
    start_logits: Sequence[torch.Tensor],
    end_logits: Sequence[torch.Tensor],
    n_best: int = 20,
    max_answer_length: int = 30,
) -> list[SpanAnswer]:
    """Best start <= end span of each example over all its windows."""
    candidates: list[list[tuple[float, int, int]]] = [[] for _ in examples]
    for f, sl, el in zip(features, start_logits, end_logits, strict=False):
        sl, el = sl.float(), el.float()
        n = min(n_best, sl.shape[0])
        starts = sl.topk(n).indices.tolist()
        ends = el.topk(n).indices.tolist()
        for s in starts:
            if s >= len(f.token_to_char) or f.token_to_char[s] is None or not f.max_context[s]:
                continue
            for e in ends:
                if e >= len(f.token_to_char) or f.token_to_char[e] is None or e < s or e - s + 1 > max_answer_length:
                    continue
                candidates[f.example_index].append((float(sl[s] + el[e]), f.token_to_char[s][0], f.token_to_char[e][1]))
    answers = []
    for ex, cands in zip(examples, candidates, strict=False):
        if not cands:
            answers.append(SpanAnswer("", 0, 0, 0.0))
            continue
        cands.sort(key=lambda c: -c[0])
        top = cands[:n_best]
        z = sum(math.exp(c[0] - top[0][0]) for c in top)
        score, start, end = top[0]
        answers.append(SpanAnswer(ex.context[start:end], start, end, 1.0 / z))
    return answers


# --------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------
def collate(features: Sequence[Feature], pad_id: int, shape: str) -> dict:
    """Pad to the longest row. Returns input_ids, token_type_ids, attention_mask (B, T) long, the
    labels the shape needs, and num_tokens (int, real tokens)."""
    B, T = len(features), max(len(f.input_ids) for f in features)  # noqa: N806
    batch: dict = pad_batch([f.input_ids for f in features], pad_id, [f.token_type_ids for f in features])
    batch["num_tokens"] = int(batch["attention_mask"].sum())
    if shape == "tagging":
        if features[0].token_labels is not None:
            labels = torch.full((B, T), IGNORE, dtype=torch.long)
            for b, f in enumerate(features):
                labels[b, : len(f.token_labels)] = torch.tensor(f.token_labels)
            batch["labels"] = labels
    elif shape == "qa":
        batch["start_positions"] = torch.tensor([f.start_position for f in features], dtype=torch.long)
        batch["end_positions"] = torch.tensor([f.end_position for f in features], dtype=torch.long)
    elif features[0].label is not None:
        dtype = torch.float if shape == "regression" else torch.long
        batch["labels"] = torch.tensor([f.label for f in features], dtype=dtype)
    return batch
