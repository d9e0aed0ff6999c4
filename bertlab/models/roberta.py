"""The RoBERTa family (Liu et al. 2019), model_type "roberta": BERT's encoder with RoBERTa's
embeddings and masked-LM head, named as transformers' `RobertaForMaskedLM` key for key.

RoBERTa's layers are BERT's (bertlab.model's, imported, not copied). It differs in three places:
- the embeddings (`roberta.embeddings.*`): one segment row (type_vocab_size 1: every token reads
  it, segment ids or not), and positions
  offset by the padding index as fairseq counts them: a token's position is padding_idx plus its
  count among its row's non-pad tokens, so the first real token sits at padding_idx + 1 and pads at
  padding_idx (a zero row that never trains). The table so has max length + padding_idx + 1 rows:
  514 for 512 tokens with <pad> = 1. `max_position_embeddings` is that table, as in config.json, and
  `RobertaConfig.max_length` the longest input;
- no pooler and no NSP head (transformers builds RobertaModel(add_pooling_layer=False));
- the masked-LM head `lm_head.dense`, `lm_head.layer_norm`, `lm_head.decoder` (tied to the word
  embeddings, saved once) and `lm_head.bias`.

Its tokenizer is byte-level BPE (bertlab.models.roberta_tokenizer); a RoBERTa pretrained here with WordPiece
(`tokenizer: wordpiece`) keeps its vocab.txt, and opens with it.

Imports torch, bertlab.config, bertlab.errors, bertlab.model, bertlab.models.bert (the naming rules
RoBERTa's encoder shares), bertlab.models.roberta_tokenizer and bertlab.tokenizer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import BertConfig
from bertlab.errors import CheckpointError
from bertlab.model import BertEmbeddings, BertForPreTraining, BertModel, init_weights
from bertlab.models import bert
from bertlab.models.roberta_tokenizer import RobertaTokenizer
from bertlab.tokenizer import BertTokenizer

ENCODER_PREFIXES = ("roberta.",)  # a folder without these weights is not a RoBERTa
OPTIONAL_PREFIXES = ()  # no pooler to miss
MLM_KEYS = ("lm_head.dense.weight", "lm_head.bias")
TIED_KEYS = ("lm_head.decoder.weight", "lm_head.decoder.bias")  # copies of the word embeddings and lm_head.bias


@dataclass(frozen=True)
class RobertaConfig(BertConfig):
    """BERT's config read as RoBERTa's: `max_position_embeddings` is the position table's rows
    (config.json's 514), of which the first pad_token_id + 1 never hold a real token."""

    model_type: ClassVar[str] = "roberta"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_length < 1:
            raise ValueError(
                f"max_position_embeddings {self.max_position_embeddings} leaves no position for a token: RoBERTa's "
                f"first token sits at pad_token_id + 1 = {self.pad_token_id + 1}"
            )

    @property
    def max_length(self) -> int:
        """The longest input, specials included: the rows after the padding offset (512 of 514)."""
        return self.max_position_embeddings - self.pad_token_id - 1


def config_from_hf(
    raw: dict, source: str, config_class: type[RobertaConfig] = RobertaConfig, class_prefix: str = "Roberta"
) -> RobertaConfig:
    """Our RobertaConfig from config.json's content (transformers' RobertaConfig keys, or a run's).

    A pretraining run's config comes from the recipe in BERT's terms (architectures names no Roberta
    class; `max_position_embeddings` is the longest input; two segments): it is given RoBERTa's
    layout here, one segment row and a table of max length + pad_token_id + 1 rows. A family built on
    RoBERTa's layout (Longformer) reads its config here with its own `config_class` and the prefix
    of its transformers class names.

    Raises:
        CheckpointError: the config asks for an NSP head, which RoBERTa has none of.
    """
    ours = raw.get("bertlab") or {}
    if ours.get("use_nsp_head", False):
        raise CheckpointError(
            f"{source}: RoBERTa has no next-sentence head; pretrain it with an objective without NSP "
            "(data.objective=roberta, RoBERTa's recipe, or mlm)"
        )
    architectures = raw.get("architectures") or [f"{class_prefix}ForMaskedLM"]
    if not str(architectures[0]).startswith(class_prefix):  # a pretraining run's, in BERT's terms
        pad = int(raw.get("pad_token_id") or 0)
        raw = {**raw, "type_vocab_size": 1, "max_position_embeddings": int(raw["max_position_embeddings"]) + pad + 1}
    config = config_class.from_hf_dict(raw, source)
    return dataclasses.replace(config, use_nsp_head=False)


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------
class RobertaEmbeddings(BertEmbeddings):
    """BERT's embeddings with positions counted from the padding index (see the module docstring)."""

    def __init__(self, config: RobertaConfig):
        super().__init__(config)
        # the padding row stays zero and untrained, as transformers' (pads sit at position padding_idx)
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.padding_idx = config.pad_token_id
        self.max_length = config.max_length

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[1] > self.max_length:  # a shape, not the data: no sync, no graph break
            raise ValueError(
                f"input is {input_ids.shape[1]} tokens long; this RoBERTa's positions cover {self.max_length} "
                f"(max_position_embeddings - pad_token_id - 1): shorten it or raise max_position_embeddings"
            )
        real = input_ids.ne(self.padding_idx).long()  # (B, T)
        positions = (
            real.cumsum(1) * real + self.padding_idx
        )  # (B, T): first real token padding_idx + 1, pads padding_idx
        if self.token_type_embeddings.num_embeddings == 1:
            # one segment, as fairseq's RoBERTa, which has no segment ids: a pair's B (type 1, from a
            # paired objective's batches or a WordPiece tokenizer) reads the one row too
            token_type_ids = torch.zeros_like(token_type_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)  # (B, T, H)
        return self.dropout(self.LayerNorm(x))


class RobertaModel(BertModel):
    """transformers' RobertaModel(add_pooling_layer=False): BERT's layers on RoBERTa's embeddings."""

    def __init__(self, config: RobertaConfig):
        super().__init__(config, add_pooling_layer=False)
        self.embeddings = RobertaEmbeddings(config)


class RobertaLMHead(nn.Module):
    """dense + GELU + LayerNorm, then a decoder tied to the word embeddings, with its own bias."""

    def __init__(self, config: RobertaConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layer_norm(F.gelu(self.dense(x)))) + self.bias  # (..., V)


class RobertaForMaskedLM(BertForPreTraining):
    """RoBERTa with its masked-LM head: BertForPreTraining's forward (the masked positions scored,
    the last layer run only there) over RoBERTa's modules and names."""

    tied_keys = ("lm_head.decoder.weight",)  # saved once: the decoder is the word embeddings

    def __init__(self, config: RobertaConfig):
        # not BertForPreTraining.__init__: that builds BERT's modules under BERT's names (bert., cls.)
        nn.Module.__init__(self)
        self.config = config
        self.roberta = RobertaModel(config)
        self.lm_head = RobertaLMHead(config)
        init_weights(self, config.initializer_range)
        self.tie_weights()

    @property
    def bert(self) -> RobertaModel:
        """The encoder, under the name every family's model answers to (transformers calls it `roberta`)."""
        return self.roberta

    def tie_weights(self) -> None:
        self.lm_head.decoder.weight = self.roberta.embeddings.word_embeddings.weight

    @property
    def heads(self) -> tuple[str, ...]:
        return ("mlm",)

    def next_sentence_logits(self, pooled: torch.Tensor | None) -> None:
        return None  # RoBERTa dropped NSP

    def layer_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Apply the masked-LM head to any hidden state (B, T, H) -> (B, T, V), e.g. an earlier layer's."""
        return self.lm_head(hidden)


def build(config: RobertaConfig) -> RobertaForMaskedLM:
    return RobertaForMaskedLM(config)


def build_encoder(config: RobertaConfig) -> RobertaModel:
    """The encoder alone (no pooler): what RobertaForSequenceClassification holds under `roberta.`."""
    return RobertaModel(config)


task_config = bert.task_config  # the pretrained config: the LM head is not built


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------
def normalize_keys(state: dict[str, torch.Tensor], prefix: str = "roberta.") -> dict[str, torch.Tensor]:
    """BERT's renaming (TF-era LayerNorm names, a bare encoder's keys) under `prefix`; the LM head's
    bias from its decoder's where only that was saved; the tied copies dropped."""
    out = bert.normalize_keys(state, prefix=prefix)
    if "lm_head.bias" not in out and "lm_head.decoder.bias" in out:
        out["lm_head.bias"] = out["lm_head.decoder.bias"]
    for k in TIED_KEYS:
        out.pop(k, None)
    return out


def expected_shapes(config: RobertaConfig, prefix: str = "roberta.") -> dict[str, tuple[int, ...]]:
    """The shape config.json implies for each RobertaForMaskedLM weight: BERT's encoder under
    `prefix` (no pooler) and the LM head."""
    h, v = config.hidden_size, config.vocab_size
    shapes = {
        prefix + k.removeprefix("bert."): shape
        for k, shape in bert.expected_shapes(config).items()
        if k.startswith("bert.") and not k.startswith("bert.pooler.")
    }
    shapes.update(
        {
            "lm_head.dense.weight": (h, h),
            "lm_head.dense.bias": (h,),
            "lm_head.layer_norm.weight": (h,),
            "lm_head.layer_norm.bias": (h,),
            "lm_head.decoder.weight": (v, h),  # tied to the word embeddings
            "lm_head.bias": (v,),
        }
    )
    return shapes


def heads_in(config: RobertaConfig, state: Mapping[str, Any]) -> tuple[str, ...]:
    """("mlm",) when `state` holds the LM head; () for an encoder or a classifier's folder."""
    return ("mlm",) if all(k in state for k in MLM_KEYS) else ()


def load_tokenizer(directory: Path, config: RobertaConfig) -> BertTokenizer:
    """The folder's byte-level BPE (vocab.json + merges.txt, or tokenizer.json), or the vocab.txt of a
    RoBERTa pretrained here with WordPiece; never longer than the position table covers."""
    if (Path(directory) / "vocab.txt").is_file():
        return BertTokenizer.from_dir(directory, config.max_length)
    return RobertaTokenizer.from_dir(directory, config.max_length)


def architecture(config: RobertaConfig) -> str:
    """The transformers class a pretraining folder of this family is saved as."""
    return "RobertaForMaskedLM"
