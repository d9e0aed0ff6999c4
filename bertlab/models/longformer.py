"""The Longformer family (Beltagy et al. 2020), model_type "longformer": RoBERTa's layout with
sliding-window attention and global tokens that have their own projections, named as transformers'
`LongformerForMaskedLM` key for key (`longformer.`, `lm_head.`).

Everything but the attention is RoBERTa's (bertlab.models.roberta, imported, not copied): the
embeddings with positions offset by the padding index, no pooler, the tied masked-LM head, the
byte-level BPE that reads a typed `[MASK]` as `<mask>`. The attention is the "window" pattern of
bertlab.patterns, which is Longformer's:
- each token reads `attention_window // 2` tokens on each side: config.json's `attention_window` is
  the whole window, as transformers states it. transformers pads an input to a multiple of the
  window before attending; the pattern kernel needs no padding, and real tokens' outputs are the same;
- global tokens read every token and every token reads them. transformers' LongformerForMaskedLM has
  none unless the caller passes a `global_attention_mask`, so a folder from transformers opens with
  `global_tokens: "none"` and the forward's `global_attention_mask` (B, T) picks them, as in theirs;
- a global token's own row is computed with its own projections, `query_global`, `key_global` and
  `value_global` (every token's key and value through the global ones, the global token's query),
  given to the kernel by `LongformerSelfAttention.global_projections`. Tokens reading a global token
  use its ordinary key and value, as transformers does.

transformers' config allows one window per layer (`attention_window` a list, which its LongformerModel
always writes, even when the values are equal). A list of equal values is `attention_window`; a list
that differs is kept per layer (`LongformerConfig.layer_windows`), each layer then reading with its
own window's plan (`LongformerModel.attention_plans`), and saved back as the list.

A fine-tuned Longformer (bertlab.finetune) is built with [CLS] global (`task_config`), as transformers'
LongformerForSequenceClassification makes it when given no global_attention_mask and as the paper
fine-tunes classifiers: its sentence classifiers equal transformers'. transformers' token classifier has no
global token and its QA model makes the question's tokens global; a config cannot say either per task,
so those two differ from transformers' until bertlab.finetune passes a global_attention_mask per task.

Imports torch, bertlab.config (through RobertaConfig), bertlab.errors, bertlab.model,
bertlab.models.roberta, bertlab.patterns and bertlab.tokenizer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from bertlab.errors import CheckpointError
from bertlab.model import BertSelfAttention, init_weights
from bertlab.models import roberta
from bertlab.models.roberta import RobertaConfig, RobertaForMaskedLM, RobertaLMHead, RobertaModel
from bertlab.patterns.kernel import GlobalProjections
from bertlab.patterns.plan import AttentionPlan, build_plan
from bertlab.tokenizer import BertTokenizer

ENCODER_PREFIXES = ("longformer.",)  # a folder without these weights is not a Longformer
OPTIONAL_PREFIXES = ()  # no pooler to miss
MLM_KEYS = roberta.MLM_KEYS  # the LM head is RoBERTa's, under the same names
GLOBAL_PROJECTIONS = ("query_global", "key_global", "value_global")  # a layer's global tokens' own Q, K, V


@dataclass(frozen=True)
class LongformerConfig(RobertaConfig):
    """RoBERTa's config with the window pattern always on (`attention_pattern` "window"); global tokens
    "none" unless a bertlab folder says otherwise."""

    model_type: ClassVar[str] = "longformer"

    attention_pattern: str = "window"
    global_tokens: str = "none"  # transformers' LongformerForMaskedLM: only what global_attention_mask names
    # one whole window per layer where config.json's list differs across layers; () when `attention_window`
    # serves every layer (then it is the largest of the list, as transformers pads to it)
    layer_windows: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.attention_pattern != "window":
            raise ValueError(f"a Longformer attends with the window pattern, not {self.attention_pattern!r}")
        if self.layer_windows:
            if len(self.layer_windows) != self.num_layers:
                raise ValueError(
                    f"attention_window lists {len(self.layer_windows)} windows for {self.num_layers} layers: "
                    "give one per layer, or one number for all"
                )
            if any(w < 2 or w % 2 for w in self.layer_windows):
                raise ValueError(
                    f"each attention_window is the whole window, an even number >= 2: {self.layer_windows}"
                )

    def window_of(self, layer: int) -> int:
        """The whole window `layer` reads with."""
        return self.layer_windows[layer] if self.layer_windows else self.attention_window

    def to_hf_dict(self, architecture: str = "LongformerForMaskedLM", extra: dict | None = None) -> dict:
        """RoBERTa's keys plus transformers' `attention_window` (a list when the layers differ)."""
        data = super().to_hf_dict(architecture, extra)
        data["attention_window"] = list(self.layer_windows) if self.layer_windows else self.attention_window
        data["bertlab"].pop("attention_window", None)  # the top-level key is the one both read
        return data


def config_from_hf(raw: dict, source: str) -> LongformerConfig:
    """Our LongformerConfig from config.json's content (transformers' LongformerConfig keys, or ours).

    Raises:
        CheckpointError: an attention_window that is not an even number >= 2 (or a list of them, one per
            layer), or a config asking for an NSP head.
    """
    ours = raw.get("bertlab") or {}
    windows = _windows(raw.get("attention_window", ours.get("attention_window", 512)), raw, source)
    section = {
        **ours,
        "attention_pattern": "window",
        "attention_window": max(windows),
        "global_tokens": ours.get("global_tokens", "none"),
    }
    config = roberta.config_from_hf({**raw, "bertlab": section}, source, LongformerConfig, "Longformer")
    try:
        return dataclasses.replace(config, layer_windows=windows if len(set(windows)) > 1 else ())
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from exc


def _windows(value: Any, raw: dict, source: str) -> tuple[int, ...]:
    """config.json's attention_window (a number, or transformers' list of one per layer) as a tuple."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(w, int) and not isinstance(w, bool) for w in values):
        raise CheckpointError(f"{source}: attention_window must be a whole number or a list of them, got {value!r}")
    if isinstance(value, list) and len(values) != int(raw.get("num_hidden_layers", len(values))):
        raise CheckpointError(
            f"{source}: attention_window lists {len(values)} windows for {raw.get('num_hidden_layers')} layers"
        )
    return tuple(values)


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------
class LongformerSelfAttention(BertSelfAttention):
    """BERT's self-attention (run on the window pattern's plan) plus the global tokens' own projections."""

    def __init__(self, config: LongformerConfig, pruned: tuple[int, ...] = ()):
        super().__init__(config, pruned)
        width = self.num_heads * self.head_size
        self.query_global = nn.Linear(config.hidden_size, width)
        self.key_global = nn.Linear(config.hidden_size, width)
        self.value_global = nn.Linear(config.hidden_size, width)

    def global_projections(self, x: torch.Tensor) -> GlobalProjections:
        """(B, nh, T, hs) each: the kernel reads the query at the global tokens, key and value everywhere."""
        B, T, _ = x.shape
        shape = (B, T, self.num_heads, self.head_size)
        q, k, v = (
            proj(x).view(shape).transpose(1, 2) for proj in (self.query_global, self.key_global, self.value_global)
        )
        return GlobalProjections(query=q, key=k, value=v)


