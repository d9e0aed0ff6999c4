"""BERT's pretraining heads and BertForPreTraining: the masked-LM head (dense + GELU + LayerNorm, then a
decoder tied to the word embeddings), the NSP head, SpanBERT's span-boundary head, which positions the
last layer runs at when only some are scored, and BERT's weight init.

Names match Google's / Hugging Face's checkpoints (`cls.predictions.transform.dense.weight`,
`cls.seq_relationship`; `cls.span_boundary.*` is ours). The model returns the heads' logits and
computes no loss: each pretraining objective owns its loss (bertlab.losses), and the BERT family's
loading and naming rules live in bertlab.models.bert.

Imports torch, bertlab.config and bertlab.model.encoder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import SBO_POSITIONS, BertConfig
from bertlab.model.encoder import BertModel, EncoderOutput


@dataclass
class PreTrainingOutput:
    """What `BertForPreTraining` returns: the heads' outputs. Losses belong to the objective
    (bertlab.losses), which reads these.

    Attributes:
        mlm_logits: (B, T, V) when every position is scored, (N, V) for the N positions selected by
            `mlm_positions` (row order = `mask.nonzero()` order), or (B, K, V) over K fixed slots
            per row when a `prediction_cap` was given (see `mlm_slots`).
        nsp_logits: (B, 2); index 0 = IsNext, 1 = NotNext (Google's convention). None without NSP head.
        encoder: the encoder's output.
        mlm_slots: with a `prediction_cap`, ((B, K) long positions each slot scored, (B, K) bool
            slots that hold a selected position); None otherwise.
        sbo_logits: the span-boundary head's logits at the same rows or slots as mlm_logits ((N, V)
            or (B, K, V)), when `span_boundaries` were given; None otherwise.
    """

    mlm_logits: torch.Tensor
    nsp_logits: torch.Tensor | None
    encoder: EncoderOutput
    mlm_slots: tuple[torch.Tensor, torch.Tensor] | None = None
    sbo_logits: torch.Tensor | None = None


# --------------------------------------------------------------------------------------
# Pretraining heads
# --------------------------------------------------------------------------------------
TIED_KEYS = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")  # copies of other weights


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig, in_features: int | None = None):
        super().__init__()
        self.dense = nn.Linear(in_features or config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(F.gelu(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """dense + GELU + LayerNorm, then a decoder tied to the word embeddings, with its own bias."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(x)) + self.bias


