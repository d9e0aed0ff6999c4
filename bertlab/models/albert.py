"""The ALBERT family (Lan et al. 2019, "ALBERT: A Lite BERT"): factorised embeddings, cross-layer
parameter sharing and the sentence-order head, with Hugging Face's names key for key (registered in
bertlab.models.registry as model_type "albert").

ALBERT is BERT with three changes (paper, section 3.1), and this module keeps BERT's computation
wherever the math is the same (bertlab.model's embeddings, self-attention with its head mask and SDPA
path, its encoder loop and its pretraining forward):
- factorised embeddings: tokens, positions and segments are embedded at width E (`embedding_size`,
  128 in ALBERT-base against H = 768) and projected to H before the first layer
  (`albert.encoder.embedding_hidden_mapping_in`); the masked-LM head projects H back to E, and its
  decoder is the E-wide word embeddings;
- cross-layer parameter sharing (`parameter_sharing`):
  - "all": one layer's weights run L times (the paper's ALBERT; transformers' layout: one layer group,
    `albert.encoder.albert_layer_groups.0.albert_layers.0.…`);
  - "none": L layers of their own (the paper's "not-shared" row; transformers' layout with L groups,
    `num_hidden_groups` = L);
  - "attention" (only the attention block shared) and "ffn" (only the feed-forward block shared), the
    paper's Table 4 ablations. transformers has no class for these two: they save in our layout (the
    L-group layout, the shared block stored once, under group 0) and load only in BERT Lab. Their
    config.json names the architecture "BertLabAlbertForPreTraining"; transformers would read such a
    folder as an unshared ALBERT with the shared blocks of layers 1.. missing;
- sentence-order prediction (SOP) instead of NSP: a two-way classifier on the pooled [CLS]
  (`sop_classifier.classifier`); label 0 = A then B in order, 1 = swapped (transformers'
  `sentence_order_label`). Its logits are `AlbertPreTrainingOutput.sop_logits`; `nsp_logits` stays
  None, since ALBERT has no next-sentence head.

One departure from transformers: its AlbertLayer applies no dropout to the feed-forward output (it
builds the module and never calls it); Google's ALBERT does, and so does this module. The two agree
whenever dropout is off (inference, and ALBERT v2's released configs, which set it to 0).

What a folder of this family holds: the encoder under `albert.`, the masked-LM head under
`predictions.`, the SOP head under `sop_classifier.`. ALBERT's released checkpoints (albert-base-v2)
and folders transformers saves keep a SentencePiece tokenizer (spiece.model and/or a unigram
tokenizer.json), read by bertlab.models.spiece_tokenizer; ours keep a WordPiece vocab.txt.

Imports torch, bertlab.config, bertlab.errors, bertlab.model, bertlab.models.bert,
bertlab.models.spiece_tokenizer and bertlab.tokenizer.
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
from bertlab.model import (
    BertEmbeddings,
    BertForPreTraining,
    BertModel,
    BertSelfAttention,
    PreTrainingOutput,
    init_weights,
)
from bertlab.models import bert
from bertlab.models.spiece_tokenizer import SentencePieceTokenizer, holds_sentencepiece
from bertlab.patterns.plan import AttentionPlan
from bertlab.tokenizer import BertTokenizer

SHARING = ("all", "attention", "ffn", "none")  # what the L layers share
HF_SHARING = ("all", "none")  # the sharing modes transformers' layer groups can express
# transformers' names of GELU: the exact one, and the tanh approximation ALBERT's releases use
ACTIVATIONS = {"gelu": "none", "gelu_python": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}

ENCODER_PREFIXES = ("albert.",)  # a folder without these weights is not an ALBERT
OPTIONAL_PREFIXES = ("albert.pooler.",)  # AlbertForMaskedLM has no pooler; only SOP needs it
MLM_KEYS = ("predictions.dense.weight",)  # the masked-LM head's first weight
SOP_KEYS = ("sop_classifier.classifier.weight", "albert.pooler.weight")  # SOP needs both
TIED_KEYS = ("predictions.decoder.weight", "predictions.decoder.bias")  # copies of other weights
GROUPS = "albert.encoder.albert_layer_groups"
ATTENTION_BLOCK = ("attention",)  # an AlbertLayer's children that make each block
FFN_BLOCK = ("ffn", "ffn_output", "full_layer_layer_norm")


# --------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlbertConfig(BertConfig):
    """BERT's shape plus ALBERT's: embedding width, what the layers share, and its heads."""

    model_type: ClassVar[str] = "albert"

    embedding_size: int = 128  # E: the embeddings' width, projected to H (ALBERT-base: 128 against H = 768)
    parameter_sharing: str = "all"  # what the layers share: all | attention | ffn | none (see the module docstring)
    hidden_act: str = "gelu_new"  # ALBERT's releases use GELU's tanh approximation; "gelu" is the exact one
    classifier_dropout: float = 0.1  # dropout on the pooled [CLS] before the SOP classifier
    use_sop_head: bool = True  # the sentence-order head (transformers' AlbertForPreTraining always has one)
    use_nsp_head: bool = False  # ALBERT has no next-sentence head: its sentence-pair head is sentence order

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.embedding_size <= 0:
            raise ValueError(f"embedding_size must be positive, got {self.embedding_size}")
        if self.parameter_sharing not in SHARING:
            raise ValueError(f"parameter_sharing must be one of {SHARING}, got {self.parameter_sharing!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {tuple(ACTIVATIONS)}, got {self.hidden_act!r}")
        if self.use_nsp_head:
            raise ValueError(
                "ALBERT has no next-sentence head (its sentence-pair head is sentence order): "
                "pretrain it with data.objective=mlm_sop, or mlm"
            )

    @property
    def num_layer_groups(self) -> int:
        """Layer groups in the layout (transformers' num_hidden_groups): one under "all", else one a layer."""
        return 1 if self.parameter_sharing == "all" else self.num_layers

    @property
    def gelu_approximation(self) -> str:
        """F.gelu's `approximate` for `hidden_act`."""
        return ACTIVATIONS[self.hidden_act]

    def to_hf_dict(self, architecture: str = "AlbertForPreTraining", extra: dict | None = None) -> dict:
        """The `config.json` content: transformers' AlbertConfig keys plus our `bertlab` section."""
        data = super().to_hf_dict(architecture, extra)
        data.update(
            embedding_size=self.embedding_size,
            hidden_act=self.hidden_act,
            num_hidden_groups=self.num_layer_groups,
            inner_group_num=1,
            classifier_dropout_prob=self.classifier_dropout,
            parameter_sharing=self.parameter_sharing,  # ours; transformers keeps it as a plain attribute
        )
        data["bertlab"]["use_sop_head"] = self.use_sop_head
        return data

    @classmethod
    def from_hf_dict(cls, data: dict, source: str = "config.json") -> AlbertConfig:
        """Read an ALBERT `config.json` (ours, or one written by transformers' AlbertConfig).

        Raises:
            CheckpointError: a layout or setting this module does not implement, or a bad value.
        """
        act = data.get("hidden_act", "gelu_new")
        if act not in ACTIVATIONS:
            raise CheckpointError(f"{source}: hidden_act {act!r} is not supported (ALBERT: {', '.join(ACTIVATIONS)})")
        if int(data.get("inner_group_num", 1)) != 1:
            raise CheckpointError(
                f"{source}: inner_group_num {data['inner_group_num']} is not supported (every released ALBERT has 1)"
            )
        if data.get("tie_word_embeddings", True) is False:
            raise CheckpointError(f"{source}: untied output embeddings are not supported (tie_word_embeddings=false)")
        ours = data.get("bertlab") or {}
        if ours.get("use_nsp_head"):
            raise CheckpointError(
                f"{source}: ALBERT has no next-sentence head (its sentence-pair head is sentence order); "
                "pretrain it with data.objective=mlm_sop, or mlm"
            )
        # BERT's keys, read as BERT reads them; transformers' AlbertConfig has no dropout by default
        shared = BertConfig.from_hf_dict(
            {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, **data, "hidden_act": "gelu"}, source
        )
        groups = int(data.get("num_hidden_groups", 1))
        by_groups = {shared.num_layers: "none", 1: "all"}  # a one-layer ALBERT shares "all"
        sharing = data.get("parameter_sharing") or by_groups.get(groups)
        if sharing is None:
            raise CheckpointError(
                f"{source}: num_hidden_groups {groups} is not supported: BERT Lab opens ALBERTs whose "
                f"{shared.num_layers} layers share all weights (1 group) or none ({shared.num_layers} groups)"
            )
        try:
            bert_fields = {f.name: getattr(shared, f.name) for f in dataclasses.fields(BertConfig)}
            config = cls(
                **(bert_fields | {"use_nsp_head": False}),
                embedding_size=int(data.get("embedding_size", 128)),
                parameter_sharing=sharing,
                hidden_act=act,
                classifier_dropout=float(data.get("classifier_dropout_prob", 0.1)),
                use_sop_head=bool(ours.get("use_sop_head", True)),
            )
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{source}: {exc}") from exc
        if "num_hidden_groups" in data and groups != config.num_layer_groups:
            raise CheckpointError(
                f"{source}: parameter_sharing {sharing!r} needs num_hidden_groups {config.num_layer_groups}, "
                f"not {groups}; the file was edited by hand?"
            )
        return config


# --------------------------------------------------------------------------------------
# Encoder
# --------------------------------------------------------------------------------------
def _at_embedding_width(config: AlbertConfig) -> AlbertConfig:
    """The config BERT's embeddings are built from at ALBERT's width E (they read hidden_size as
    their width; one head, so that any E divides)."""
    return config.replace(hidden_size=config.embedding_size, num_heads=1)


class AlbertAttention(BertSelfAttention):
    """BERT's self-attention (head mask, SDPA and explicit paths) with its output projection,
    dropout, residual and LayerNorm in the same module, as transformers names ALBERT's:
    `attention.query` ... `attention.dense`, `attention.LayerNorm`."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.output_dropout = nn.Dropout(config.hidden_dropout)

    def forward(
        self,
        x: torch.Tensor,
        attn_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
        xq: torch.Tensor | None = None,
        plan: AttentionPlan | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        context, probs = super().forward(x, attn_bias, head_mask, output_attentions, xq, plan)  # (B, Tq, H)
        residual = x if xq is None else xq
        return self.LayerNorm(residual + self.output_dropout(self.dense(context))), probs  # post-LN


class AlbertLayer(nn.Module):
    """One post-LN encoder layer, as BertLayer computes it, under transformers' ALBERT names: the
    attention block (`attention`), then the feed-forward block (`ffn`, its GELU `activation`,
    `ffn_output`, `full_layer_layer_norm`). Either block may be the same module object in every layer
    (sharing), and under "all" the layer itself is: one module called L times in one forward."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.attention = AlbertAttention(config)
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)  # Google's; transformers leaves it out (module docstring)
        # a module of its own (no weights), so that the neurons' activations can be read where they
        # are computed (bertlab.interpret.neurons), as BertLayer's `intermediate` output is
        self.activation = nn.GELU(approximate=config.gelu_approximation)

    def forward(
        self,
        x: torch.Tensor,
        attn_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
        xq: torch.Tensor | None = None,
        plan: AttentionPlan | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """BertLayer's signature: xq (B, K, H) the rows to compute (all rows serve as keys); None = all;
        plan: a sparse attention pattern's keys (bertlab.patterns.plan), None for full attention."""
        a, probs = self.attention(x, attn_bias, head_mask, output_attentions, xq, plan)  # (B, Tq, H)
        h = self.ffn_output(self.activation(self.ffn(a)))  # (B, Tq, H)
        return self.full_layer_layer_norm(self.dropout(h) + a), probs


class AlbertLayerGroup(nn.Module):
    """transformers' layer group: the layers that run in turn when the group runs (always one here)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.albert_layers = nn.ModuleList([AlbertLayer(config)])


class AlbertTransformer(nn.Module):
    """The projection from E to H and the layer groups; `layer` lists the L layers in running order."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.num_layers = config.num_layers
        self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        self.albert_layer_groups = nn.ModuleList(AlbertLayerGroup(config) for _ in range(config.num_layer_groups))
        first = self.albert_layer_groups[0].albert_layers[0]
        for name in self.shared_block(config):
            for group in self.albert_layer_groups[1:]:
                setattr(group.albert_layers[0], name, getattr(first, name))  # one module object in every layer

    @staticmethod
    def shared_block(config: AlbertConfig) -> tuple[str, ...]:
        """The children of an AlbertLayer that every layer group shares beside its own (none for the
        layouts transformers has: "all" has one group, "none" shares nothing)."""
        return {"attention": ATTENTION_BLOCK, "ffn": FFN_BLOCK}.get(config.parameter_sharing, ())

    @property
    def layer(self) -> list[AlbertLayer]:
        """The L layers in the order they run (BertModel.forward walks this list): under "all" one
        layer L times. Layer i runs group i * groups // L, as transformers' AlbertTransformer does."""
        groups = self.albert_layer_groups
        return [groups[i * len(groups) // self.num_layers].albert_layers[0] for i in range(self.num_layers)]


class AlbertPooler(nn.Linear):
    """tanh(dense([CLS])), with the weights at `albert.pooler.weight` as transformers names them."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(super().forward(hidden[:, 0]))  # (B, H) from [CLS]


class AlbertModel(BertModel):
    """The encoder: E-wide embeddings, their projection to H, L layers (shared as the config says),
    the pooler. BertModel's forward and attention mask run over these modules."""

    def __init__(self, config: AlbertConfig):
        nn.Module.__init__(self)  # BertModel.__init__ would build BERT's modules; these are ALBERT's
        self.config = config
        self.embeddings = BertEmbeddings(_at_embedding_width(config))
        self.encoder = AlbertTransformer(config)
        self.pooler = AlbertPooler(config.hidden_size, config.hidden_size)

    def embed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, H): the embeddings (B, T, E) projected to the layers' width."""
        return self.encoder.embedding_hidden_mapping_in(self.embeddings(input_ids, token_type_ids))


# --------------------------------------------------------------------------------------
# Pretraining heads
# --------------------------------------------------------------------------------------
@dataclass
class AlbertPreTrainingOutput(PreTrainingOutput):
    """BERT's pretraining output with ALBERT's sentence-pair head: `sop_logits` (B, 2), index 0 = A
    then B in order, 1 = swapped (transformers' `sentence_order_label`); None without the SOP head.
    `nsp_logits` is always None: ALBERT has no next-sentence head."""

    sop_logits: torch.Tensor | None = None


class AlbertMLMHead(nn.Module):
    """dense H -> E + GELU + LayerNorm, then a decoder tied to the E-wide word embeddings, with its own bias."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.approximate = config.gelu_approximation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(F.gelu(self.dense(x), approximate=self.approximate))) + self.bias


class AlbertSOPHead(nn.Module):
    """Sentence order: dropout, then a two-way classifier on the pooled [CLS] vector."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))  # (B, 2)


class AlbertForPreTraining(BertForPreTraining):
    """ALBERT with the masked-LM head and (optionally) the sentence-order head.

    BertForPreTraining's forward (the positions scored, the last-layer shortcut, the prediction cap),
    layer_logits, num_parameters and set_dropout run over ALBERT's modules; `.bert` is the encoder,
    which transformers names `albert`.
    """

    def __init__(self, config: AlbertConfig):
        nn.Module.__init__(self)  # BertForPreTraining.__init__ would build BERT's modules; these are ALBERT's
        self.config = config
        self.albert = AlbertModel(config)
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config) if config.use_sop_head else None
        init_weights(self, config.initializer_range)
        self.tie_weights()
        # saved once: the decoder is the word embeddings, and a shared block is stored under group 0 only
        self.tied_keys = TIED_KEYS + shared_copies(config)

    @property
    def bert(self) -> AlbertModel:
        """The encoder, under the name the inference API and the trainer use."""
        return self.albert

    def tie_weights(self) -> None:
        self.predictions.decoder.weight = self.albert.embeddings.word_embeddings.weight

    @property
    def heads(self) -> tuple[str, ...]:
        """The heads this model has (bertlab.models.registry.HEAD_TITLES' names)."""
        return ("mlm",) + (("sop",) if self.sop_classifier is not None else ())

    def layer_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Apply the MLM head to any hidden state (B, T, H) -> (B, T, V), e.g. an earlier layer's."""
        return self.predictions(hidden)

    def next_sentence_logits(self, pooled: torch.Tensor) -> None:
        return None  # no NSP head: ALBERT's sentence-pair head is sentence order (`sop_logits`)

    def forward(self, *args: Any, **kwargs: Any) -> AlbertPreTrainingOutput:
        """BertForPreTraining.forward's arguments and outputs, plus the SOP head's `sop_logits` (B, 2)."""
        out = super().forward(*args, **kwargs)
        head = self.sop_classifier
        return AlbertPreTrainingOutput(
            mlm_logits=out.mlm_logits,
            nsp_logits=None,
            encoder=out.encoder,
            mlm_slots=out.mlm_slots,
            sop_logits=head(out.encoder.pooled_output) if head is not None else None,
        )


# --------------------------------------------------------------------------------------
# The family's checkpoint rules (bertlab.models.registry.FamilyImplementation)
# --------------------------------------------------------------------------------------
def shared_copies(config: AlbertConfig) -> tuple[str, ...]:
    """State-dict names of the shared blocks in layer groups 1.. (the same tensors as group 0's)."""
    block = AlbertTransformer.shared_block(config)
    own = _layer_shapes(config)
    return tuple(
        f"{GROUPS}.{g}.albert_layers.0.{k}"
        for g in range(1, config.num_layer_groups)
        for k in own
        if k.split(".")[0] in block
    )


def _layer_shapes(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """One AlbertLayer's weights and their shapes, by arithmetic."""
    h, i = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {}
    for name, out_features, in_features in (
        ("attention.query", h, h),
        ("attention.key", h, h),
        ("attention.value", h, h),
        ("attention.dense", h, h),
        ("ffn", i, h),
        ("ffn_output", h, i),
    ):
        shapes |= {f"{name}.weight": (out_features, in_features), f"{name}.bias": (out_features,)}
    for name in ("attention.LayerNorm", "full_layer_layer_norm"):
        shapes |= {f"{name}.weight": (h,), f"{name}.bias": (h,)}
    return shapes


def config_from_hf(raw: dict, source: str) -> AlbertConfig:
    """Our AlbertConfig from config.json's content (transformers' keys plus our `bertlab` section)."""
    return AlbertConfig.from_hf_dict(raw, source)


def build(config: AlbertConfig) -> AlbertForPreTraining:
    """A freshly initialised model with the heads `config` asks for (SOP when `use_sop_head`)."""
    return AlbertForPreTraining(config)


def build_encoder(config: AlbertConfig) -> AlbertModel:
    """The encoder alone, with its pooler: what AlbertForSequenceClassification holds under `albert.`.
    (A fine-tuned ALBERT with "attention" or "ffn" sharing saves in our layout, as its pretraining folder
    does; its config.json's `parameter_sharing` says so, and transformers would misread it.)"""
    return AlbertModel(config)


task_config = bert.task_config  # the pretrained config: the SOP head is not built


def normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map the names ALBERT savers use onto ours: BERT's rules with the `albert.` prefix (an encoder
    saved bare, TF-era LayerNorm names), the decoder's bias as the head's, tied copies dropped."""
    out = bert.normalize_keys(state, prefix="albert.")
    if "predictions.bias" not in out and "predictions.decoder.bias" in out:
        out["predictions.bias"] = out["predictions.decoder.bias"]
    for k in TIED_KEYS:
        out.pop(k, None)
    return out


def expected_shapes(config: AlbertConfig) -> dict[str, tuple[int, ...]]:
    """The shape config.json implies for each weight of AlbertForPreTraining's state dict (HF names;
    shared blocks under every group that holds them), by arithmetic, as bertlab.models.bert's is."""
    h, e, v = config.hidden_size, config.embedding_size, config.vocab_size
    shapes: dict[str, tuple[int, ...]] = {
        "albert.embeddings.word_embeddings.weight": (v, e),
        "albert.embeddings.position_embeddings.weight": (config.max_position_embeddings, e),
        "albert.embeddings.token_type_embeddings.weight": (config.type_vocab_size, e),
        "albert.embeddings.LayerNorm.weight": (e,),
        "albert.embeddings.LayerNorm.bias": (e,),
        "albert.encoder.embedding_hidden_mapping_in.weight": (h, e),
        "albert.encoder.embedding_hidden_mapping_in.bias": (h,),
        "albert.pooler.weight": (h, h),
        "albert.pooler.bias": (h,),
        "predictions.bias": (v,),
        "predictions.dense.weight": (e, h),
        "predictions.dense.bias": (e,),
        "predictions.LayerNorm.weight": (e,),
        "predictions.LayerNorm.bias": (e,),
        "predictions.decoder.weight": (v, e),  # tied to the word embeddings
    }
    if config.use_sop_head:
        shapes |= {"sop_classifier.classifier.weight": (2, h), "sop_classifier.classifier.bias": (2,)}
    for g in range(config.num_layer_groups):
        shapes |= {f"{GROUPS}.{g}.albert_layers.0.{k}": s for k, s in _layer_shapes(config).items()}
    return shapes


