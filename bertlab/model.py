"""The BERT encoder and its pretraining heads, in the order data flows through them.

Module and parameter names match Google's / Hugging Face's BERT checkpoints key for key
(`bert.encoder.layer.3.attention.self.query.weight`, `cls.predictions.transform.dense.weight`),
so real weights import without renaming. The model takes tensors and returns typed dataclasses:
hidden states and the heads' logits. It computes no loss: each pretraining objective owns its loss
(bertlab.losses), and the BERT family's loading and naming rules live in bertlab.models.bert.

Imports torch and bertlab.config only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import SBO_POSITIONS, BertConfig
from bertlab.patterns.kernel import GlobalProjections, sparse_attention
from bertlab.patterns.plan import AttentionPlan, build_plan


# --------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------
@dataclass
class EncoderOutput:
    """What `BertModel` returns.

    Attributes:
        last_hidden_state: (B, T, H) float, the last layer's output.
        pooled_output: (B, H) float, tanh(dense([CLS])), the input of the NSP head; None for an
            encoder built without a pooler (RoBERTa's masked LM).
        hidden_states: L+1 tensors (B, T, H): the embeddings output, then every layer's output;
            None unless requested.
        attentions: L tensors (B, A, T, T) of attention probabilities (rows sum to 1);
            None unless requested.
    """

    last_hidden_state: torch.Tensor
    pooled_output: torch.Tensor | None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


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
# Encoder
# --------------------------------------------------------------------------------------
class BertEmbeddings(nn.Module):
    """token + segment + position embeddings, then LayerNorm and dropout (paper, Figure 2)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        T = input_ids.shape[1]
        positions = torch.arange(T, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)[None]  # (B, T, H)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention; SDPA fast path and explicit path side by side.

    A layer whose heads were pruned (`pruned`, BertConfig.pruned_heads) has only its kept heads'
    rows in query/key/value, as transformers 4's `prune_heads` leaves it; a head mask still has one
    entry per unpruned head, and the kept heads' entries apply; the attention maps it returns have
    one per unpruned head too, zeros for the removed ones."""

    def __init__(self, config: BertConfig, pruned: tuple[int, ...] = ()):
        super().__init__()
        self.head_size = config.head_size
        self.kept_heads = tuple(h for h in range(config.num_heads) if h not in pruned)  # unpruned numbering
        self.num_heads = len(self.kept_heads)
        width = self.num_heads * self.head_size  # hidden_size unless heads were pruned
        self.query = nn.Linear(config.hidden_size, width)
        self.key = nn.Linear(config.hidden_size, width)
        self.value = nn.Linear(config.hidden_size, width)
        self.pruned = bool(pruned)
        self.all_heads = config.num_heads  # A before pruning: head masks and attention maps are (.., A, ..)
        self.dropout = nn.Dropout(config.attention_dropout)  # its .p is also the SDPA path's dropout_p

    def forward(
        self,
        x: torch.Tensor,
        attn_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
        xq: torch.Tensor | None = None,
        plan: AttentionPlan | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """xq: (B, K, H) the rows that ask (queries); None means every position of x.
        plan: a sparse pattern's keys (bertlab.patterns): attention reads only those, attn_bias unused."""
        B, T, _ = x.shape
        nh, hs = self.num_heads, self.head_size
        if head_mask is not None and self.pruned:
            head_mask = head_mask[list(self.kept_heads)]  # (A,) -> (nh,): the removed heads are gone already
        xq = x if xq is None else xq
        Tq = xq.shape[1]
        q = self.query(xq).view(B, Tq, nh, hs).transpose(1, 2)  # (B, nh, Tq, hs)
        k = self.key(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = self.value(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        probs = None
        if plan is not None:
            context, probs = sparse_attention(
                q,
                k,
                v,
                plan,
                head_mask=head_mask,
                dropout_p=self.dropout.p if self.training else 0.0,
                global_proj=self.global_projections(x) if plan.global_idx is not None else None,
                output_attentions=output_attentions,
            )
        elif output_attentions:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(hs)  # (B, nh, Tq, T)
            if attn_bias is not None:
                scores = scores + attn_bias
            probs = scores.softmax(dim=-1)
            dropped = self.dropout(probs)
            if head_mask is not None:
                dropped = dropped * head_mask.view(1, nh, 1, 1)
                probs = probs * head_mask.view(1, nh, 1, 1)
            context = dropped @ v  # (B, nh, Tq, hs)
        else:
            context = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_bias, dropout_p=self.dropout.p if self.training else 0.0
            )  # (B, nh, Tq, hs)
            if head_mask is not None:
                # probs @ v is linear in probs, so masking a head's output equals masking its probs
                context = context * head_mask.view(1, nh, 1, 1).to(context.dtype)
        context = context.transpose(1, 2).reshape(B, Tq, nh * hs)  # (B, Tq, nh*hs), H unless pruned
        if probs is not None and self.pruned:
            # a removed head's map is all zeros, as a masked head's is: every layer returns (B, A, Tq, T)
            full = probs.new_zeros(B, self.all_heads, *probs.shape[2:])
            full[:, list(self.kept_heads)] = probs
            probs = full
        return context, probs

    def global_projections(self, x: torch.Tensor) -> GlobalProjections | None:
        """The global tokens' own query, key and value (Longformer has them); None: they use the usual ones."""
        return None


class BertSelfOutput(nn.Module):
    def __init__(self, config: BertConfig, num_heads: int | None = None):
        super().__init__()
        heads = config.num_heads if num_heads is None else num_heads  # fewer in a pruned layer
        self.dense = nn.Linear(heads * config.head_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, context: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(context)) + residual)  # post-LN


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig, pruned: tuple[int, ...] = ()):
        super().__init__()
        self.self = BertSelfAttention(config, pruned)
        self.output = BertSelfOutput(config, self.self.num_heads)

    def forward(
        self,
        x: torch.Tensor,
        attn_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
        xq: torch.Tensor | None = None,
        plan: AttentionPlan | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        context, probs = self.self(x, attn_bias, head_mask, output_attentions, xq, plan)
        return self.output(context, x if xq is None else xq), probs


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # exact (erf) GELU, as Hugging Face's BERT (numbers match its checkpoints); Google's TF code
        # uses the tanh approximation, which differs by < 1e-3
        return F.gelu(self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, h: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertLayer(nn.Module):
    """One post-LN Transformer encoder layer: self-attention, then the feed-forward block."""

    def __init__(self, config: BertConfig, pruned: tuple[int, ...] = ()):
        super().__init__()
        self.attention = BertAttention(config, pruned)  # pruned: the heads removed from this layer
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(
        self,
        x: torch.Tensor,
        attn_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
        xq: torch.Tensor | None = None,
        plan: AttentionPlan | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """xq: (B, K, H) rows of x to compute outputs for (all rows attend to all of x); None = all.
        plan: a sparse attention pattern's keys (bertlab.patterns.plan); None = full attention."""
        a, probs = self.attention(x, attn_bias, head_mask, output_attentions, xq, plan)
        return self.output(self.intermediate(a), a), probs


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config, config.pruned_in(n)) for n in range(config.num_layers))


class BertPooler(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))  # (B, H) from [CLS]