class BertSpanBoundaryHead(nn.Module):
    """SpanBERT's span-boundary objective (Joshi et al. 2019, §3.2): the token x_i of a masked span
    x_s..x_e predicted from the encoder's outputs at the boundary tokens x_{s-1}, x_{e+1} and a
    relative position embedding p_{i-s}: h1 = LayerNorm(GELU(W1 [x_{s-1}; x_{e+1}; p_{i-s}])),
    y = LayerNorm(GELU(W2 h1)). The model scores y with the masked LM's decoder (the word embeddings)
    plus this head's own `bias`: SpanBERT's released code gives its SBO head a bias of its own, and
    the two heads' token priors need not agree (the SBO one sees no token of the span)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        H = config.hidden_size  # noqa: N806
        self.position_embeddings = nn.Embedding(SBO_POSITIONS, H)  # p: the place in the span, 0-based
        self.input_transform = BertPredictionHeadTransform(config, 3 * H)  # W1: [left; right; p] -> H
        self.output_transform = BertPredictionHeadTransform(config)  # W2
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, left: torch.Tensor, right: torch.Tensor, relative: torch.Tensor) -> torch.Tensor:
        """left, right: (..., H) the last layer's outputs at the span's boundary tokens; relative:
        (...) long, each token's place in its span (0 = first; past the table's last row: that row).
        Returns y, (..., H), for the decoder."""
        p = self.position_embeddings(relative.clamp(0, SBO_POSITIONS - 1))  # (..., H)
        return self.output_transform(self.input_transform(torch.cat([left, right, p], dim=-1)))


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        # The "No NSP" ablation drops this head entirely, so the checkpoint holds no NSP weights.
        self.seq_relationship = nn.Linear(config.hidden_size, 2) if config.use_nsp_head else None
        # SpanBERT's span-boundary head, for the span_sbo objective only (config.span_boundary_head)
        self.span_boundary = BertSpanBoundaryHead(config) if config.span_boundary_head else None


def _last_layer_positions(select: torch.Tensor, cap: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """From a (B, T) bool of positions to score: (B, K) ascending positions with [CLS] first, and
    a (B, K) bool of the slots that are scored positions (the rest are [CLS] or filler).

    K is the most any row needs, read from the data; with `cap` (the most positions a row may
    have scored) K is min(cap + 1, T) instead, a bound known before the data, so a compiled graph
    has static shapes and no break. Positions past the cap in a row are not scored."""
    wanted = select.clone()
    wanted[:, 0] = True  # [CLS] feeds the pooler (NSP)
    K = min(cap + 1, select.shape[1]) if cap is not None else int(wanted.sum(1).max())  # noqa: N806
    # a stable sort puts each row's wanted positions first, in ascending order; filler slots hold
    # unwanted positions, where `select` is False
    order = torch.sort((~wanted).to(torch.int8), dim=1, stable=True).indices[:, :K]  # (B, K)
    return order, select.gather(1, order)


def init_weights(module: nn.Module, std: float) -> None:
    """BERT's init: normal(0, std) weights, zero biases, LayerNorm at identity."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=std)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class BertForPreTraining(nn.Module):
    """BERT with the masked-LM head and (optionally) the next-sentence head."""

    tied_keys = TIED_KEYS  # saved once: the decoder is the word embeddings

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        init_weights(self, config.initializer_range)
        self.tie_weights()

    def tie_weights(self) -> None:
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    @property
    def heads(self) -> tuple[str, ...]:
        """The heads this model has (bertlab.models.registry.HEAD_TITLES' names)."""
        return (
            ("mlm",)
            + (("nsp",) if self.cls.seq_relationship is not None else ())
            + (("sbo",) if self.cls.span_boundary is not None else ())
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mlm_positions: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        prediction_cap: int | None = None,
        global_attention_mask: torch.Tensor | None = None,
        attention_pool: int = 1,
        span_boundaries: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> PreTrainingOutput:
        """Run the encoder and the heads.

        Args:
            mlm_positions: (B, T) bool, the positions the masked-LM head scores (training: where the
                labels are); None scores every position and returns (B, T, V). Scoring only these
                is what makes training fast: the vocabulary projection is most of the cost.
            prediction_cap: the most selected positions a row has (the data's
                max_predictions_per_seq). It fixes the number of scored slots per row (cap + 1, with
                [CLS]), so shapes do not depend on the data and `torch.compile` traces the whole
                step as one graph; mlm_logits is then (B, K, V) over every slot and `mlm_slots` says
                which position each slot holds and which slots are real.
            global_attention_mask, attention_pool: a sparse attention pattern's, as BertModel.forward.
            span_boundaries: the span-boundary head's inputs (a model with one; needs mlm_positions):
                (left, right, relative), each (B, T) long, read where mlm_positions is True: the
                positions of the token's span's boundary tokens x_{s-1} and x_{e+1} and its place in
                the span, 0-based (bertlab.losses.span_boundaries makes them from the labels).
                `sbo_logits` then scores the same rows or slots as mlm_logits.

        When only some positions are scored (and no attentions or hidden states are asked for),
        the last layer runs only at those positions and [CLS]: the same numbers, less work. With
        span_boundaries it also runs at each scored slot's two boundary positions, as rows of their
        own beside the slot's (3K rows; a boundary shared by two slots is computed twice): a gather
        then needs no position-to-row map, and with a prediction_cap the rows stay 3(cap + 1), static.
        """
        select = mlm_positions
        if span_boundaries is not None and (select is None or self.cls.span_boundary is None):
            raise ValueError(
                "span_boundaries need mlm_positions and a model with a span-boundary head "
                "(BertConfig.span_boundary_head=True, as data.objective=span_sbo builds it)"
            )
        positions = rows = slot_used = None
        if (
            select is not None
            and not output_attentions
            and not output_hidden_states
            and self.config.attention_direction == "bidirectional"
        ):
            positions, slot_used = _last_layer_positions(select, prediction_cap)  # (B, K) each
            rows = positions
            if span_boundaries is not None:
                left, right = (t.gather(1, positions) for t in span_boundaries[:2])  # (B, K) each
                rows = torch.cat([positions, left, right], dim=1)  # (B, 3K): [CLS] still first, for the pooler
        enc = self.bert(
            input_ids,
            token_type_ids,
            attention_mask,
            head_mask,
            output_attentions,
            output_hidden_states,
            last_layer_positions=rows,
            global_attention_mask=global_attention_mask,
            attention_pool=attention_pool,
        )
        sbo_logits = None
        if span_boundaries is not None:
            enc, sbo_logits = self._span_boundary_outputs(
                enc, span_boundaries, select, positions, slot_used, prediction_cap
            )
        hidden = enc.last_hidden_state
        slots = None
        if positions is not None and prediction_cap is not None:
            mlm_logits = self.layer_logits(hidden)  # (B, K, V): every slot, a shape known in advance
            slots = (positions, slot_used)
        elif positions is not None:
            mlm_logits = self.layer_logits(hidden[slot_used])  # (N, V), row-major like hidden[select]
        elif select is not None:
            mlm_logits = self.layer_logits(hidden[select])  # (N, V)
        else:
            mlm_logits = self.layer_logits(hidden)  # (B, T, V)
        nsp_logits = self.next_sentence_logits(enc.pooled_output)  # (B, 2) or None
        return PreTrainingOutput(
            mlm_logits=mlm_logits, nsp_logits=nsp_logits, encoder=enc, mlm_slots=slots, sbo_logits=sbo_logits
        )

    def _span_boundary_outputs(
        self,
        enc: EncoderOutput,
        span_boundaries: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        select: torch.Tensor,
        positions: torch.Tensor | None,
        slot_used: torch.Tensor | None,
        prediction_cap: int | None,
    ) -> tuple[EncoderOutput, torch.Tensor]:
        """The span-boundary logits, and the encoder output with the scored slots' rows only (as without SBO).
        With the last-layer shortcut (`positions`) the last layer ran at 3K rows: the slots, then each slot's
        left and right boundary; otherwise at every position, whose outputs the boundaries are gathered from."""
        hidden = enc.last_hidden_state
        if positions is not None:
            relative = span_boundaries[2].gather(1, positions)  # (B, K)
            hidden, at_left, at_right = hidden.split(positions.shape[1], dim=1)  # (B, K, H) each
            enc = dataclasses.replace(enc, last_hidden_state=hidden)
            if prediction_cap is None:  # the selected slots only, row-major like mlm_logits
                at_left, at_right, relative = at_left[slot_used], at_right[slot_used], relative[slot_used]
            return enc, self.span_boundary_logits(at_left, at_right, relative)  # (B, K, V) or (N, V)
        left, right, relative = span_boundaries
        width = hidden.shape[-1]
        at_left = hidden.gather(1, left[..., None].expand(-1, -1, width))  # (B, T, H)
        at_right = hidden.gather(1, right[..., None].expand(-1, -1, width))  # (B, T, H)
        return enc, self.span_boundary_logits(at_left[select], at_right[select], relative[select])  # (N, V)

    def span_boundary_logits(self, left: torch.Tensor, right: torch.Tensor, relative: torch.Tensor) -> torch.Tensor:
        """The span-boundary head (BertSpanBoundaryHead) scored against the vocabulary with the masked
        LM's decoder, the word embeddings, and the head's own bias: (..., H), (..., H), (...) -> (..., V)."""
        head = self.cls.span_boundary
        return self.cls.predictions.decoder(head(left, right, relative)) + head.bias

    def next_sentence_logits(self, pooled: torch.Tensor) -> torch.Tensor | None:
        """(B, 2) the NSP head on the pooled [CLS] vector (B, H); None without one (No NSP; ALBERT,
        whose sentence-pair head is sentence order)."""
        head = self.cls.seq_relationship
        return head(pooled) if head is not None else None

    def layer_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Apply the MLM head to any hidden state (B, T, H) -> (B, T, V), e.g. an earlier layer's."""
        return self.cls.predictions(hidden)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def set_dropout(self, p: float) -> None:
        """Use dropout probability `p` everywhere (embeddings, attention, sub-layers) from now on.

        Changes the running model only; the saved config keeps its own values, so a model
        pretrained without dropout is still fine-tuned with the config's dropout."""
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        for m in self.modules():
            if isinstance(m, nn.Dropout):
                m.p = p
