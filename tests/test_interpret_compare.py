"""bertlab.interpret.compare: two models on one sentence."""

from __future__ import annotations

import pytest
from interpret_models import finetuned, pretrained

from bertlab.errors import InputError
from bertlab.interpret.compare import compare_models


def test_two_models_side_by_side(tokenizer):
    a, b = pretrained(tokenizer, seed=0), pretrained(tokenizer, seed=1)
    c = compare_models(a, b, "the cat [MASK] on the mat", names=("zero", "one"), steps=8)
    assert (c.left.name, c.right.name) == ("zero", "one")
    for side in (c.left, c.right):
        assert side.fill_mask.masks and len(side.fill_mask.masks[0].candidates) == 5
        assert side.attribution.tokens == side.fill_mask.tokens
        top = side.fill_mask.masks[0].candidates[0].token
        assert repr(top) in side.attribution.target  # each side explains its own top answer
        assert side.attention.rollout.shape[0] == 2 and side.attention.flow is None
    assert compare_models(a, a, "the cat [MASK]", steps=4).agree


def test_needs_a_mask(tokenizer):
    lm = pretrained(tokenizer)
    with pytest.raises(InputError, match=r"\[MASK\]"):
        compare_models(lm, lm, "no mask")


def test_a_finetuned_model_is_refused_by_name(tokenizer):
    with pytest.raises(InputError, match="model B is a FinetunedModel.*load_model"):
        compare_models(pretrained(tokenizer), finetuned(tokenizer), "the cat [MASK] on the mat", steps=2)
