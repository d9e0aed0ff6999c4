"""What a pattern reads, without a model: the share of query-key pairs it computes, drawn tile by tile, and
the memory its attention maps take against full attention's.

`pattern_picture(config, length)` builds the plan a forward pass would build for `length` tokens and
counts, for every pool x pool tile of the T x T map, the share of its pairs the pattern computes (1 for
full attention). The Long inputs page draws it; the numbers say why 512 tokens is a wall for full
attention (its maps grow as T^2) and what a window keeps (T x window).

Imports torch, bertlab.config and the plan and kernel of bertlab.patterns.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertlab.config import BertConfig
from bertlab.patterns.kernel import attention_map
from bertlab.patterns.plan import build_plan

MAX_CELLS = 256  # a drawn map is at most this many tiles a side


@dataclass(frozen=True)
class PatternPicture:
    """The pairs a pattern computes for one input length, as a picture and as counts."""

    pattern: str  # BertConfig.attention_pattern
    length: int  # T
    pool: int  # tokens per tile side
    density: np.ndarray  # (n, n): the share of each tile's query-key pairs computed, 0 to 1
    pairs: int  # query-key pairs computed (a score each, per head and layer)
    full_pairs: int  # T^2, full attention's

    @property
    def share(self) -> float:
        return self.pairs / self.full_pairs

    def map_bytes(self, config: BertConfig, bytes_per_value: int = 4) -> tuple[int, int]:
        """(this pattern's, full attention's) attention maps for every head and layer, in bytes."""
        per = config.num_heads * config.num_layers * bytes_per_value
        return self.pairs * per, self.full_pairs * per


def pool_for(length: int, cells: int = MAX_CELLS) -> int:
    """Tokens per tile side so that a length-token map is at most `cells` tiles a side."""
    return max(1, math.ceil(length / cells))


def pattern_picture(config: BertConfig, length: int, pool: int | None = None) -> PatternPicture:
    """The share of each tile's pairs that `config`'s pattern computes for an input of `length` tokens
    ([CLS] first, no padding)."""
    if length < 1:
        raise ValueError(f"length must be at least 1, got {length}")
    pool = pool or pool_for(length)
    n = math.ceil(length / pool)
    if not config.sparse:
        counts = np.full((n, n), float(pool * pool))
        edge = length - (n - 1) * pool  # the last row and column of tiles are partial
        counts[-1, :] *= edge / pool
        counts[:, -1] *= edge / pool
        return PatternPicture(config.attention_pattern, length, pool, counts / pool**2, length**2, length**2)
    ids = torch.zeros(1, length, dtype=torch.long)
    plan = build_plan(config, ids, None, pool=pool)
    G = 0 if plan.global_idx is None else plan.global_idx.shape[1]
    band = (plan.band[None] & plan.key_ok[:, :, None, :]).float()[:, None]  # (1, 1, nb, b, K*b)
    local = band.masked_fill(~plan.key_valid.view(1, 1, plan.num_blocks, plan.block, 1), 0.0)
    rows = None
    if G:
        cols = plan.global_valid.float()[:, None, None, None, :].expand(1, 1, plan.num_blocks, plan.block, G)
        local = torch.cat([cols * plan.key_valid.view(1, 1, plan.num_blocks, plan.block, 1), local], -1)
        rows = plan.key_valid.float()[:, None, None, :].expand(1, 1, G, plan.padded)
    # attention_map sums a tile's pairs and divides by pool (a mean over its rows); once more for the share
    density = attention_map(local, rows, plan)[0, 0].numpy() / pool
    pairs = int(round(float(density.sum()) * pool * pool))
    return PatternPicture(config.attention_pattern, length, pool, density, pairs, length**2)


@dataclass(frozen=True)
class Claim:
    """What a paper says about long inputs, for the Long inputs page."""

    paper: str
    claim: str
    source: str


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "BERT (Devlin et al. 2018)",
        "512 positions; every token attends to every token, so time and attention memory grow as n². Pretrained "
        "on 128-token inputs for 90% of its steps because longer ones cost disproportionately more.",
        "Devlin et al. 2018, section 3.1 and appendix A.2",
    ),
    Claim(
        "Longformer (Beltagy et al. 2020)",
        "A sliding window plus a few task-chosen global tokens reads 4,096 tokens with memory linear in length. "
        "Its position table starts as RoBERTa's 512 learned positions copied 8 times, then continues pretraining.",
        "Beltagy, Peters & Cohan 2020, sections 3 and 5",
    ),
    Claim(
        "BigBird (Zaheer et al. 2020)",
        "Window, global and random blocks: with its global tokens the sparse pattern keeps full attention's "
        "expressive power (a universal approximator of sequence functions, and Turing complete), at linear cost.",
        "Zaheer et al. 2020, section 3",
    ),
    Claim(
        "BigBird's limit (Zaheer et al. 2020)",
        "Sparse attention is not free: some tasks one full-attention layer solves need about n layers of a "
        "sparse pattern (their Proposition 1, finding each vector's furthest vector).",
        "Zaheer et al. 2020, section 3.4",
    ),
)


_PARAGRAPH = (
    "The lighthouse keeper wrote in his log every evening. He noted the wind, the height of the waves and the "
    "ships that passed the point before dark. On calm nights he added a line about the birds that rested on the "
    "rail, and on stormy ones he wrote only the hour the lamp was lit. Years later his daughter read the logs "
    "from the first page to the last, and found that the weather repeated itself, but the birds did not. "
)
# an invented text of about 2,000 word pieces: long enough that a 512-token model reads a quarter of it
LONG_SAMPLE = "\n\n".join(f"Chapter {i + 1}. {_PARAGRAPH}" for i in range(20))

COST_TABLE = Path(__file__).resolve().parents[2] / "bench" / "results" / "long_inputs.csv"


def read_cost_table(path: str | Path = COST_TABLE) -> list[dict]:
    """The long-input benchmark's rows (bench/bench_long_inputs.py), numbers as numbers; [] when absent."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        return []
    return [{k: _number(v) for k, v in row.items()} for row in rows]


def _number(value: str | None) -> object:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value
