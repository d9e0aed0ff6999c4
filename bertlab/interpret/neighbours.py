"""Nearest words in a corpus, layer by layer (as exBERT searches a reference corpus).

Owns `build_index` and its `CorpusIndex` (every word of a set of sentences, as the model's vector
at every layer), `nearest_words` and its `NeighbourResult`: for one word of a typed sentence, the k
words of the corpus whose vectors at a layer are closest to its own (cosine), and at every layer
the share of those k that are the same word. At the embeddings (layer 0) the nearest words are
almost all the word itself; going up, a contextual model brings in other words used the same way,
and the same word used another way falls behind: the share traces how contextual each layer is.

A word's vector is the mean of its WordPieces' (as `bertlab.interpret.contextual` takes it), words
as the tokenizer splits them (punctuation a word of its own); [CLS] and [SEP] are not words. The
vectors are kept unit-length in float16 (cosine = dot product), at most `MAX_INDEX_MB` of them.

Imports torch, bertlab.data.batching, bertlab.errors and bertlab.interpret.targets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError
from bertlab.interpret.targets import as_subject

MAX_INDEX_MB = 256  # the vectors of an index, every layer: a shared app keeps one per model and corpus
MAX_SENTENCES = 5000
MAX_K = 50
BATCH = 32  # sentences a forward pass


@dataclass(frozen=True)
class IndexedWord:
    """One word of the corpus: its sentence (index), its text and where it stands in the sentence."""

    sentence: int
    text: str
    start: int  # character offsets in the sentence
    end: int


@dataclass(frozen=True)
class CorpusIndex:
    """Every word of `sentences` with its unit vector at every layer: `vectors` is (L+1, N, H) float16,
    row n of each layer the word `words[n]`. `model` is the path of the model that read them, `weights` a
    fingerprint of its weights then."""

    model: str
    sentences: tuple[str, ...]
    words: tuple[IndexedWord, ...]
    vectors: torch.Tensor
    weights: float = 0.0  # a fingerprint of the model's weights (`_fingerprint`): a rewritten model is another

    @property
    def num_layers(self) -> int:
        return self.vectors.shape[0] - 1

    @property
    def megabytes(self) -> float:
        return self.vectors.numel() * self.vectors.element_size() / 2**20


@dataclass(frozen=True)
class Neighbour:
    """A corpus word near the query at one layer: cosine `similarity`, whether it is the query's own word
    (case-insensitive), and its sentence split around it (`before`, `text`, `after`) to show it in context."""

    similarity: float
    text: str
    same_word: bool
    before: str
    after: str
    sentence: int


@dataclass(frozen=True)
class NeighbourResult:
    """The query word's k nearest corpus words at every layer (`layers[l]`, best first) and the share of
    them that are the same word (`same_word_share[l]`, 0..1), plus how often the word occurs in the corpus."""

    word: str
    sentence: str
    k: int
    layers: tuple[tuple[Neighbour, ...], ...]
    same_word_share: tuple[float, ...]
    occurrences: int  # of the query's word in the corpus: the most the same-word share can reach is min(k, this)/k

    def word_counts(self, layer: int, top: int = 10) -> list[tuple[str, int]]:
        """Which words the nearest k are at `layer`, commonest first (exBERT's histogram): counted in any
        case, each named as it is written most often ('Paris', not 'paris')."""
        counts = Counter(n.text.casefold() for n in self.layers[layer])
        forms = Counter(n.text for n in self.layers[layer])
        named = {w: max((f for f in forms if f.casefold() == w), key=forms.__getitem__) for w in counts}
        return [(named[w], c) for w, c in counts.most_common(top)]


@torch.inference_mode()
def _fingerprint(module: torch.nn.Module) -> float:
    """A number that changes when the weights do: the sum of the first values of every parameter."""
    return float(sum(p.detach().flatten()[:64].double().sum() for p in module.parameters()))


def sentence_words(model, sentence: str) -> list[tuple[str, list[int], tuple[int, int]]]:
    """The words of `sentence` as the model's tokenizer splits them: (text, token positions, character span)."""
    subject = as_subject(model, gradients=False)
    e = subject.tokenizer.encode(sentence, max_length=subject.max_length)
    return _words_of(e, sentence)


def _words_of(e, sentence: str) -> list[tuple[str, list[int], tuple[int, int]]]:
    out = []
    for positions in e.word_positions():
        start, end = e.offsets[positions[0]][0], e.offsets[positions[-1]][1]
        out.append((sentence[start:end], positions, (start, end)))
    return out


@torch.inference_mode()
def _word_vectors(subject, sentences: Sequence[str]) -> list[tuple[list, torch.Tensor]]:
    """Per sentence: its words and their (L+1, W, H) mean-of-pieces vectors, one batch."""
    tok = subject.tokenizer
    encs = tok.encode_batch(list(sentences), max_length=subject.max_length)
    batch = pad_batch([e.ids for e in encs], tok.pad_id, [e.type_ids for e in encs])
    out = subject.module.bert(**{k: v.to(subject.device) for k, v in batch.items()}, output_hidden_states=True)
    states = torch.stack(out.hidden_states, 1).float().cpu()  # (B, L+1, T, H)
    result = []
    for i, (e, sentence) in enumerate(zip(encs, sentences, strict=True)):
        words = _words_of(e, sentence)
        if not words:
            result.append(([], torch.empty(states.shape[1], 0, states.shape[3])))
            continue
        vecs = torch.stack([states[i, :, positions].mean(1) for _, positions, _ in words], 1)  # (L+1, W, H)
        result.append((words, vecs))
    return result


def build_index(
    model,
    sentences: Sequence[str],
    progress: Callable[[int, int], None] | None = None,
    max_mb: float = MAX_INDEX_MB,
) -> CorpusIndex:
    """Read `sentences` with the model and keep every word's unit vector at every layer.

    Sentences are read in batches of `BATCH` (`progress(done, total)` after each); blank ones are
    skipped. InputError for no words at all, more than `MAX_SENTENCES`, or an index over `max_mb`
    (fewer sentences, or a smaller model, fit)."""
    if isinstance(sentences, str):
        raise InputError("give the corpus as a list of sentences, not one string")
    kept = [s.strip() for s in sentences if isinstance(s, str) and s.strip()]
    if len(kept) > MAX_SENTENCES:
        raise InputError(f"{len(kept):,} sentences; an index holds at most {MAX_SENTENCES:,}")
    subject = as_subject(model, gradients=False)
    words: list[IndexedWord] = []
    chunks: list[torch.Tensor] = []
    size = 0.0
    for start in range(0, len(kept), BATCH):
        part = kept[start : start + BATCH]
        for offset, (found, vecs) in enumerate(_word_vectors(subject, part)):
            words += [IndexedWord(start + offset, text, s, e) for text, _, (s, e) in found]
            unit = torch.nn.functional.normalize(vecs, dim=-1).to(torch.float16)
            chunks.append(unit)
            size += unit.numel() * 2 / 2**20
        if size > max_mb:
            raise InputError(
                f"the index would pass {max_mb:,.0f} MB after {start + len(part):,} sentences "
                f"(of {len(kept):,}): use fewer sentences"
            )
        if progress is not None:
            progress(min(start + BATCH, len(kept)), len(kept))
    if not words:
        raise InputError("the corpus has no words to search: give it some sentences")
    return CorpusIndex(subject.name, tuple(kept), tuple(words), torch.cat(chunks, 1), _fingerprint(subject.module))


def nearest_words(model, index: CorpusIndex, sentence: str, word: int, k: int = 10) -> NeighbourResult:
    """The `k` corpus words nearest to word number `word` (0-based, as `sentence_words` counts) of
    `sentence`, at every layer. The query sentence itself is not searched unless it is in the corpus:
    then its own occurrence of the word (similarity 1) is left out."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InputError(f"k must be a whole number from 1 to {MAX_K}, got {k!r}")
    subject = as_subject(model, gradients=False)
    if subject.name != index.model or _fingerprint(subject.module) != index.weights:
        raise InputError(f"this index was built by {index.model} as it was then, not this model: build it again")
    if not isinstance(sentence, str) or not sentence.strip():
        raise InputError("type a sentence")
    sentence = sentence.strip()  # as the index keeps its sentences
    ((found, vecs),) = _word_vectors(subject, [sentence])
    if not 0 <= word < len(found):
        raise InputError(f"word {word} of a sentence of {len(found)} words")
    text, _, (start, end) = found[word]
    query = torch.nn.functional.normalize(vecs[:, word], dim=-1)  # (L+1, H)
    target = text.casefold()
    own = [n for n, w in enumerate(index.words) if w.text.casefold() == target]
    # the query itself, where the corpus holds the very same sentence
    itself = {
        n
        for n in own
        if index.sentences[index.words[n].sentence] == sentence
        and (index.words[n].start, index.words[n].end) == (start, end)
    }
    k_here = min(k, len(index.words) - len(itself))
    if k_here < 1:
        raise InputError("the corpus has no other word to compare with")
    # a layer at a time: a float32 copy of one layer's vectors, not of the whole index, on every search
    sims = torch.stack([index.vectors[layer].float() @ query[layer] for layer in range(query.shape[0])])  # (L+1, N)
    if itself:
        sims[:, sorted(itself)] = -2.0
    layers, shares = [], []
    for layer in range(sims.shape[0]):
        values, rows = torch.topk(sims[layer], k_here)
        near = []
        for value, n in zip(values.tolist(), rows.tolist(), strict=True):
            w = index.words[n]
            s = index.sentences[w.sentence]
            near.append(
                Neighbour(float(value), w.text, w.text.casefold() == target, s[: w.start], s[w.end :], w.sentence)
            )
        layers.append(tuple(near))
        shares.append(sum(n.same_word for n in near) / k_here)
    return NeighbourResult(
        word=text,
        sentence=sentence,
        k=k_here,
        layers=tuple(layers),
        same_word_share=tuple(shares),
        occurrences=len(own) - len(itself),
    )


def sentences_that_fit(num_layers: int, hidden: int, max_mb: float = MAX_INDEX_MB, words_per_sentence: int = 26) -> int:
    """About how many sentences an index of a model of this shape holds within `max_mb` (a Wikipedia
    sentence has ~26 words as the tokenizer splits them); at most `MAX_SENTENCES`."""
    per_sentence = words_per_sentence * (num_layers + 1) * hidden * 2 / 2**20
    return int(min(MAX_SENTENCES, max_mb / per_sentence))


def unique_sentences(lines: Sequence[str]) -> tuple[str, ...]:
    """The non-blank lines, stripped, each once, in order: a sentence typed twice would fill the nearest
    words twice over with the same occurrence."""
    return tuple(dict.fromkeys(line.strip() for line in lines if isinstance(line, str) and line.strip()))


def corpus_sample(documents: Sequence[Sequence[str]], n: int, per_document: int = 5) -> list[str]:
    """Up to `n` sentences spread over `documents`: the first `per_document` of each, in order, then the
    next ones, until `n` (so a few long articles do not fill the sample)."""
    picked: list[str] = []
    depth = 0
    while len(picked) < n:
        added = False
        for doc in documents:
            part = doc[depth : depth + per_document]
            for s in part:
                if len(picked) >= n:
                    return picked
                picked.append(s)
                added = True
        if not added:
            break
        depth += per_document
    return picked


def same_word_ceiling(result: NeighbourResult) -> float:
    """The highest same-word share the corpus allows: min(k, occurrences) / k."""
    return min(result.k, result.occurrences) / result.k


__all__ = [
    "MAX_INDEX_MB",
    "MAX_K",
    "MAX_SENTENCES",
    "CorpusIndex",
    "IndexedWord",
    "Neighbour",
    "NeighbourResult",
    "build_index",
    "corpus_sample",
    "nearest_words",
    "same_word_ceiling",
    "sentence_words",
    "sentences_that_fit",
    "unique_sentences",
]
