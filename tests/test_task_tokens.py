"""bertlab.jobs.estimates.task_tokens: padded lengths under dynamic padding, and the fallback when data cannot be read."""

from __future__ import annotations

import pytest

from bertlab.jobs.estimates.task_tokens import TYPICAL_TOKENS, padded_length, typical_tokens


def test_padded_length_pads_each_batch_to_its_longest_row():
    assert padded_length([], 4) == 0.0
    assert padded_length([5, 5, 5, 5], 2) == 5.0
    assert padded_length([3, 9], 2) == 9.0  # one batch: both rows padded to 9
    assert padded_length([3, 9], 1) == 6.0  # batches of one row: no padding at all
    lengths = [10] * 31 + [100]
    one_batch = padded_length(lengths, 32)
    assert one_batch == 100.0 and padded_length(lengths, 1) == pytest.approx(sum(lengths) / 32)


def test_typical_tokens_stop_at_the_jobs_length_and_say_why():
    t = typical_tokens("squad", 256, "data not read here")
    assert t.padded_per_row == 256 and t.real_per_row == 256
    assert "typical lengths of squad (data not read here)" == t.source
    real, padded = TYPICAL_TOKENS["sst2"]
    assert (typical_tokens("sst2", 128, "x").real_per_row, typical_tokens("sst2", 128, "x").padded_per_row) == (
        real,
        padded,
    )
    assert typical_tokens("unknown-task", 128, "x").padded_per_row == 96
