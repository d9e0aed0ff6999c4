"""Padding token rows into a batch: the one place that lays out input_ids, token_type_ids and
attention_mask for the model. Inference, pretraining and fine-tuning all batch through it.

Imports torch and numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def pad_batch(
    input_ids: Sequence[Sequence[int]],
    pad_id: int,
    token_type_ids: Sequence[Sequence[int]] | None = None,
    pad_to: int | None = None,
) -> dict[str, torch.Tensor]:
    """Pad rows of token ids to the longest one (or to `pad_to`, when longer).

    Args:
        input_ids: B rows of token ids, any lengths (at least one row).
        pad_id: the id written after each row's end.
        token_type_ids: segment ids, one row per input row of the same length; None: all 0.
        pad_to: a least width T, e.g. the data's max_seq_length, so every batch has one shape (a
            compiled model then traces it once).

    Returns:
        input_ids, token_type_ids and attention_mask, each (B, T) int64, T the longest row;
        attention_mask is 1 on real tokens and 0 on padding.
    """
    B, T = len(input_ids), max(max(len(row) for row in input_ids), pad_to or 0)  # noqa: N806
    ids = np.full((B, T), pad_id, dtype=np.int64)
    types = np.zeros((B, T), dtype=np.int64)
    mask = np.zeros((B, T), dtype=np.int64)
    for b, row in enumerate(input_ids):
        n = len(row)
        ids[b, :n] = row
        mask[b, :n] = 1
        if token_type_ids is not None:
            types[b, :n] = token_type_ids[b]
    return {
        "input_ids": torch.from_numpy(ids),
        "token_type_ids": torch.from_numpy(types),
        "attention_mask": torch.from_numpy(mask),
    }
