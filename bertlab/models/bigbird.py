"""The BigBird family (Zaheer et al. 2020), model_type "big_bird": BERT's layout under BERT's names
(`bert.`, `cls.predictions.`), as transformers' `BigBirdForMaskedLM` (and BigBirdForPreTraining) saves it.

transformers' BigBird differs from its BERT in five places, all followed here:
- the embeddings apply dropout *before* LayerNorm, and may scale the word vectors by sqrt(H)
  (`rescale_embeddings`);
- GELU is the tanh approximation by default (`hidden_act` "gelu_new"), in the feed-forward block and the
  masked-LM transform;
- the pooler is a bare Linear (`bert.pooler.weight`, then tanh), not BERT's `bert.pooler.dense`;
- query, key and value may have no bias (`use_bias`);
- `attention_type`: "original_full" is full attention (attention_pattern "full"), equal to
  transformers' to 1e-5; "block_sparse" is BigBird's pattern (attention_pattern "bigbird",
  `attention_block` = block_size, `random_blocks` = num_random_blocks), read as below.

block_sparse. transformers' layout, read from its modeling_big_bird.py (transformers 5): the input is
padded to a multiple of block_size b; the first and the last block of the *padded batch* are global
(they read every key, every query reads them); every other query block reads its own block and its two
neighbours; and r = num_random_blocks random key blocks. Two things decide whether we can match it:
- inputs of at most (5 + 2r) * b tokens are not block-sparse at all: transformers switches the model to
  original_full (and leaves it switched: `set_attention_type` is a lasting change of the model, so a
  longer input afterwards is read with full attention too). Here a short input is read with full
  attention each time, and a long one block-sparse each time; the lasting switch is not copied;
- the random blocks: in eval mode transformers draws none. Its random adjacency is all zeros, so every
  "random" block is block 0, the first (global) block, read again: each middle query reads block 0's
  keys 1 + r times in one softmax. That is matched exactly (`block_sparse_plan`: r copies of block 0
  beside the band, which the pattern kernel counts as transformers does). In training mode it draws
  them with NumPy's global generator seeded by the layer's index (so the same blocks at every step, for
  a given length), a different set for every head, by one of two procedures (the paper's, for inputs
  padded to 1,024, 3,072 or 4,096 tokens; a "plan" otherwise). `train_random_blocks` is that code step
  for step on a generator of its own, and each head then reads with its own plan (`HeadPlans`; the
  kernel holds one set of key blocks for all heads, so the heads run one after another). transformers'
  block-sparse attention has no attention dropout; ours has none there either.
So a block_sparse checkpoint opens, and its logits and gradients equal transformers' in eval and in
training mode, at every length. What is not copied: transformers' lasting switch to full attention, and
its reseeding of NumPy's global generator (ours leaves it alone). The attention maps of a middle query
show block 0 as the sum of its 1 + r reads in eval mode; transformers' own block-sparse maps keep one.

BigBird's released tokenizers are SentencePiece (spiece.model); BERT Lab reads WordPiece (vocab.txt), so
Google's releases are refused with a CheckpointError that says so; a folder with a vocab.txt opens.

Imports numpy, torch, bertlab.config, bertlab.errors, bertlab.model, bertlab.models.albert (transformers'
GELU names), bertlab.models.bert, bertlab.patterns and bertlab.tokenizer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import BertConfig
from bertlab.errors import CheckpointError
from bertlab.model import (
    BertEmbeddings,
    BertForPreTraining,
    BertIntermediate,
    BertModel,
    BertPredictionHeadTransform,
    BertSelfAttention,
    init_weights,
)
from bertlab.models import bert
from bertlab.models.albert import ACTIVATIONS
from bertlab.patterns.kernel import sparse_attention
from bertlab.patterns.plan import AttentionPlan
from bertlab.tokenizer import BertTokenizer

ENCODER_PREFIXES = bert.ENCODER_PREFIXES
OPTIONAL_PREFIXES = bert.OPTIONAL_PREFIXES  # the pooler: only NSP reads it
ATTENTION_TYPES = {"original_full": "full", "block_sparse": "bigbird"}  # transformers' name -> attention_pattern


@dataclass(frozen=True)
class BigBirdConfig(BertConfig):
    """BERT's config plus transformers' BigBird settings (see the module docstring)."""

    model_type: ClassVar[str] = "big_bird"

    hidden_act: str = "gelu_new"  # transformers' BigBird default: GELU's tanh approximation
    rescale_embeddings: bool = False  # word vectors times sqrt(hidden_size) before the sum
    use_bias: bool = True  # query, key and value have biases
    use_nsp_head: bool = False  # BigBirdForMaskedLM; BigBirdForPreTraining has one

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {tuple(ACTIVATIONS)}, got {self.hidden_act!r}")
        if self.attention_pattern not in ATTENTION_TYPES.values():
            raise ValueError(f"a BigBird attends with full or bigbird attention, not {self.attention_pattern!r}")

    @property
    def attention_type(self) -> str:
        """transformers' name for the attention: "original_full" or "block_sparse"."""
        return {v: k for k, v in ATTENTION_TYPES.items()}[self.attention_pattern]

    @property
    def sparse_from(self) -> int:
        """The shortest input read block-sparse: transformers reads (5 + 2r) * b tokens or fewer with full attention."""
        return (5 + 2 * self.random_blocks) * self.attention_block + 1

    def to_hf_dict(self, architecture: str = "BigBirdForMaskedLM", extra: dict | None = None) -> dict:
        """BERT's keys plus transformers' BigBirdConfig ones."""
        data = super().to_hf_dict(architecture, extra)
        data.update(
            hidden_act=self.hidden_act,
            attention_type=self.attention_type,
            block_size=self.attention_block,
            num_random_blocks=self.random_blocks,
            use_bias=self.use_bias,
            rescale_embeddings=self.rescale_embeddings,
        )
        return data