class LongformerModel(RobertaModel):
    """transformers' LongformerModel(add_pooling_layer=False): RoBERTa's encoder with Longformer's attention."""

    def __init__(self, config: LongformerConfig):
        super().__init__(config)
        for n, layer in enumerate(self.encoder.layer):
            layer.attention.self = LongformerSelfAttention(config, config.pruned_in(n))

    def attention_plans(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        global_attention_mask: torch.Tensor | None,
        pool: int,
    ) -> list[AttentionPlan] | None:
        """One plan per layer's window: BertModel's shared plan when every layer has the same one."""
        windows = self.config.layer_windows
        if not windows:
            return super().attention_plans(input_ids, attention_mask, global_attention_mask, pool)
        plans = {
            w: build_plan(
                self.config.replace(attention_window=w, layer_windows=()),
                input_ids,
                attention_mask,
                global_mask=global_attention_mask,
                pool=pool,
            )
            for w in set(windows)
        }
        return [plans[w] for w in windows]


class LongformerForMaskedLM(RobertaForMaskedLM):
    """Longformer with RoBERTa's masked-LM head, under transformers' names (`longformer.`, `lm_head.`)."""

    def __init__(self, config: LongformerConfig):
        # not RobertaForMaskedLM.__init__: that builds the encoder under `roberta.`
        nn.Module.__init__(self)
        self.config = config
        self.longformer = LongformerModel(config)
        self.lm_head = RobertaLMHead(config)
        init_weights(self, config.initializer_range)
        self.tie_weights()

    @property
    def bert(self) -> LongformerModel:
        """The encoder, under the name every family's model answers to (transformers calls it `longformer`)."""
        return self.longformer

    def tie_weights(self) -> None:
        self.lm_head.decoder.weight = self.longformer.embeddings.word_embeddings.weight


def build(config: LongformerConfig) -> LongformerForMaskedLM:
    return LongformerForMaskedLM(config)


def build_encoder(config: LongformerConfig) -> LongformerModel:
    """The encoder alone (no pooler): what LongformerForSequenceClassification holds under `longformer.`."""
    return LongformerModel(config)


def task_config(config: LongformerConfig) -> LongformerConfig:
    """A fine-tuned Longformer reads with [CLS] global, as transformers' classifier and the paper's."""
    return config.replace(global_tokens="cls")


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------
def normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """RoBERTa's renaming under `longformer.`."""
    return roberta.normalize_keys(state, prefix="longformer.")


def expected_shapes(config: LongformerConfig) -> dict[str, tuple[int, ...]]:
    """RoBERTa's shapes under `longformer.`, plus each layer's global projections."""
    shapes = roberta.expected_shapes(config, prefix="longformer.")
    h = config.hidden_size
    for n in range(config.num_layers):
        width = config.heads_in_layer(n) * config.head_size
        for name in GLOBAL_PROJECTIONS:
            shapes[f"longformer.encoder.layer.{n}.attention.self.{name}.weight"] = (width, h)
            shapes[f"longformer.encoder.layer.{n}.attention.self.{name}.bias"] = (width,)
    return shapes


def heads_in(config: LongformerConfig, state: Mapping[str, Any]) -> tuple[str, ...]:
    """("mlm",) when `state` holds the LM head; () for an encoder or a classifier's folder."""
    return roberta.heads_in(config, state)


def load_tokenizer(directory: Path, config: LongformerConfig) -> BertTokenizer:
    """The folder's byte-level BPE (or WordPiece vocab.txt), as RoBERTa's."""
    return roberta.load_tokenizer(directory, config)


def architecture(config: LongformerConfig) -> str:
    """The transformers class a pretraining folder of this family is saved as."""
    return "LongformerForMaskedLM"