class BertModel(nn.Module):
    """The encoder: embeddings, L layers, pooler."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        # transformers' name; False for a masked LM without NSP that saves no pooler (RobertaForMaskedLM)
        self.pooler = BertPooler(config) if add_pooling_layer else None

    def attention_bias(
        self, attention_mask: torch.Tensor | None, T: int, device: torch.device, dtype: torch.dtype
    ) -> torch.Tensor | None:
        """Additive bias (B or 1, 1, T or 1, T): 0 where attending is allowed, dtype-min elsewhere."""
        neg = torch.finfo(dtype).min
        bias = None
        if attention_mask is not None:
            bias = (1.0 - attention_mask[:, None, None, :].to(dtype)) * neg  # (B, 1, 1, T)
        if self.config.attention_direction == "left_to_right":
            future = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)
            causal = torch.zeros(T, T, dtype=dtype, device=device).masked_fill(future, neg)[None, None]
            bias = causal if bias is None else (bias + causal).clamp(min=neg)
        return bias

    def attention_plans(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        global_attention_mask: torch.Tensor | None,
        pool: int,
    ) -> list[AttentionPlan] | None:
        """Each layer's sparse-attention plan (one shared by all but BigBird's); None under full attention."""
        if not self.config.sparse:
            if global_attention_mask is not None:
                raise ValueError("global_attention_mask needs a sparse attention_pattern; this model attends to all")
            return None
        n = len(self.encoder.layer)
        if self.config.attention_pattern == "bigbird" and self.config.random_blocks:
            return [build_plan(self.config, input_ids, attention_mask, layer=i, pool=pool) for i in range(n)]
        plan = build_plan(self.config, input_ids, attention_mask, global_mask=global_attention_mask, pool=pool)
        return [plan] * n

    def embed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, H) the first layer's input, `hidden_states[0]` (ALBERT projects its narrower embeddings here)."""
        return self.embeddings(input_ids, token_type_ids)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        last_layer_positions: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        attention_pool: int = 1,
    ) -> EncoderOutput:
        """Encode a batch.

        Args:
            input_ids: (B, T) long token ids.
            token_type_ids: (B, T) long segment ids (0 = A, 1 = B); zeros when None.
            attention_mask: (B, T) 1 for real tokens, 0 for padding; all ones when None.
            head_mask: (L, A) with 1 to keep a head and 0 to switch it off.
            output_attentions: also return every layer's attention probabilities (explicit path).
            output_hidden_states: also return the embeddings output and every layer's output.
            last_layer_positions: (B, K) long, ascending positions with [CLS] (0) first: the last
                layer computes outputs only there (every position still serves as key and value),
                and last_hidden_state is (B, K, H). Pretraining needs only the masked positions and
                [CLS], so this skips most of the last layer. Not with attentions, hidden states or
                left-to-right attention.
            global_attention_mask: (B, T) 1 where a token reads and is read by every token, under a
                sparse attention pattern (config.attention_pattern); None: config.global_tokens.
            attention_pool: with a sparse pattern, attention maps come back averaged over tiles of
                this many tokens a side, (B, A, T/pool, T/pool), so that a long input's map fits.
        """
        if last_layer_positions is not None and (
            output_attentions or output_hidden_states or self.config.attention_direction != "bidirectional"
        ):
            raise ValueError("last_layer_positions works only without attentions, hidden states or causal masks")
        gather_at = None
        if last_layer_positions is not None and self.config.sparse:
            # a sparse pattern's last layer runs at every position (its plan is per block); pick the rows after
            gather_at, last_layer_positions = last_layer_positions, None
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if (
            attention_mask is not None
            and not output_attentions
            and not torch.compiler.is_compiling()  # reading the mask's values would break a compiled graph
            and bool(attention_mask.all())
        ):
            attention_mask = None  # no padding: let SDPA pick its unmasked (fastest) kernel
        x = self.embed(input_ids, token_type_ids)
        plans = self.attention_plans(input_ids, attention_mask, global_attention_mask, attention_pool)
        bias = None if plans else self.attention_bias(attention_mask, input_ids.shape[1], x.device, x.dtype)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        last = len(self.encoder.layer) - 1
        for i, layer in enumerate(self.encoder.layer):
            xq = None
            if i == last and last_layer_positions is not None:
                xq = x.gather(1, last_layer_positions[..., None].expand(-1, -1, x.shape[-1]))  # (B, K, H)
            plan = plans[i] if plans else None
            x, probs = layer(x, bias, None if head_mask is None else head_mask[i], output_attentions, xq, plan)
            if output_hidden_states:
                hidden_states.append(x)
            if output_attentions:
                attentions.append(probs)
        if gather_at is not None:
            x = x.gather(1, gather_at[..., None].expand(-1, -1, x.shape[-1]))  # (B, K, H)
        return EncoderOutput(
            last_hidden_state=x,
            pooled_output=self.pooler(x) if self.pooler is not None else None,
            hidden_states=tuple(hidden_states) if hidden_states is not None else None,
            attentions=tuple(attentions) if attentions is not None else None,
        )


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
        positions = rows = None
        if (
            select is not None
            and not output_attentions
            and not output_hidden_states
            and self.config.attention_direction == "bidirectional"
        ):
            positions, slot_used = _last_layer_positions(select, prediction_cap)  # (B, K) each
            rows = positions
            if span_boundaries is not None:
                left, right, relative = (t.gather(1, positions) for t in span_boundaries)  # (B, K) each
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
        hidden = enc.last_hidden_state
        sbo_logits = None
        if positions is not None and span_boundaries is not None:
            hidden, at_left, at_right = hidden.split(positions.shape[1], dim=1)  # (B, K, H) each
            enc = dataclasses.replace(enc, last_hidden_state=hidden)  # the scored slots' rows, as without SBO
            if prediction_cap is None:  # the selected slots only, row-major like mlm_logits
                at_left, at_right, relative = at_left[slot_used], at_right[slot_used], relative[slot_used]
            sbo_logits = self.span_boundary_logits(at_left, at_right, relative)  # (B, K, V) or (N, V)
        elif span_boundaries is not None:  # every position's output is there: gather the boundaries
            left, right, relative = span_boundaries
            width = hidden.shape[-1]
            at_left = hidden.gather(1, left[..., None].expand(-1, -1, width))  # (B, T, H)
            at_right = hidden.gather(1, right[..., None].expand(-1, -1, width))  # (B, T, H)
            sbo_logits = self.span_boundary_logits(at_left[select], at_right[select], relative[select])  # (N, V)
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
