"""Attention over a sparse pattern's keys only (bertlab.patterns.plan), in time and memory linear in the length.

`sparse_attention` takes the usual per-head queries, keys and values (B, nh, T, hs) and an
AttentionPlan. Query blocks read their plan's key blocks, gathered side by side (never a T x T
matrix); every query also reads the global tokens' keys, and the global tokens' queries read every key
(with their own projections where a model has them, as Longformer does). One softmax per query covers
its global and its local keys, so a window that covers the whole input gives full attention's numbers.

The attention probabilities come back, when asked, as a dense (B, nh, T, T) map with zeros outside the
pattern, or averaged over pool x pool tiles (plan.pool) so that a 4,096-token map can be drawn: each
pooled row is the mean of its tile's rows, and still sums to 1.

Imports torch and bertlab.patterns.plan only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bertlab.patterns.plan import AttentionPlan


@dataclass
class GlobalProjections:
    """Separate query, key and value vectors (B, nh, T, hs) for the global tokens' own rows (Longformer)."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor


def _pad(x: torch.Tensor, length: int) -> torch.Tensor:
    return F.pad(x, (0, 0, 0, length - x.shape[2])) if x.shape[2] < length else x


def _gather_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x (B, nh, T, hs), idx (B, G) -> (B, nh, G, hs)."""
    B, nh, _, hs = x.shape
    return x.gather(2, idx[:, None, :, None].expand(B, nh, idx.shape[1], hs))


def sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    plan: AttentionPlan,
    *,
    head_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    global_proj: GlobalProjections | None = None,
    output_attentions: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention under `plan`: returns the context (B, nh, T, hs) and, if asked, the maps (B, nh, T', T')."""
    B, nh, T, hs = q.shape
    nb, b, P = plan.num_blocks, plan.block, plan.padded
    scale = 1.0 / math.sqrt(hs)
    qp, kp, vp = (_pad(x, P) for x in (q, k, v))
    qb = qp.view(B, nh, nb, b, hs) * scale
    kb = plan.gather_blocks(kp.view(B, nh, nb, b, hs))  # (B, nh, nb, K*b, hs)
    vb = plan.gather_blocks(vp.view(B, nh, nb, b, hs))
    scores = (qb @ kb.transpose(-1, -2)).float() + plan.local_bias  # (B, nh, nb, b, K*b): linear in T
    G = 0 if plan.global_idx is None else plan.global_idx.shape[1]
    if G:
        kg, vg = _gather_rows(kp, plan.global_idx), _gather_rows(vp, plan.global_idx)  # (B, nh, G, hs)
        gscores = (qb.flatten(2, 3) @ kg.transpose(-1, -2)).float().view(B, nh, nb, b, G)
        gscores = gscores + plan.global_column_bias
        scores = torch.cat([gscores, scores], -1)
    probs = scores.softmax(-1)
    if plan.has_padding:
        probs = probs * plan.key_valid.view(B, 1, nb, b, 1)  # a padded query reads nothing
    probs = probs.to(v.dtype)
    dropped = F.dropout(probs, dropout_p) if dropout_p > 0 else probs
    context = dropped[..., G:] @ vb  # (B, nh, nb, b, hs)
    if G:
        context = context + (dropped[..., :G].flatten(2, 3) @ vg).view(B, nh, nb, b, hs)
    context = context.reshape(B, nh, P, hs)
    grows = None
    if G:
        context, grows = _global_rows(context, qp, kp, vp, plan, global_proj, dropout_p, scale)
    if head_mask is not None:
        # probs @ v is linear in probs, so masking a head's output equals masking its probabilities
        context = context * head_mask.view(1, nh, 1, 1).to(context.dtype)
    maps = None
    if output_attentions:
        maps = attention_map(probs, grows, plan)
        if head_mask is not None:
            maps = maps * head_mask.view(1, nh, 1, 1).to(maps.dtype)
    return context[:, :, :T], maps


def _global_rows(
    context: torch.Tensor,
    qp: torch.Tensor,
    kp: torch.Tensor,
    vp: torch.Tensor,
    plan: AttentionPlan,
    proj: GlobalProjections | None,
    dropout_p: float,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The global tokens read every real token: their rows of `context` replaced; their (B, nh, G, P) probs."""
    B, nh, P, hs = context.shape
    if proj is not None:
        qp, kp, vp = (_pad(x, P) for x in (proj.query, proj.key, proj.value))
    qg = _gather_rows(qp, plan.global_idx) * scale  # (B, nh, G, hs)
    scores = (qg @ kp.transpose(-1, -2)).float() + plan.global_row_bias
    probs = scores.softmax(-1).to(vp.dtype)  # (B, nh, G, P); an unused global slot's row is never read
    dropped = F.dropout(probs, dropout_p) if dropout_p > 0 else probs
    rows = dropped @ vp  # (B, nh, G, hs)
    idx = plan.global_idx[:, None, :, None].expand(B, nh, -1, hs)
    keep = plan.global_valid[:, None, :, None].to(rows.dtype)
    # add the change, so that an unused global slot (index 0, keep 0) adds nothing to a real one's row
    delta = (rows - context.gather(2, idx)) * keep
    return context.scatter_add(2, idx, delta), probs


def attention_map(local: torch.Tensor, global_rows: torch.Tensor | None, plan: AttentionPlan) -> torch.Tensor:
    """The probabilities as a (B, nh, n, n) map, n = ceil(T / pool): dense for pool 1, tile means otherwise.

    local: (B, nh, nb, b, G + K*b), the global keys' columns first; global_rows: (B, nh, G, P)."""
    B, nh = local.shape[:2]
    p, T, P = plan.pool, plan.length, plan.padded
    n = math.ceil(P / p)
    G = 0 if plan.global_idx is None else plan.global_idx.shape[1]
    qpos = torch.arange(P, device=local.device).view(plan.num_blocks, plan.block)
    kpos = plan.key_positions()
    cell = (qpos[:, :, None] // p) * n + kpos[:, None, :] // p  # (nb, b, K*b)
    vals = local[..., G:].float()
    out = torch.zeros(B, nh, n * n, device=local.device)
    if G:
        hits = torch.zeros(B, P, device=local.device).scatter_add_(1, plan.global_idx, plan.global_valid.float())
        is_global = hits > 0  # (B, P); scatter_add, so that an unused slot (index 0) cannot unset [CLS]
        vals = vals.masked_fill(is_global.view(B, 1, plan.num_blocks, plan.block, 1), 0.0)  # their rows come next
        gcols = local[..., :G].float().masked_fill(is_global.view(B, 1, plan.num_blocks, plan.block, 1), 0.0)
        gcell = (qpos.reshape(P, 1) // p) * n + plan.global_idx[:, None, :] // p  # (B, P, G)
        out.scatter_add_(2, gcell.view(B, 1, -1).expand(B, nh, -1), gcols.reshape(B, nh, -1))
        rcell = (plan.global_idx[:, :, None] // p) * n + torch.arange(P, device=local.device) // p  # (B, G, P)
        rvals = global_rows.float() * plan.global_valid[:, None, :, None]
        out.scatter_add_(2, rcell.view(B, 1, -1).expand(B, nh, -1), rvals.reshape(B, nh, -1))
    out.scatter_add_(2, cell.view(1, 1, -1).expand(B, nh, -1), vals.reshape(B, nh, -1))
    m = math.ceil(T / p)
    return (out.view(B, nh, n, n) / p)[:, :, :m, :m]
