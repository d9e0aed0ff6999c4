"""Contextual vs static: the same word in several sentences, layer by layer (Ethayarajh 2019).

Owns `contextual_word` and its result `ContextualWord`, plus the measures it reports:
- the word's vector in every sentence at every layer (the mean of its WordPieces; layer 0 is the
  embeddings output, so position and segment are already mixed in);
- a 2-D PCA of those vectors per layer, to colour by sentence;
- self-similarity: the mean cosine between the word's vectors in different sentences;
- anisotropy: the mean cosine between random words of a sample in different sentences, the
  baseline Ethayarajh subtracts ("adjusted" self-similarity) because every layer's vectors share a
  direction;
- with a sense given per sentence ("river", "money"), the mean cosine within a sense and across senses;
  a sentence without a sense ("") is left out of both (it still counts in self-similarity and the PCA).

The word is matched as whole words of the tokenizer: "bank" is one word, "!!!" three ("!" "!" "!":
punctuation is always a word of its own), "don't" three; its vector is the mean of all its WordPieces.
At layer 0 that vector is the word's token embedding plus its position's (and segment's), so the
word at the same position in two sentences has the same layer-0 vector (`identical_at_layer_0`).

Every function takes any loaded model (a `LoadedModel`, a `FinetunedModel`, a `Subject`): it reads
the encoder's hidden states only, so a fine-tuned encoder (frozen or not) is as welcome as a pretrained one.

Imports numpy, torch, bertlab.data.batching, bertlab.errors, bertlab.attention (the built-in sample)
and bertlab.interpret.targets (the model as a `Subject`).
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from bertlab.attention import SAMPLE_PAIRS
from bertlab.data.batching import pad_batch
from bertlab.errors import InputError
from bertlab.interpret.targets import Subject, as_subject

MAX_SENTENCES = 16  # the user's sentences per call: one forward pass each, and N^2 cosines per layer
SAMPLE_SENTENCES: tuple[str, ...] = tuple(s for pair in SAMPLE_PAIRS for s in pair)  # for anisotropy
ANISOTROPY_PAIRS = 1000  # random word pairs per layer


@dataclass
class Occurrence:
    """One occurrence of the word: sentence `sentence_index`, its token positions and its pieces as a page
    draws them (`pieces`, `readable_tokens`: RoBERTa's 'Ġb' reads '␣b'), as typed (`surface`); `sense` is ""
    when the sentence has none."""

    sentence_index: int
    sentence: str
    surface: str
    token_positions: list[int]
    sense: str = ""
    pieces: list[str] = field(default_factory=list)


@dataclass
class ContextualWord:
    """The word's vectors per layer and how similar they are.

    Attributes:
        vectors: (L+1, N, H) float32, the word's vector per layer and occurrence.
        projection: (L+1, N, 2) float64, a PCA of each layer's N vectors (fitted per layer).
        explained: (L+1, 2) the share of variance the two components keep (0, 0 where every vector
            of the layer is the same: there is no variance to keep).
        self_similarity: (L+1,) mean cosine between occurrences in different sentences.
        anisotropy: (L+1,) mean cosine between random words of the sample in different sentences.
        within_sense / across_sense: (L+1,) mean cosine between occurrences of the same sense /
            of different senses, sentences without a sense left out (NaN when no senses were given
            or a group is empty).
    """

    word: str
    occurrences: list[Occurrence]
    vectors: np.ndarray
    projection: np.ndarray
    explained: np.ndarray
    self_similarity: np.ndarray
    anisotropy: np.ndarray
    within_sense: np.ndarray
    across_sense: np.ndarray

    @property
    def adjusted_self_similarity(self) -> np.ndarray:
        """(L+1,) self-similarity minus anisotropy (Ethayarajh's anisotropy-adjusted measure)."""
        return self.self_similarity - self.anisotropy

    @property
    def unlabelled_sentences(self) -> list[int]:
        """Indices of the sentences without a sense when some others have one (left out of the sense comparison)."""
        if not any(o.sense for o in self.occurrences):
            return []
        return sorted({o.sentence_index for o in self.occurrences if not o.sense})

    def identical_at_layer_0(self) -> list[list[int]]:
        """Groups (two or more) of occurrences in different sentences whose layer-0 vectors are the same
        (cosine above 1 - 1e-6): the same word at the same position. Occurrence indices, in order."""
        n = _normalise(self.vectors[0].astype(np.float64))
        same = (n @ n.T) > 1 - 1e-6
        groups, seen = [], set()
        for k in range(len(self.occurrences)):
            if k in seen:
                continue
            members = [j for j in range(k, len(self.occurrences)) if same[k, j] and j not in seen]
            seen.update(members)
            if len({self.occurrences[j].sentence_index for j in members}) > 1:
                groups.append(members)
        return groups

    def rows(self) -> list[dict]:
        """One dict per layer, for a table."""
        out = []
        for layer in range(len(self.self_similarity)):
            row = {
                "layer": layer,
                "self-similarity": float(self.self_similarity[layer]),
                "anisotropy": float(self.anisotropy[layer]),
                "adjusted": float(self.adjusted_self_similarity[layer]),
            }
            if not np.isnan(self.within_sense).all():
                row["same sense"] = float(self.within_sense[layer])
            if not np.isnan(self.across_sense).all():
                row["other sense"] = float(self.across_sense[layer])
            out.append(row)
        return out


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def mean_cosine(a: np.ndarray, b: np.ndarray | None = None, groups: np.ndarray | None = None) -> float:
    """Mean cosine between the rows of `a` and of `b` (default: distinct rows of `a`).

    groups: (N,) ints; only pairs from different groups count (different sentences)."""
    na = _normalise(np.asarray(a, dtype=np.float64))
    nb = na if b is None else _normalise(np.asarray(b, dtype=np.float64))
    sims = na @ nb.T
    valid = np.ones_like(sims, dtype=bool)
    if b is None:
        np.fill_diagonal(valid, False)
    if groups is not None:
        valid &= groups[:, None] != groups[None, :]
    return float(sims[valid].mean()) if valid.any() else float("nan")


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, 2) projection of the rows of `x` on their two main directions, and (2,) variance shares.

    Rows that are all the same (up to rounding) have no variance: every row projects to (0, 0) and the
    shares are (0, 0), not the shares of the rounding error."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - np.mean(x, axis=0, keepdims=True)
    if np.square(centred).sum() <= 1e-10 * max(np.square(x).sum(), 1e-300):
        return np.zeros((x.shape[0], 2)), np.zeros(2)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    proj = centred @ vt[:2].T
    var = s**2
    share = var[:2] / var.sum()
    if proj.shape[1] < 2:  # one or two points: pad the missing direction with zeros
        proj = np.pad(proj, ((0, 0), (0, 2 - proj.shape[1])))
        share = np.pad(share, (0, 2 - share.shape[0]))
    return proj, share


BANK_EXAMPLE = (
    "river: We sat on the bank of the river and watched the boats.",
    "river: The river bank was muddy after the rain.",
    "river: She walked along the bank to her fishing spot.",
    "money: I need to go to the bank to pay in a cheque.",
    "money: The bank raised its interest rates again.",
    "money: He opened an account at the bank in town.",
)


def parse_sense_lines(lines: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Sentences, one a line, each optionally prefixed with its sense ("river: We sat on the bank").

    Returns the sentences and their senses, or None for senses when no line names one (a line
    without a prefix then gets the sense "": unlabelled, left out of the sense comparison)."""
    sentences, senses = [], []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        head, colon, rest = line.partition(":")
        if colon and rest.strip() and head.strip() and len(head.split()) == 1:
            senses.append(head.strip())
            sentences.append(rest.strip())
        else:
            senses.append("")
            sentences.append(line)
    return sentences, (senses if any(senses) else None)


def find_word(model, word: str, sentence: str) -> list[tuple[str, list[int]]]:
    """Every occurrence of `word` (case-insensitive) in `sentence` as whole words of the tokenizer:
    its surface text and token positions in the model's encoding of the sentence.

    The tokenizer makes each punctuation mark a word of its own, so "!!!" is matched as three
    adjacent words "!" "!" "!" (and "don't" as "don" "'" "t"), never across a space; matches do not overlap."""
    subject = as_subject(model, gradients=False)
    e = subject.tokenizer.encode(sentence, max_length=subject.max_length)
    words = e.word_positions()  # token positions of each word, in order
    target = word.casefold()
    found, i = [], 0
    while i < len(words):
        start = e.offsets[words[i][0]][0]
        for j in range(i, len(words)):
            text = sentence[start : e.offsets[words[j][-1]][1]]
            if text.casefold() == target:
                found.append((text, [p for w in words[i : j + 1] for p in w]))
                i = j
                break
            if len(text) >= len(word) or any(c.isspace() for c in text):
                break
        i += 1
    return found


@torch.inference_mode()
def _hidden_states(subject: Subject, sentences: Sequence[str]) -> list[np.ndarray]:
    """Per sentence, (L+1, T, H) float32 hidden states (one batch)."""
    tok = subject.tokenizer
    encs = tok.encode_batch(list(sentences), max_length=subject.max_length)
    batch = pad_batch([e.ids for e in encs], tok.pad_id, [e.type_ids for e in encs])
    enc = subject.module.bert(**{k: v.to(subject.device) for k, v in batch.items()}, output_hidden_states=True)
    states = torch.stack(enc.hidden_states, 1).float().cpu().numpy()  # (B, L+1, T, H)
    return [states[i, :, : len(e)] for i, e in enumerate(encs)]


def anisotropy(model, sentences: Sequence[str], pairs: int = ANISOTROPY_PAIRS, seed: int = 0) -> np.ndarray:
    """(L+1,) mean cosine between `pairs` random words (tokens other than [CLS]/[SEP]) of different sentences."""
    sentences = _sentence_list(sentences, "sample sentences")
    states = _hidden_states(as_subject(model, gradients=False), sentences)
    pool = [(s, t) for s, h in enumerate(states) for t in range(1, h.shape[1] - 1)]
    if len({s for s, _ in pool}) < 2:
        raise InputError("anisotropy needs words from at least two sentences")
    rng = random.Random(seed)
    picked = []
    while len(picked) < pairs:
        a, b = rng.choice(pool), rng.choice(pool)
        if a[0] != b[0]:
            picked.append((a, b))
    left = np.stack([states[s][:, t] for (s, t), _ in picked], 1)  # (L+1, P, H)
    right = np.stack([states[s][:, t] for _, (s, t) in picked], 1)
    cos = (_normalise(left.astype(np.float64)) * _normalise(right.astype(np.float64))).sum(-1)  # (L+1, P)
    return cos.mean(1)


def _sentence_list(sentences, what: str = "sentences") -> list[str]:
    """`sentences` as a list, once it is a list (or tuple) of non-blank strings; an error names the bad one."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        got = "one string" if isinstance(sentences, str) else type(sentences).__name__
        raise InputError(f"{what} must be a list of sentences (strings), got {got}; give one string per sentence")
    sentences = list(sentences)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise InputError(f"{what}: item {i + 1} is {type(s).__name__} ({s!r}), not a sentence; give strings")
        if not s.strip():
            raise InputError(f"{what}: sentence {i + 1} of {len(sentences)} is blank; remove it or write a sentence")
    return sentences


def contextual_word(
    model,
    word: str,
    sentences: Sequence[str],
    senses: Sequence[str] | None = None,
    sample: Sequence[str] = SAMPLE_SENTENCES,
    seed: int = 0,
    max_sentences: int = MAX_SENTENCES,
) -> ContextualWord:
    """`word` in each of `sentences`: its vector per layer, a PCA, self-similarity and anisotropy.

    Args:
        model: a `LoadedModel`, a `FinetunedModel` or a `Subject` (only its encoder is read).
        sentences: a list of non-blank sentences (`parse_sense_lines` reads them from text lines).
        senses: one label per sentence (e.g. "river", "money") to compare within and across senses;
            "" for a sentence without one (left out of that comparison).
        sample: sentences whose random word pairs measure anisotropy (with `sentences` added).

    Raises:
        InputError: `sentences` not a list of strings, a blank sentence (named), fewer than two or
            more than `max_sentences` sentences, not one sense per sentence, or a sentence without the word.
    """
    subject = as_subject(model, gradients=False)
    if word is not None and not isinstance(word, str):
        raise InputError(f"word must be a string, got {type(word).__name__}; type one word (e.g. bank)")
    word = (word or "").strip()
    if not word or len(word.split()) != 1:
        raise InputError("type one word (e.g. bank) to follow through the sentences")
    sentences = _sentence_list(sentences)
    if len(sentences) < 2:
        raise InputError("give at least two sentences that use the word, so there is something to compare")
    if len(sentences) > max_sentences:
        raise InputError(f"{len(sentences)} sentences; at most {max_sentences} are compared at once")
    if senses is not None:
        if isinstance(senses, str) or not isinstance(senses, Sequence):
            raise InputError(f"senses must be a list with one label per sentence, got {type(senses).__name__}")
        if len(senses) != len(sentences):
            raise InputError(f"{len(sentences)} sentences but {len(senses)} senses; give one sense per sentence")
        senses = [str(s) for s in senses]
    sample = _sentence_list(sample, "sample sentences")
    occurrences: list[Occurrence] = []
    for i, s in enumerate(sentences):
        found = find_word(subject, word, s)
        if not found:
            raise InputError(
                f"sentence {i + 1} ({textwrap.shorten(s, 60, placeholder=' …')!r}) does not contain the word "
                f"{word!r}; use it as a whole word"
            )
        tokens = subject.tokenizer.encode(s, max_length=subject.max_length).tokens
        for surface, positions in found:
            sense = senses[i].strip() if senses else ""
            pieces = subject.tokenizer.readable_tokens([tokens[p] for p in positions])
            occurrences.append(Occurrence(i, s, surface, positions, sense, pieces))
    states = _hidden_states(subject, sentences)
    vectors = np.stack([states[o.sentence_index][:, o.token_positions].mean(1) for o in occurrences], 1)  # (L+1, N, H)
    groups = np.array([o.sentence_index for o in occurrences])
    layers = vectors.shape[0]
    self_sim = np.array([mean_cosine(vectors[layer], groups=groups) for layer in range(layers)])
    pcs = [pca_2d(vectors[layer]) for layer in range(layers)]
    within = np.full(layers, np.nan)
    across = np.full(layers, np.nan)
    if senses:
        labels = np.array([o.sense for o in occurrences])
        labelled = (labels != "")[:, None] & (labels != "")[None, :]  # a sentence without a sense compares with none
        same = labelled & (labels[:, None] == labels[None, :]) & (groups[:, None] != groups[None, :])
        other = labelled & (labels[:, None] != labels[None, :])
        for layer in range(layers):
            n = _normalise(vectors[layer].astype(np.float64))
            sims = n @ n.T
            if same.any():
                within[layer] = sims[same].mean()
            if other.any():
                across[layer] = sims[other].mean()
    return ContextualWord(
        word=word,
        occurrences=occurrences,
        vectors=vectors,
        projection=np.stack([p for p, _ in pcs]),
        explained=np.stack([e for _, e in pcs]),
        self_similarity=self_sim,
        anisotropy=anisotropy(subject, [*sample, *sentences], seed=seed),
        within_sense=within,
        across_sense=across,
    )