def config_from_hf(raw: dict, source: str) -> BigBirdConfig:
    """Our BigBirdConfig from config.json's content (transformers' BigBirdConfig keys, or ours).

    Raises:
        CheckpointError: an attention_type, activation or decoder setting this module does not implement.
    """
    attention_type = raw.get("attention_type", "block_sparse")
    if attention_type not in ATTENTION_TYPES:
        raise CheckpointError(f"{source}: attention_type {attention_type!r}; BigBird has {tuple(ATTENTION_TYPES)}")
    act = raw.get("hidden_act", "gelu_new")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"{source}: hidden_act {act!r} is not supported (BigBird: {', '.join(ACTIVATIONS)})")
    if raw.get("is_decoder") or raw.get("add_cross_attention"):
        raise CheckpointError(f"{source}: a BigBird decoder (is_decoder, add_cross_attention) is not supported")
    ours = raw.get("bertlab") or {}
    architectures = raw.get("architectures") or ["BigBirdForMaskedLM"]
    section = {
        "use_nsp_head": architectures[0] == "BigBirdForPreTraining",
        **ours,
        "attention_pattern": ATTENTION_TYPES[attention_type],
        "attention_block": int(raw.get("block_size", 64)),
        "random_blocks": int(raw.get("num_random_blocks", 3)),
    }
    shared = BertConfig.from_hf_dict({**raw, "hidden_act": "gelu", "bertlab": section}, source)
    try:
        return BigBirdConfig(
            **{f.name: getattr(shared, f.name) for f in dataclasses.fields(BertConfig)},
            hidden_act=act,
            rescale_embeddings=bool(raw.get("rescale_embeddings", False)),
            use_bias=bool(raw.get("use_bias", True)),
        )
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from exc


# --------------------------------------------------------------------------------------
# block_sparse as transformers computes it in eval mode
# --------------------------------------------------------------------------------------
def block_sparse_plan(
    config: BigBirdConfig,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    pool: int = 1,
    random: torch.Tensor | None = None,
) -> AttentionPlan:
    """transformers' block_sparse attention for one head as a plan for bertlab.patterns.kernel.

    Blocks of b tokens over the input padded to nb blocks. Global: the first and the last block
    (their real tokens). Each other query block reads its band (own block and neighbours; a global block
    in it is read once, as a global key) and its r random blocks, `random` (nb - 2, r) block ids for
    query blocks 1 .. nb - 2 (`train_random_blocks`). None is eval mode's all-zero adjacency: block 0
    read r more times, copies that the kernel's softmax counts beside its global columns.
    """
    B, T = input_ids.shape
    device = input_ids.device
    b, r = config.attention_block, config.random_blocks
    nb = math.ceil(T / b)
    padded = nb * b
    rows = torch.zeros(nb, r, dtype=torch.long, device=device)  # the first and last rows are never read
    if random is not None:
        rows[1:-1] = random.to(device)
    real = torch.ones(B, T, dtype=torch.bool, device=device) if attention_mask is None else attention_mask.bool()
    key_valid = torch.zeros(B, padded, dtype=torch.bool, device=device)
    key_valid[:, :T] = real
    qblock = torch.arange(nb, device=device)
    band_blocks = qblock[:, None] + torch.arange(-1, 2, device=device)[None]  # (nb, 3)
    key_blocks = torch.cat([band_blocks.clamp(0, nb - 1), rows], 1)  # (nb, 3 + r)
    middle = (qblock > 0) & (qblock < nb - 1)  # the first and last blocks' rows read everything instead
    block_ok = torch.cat([(band_blocks >= 0) & (band_blocks < nb), middle[:, None].expand(nb, r)], 1)
    band = block_ok.repeat_interleave(b, 1)[:, None, :]  # (nb, 1, K*b)
    position = torch.arange(padded, device=device)
    glob = key_valid & ((position < b) | (position >= padded - b))[None]  # (B, padded)
    blocked = key_valid.view(B, nb, b)
    local = (key_valid & ~glob).view(B, nb, b)  # the band's keys, global ones aside (read as global keys)
    key_ok = torch.cat([local[:, key_blocks[:, :3]].flatten(2), blocked[:, key_blocks[:, 3:]].flatten(2)], -1)
    global_idx = torch.cat([position[:b], position[padded - b :]])[None].expand(B, -1)  # (B, 2b)
    global_valid = glob.gather(1, global_idx)
    return AttentionPlan(
        b, T, key_blocks, None, band, key_ok, key_valid, global_idx.masked_fill(~global_valid, 0), global_valid, pool
    )


