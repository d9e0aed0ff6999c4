"""Documents -> pretraining instances -> batches, faithful to google-research/bert's
`create_pretraining_data.py`.

Owns: the data config (`DataConfig`), segment pairs A/B with 50% IsNext / 50% NotNext (B from
another document, the unused sentences put back) or, for sentence order, A and B swapped half the
time (as Google's ALBERT script does), `short_seq_prob`, `truncate_seq_pair`, the
masked-LM choice (15% of tokens; 80% [MASK] / 10% random / 10% kept; whole-word option), static
(`dupe_factor` copies) and dynamic (fresh masks every epoch) masking, instances and labels as
the objective says (bertlab.data.objectives: MLM+NSP, MLM only, left-to-right LM; the maskers are
bertlab.data.maskers'), a cache keyed by a hash of everything that made the data,
collation into padded batches. Explanations of an instance for the app: bertlab.data.explain.

One deliberate departure: the 10% random replacement draws from the vocabulary *minus* the
special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]); Google's script draws from the whole vocabulary.
A random [SEP] or [CLS] in the middle of a sentence would teach nothing about words and can
mislead the NSP head (a second [SEP] looks like a segment boundary), and a random [MASK] would
turn a "random" case into a "mask" case. Five tokens in thousands change the share of any other
token by well under 0.1%, so the recipe is the paper's in effect (see `DataConfig.random_token_prob`).

Imports numpy, torch (for batches), bertlab.atomic, bertlab.data.batching, bertlab.data.corpus, bertlab.data.objectives
and bertlab.tokenizer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertlab.atomic import atomic_file
from bertlab.data.batching import pad_batch
from bertlab.data.corpus import Document
from bertlab.data.data_config import DataConfig
from bertlab.data.maskers import (
    make_masker,
)
from bertlab.tokenizer import BertTokenizer

log = logging.getLogger(__name__)

IS_NEXT, NOT_NEXT = 0, 1  # label 0 = IsNext, as in Google's and Hugging Face's code
IN_ORDER, SWAPPED = 0, 1  # sentence order: label 1 = swapped, as transformers' sentence_order_label


@dataclass
class Instance:
    """One pretraining example (token ids; for static masking already masked).

    Attributes:
        input_ids: [CLS] A [SEP] B [SEP] (or [CLS] text [SEP] without NSP).
        a_len: number of tokens of A (so the first [SEP] is at index a_len + 1).
        masked_positions / masked_labels / mask_kinds: the chosen tokens, their original ids and
            what each became (KIND_MASK / KIND_RANDOM / KIND_KEEP).
        is_random_next: True for NotNext.
        doc_a / doc_b: source document indices (doc_b == doc_a for IsNext).
        is_swapped: sentence order: True when B is the text before A in doc_a.
    """

    input_ids: list[int]
    a_len: int
    is_random_next: bool
    doc_a: int
    doc_b: int
    masked_positions: list[int] = dataclasses.field(default_factory=list)
    masked_labels: list[int] = dataclasses.field(default_factory=list)
    mask_kinds: list[int] = dataclasses.field(default_factory=list)
    is_swapped: bool = False

    @property
    def segment_ids(self) -> list[int]:
        n_a = self.a_len + 2
        return [0] * n_a + [1] * (len(self.input_ids) - n_a)


# --------------------------------------------------------------------------------------
# Google's algorithm
# --------------------------------------------------------------------------------------
def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Trim the longer side, from the front or the back at random, until both fit."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def create_pair_instances(
    documents: Sequence[Sequence[list[int]]],
    document_index: int,
    config: DataConfig,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    partner_documents: Sequence[Sequence[list[int]]] | None = None,
) -> list[Instance]:
    """Segment pairs from one document (unmasked), as google-research/bert does.

    `partner_documents` (default: `documents`) is where NotNext B segments come from. For sentence
    order (the objective's segment_b "swap") B is A's continuation, and A and B swap places half the time.
    """
    document = documents[document_index]
    swap = config.objective_spec.segment_b == "swap"
    partners = documents if partner_documents is None else partner_documents
    max_num_tokens = config.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances = []
    current_chunk: list[list[int]] = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = rng.randint(1, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
                tokens_a = [t for j in range(a_end) for t in current_chunk[j]]
                tokens_b: list[int] = []
                doc_b = document_index
                if len(current_chunk) == 1 and config.random_next_prob <= 0:
                    # never a random B (No NSP): one long sentence is cut in two instead
                    seg = current_chunk[0]
                    cut = rng.randint(1, len(seg) - 1) if len(seg) >= 2 else len(seg)
                    tokens_a, tokens_b = list(seg[:cut]), list(seg[cut:])
                    is_random_next = False
                elif len(current_chunk) == 1 or rng.random() < config.random_next_prob:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        doc_b = rng.randint(0, len(partners) - 1)
                        if partners is not documents or doc_b != document_index:
                            break
                    random_document = partners[doc_b]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    i -= len(current_chunk) - a_end  # put the unused segments back
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                # sentence order: the coin is flipped only for it, so other objectives' pairs stay as they were
                swapped = swap and rng.random() < 0.5
                if swapped:
                    tokens_a, tokens_b = tokens_b, tokens_a
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                if tokens_a and tokens_b:
                    ids = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
                    instances.append(
                        Instance(ids, len(tokens_a), is_random_next, document_index, doc_b, is_swapped=swapped)
                    )
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def create_single_instances(
    document: Sequence[list[int]], document_index: int, config: DataConfig, cls_id: int, sep_id: int, rng: random.Random
) -> list[Instance]:
    """Contiguous text packed into [CLS] text [SEP] (the objectives without NSP)."""
    max_num_tokens = config.max_seq_length - 2
    target = max_num_tokens if rng.random() >= config.short_seq_prob else rng.randint(2, max_num_tokens)
    out, chunk = [], []
    for sent in document:
        chunk.extend(sent)
        while len(chunk) >= target:
            out.append(Instance([cls_id, *chunk[:target], sep_id], target, False, document_index, document_index))
            chunk = chunk[target:]
            target = max_num_tokens if rng.random() >= config.short_seq_prob else rng.randint(2, max_num_tokens)
    if chunk:
        out.append(Instance([cls_id, *chunk, sep_id], len(chunk), False, document_index, document_index))
    return out


def create_full_sentence_instances(
    documents: Sequence[Sequence[list[int]]], config: DataConfig, cls_id: int, sep_id: int
) -> list[Instance]:
    """RoBERTa's FULL-SENTENCES (Liu et al. 2019, §4.2): [CLS] whole sentences [SEP], read in order across
    the documents and each instance filled up to max_seq_length; where one document ends and the next
    begins inside an instance, an extra [SEP] marks the boundary (RoBERTa's </s>). A sentence longer
    than an instance is cut into pieces that fill one each. No `short_seq_prob`: RoBERTa trains on
    full-length inputs only. doc_a / doc_b are the first and the last document an instance reads."""
    max_num_tokens = config.max_seq_length - 2
    out: list[Instance] = []
    body: list[int] = []
    docs_read: list[int] = []  # the documents `body` holds text of, in order

    def close() -> None:
        if body and body[-1] == sep_id:
            body.pop()  # a boundary at the very end: the closing [SEP] marks it
        if body:
            out.append(Instance([cls_id, *body, sep_id], len(body), False, docs_read[0], docs_read[-1]))
        body.clear()
        docs_read.clear()

    for di, document in enumerate(documents):
        for sentence in document:
            for start in range(0, len(sentence), max_num_tokens):
                piece = sentence[start : start + max_num_tokens]
                if len(body) + len(piece) > max_num_tokens:
                    close()
                body.extend(piece)
                if not docs_read or docs_read[-1] != di:
                    docs_read.append(di)
        if body and body[-1] != sep_id and len(body) < max_num_tokens:
            body.append(sep_id)  # the next document goes on in this instance, after the separator
    close()
    return out


def pair_config(config: DataConfig) -> DataConfig:
    """The config pairs are made with: without NSP, B is never a random other document."""
    return config if config.objective_spec.nsp else dataclasses.replace(config, random_next_prob=0.0)


def running_text(document: Document) -> list[str]:
    """A document's sentences as they read in running text: every one after the first with the space
    before it. A tokenizer that marks spaces (RoBERTa's byte-level BPE: 'ĠOn') then reads a sentence's
    first word as it reads it inside a paragraph, not as the start of a text ('On'); WordPiece and
    SentencePiece drop the space, so their ids do not change."""
    return [s if i == 0 else " " + s for i, s in enumerate(document)]


def tokenize_documents(
    documents: Sequence[Document], tokenizer: BertTokenizer, batch: int = 20000
) -> list[list[list[int]]]:
    """Every sentence to token ids (as in running text: `running_text`), in big batches (parallel in Rust)."""
    flat = [s for d in documents for s in running_text(d)]
    ids: list[list[int]] = []
    for start in range(0, len(flat), batch):
        ids.extend(tokenizer.tokenize_batch(flat[start : start + batch]))
    out, k = [], 0
    for d in documents:
        sents = [s for s in ids[k : k + len(d)] if s]
        k += len(d)
        if sents:
            out.append(sents)
    return out


def create_instances(
    token_docs: Sequence[Sequence[list[int]]],
    tokenizer: BertTokenizer,
    config: DataConfig,
    seed: int,
    dupe_factor: int | None = None,
    mask: bool = True,
) -> list[Instance]:
    """All instances of a tokenized corpus (dupe_factor passes over the shuffled documents)."""
    rng = random.Random(seed)
    docs = list(token_docs)
    order = list(range(len(docs)))
    rng.shuffle(order)
    docs = [docs[i] for i in order]
    masker = make_masker(tokenizer, config)
    dupe = config.dupe_factor if dupe_factor is None else dupe_factor
    instances: list[Instance] = []
    for _ in range(dupe):
        for made in instances_by_document(docs, len(docs), config, tokenizer, rng):
            for inst in made:
                inst.doc_a, inst.doc_b = order[inst.doc_a], order[inst.doc_b]
                if mask and masker is not None:
                    apply_mask(inst, masker, rng)
            instances.extend(made)
    rng.shuffle(instances)
    return instances


def instances_by_document(
    docs: Sequence[Sequence[list[int]]], count: int, config: DataConfig, tokenizer: BertTokenizer, rng: random.Random
) -> Iterator[list[Instance]]:
    """One pass: the instances of each of the first `count` documents in turn, made as they are asked
    for (the rest are only partners, where NotNext B segments may come from); with FULL-SENTENCES
    packing, those of the `count` documents at once, as their instances cross documents."""
    if config.objective_spec.full_sentences:
        yield create_full_sentence_instances(docs[:count], config, tokenizer.cls_id, tokenizer.sep_id)
        return
    for di in range(count):
        if config.objective_spec.paired:
            yield create_pair_instances(docs, di, pair_config(config), tokenizer.cls_id, tokenizer.sep_id, rng)
        else:
            yield create_single_instances(docs[di], di, config, tokenizer.cls_id, tokenizer.sep_id, rng)


def apply_mask(inst: Instance, masker: Callable, rng: random.Random) -> Instance:
    inst.input_ids, inst.masked_positions, inst.masked_labels, inst.mask_kinds = masker(inst.input_ids, rng)
    return inst


# --------------------------------------------------------------------------------------
# Storage and cache
# --------------------------------------------------------------------------------------
def pack(instances: Sequence[Instance]) -> dict[str, np.ndarray]:
    """Flat numpy arrays (no pickle) for saving and for fast random access."""
    lens = np.array([len(x.input_ids) for x in instances], dtype=np.int64)
    mlens = np.array([len(x.masked_positions) for x in instances], dtype=np.int64)
    return {
        "ids": np.fromiter((t for x in instances for t in x.input_ids), dtype=np.int32, count=int(lens.sum())),
        "offsets": np.concatenate([[0], np.cumsum(lens)]),
        "a_len": np.array([x.a_len for x in instances], dtype=np.int32),
        "is_random_next": np.array([x.is_random_next for x in instances], dtype=bool),
        "is_swapped": np.array([x.is_swapped for x in instances], dtype=bool),
        "doc_a": np.array([x.doc_a for x in instances], dtype=np.int32),
        "doc_b": np.array([x.doc_b for x in instances], dtype=np.int32),
        "m_pos": np.fromiter(
            (t for x in instances for t in x.masked_positions), dtype=np.int32, count=int(mlens.sum())
        ),
        "m_lab": np.fromiter((t for x in instances for t in x.masked_labels), dtype=np.int32, count=int(mlens.sum())),
        "m_kind": np.fromiter((t for x in instances for t in x.mask_kinds), dtype=np.int8, count=int(mlens.sum())),
        "m_offsets": np.concatenate([[0], np.cumsum(mlens)]),
    }


class InstanceStore:
    """Random access over packed instances."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.a = arrays

    def __len__(self) -> int:
        return len(self.a["a_len"])

    def __getitem__(self, i: int) -> Instance:
        a = self.a
        s, e = a["offsets"][i], a["offsets"][i + 1]
        ms, me = a["m_offsets"][i], a["m_offsets"][i + 1]
        return Instance(
            input_ids=a["ids"][s:e].tolist(),
            a_len=int(a["a_len"][i]),
            is_random_next=bool(a["is_random_next"][i]),
            doc_a=int(a["doc_a"][i]),
            doc_b=int(a["doc_b"][i]),
            masked_positions=a["m_pos"][ms:me].tolist(),
            masked_labels=a["m_lab"][ms:me].tolist(),
            mask_kinds=a["m_kind"][ms:me].tolist(),
            # a cache packed before sentence order has no such array, and no swapped pair
            is_swapped="is_swapped" in a and bool(a["is_swapped"][i]),
        )

    @property
    def num_tokens(self) -> int:
        return int(self.a["offsets"][-1])

    def save(self, path: Path) -> None:
        """Write the arrays as one .npz, atomically: under this writer's own temporary name, then
        renamed, so ranks or runs that save the same cache file at once never collide."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as tmp, open(tmp, "xb") as f:
            np.savez(f, **self.a)

    @classmethod
    def load(cls, path: Path) -> InstanceStore:
        with np.load(path, allow_pickle=False) as f:
            return cls({k: f[k] for k in f.files})


def data_cache_key(corpus_fingerprint: str, tokenizer: BertTokenizer, config: DataConfig, seed: int, split: str) -> str:
    """Hash of everything that made the data, so a changed config never reuses stale data."""
    h = hashlib.sha256()
    h.update(corpus_fingerprint.encode())
    h.update(json.dumps(sorted(tokenizer.vocab.items())).encode())
    h.update(str(tokenizer.lowercase).encode())
    h.update(json.dumps(dataclasses.asdict(config), sort_keys=True).encode())
    h.update(f"{seed}:{split}:v1".encode())
    if tokenizer.tokenize_batch([" a"]) != tokenizer.tokenize_batch(["a"]):  # marks spaces: `running_text` changed it
        h.update(b"running-text")
    return h.hexdigest()[:20]


def split_heldout(n_docs: int, config: DataConfig, seed: int) -> tuple[list[int], list[int]]:
    """Deterministic split of document indices into (train, held-out)."""
    rng = random.Random(seed + 7919)
    order = list(range(n_docs))
    rng.shuffle(order)
    k = max(config.min_heldout_documents, int(round(n_docs * config.heldout_fraction)))
    k = min(k, max(0, n_docs - 2))
    return sorted(order[k:]), sorted(order[:k])


# --------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------
def collate(
    instances: Sequence[Instance], config: DataConfig, pad_id: int = 0, pad_to: int | None = None
) -> dict[str, torch.Tensor]:
    """Pad to the longest instance (or to `pad_to`); labels -100 where nothing is predicted.

    With an objective's `next_token_labels` (the `ltr` objective) the label at position t is the
    token at t+1 (next-token prediction); with its `nsp`, `nsp_labels` (0 = IsNext) too; with sentence
    order (segment_b "swap"), `sop_labels` (0 = in order, 1 = swapped).
    """
    B, T = len(instances), max(max(len(x.input_ids) for x in instances), pad_to or 0)  # noqa: N806
    objective = config.objective_spec
    paired = objective.paired
    types = (
        [[0] * min(len(x.input_ids), x.a_len + 2) + [1] * max(0, len(x.input_ids) - x.a_len - 2) for x in instances]
        if paired
        else None
    )
    batch: dict = pad_batch([x.input_ids for x in instances], pad_id, types, pad_to)
    labels = np.full((B, T), -100, dtype=np.int64)
    for b, x in enumerate(instances):
        n = len(x.input_ids)
        if objective.next_token_labels:
            labels[b, : n - 1] = x.input_ids[1:n]
        elif x.masked_positions:
            labels[b, x.masked_positions] = x.masked_labels
    batch["mlm_labels"] = torch.from_numpy(labels)
    batch["num_tokens"] = int(batch["attention_mask"].sum())
    if objective.nsp:
        batch["nsp_labels"] = torch.tensor([NOT_NEXT if x.is_random_next else IS_NEXT for x in instances])
    if objective.pair_head == "sop":
        batch["sop_labels"] = torch.tensor([SWAPPED if x.is_swapped else IN_ORDER for x in instances])
    return batch


class PretrainingBatches:
    """Epoch-ordered batches over a store, deterministic for (seed, epoch); dynamic masking
    draws fresh masks from an RNG seeded by (seed, epoch, instance)."""

    def __init__(self, store: InstanceStore, config: DataConfig, tokenizer: BertTokenizer, batch_size: int, seed: int):
        self.store, self.config, self.batch_size, self.seed = store, config, batch_size, seed
        self.pad_id = tokenizer.pad_id
        self.masker = make_masker(tokenizer, config) if config.masking == "dynamic" else None

    def num_batches(self, world: int = 1) -> int:
        return (len(self.store) // self.batch_size) // world

    def __call__(self, epoch: int, start: int = 0, rank: int = 0, world: int = 1) -> Iterator[dict[str, torch.Tensor]]:
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.store))
        n = self.num_batches(world)
        for k in range(start, n):
            g = k * world + rank
            idx = order[g * self.batch_size : (g + 1) * self.batch_size]
            items = []
            for i in idx:
                inst = self.store[int(i)]
                if self.masker is not None:
                    apply_mask(inst, self.masker, random.Random(hash((self.seed, epoch, int(i))) & 0xFFFFFFFF))
                items.append(inst)
            # every training batch as wide as the phase's sequences: one shape for a compiled step
            # (nearly every batch has a full-length instance anyway)
            yield collate(items, self.config, self.pad_id, pad_to=self.config.max_seq_length)
