"""bertlab/data/batching.py: padding rows of token ids into a batch."""

import torch

from bertlab.data.batching import pad_batch


def test_pad_batch_pads_to_the_longest_row():
    batch = pad_batch([[2, 5, 3], [2, 3]], pad_id=0, token_type_ids=[[0, 0, 1], [0, 1]])
    assert batch["input_ids"].tolist() == [[2, 5, 3], [2, 3, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1], [0, 1, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert all(v.dtype == torch.long for v in batch.values())


def test_pad_batch_without_segments_and_another_pad_id():
    batch = pad_batch([[7], [7, 8, 9]], pad_id=1)
    assert batch["input_ids"].tolist() == [[7, 1, 1], [7, 8, 9]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0], [0, 0, 0]]
