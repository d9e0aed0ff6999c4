"""Which keys each query may read under a sparse attention pattern: the plan a forward pass builds once.

A pattern groups the (padded) sequence into blocks of `block` tokens. Each query block reads a fixed
number K of key blocks (`key_blocks`, the same for every example), and a token-level mask (`allowed`)
says which of those K*block keys each query may attend to. Global tokens are separate: every query
reads them, and they read every token. Time and memory are then O(T * K * block), linear in the length
T for a fixed window, where full attention's score matrix is O(T^2).

- `window` (Longformer, Beltagy et al. 2020): each token reads `one_sided` tokens on each side
  (config.attention_window is the whole window, 2 * one_sided, as transformers' Longformer states it),
  plus the global tokens.
- `bigbird` (Zaheer et al. 2020, the ITC variant): blocks of `attention_block` tokens; each block reads
  its own and its two neighbours, `random_blocks` blocks drawn at random (fixed per layer and length, so
  that answers are reproducible), and the global tokens: the first block and the last block of text.

Imports torch and bertlab.config only.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bertlab.config import BertConfig

MASKED = -1e9  # a masked score (float32): finite, so that a row with nothing to read gives no NaN


def as_bias(allowed: torch.Tensor) -> torch.Tensor:
    """0 where allowed, MASKED elsewhere, in float32 (added to the scores before the softmax)."""
    return torch.zeros(allowed.shape, device=allowed.device).masked_fill_(~allowed, MASKED)


@dataclass(frozen=True)
class AttentionPlan:
    """The keys each query reads in one forward pass (one layer's, for BigBird's random blocks).

    Which of a query block's K*b gathered keys a query may read factorises: `band` (the same for every
    query block: within the window, and in a real key block) and `key_ok` (per example: the key is a
    real token and not a global one, which every query reads separately)."""

    block: int  # b: queries and keys are grouped in blocks of b tokens
    length: int  # T, the real length (the batch's, before padding to a multiple of b)
    key_blocks: torch.Tensor  # (nb, K) long: the key blocks each query block reads (clamped into range)
    offsets: tuple[int, ...] | None  # window: key block = query block + offset, so keys gather by shifting
    band: torch.Tensor  # (nb or 1, b, K*b) bool: within the pattern, in a real block
    key_ok: torch.Tensor  # (B, nb, K*b) bool: the gathered key is a real, non-global token
    key_valid: torch.Tensor  # (B, padded) bool: real tokens (not padding, not past T)
    global_idx: torch.Tensor | None = None  # (B, G) long: positions of the global tokens (0 where unused)
    global_valid: torch.Tensor | None = None  # (B, G) bool: which of global_idx are real
    pool: int = 1  # attention maps come back averaged over pool x pool tiles (1: the full map)

    @property
    def padded(self) -> int:
        return self.key_blocks.shape[0] * self.block

    @property
    def num_blocks(self) -> int:
        return self.key_blocks.shape[0]

    @functools.cached_property
    def has_padding(self) -> bool:
        return self.padded != self.length or not bool(self.key_valid.all())

    # The masks as float32 biases for the scores, made once per plan: every layer that shares the plan reuses them
    @functools.cached_property
    def local_bias(self) -> torch.Tensor:
        """(B, 1, nb, b, K*b): 0 where a query may read a gathered key, MASKED elsewhere."""
        return as_bias(self.band)[None, None] + as_bias(self.key_ok)[:, None, :, None, :]

    @functools.cached_property
    def global_column_bias(self) -> torch.Tensor:
        """(B, 1, 1, 1, G): every query reads the real global tokens."""
        return as_bias(self.global_valid)[:, None, None, None, :]

    @functools.cached_property
    def global_row_bias(self) -> torch.Tensor:
        """(B, 1, 1, padded): a global token reads every real token."""
        return as_bias(self.key_valid)[:, None, None, :]

    def key_positions(self) -> torch.Tensor:
        """(nb, K*b) long: the position of every key each query block reads."""
        offsets = torch.arange(self.block, device=self.key_blocks.device)
        return (self.key_blocks[:, :, None] * self.block + offsets).flatten(1)

    def gather_blocks(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., nb, b, d) blocked along dim -3 -> (..., nb, K*b, d): each query block's keys.

        A window's blocks are shifted copies (slices of a padded tensor: a cheap backward); BigBird's
        random blocks are gathered by index. Blocks outside the sequence come back as zeros."""
        if self.offsets is not None:
            r = max(abs(o) for o in self.offsets)
            nb = x.shape[-3]
            xp = F.pad(x, (0, 0, 0, 0, r, r))
            return torch.cat([xp[..., r + o : r + o + nb, :, :] for o in self.offsets], dim=-2)
        return x[..., self.key_blocks, :, :].flatten(-3, -2)


