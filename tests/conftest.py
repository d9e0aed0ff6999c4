"""Tiny configs, vocabularies and checkpoints that tests build for themselves (no network, no ../shared)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from bertlab.config import BertConfig

torch.set_num_threads(min(2, os.cpu_count() or 1))

WORDS = (
    "the a an cat dog sat on mat rug ran to park house in of and was is he she it they "
    "big small red blue quick brown fox jumps over lazy river tree bird sang sky sun day night "
    "paris france london england capital city man woman king queen walk walked walking play played"
).split()
PUNCT = list(".,!?;:'\"()-")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

SAMPLE_TEXT = [
    "The cat sat on the mat. It was a big cat.",
    "The dog ran to the park. He played in the park all day.",
    "Paris is the capital of France. London is the capital of England.",
    "The quick brown fox jumps over the lazy dog.",
    "The bird sang in the tree. The sun was in the sky.",
]


def write_vocab(path: Path) -> Path:
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces = ["##" + ch for ch in letters] + ["##s", "##ed", "##ing"]
    tokens = SPECIALS + PUNCT + letters + WORDS + sorted(set(pieces))
    seen, out = set(), []
    for t in tokens:
        if t not in seen:
            seen.add(t)
            out.append(t)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory) -> Path:
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt")


@pytest.fixture(scope="session")
def tokenizer(vocab_file):
    from bertlab.tokenizer import BertTokenizer

    return BertTokenizer.from_vocab(vocab_file)


def tiny_config(vocab_size: int, **kw) -> BertConfig:
    base = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    base.update(kw)
    return BertConfig(**base)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A random-weight tiny BertForPreTraining saved in our format."""
    from bertlab.checkpoint import save_checkpoint
    from bertlab.model import BertForPreTraining

    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(len(tokenizer)))
    d = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_checkpoint(d, model, tokenizer)
    return d