def heads_in(config: AlbertConfig, state: Mapping[str, Any]) -> tuple[str, ...]:
    """The heads whose weights `state` (normalised names) holds: "mlm", "sop"."""
    wanted = {"mlm": MLM_KEYS, "sop": SOP_KEYS if config.use_sop_head else None}
    return tuple(head for head, keys in wanted.items() if keys and all(k in state for k in keys))


def load_tokenizer(directory: Path, config: AlbertConfig) -> BertTokenizer:
    """The folder's tokenizer: WordPiece (vocab.txt, or a WordPiece tokenizer.json: ALBERTs trained
    here), else SentencePiece (a unigram tokenizer.json or spiece.model: Google's releases and folders
    transformers' AlbertTokenizer saved).

    Raises:
        CheckpointError: no tokenizer file, or one that cannot be read.
    """
    directory = Path(directory)
    if holds_sentencepiece(directory):
        return SentencePieceTokenizer.from_dir(directory, config.max_position_embeddings)
    return bert.load_tokenizer(directory, config)


def architecture(config: AlbertConfig) -> str:
    """The class a pretraining folder is saved as: transformers' AlbertForPreTraining for the layouts
    it has ("all", "none"); the others are ours alone (module docstring)."""
    return "AlbertForPreTraining" if config.parameter_sharing in HF_SHARING else "BertLabAlbertForPreTraining"