def _as_index(glob: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | tuple[None, None]:
    """(B, T) bool -> (B, G) positions and (B, G) validity, G the most global tokens in a row."""
    counts = glob.sum(1)
    g = int(counts.max()) if glob.numel() else 0
    if g == 0:
        return None, None
    # stable sort puts each row's global positions first, in order
    order = torch.sort((~glob).to(torch.int8), dim=1, stable=True).indices[:, :g]
    valid = torch.arange(g, device=glob.device)[None] < counts[:, None]
    return order.masked_fill(~valid, 0), valid


def _window_blocks(one_sided: int, padded_len: int) -> tuple[int, torch.Tensor]:
    """Block size and (nb, K) key-block offsets for a band of `one_sided` tokens each side."""
    block = max(1, min(one_sided, padded_len))
    reach = math.ceil(one_sided / block)  # neighbouring blocks the band reaches into
    return block, torch.arange(-reach, reach + 1)


def _random_blocks(nb: int, fixed: torch.Tensor, count: int, seed: int) -> torch.Tensor:
    """(nb, count) random key blocks per query block, none of `fixed` (nb, F); -1 where none is left."""
    gen = torch.Generator().manual_seed(seed)
    out = torch.full((nb, count), -1, dtype=torch.long)
    for i in range(nb):
        taken = set(fixed[i].tolist()) | {0, nb - 1}
        pool = torch.tensor([j for j in range(nb) if j not in taken], dtype=torch.long)
        if len(pool):
            pick = pool[torch.randperm(len(pool), generator=gen)[:count]]
            out[i, : len(pick)] = pick
    return out


def build_plan(
    config: BertConfig,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    layer: int = 0,
    global_mask: torch.Tensor | None = None,
    pool: int = 1,
) -> AttentionPlan:
    """The plan for one batch under config.attention_pattern ("window" or "bigbird").

    Args:
        input_ids: (B, T) token ids (their shape and device).
        attention_mask: (B, T) 1 for real tokens, 0 for padding; None for all real.
        layer: the layer index: BigBird's random blocks differ per layer (fixed for a given length).
        global_mask: (B, T) bool or 0/1, overriding config.global_tokens (e.g. a question's tokens).
        pool: attention maps averaged over pool x pool tiles, for drawing long inputs.
    """
    B, T = input_ids.shape
    device = input_ids.device
    pattern = config.attention_pattern
    if pattern == "window":
        block, offsets = _window_blocks(config.attention_window // 2, T)
    elif pattern == "bigbird":
        block, offsets = config.attention_block, torch.arange(-1, 2)
    else:
        raise ValueError(f"build_plan is for sparse patterns, not {pattern!r}")
    nb = math.ceil(T / block)
    padded = nb * block
    real = torch.ones(B, T, dtype=torch.bool, device=device) if attention_mask is None else attention_mask.bool()
    key_valid = torch.zeros(B, padded, dtype=torch.bool, device=device)
    key_valid[:, :T] = real
    if global_mask is not None:
        glob = global_mask.bool() & real
    elif pattern == "bigbird":
        # BigBird-ITC's global tokens: the first block and the block holding each row's last real token
        pos = torch.arange(T, device=device)[None]
        last = (real.long().sum(1, keepdim=True) - 1).clamp(min=0) // block
        glob = real & ((pos // block == 0) | (pos // block == last))
    else:
        glob = real.clone() if config.global_tokens == "cls" else torch.zeros_like(real)
        glob[:, 1:] = False  # [CLS], the first token, when it is real
    # the offsets that reach a real block for some query block (the rest would only be masked out)
    offsets = offsets[(offsets > -nb) & (offsets < nb)]
    key_blocks = torch.arange(nb)[:, None] + offsets[None]  # (nb, K) and may fall outside [0, nb)
    block_ok = (key_blocks >= 0) & (key_blocks < nb)
    shifts: tuple[int, ...] | None = tuple(offsets.tolist())
    if pattern == "bigbird" and config.random_blocks > 0:
        rand = _random_blocks(nb, key_blocks, config.random_blocks, seed=1000 * layer + T)
        key_blocks = torch.cat([key_blocks, rand], 1)
        block_ok = torch.cat([block_ok, rand >= 0], 1)
        shifts = None  # random blocks are gathered by index
    key_blocks = key_blocks.clamp(0, nb - 1).to(device)
    band = block_ok.to(device).repeat_interleave(block, 1)[:, None, :]  # (nb, 1, K*b)
    if pattern == "window":
        # |query - key| <= one_sided depends only on the query's and key's places in their blocks
        r = torch.arange(block, device=device)
        dist = r[:, None] - (offsets.to(device)[:, None] * block + r[None]).flatten()[None]  # (b, K*b)
        band = band & (dist.abs() <= config.attention_window // 2)[None]
    glob_padded = torch.zeros_like(key_valid)
    glob_padded[:, :T] = glob
    global_idx, global_valid = _as_index(glob)
    plan = AttentionPlan(block, T, key_blocks, shifts, band, key_valid, key_valid, global_idx, global_valid, pool)
    # (B, nb, K*b): real keys only, and not the global ones (every query reads those separately)
    key_ok = plan.gather_blocks((key_valid & ~glob_padded).view(B, nb, block, 1)).squeeze(-1)
    return dataclasses.replace(plan, key_ok=key_ok)
