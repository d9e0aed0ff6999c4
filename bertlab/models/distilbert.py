"""The DistilBERT family (Sanh et al. 2019), model_type "distilbert": transformers'
`DistilBertForMaskedLM` checkpoints open here, and answer fill-mask as transformers does. Loading
only: BERT Lab does not save a model as DistilBERT, nor pretrain one (the paper's distillation is
not built here).

DistilBERT is BERT's architecture without segment embeddings, pooler or NSP head: its layer computes
what BertLayer does (post-LN self-attention and an exact-GELU feed-forward, LayerNorm eps 1e-12), and
its masked-LM head what BERT's does (`vocab_transform`, GELU, `vocab_layer_norm`, then
`vocab_projector`, tied to the word embeddings, with its bias). So a DistilBERT folder opens as
bertlab.model's BertForPreTraining: `normalize_keys` renames transformers' names onto BERT's
(`distilbert.transformer.layer.3.attention.q_lin` -> `bert.encoder.layer.3.attention.self.query`, ...),
and supplies the segment table DistilBERT lacks as two zero rows: a token adds nothing for its
segment, and a pair's B (segment 1) reads as DistilBERT reads it, like A. The model has no pooler.
Every page that reads an encoder or a masked LM works; `head_mask`, the SDPA path and the
last-layer shortcut are BERT's.

config.json's keys are DistilBERT's own (`dim`, `n_layers`, `n_heads`, `hidden_dim`, `dropout`,
`attention_dropout`, `activation`). `sinusoidal_pos_embds` needs nothing here: transformers fills the
position table with the sinusoids and saves it with the weights, which load as any table does.

Imports torch, bertlab.config, bertlab.errors, bertlab.model and bertlab.models.bert.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from bertlab.config import BertConfig
from bertlab.errors import CheckpointError
from bertlab.model import BertForPreTraining
from bertlab.models import bert
from bertlab.models.bert import load_tokenizer as load_tokenizer  # WordPiece, as BERT's

ENCODER_PREFIXES = bert.ENCODER_PREFIXES  # after the renaming, the encoder is BERT's
OPTIONAL_PREFIXES = ()  # no pooler to miss
SEGMENT_TABLE = "bert.embeddings.token_type_embeddings.weight"
# transformers' DistilBERT names -> BERT's, in this order (a bare DistilBertModel's keys first get the prefix)
RENAMES = (
    ("distilbert.transformer.layer.", "bert.encoder.layer."),
    ("distilbert.embeddings.", "bert.embeddings."),
    (".attention.q_lin.", ".attention.self.query."),
    (".attention.k_lin.", ".attention.self.key."),
    (".attention.v_lin.", ".attention.self.value."),
    (".attention.out_lin.", ".attention.output.dense."),
    (".sa_layer_norm.", ".attention.output.LayerNorm."),
    (".ffn.lin1.", ".intermediate.dense."),
    (".ffn.lin2.", ".output.dense."),
    (".output_layer_norm.", ".output.LayerNorm."),
    ("vocab_transform.", "cls.predictions.transform.dense."),
    ("vocab_layer_norm.", "cls.predictions.transform.LayerNorm."),
    ("vocab_projector.bias", "cls.predictions.bias"),
    ("vocab_projector.weight", "cls.predictions.decoder.weight"),  # tied: dropped by BERT's rules
)


@dataclass(frozen=True)
class DistilBertConfig(BertConfig):
    """BERT's config read from DistilBERT's keys: no NSP head, and a segment table of zeros."""

    model_type: ClassVar[str] = "distilbert"
    use_nsp_head: bool = False  # DistilBERT has no pooler and no NSP head


class DistilBertAsBert(BertForPreTraining):
    """A DistilBERT in BERT's modules and names (see the module docstring): no pooler, no NSP head."""

    def __init__(self, config: DistilBertConfig):
        super().__init__(config)
        self.bert.pooler = None  # DistilBERT has none; the encoder's pooled_output is then None


