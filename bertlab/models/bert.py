"""The BERT family: how its checkpoints are named, which heads a folder holds, and how it loads
from and saves to Hugging Face's layout (registered in bertlab.models.registry as model_type "bert").

The architecture itself is bertlab.model (BertModel, BertForPreTraining); this module is what the
checkpoint reader asks about it. Names are Google's and Hugging Face's, key for key: the encoder
under `bert.`, the masked-LM head under `cls.predictions.`, the NSP head at `cls.seq_relationship`,
and SpanBERT's span-boundary head, ours alone (transformers has none), under `cls.span_boundary.`.

Imports torch, bertlab.config, bertlab.model, bertlab.tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from bertlab.config import SBO_POSITIONS, BertConfig
from bertlab.model import TIED_KEYS, BertForPreTraining, BertModel
from bertlab.tokenizer import BertTokenizer

ENCODER_PREFIXES = ("bert.",)  # a folder without these weights is not a BERT
OPTIONAL_PREFIXES = ("bert.pooler.",)  # BertForMaskedLM has no pooler; only NSP needs it
MLM_KEYS = ("cls.predictions.transform.dense.weight",)  # the masked-LM head's first weight
NSP_KEYS = ("cls.seq_relationship.weight", "bert.pooler.dense.weight")  # NSP needs both
SBO_KEYS = ("cls.span_boundary.input_transform.dense.weight",)  # the span-boundary head's first weight


def config_from_hf(raw: dict, source: str) -> BertConfig:
    """Our BertConfig from config.json's content (Hugging Face's keys plus our `bertlab` section)."""
    return BertConfig.from_hf_dict(raw, source)


def build(config: BertConfig) -> BertForPreTraining:
    """A freshly initialised model with the heads `config` asks for (NSP when `use_nsp_head`, the span
    boundary when `span_boundary_head`)."""
    return BertForPreTraining(config)


def build_encoder(config: BertConfig) -> BertModel:
    """The encoder alone, with its pooler: what BertForSequenceClassification holds under `bert.`."""
    return BertModel(config)


def task_config(config: BertConfig) -> BertConfig:
    """The config a fine-tuned BERT is built and saved with: the pretrained one (its heads are not built)."""
    return config


def normalize_keys(state: dict[str, torch.Tensor], prefix: str = "bert.") -> dict[str, torch.Tensor]:
    """Map the names different BERT savers use onto ours.

    Handles an encoder saved bare (`embeddings.…` instead of `bert.embeddings.…`), TF-era
    LayerNorm names (`gamma`/`beta`), and the tied decoder copies.
    """
    out = {}
    for k, v in state.items():
        k = k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        if k.endswith("position_ids"):
            continue  # a buffer in some transformers versions, not a weight
        if k.startswith(("embeddings.", "encoder.", "pooler.")):
            k = prefix + k
        out[k] = v
    if "cls.predictions.bias" not in out and "cls.predictions.decoder.bias" in out:
        out["cls.predictions.bias"] = out["cls.predictions.decoder.bias"]
    for k in TIED_KEYS:
        out.pop(k, None)
    return out


def expected_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """The shape config.json implies for each BertForPreTraining weight (HF names), by arithmetic.

    Plain arithmetic, not a model built on the meta device: that costs ~2 s the first time in a
    process (torch warms its meta kernels), on every `bertlab fill-mask`. A test holds this table
    equal to a real model's state_dict for several configs."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size

    def linear(name: str, out_features: int, in_features: int) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (out_features, in_features), f"{name}.bias": (out_features,)}

    def layer_norm(name: str) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (h,), f"{name}.bias": (h,)}

    shapes = {
        "bert.embeddings.word_embeddings.weight": (v, h),
        "bert.embeddings.position_embeddings.weight": (config.max_position_embeddings, h),
        "bert.embeddings.token_type_embeddings.weight": (config.type_vocab_size, h),
        **layer_norm("bert.embeddings.LayerNorm"),
        **linear("bert.pooler.dense", h, h),
        "cls.predictions.bias": (v,),
        "cls.predictions.decoder.weight": (v, h),  # tied to the word embeddings
        **linear("cls.predictions.transform.dense", h, h),
        **layer_norm("cls.predictions.transform.LayerNorm"),
    }
    if config.use_nsp_head:
        shapes.update(linear("cls.seq_relationship", 2, h))
    if config.span_boundary_head:  # its decoder is the masked LM's (the word embeddings): no weight of its own
        shapes.update(
            {
                "cls.span_boundary.position_embeddings.weight": (SBO_POSITIONS, h),
                **linear("cls.span_boundary.input_transform.dense", h, 3 * h),
                **layer_norm("cls.span_boundary.input_transform.LayerNorm"),
                **linear("cls.span_boundary.output_transform.dense", h, h),
                **layer_norm("cls.span_boundary.output_transform.LayerNorm"),
                "cls.span_boundary.bias": (v,),
            }
        )
    for n in range(config.num_layers):
        p = f"bert.encoder.layer.{n}."
        width = config.heads_in_layer(n) * config.head_size  # h unless heads were pruned (BertConfig.pruned_heads)
        for name in ("attention.self.query", "attention.self.key", "attention.self.value"):
            shapes.update(linear(p + name, width, h))
        shapes.update(linear(p + "attention.output.dense", h, width))
        shapes.update(linear(p + "intermediate.dense", i, h))
        shapes.update(linear(p + "output.dense", h, i))
        shapes.update(layer_norm(p + "attention.output.LayerNorm"))
        shapes.update(layer_norm(p + "output.LayerNorm"))
    return shapes


def heads_in(config: BertConfig, state: Mapping[str, Any]) -> tuple[str, ...]:
    """The heads whose weights `state` (normalised names) holds: "mlm", "nsp", "sbo" (a classifier's or
    an encoder-only folder holds none)."""
    heads = []
    if all(k in state for k in MLM_KEYS):
        heads.append("mlm")
    if config.use_nsp_head and all(k in state for k in NSP_KEYS):
        heads.append("nsp")
    if config.span_boundary_head and all(k in state for k in SBO_KEYS):
        heads.append("sbo")
    return tuple(heads)


def load_tokenizer(directory: Path, config: BertConfig) -> BertTokenizer:
    """The folder's WordPiece tokenizer (vocab.txt, or transformers' tokenizer.json)."""
    return BertTokenizer.from_dir(directory, config.max_position_embeddings)


def architecture(config: BertConfig) -> str:
    """The transformers class a pretraining folder of this family is saved as."""
    return "BertForPreTraining"