def train_random_blocks(config: BigBirdConfig, padded: int, layer: int, num_heads: int) -> torch.Tensor:
    """(num_heads, nb - 2, r) the random key blocks transformers draws in training for query blocks
    1 .. nb - 2 of an input padded to `padded` tokens: its NumPy code, step for step, from a generator
    seeded with the layer's index (transformers seeds NumPy's global one with it, so the draw is the
    same at every step)."""
    b, r = config.attention_block, config.random_blocks
    rng = np.random.RandomState(layer)
    if padded in (1024, 3072, 4096):  # the plans the paper used: drawn for the longest input, cut
        whole = config.max_position_embeddings
        layout = [_paper_random_blocks(rng, whole // b, b, r)[: padded // b - 2] for _ in range(num_heads)]
    else:
        layout = _planned_random_blocks(rng, padded // b, b, r, num_heads)
    return torch.from_numpy(np.stack(layout).astype(np.int64))


def _paper_random_blocks(rng: np.random.RandomState, nb: int, b: int, r: int, last_idx: int = 1024) -> np.ndarray:
    """transformers' `_bigbird_block_rand_mask` (its quirks kept: see its "Missing -3" comments)."""
    out = np.zeros((nb - 2, r), dtype=np.int32)
    middle = np.arange(1, nb - 1, dtype=np.int32)
    last = last_idx // b - 1 if last_idx > 2 * b else nb - 1
    for i in range(1, nb - 1):
        start, end = i - 2, i
        if i == 1:
            pool = middle[2:last]
        elif i == 2:
            pool = middle[3:last]
        elif i in (nb - 3, nb - 2):
            pool = middle[:last]
        elif start > last:
            pool = middle[:last]
        elif end + 1 == last:
            pool = middle[:start]
        else:
            pool = np.concatenate((middle[:start], middle[end + 1 : last]))
        out[i - 1, :] = rng.permutation(pool)[:r]
    return out


def _planned_random_blocks(rng: np.random.RandomState, nb: int, b: int, r: int, num_heads: int) -> list[np.ndarray]:
    """transformers' `_get_rand_attn_plan` + `_bigbird_block_rand_mask_with_head`, drawn in its order."""
    if 2 * r + 5 < nb:
        plan, counts = [(2 * r + 5) * b, nb * b], [r, 0]
    elif r + 5 < nb:
        plan, counts = [(r + 5) * b, nb * b], [r // 2, r - r // 2]
    else:
        plan, counts = [nb * b], [r]
    ends = [length // b for length in plan]
    out = [np.zeros((nb, sum(counts)), dtype=np.int32) for _ in range(num_heads)]

    def fill(rows: range, first: int, start: int, end: int, count: int) -> None:
        for row in rows:
            for h in range(num_heads):
                out[h][row, first : first + count] = _random_row(rng, row, start, end, count)

    for p, count in enumerate(counts):
        if p > 0:
            if count > 0:
                fill(range(1, ends[p - 1]), sum(counts[:p]), ends[p - 1], ends[p], count)
            for q in range(p):
                if counts[q] > 0:
                    fill(range(ends[p - 1], ends[p]), sum(counts[:q]), ends[q - 1] if q else 0, ends[q], counts[q])
        if count > 0:
            start = ends[p - 1] if p else 0
            fill(range(start if p else 1, ends[p]), sum(counts[:p]), start, ends[p], count)
    return [o[1 : nb - 1] for o in out]


def _random_row(rng: np.random.RandomState, row: int, start: int, end: int, count: int) -> np.ndarray:
    """transformers' `_get_single_block_row_attention`: `count` blocks of start .. end - 1 in a random
    order, none in the row's band, the first block or the last, nor the second-last for row 1 (or the
    second for the second-last row)."""
    illegal = {*range(row - 1, row + 2), 0, end - 1}
    if row == 1:
        illegal.add(end - 2)
    if row == end - 2:
        illegal.add(1)
    chosen = [int(blk) for blk in rng.permutation(np.arange(start, end, dtype=np.int32)) if blk not in illegal]
    return np.array(chosen[:count], dtype=np.int32)


@dataclass(frozen=True)
class HeadPlans:
    """One plan per head: transformers draws each head's random blocks apart in training."""

    heads: tuple[AttentionPlan, ...]


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------
class BigBirdEmbeddings(BertEmbeddings):
    """BERT's embeddings with transformers' BigBird order: dropout, then LayerNorm; word vectors
    optionally scaled by sqrt(H)."""

    def __init__(self, config: BigBirdConfig):
        super().__init__(config)
        self.word_scale = config.hidden_size**0.5 if config.rescale_embeddings else None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        words = self.word_embeddings(input_ids)
        if self.word_scale is not None:
            words = words * self.word_scale
        x = words + self.token_type_embeddings(token_type_ids) + self.position_embeddings(positions)[None]
        return self.LayerNorm(self.dropout(x))  # (B, T, H)


class BigBirdIntermediate(BertIntermediate):
    """BERT's feed-forward up-projection with `hidden_act`'s GELU (tanh approximation by default)."""

    def __init__(self, config: BigBirdConfig):
        super().__init__(config)
        self.approximate = ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x), approximate=self.approximate)


class BigBirdPredictionHeadTransform(BertPredictionHeadTransform):
    """The masked-LM head's dense + GELU (`hidden_act`'s) + LayerNorm."""

    def __init__(self, config: BigBirdConfig):
        super().__init__(config)
        self.approximate = ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(F.gelu(self.dense(x), approximate=self.approximate))


class BigBirdPooler(nn.Linear):
    """tanh(Linear([CLS])): transformers' BigBird pooler is the Linear itself (`bert.pooler.weight`)."""

    def __init__(self, config: BigBirdConfig):
        super().__init__(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(super().forward(hidden[:, 0]))  # (B, H)


class BigBirdSelfAttention(BertSelfAttention):
    """BERT's self-attention; under HeadPlans (training, block_sparse) each head reads its own plan, and
    without attention dropout, as transformers' block-sparse attention has none."""

    def forward(
        self,
        x: torch.Tensor,
        attn_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
        xq: torch.Tensor | None = None,
        plan: AttentionPlan | HeadPlans | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not isinstance(plan, HeadPlans):
            return super().forward(x, attn_bias, head_mask, output_attentions, xq, plan)
        B, T, _ = x.shape
        nh, hs = self.num_heads, self.head_size
        if head_mask is not None and self.pruned:
            head_mask = head_mask[list(self.kept_heads)]
        q, k, v = (proj(x).view(B, T, nh, hs).transpose(1, 2) for proj in (self.query, self.key, self.value))
        parts = [
            sparse_attention(
                q[:, h : h + 1],  # (B, 1, T, hs): one head
                k[:, h : h + 1],
                v[:, h : h + 1],
                head_plan,
                head_mask=None if head_mask is None else head_mask[h : h + 1],
                output_attentions=output_attentions,
            )
            for h, head_plan in enumerate(plan.heads)
        ]
        context = torch.cat([c for c, _ in parts], 1).transpose(1, 2).reshape(B, T, nh * hs)  # (B, T, nh*hs)
        probs = torch.cat([m for _, m in parts], 1) if output_attentions else None  # (B, nh, T', T')
        if probs is not None and self.pruned:
            full = probs.new_zeros(B, self.all_heads, *probs.shape[2:])
            full[:, list(self.kept_heads)] = probs
            probs = full
        return context, probs


class BigBirdModel(BertModel):
    """transformers' BigBirdModel: BERT's layers with BigBird's embeddings, GELU, pooler and attention."""

    def __init__(self, config: BigBirdConfig, add_pooling_layer: bool = True):
        super().__init__(config, add_pooling_layer=False)
        self.embeddings = BigBirdEmbeddings(config)
        self.pooler = BigBirdPooler(config) if add_pooling_layer else None
        for n, layer in enumerate(self.encoder.layer):
            layer.intermediate = BigBirdIntermediate(config)
            attention = layer.attention.self = BigBirdSelfAttention(config, config.pruned_in(n))
            if not config.use_bias:
                for name in ("query", "key", "value"):
                    old = getattr(attention, name)
                    setattr(attention, name, nn.Linear(old.in_features, old.out_features, bias=False))

    def attention_plans(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        global_attention_mask: torch.Tensor | None,
        pool: int,
    ) -> list[AttentionPlan | HeadPlans] | None:
        """transformers' layout: in eval mode one plan for every layer and head (no random blocks), in
        training one per head (its random blocks); None (full attention) for original_full and for
        inputs too short to be block-sparse."""
        if global_attention_mask is not None:
            raise ValueError("BigBird's global tokens are its first and last blocks; it takes no global_attention_mask")
        if not self.config.sparse or input_ids.shape[1] < self.config.sparse_from:
            return None
        if not self.training:
            return [block_sparse_plan(self.config, input_ids, attention_mask, pool)] * len(self.encoder.layer)
        padded = math.ceil(input_ids.shape[1] / self.config.attention_block) * self.config.attention_block
        plans = []
        for n, layer in enumerate(self.encoder.layer):
            random = train_random_blocks(self.config, padded, n, layer.attention.self.num_heads)
            heads = (block_sparse_plan(self.config, input_ids, attention_mask, pool, blocks) for blocks in random)
            plans.append(HeadPlans(tuple(heads)))
        return plans


class BigBirdForPreTraining(BertForPreTraining):
    """BigBird with BERT's heads (masked LM; NSP when the config has one), under transformers' names."""

    def __init__(self, config: BigBirdConfig):
        super().__init__(config)
        self.bert = BigBirdModel(config)
        self.cls.predictions.transform = BigBirdPredictionHeadTransform(config)
        init_weights(self, config.initializer_range)
        self.tie_weights()


def build(config: BigBirdConfig) -> BigBirdForPreTraining:
    return BigBirdForPreTraining(config)


def build_encoder(config: BigBirdConfig) -> BigBirdModel:
    """The encoder alone, with its pooler: what BigBirdForSequenceClassification holds under `bert.`."""
    return BigBirdModel(config)


task_config = bert.task_config  # the pretrained config: its heads are not built


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------
def normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """BERT's renaming; transformers' BigBird buffers (embeddings' position and token-type ids) dropped."""
    return {k: v for k, v in bert.normalize_keys(state).items() if not k.endswith("embeddings.token_type_ids")}


def expected_shapes(config: BigBirdConfig) -> dict[str, tuple[int, ...]]:
    """BERT's shapes, with BigBird's pooler and, under use_bias false, no query/key/value biases."""
    shapes = bert.expected_shapes(config)
    shapes["bert.pooler.weight"] = shapes.pop("bert.pooler.dense.weight")
    shapes["bert.pooler.bias"] = shapes.pop("bert.pooler.dense.bias")
    if not config.use_bias:
        for n in range(config.num_layers):
            for name in ("query", "key", "value"):
                shapes.pop(f"bert.encoder.layer.{n}.attention.self.{name}.bias")
    return shapes


def heads_in(config: BigBirdConfig, state: Mapping[str, Any]) -> tuple[str, ...]:
    """The heads `state` holds: "mlm", and "nsp" for a BigBirdForPreTraining's."""
    heads = ["mlm"] if all(k in state for k in bert.MLM_KEYS) else []
    if config.use_nsp_head and all(k in state for k in ("cls.seq_relationship.weight", "bert.pooler.weight")):
        heads.append("nsp")
    return tuple(heads)


def load_tokenizer(directory: Path, config: BigBirdConfig) -> BertTokenizer:
    """The folder's WordPiece tokenizer (vocab.txt).

    Raises:
        CheckpointError: the folder holds only BigBird's SentencePiece model (Google's releases).
    """
    directory = Path(directory)
    if not (directory / "vocab.txt").is_file() and (directory / "spiece.model").is_file():
        raise CheckpointError(
            f"{directory}: holds a SentencePiece tokenizer (spiece.model), as Google's BigBird releases do; "
            "BERT Lab reads WordPiece vocabularies only (vocab.txt): open a BigBird saved with a vocab.txt"
        )
    return bert.load_tokenizer(directory, config)


def architecture(config: BigBirdConfig) -> str:
    """The transformers class a pretraining folder of this family is saved as."""
    return "BigBirdForPreTraining" if config.use_nsp_head else "BigBirdForMaskedLM"