def config_from_hf(raw: dict, source: str) -> DistilBertConfig:
    """Our config from transformers' DistilBertConfig keys.

    Raises:
        CheckpointError: not a DistilBERT config (a pretraining run's, which BERT Lab does not make),
            untied output embeddings, or an activation other than GELU.
    """
    if "dim" not in raw:
        raise CheckpointError(
            f"{source}: not a DistilBERT config (no 'dim'): BERT Lab opens DistilBERT checkpoints saved by "
            "transformers but does not pretrain or save DistilBERTs; pretrain model_type=bert instead"
        )
    if raw.get("tie_word_embeddings", True) is False:
        raise CheckpointError(f"{source}: untied output embeddings are not supported (tie_word_embeddings=false)")
    try:
        as_bert = {
            "vocab_size": raw["vocab_size"],
            "hidden_size": raw["dim"],
            "num_hidden_layers": raw["n_layers"],
            "num_attention_heads": raw["n_heads"],
            "intermediate_size": raw["hidden_dim"],
            "max_position_embeddings": raw.get("max_position_embeddings", 512),
            "hidden_dropout_prob": raw.get("dropout", 0.1),
            "attention_probs_dropout_prob": raw.get("attention_dropout", 0.1),
            "initializer_range": raw.get("initializer_range", 0.02),
            "pad_token_id": raw.get("pad_token_id", 0),
            "hidden_act": raw.get("activation", "gelu"),  # BERT's reader refuses anything but GELU
            "layer_norm_eps": 1e-12,  # fixed in DistilBERT's code
            "type_vocab_size": 2,  # the zero segment table normalize_keys supplies
            "bertlab": {"use_nsp_head": False},
        }
    except KeyError as exc:
        raise CheckpointError(f"{source}: missing key {exc.args[0]!r}; is this a DistilBERT config?") from exc
    return DistilBertConfig.from_hf_dict(as_bert, source)


def build(config: DistilBertConfig) -> DistilBertAsBert:
    return DistilBertAsBert(config)


build_encoder = bert.build_encoder  # never called on a DistilBertConfig: task_config makes it BERT's


def task_config(config: DistilBertConfig) -> BertConfig:
    """A fine-tuned DistilBERT is the BERT its layers are (module docstring): BERT's config, so it saves as
    BertForSequenceClassification (...), with the zero segment table and a pooler that starts from random
    init (DistilBERT has none). transformers' DistilBertForSequenceClassification (its pre_classifier head)
    is not what it saves as."""
    return BertConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(BertConfig)})


def normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' DistilBERT names onto BERT's (RENAMES), then BERT's own rules (TF-era
    LayerNorm names, tied copies dropped), and the zero segment table DistilBERT lacks."""
    renamed = {}
    for key, value in state.items():
        if key.startswith(("embeddings.", "transformer.")):  # a bare DistilBertModel
            key = "distilbert." + key
        for old, new in RENAMES:
            key = key.replace(old, new)
        renamed[key] = value
    out = bert.normalize_keys(renamed)
    words = out.get("bert.embeddings.word_embeddings.weight")
    if words is not None and SEGMENT_TABLE not in out:
        out[SEGMENT_TABLE] = words.new_zeros(2, words.shape[1])  # (2, H): every segment adds nothing
    return out


def expected_shapes(config: DistilBertConfig) -> dict[str, tuple[int, ...]]:
    """BERT's shapes (after the renaming), without the pooler."""
    return {k: s for k, s in bert.expected_shapes(config).items() if not k.startswith("bert.pooler.")}


def heads_in(config: DistilBertConfig, state: Mapping[str, Any]) -> tuple[str, ...]:
    """("mlm",) when `state` holds the masked-LM head; () for an encoder or a classifier's folder."""
    return bert.heads_in(config, state)


def architecture(config: DistilBertConfig) -> str:
    """Refused: a DistilBERT opens here but is not saved (see the module docstring).

    Raises:
        CheckpointError: always.
    """
    raise CheckpointError(
        "BERT Lab opens DistilBERT checkpoints but does not save them as DistilBERT; "
        "use transformers' DistilBertForMaskedLM to save one"
    )
