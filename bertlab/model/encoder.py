"""The BERT encoder, in the order data flows through it: its outputs, the embeddings (token + segment +
position), self-attention (full, causal or a sparse pattern from bertlab.patterns), the layers and the
pooler, and BertModel.

Module and parameter names match Google's / Hugging Face's BERT checkpoints key for key
(`bert.encoder.layer.3.attention.self.query.weight`), so real weights import without renaming. It
takes tensors and returns typed dataclasses; the pretraining heads are bertlab.model.pretraining.

Imports torch, bertlab.config and bertlab.patterns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import BertConfig
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
