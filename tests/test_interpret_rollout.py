"""bertlab.interpret.rollout: rollout and flow by hand, and on a model whose attention is the identity."""

from __future__ import annotations

import numpy as np
import pytest
from interpret_models import identity_attention, pretrained

from bertlab.errors import InputError
from bertlab.interpret.rollout import attention_flow, attention_maps, attention_rollout, with_residual


def test_rollout_of_identity_attention_is_the_identity():
    att = np.broadcast_to(np.eye(5), (3, 2, 5, 5))
    np.testing.assert_allclose(attention_rollout(att), np.broadcast_to(np.eye(5), (3, 5, 5)))
    np.testing.assert_allclose(attention_flow(att, position=2), np.eye(5)[2])


def test_rollout_of_an_identity_attention_model_is_the_identity(tokenizer):
    lm = identity_attention(tokenizer)
    maps = attention_maps(lm, "the cat sat")  # [CLS] the cat sat [SEP]
    T = len(maps.tokens)
    assert T == 5
    np.testing.assert_allclose(maps.raw, np.broadcast_to(np.eye(T), maps.raw.shape), atol=1e-6)
    np.testing.assert_allclose(maps.rollout, np.broadcast_to(np.eye(T), maps.rollout.shape), atol=1e-6)
    np.testing.assert_allclose(maps.flow, np.eye(T)[0], atol=1e-6)


def test_rollout_is_the_product_of_residual_mixed_layers():
    rng = np.random.default_rng(0)
    att = rng.random((2, 3, 4, 4))
    att /= att.sum(-1, keepdims=True)
    a1 = 0.5 * att[0].mean(0) + 0.5 * np.eye(4)
    a2 = 0.5 * att[1].mean(0) + 0.5 * np.eye(4)
    out = attention_rollout(att)
    np.testing.assert_allclose(out[0], a1)
    np.testing.assert_allclose(out[1], a2 @ a1)
    np.testing.assert_allclose(out.sum(-1), 1.0)  # still a distribution over input tokens


def test_flow_is_bounded_by_the_rows_and_heads_off_are_left_out():
    rng = np.random.default_rng(1)
    att = rng.random((2, 2, 4, 4))
    att /= att.sum(-1, keepdims=True)
    flow = attention_flow(att, 0)
    assert np.all(flow >= -1e-9) and np.all(flow <= 1 + 1e-9)
    off = att.copy()
    off[0, 1] = 0.0  # head 1 of layer 0 switched off: its rows are zeros
    np.testing.assert_allclose(with_residual(off)[0], 0.5 * att[0, 0] + 0.5 * np.eye(4))
    with pytest.raises(InputError, match="outside"):
        attention_flow(att, 9)
    with pytest.raises(InputError, match=r"\(L, A, T, T\)"):
        attention_rollout(np.ones((2, 3, 4)))


def test_attention_maps_skips_flow_when_too_big(tokenizer):
    lm = pretrained(tokenizer)
    maps = attention_maps(lm, "the cat sat on the mat", max_flow_edges=10)
    assert maps.flow is None and "flow skipped" in maps.flow_note and "shorten" in maps.flow_note
    assert maps.rollout.shape == (2, len(maps.tokens), len(maps.tokens))
    small = attention_maps(lm, "the cat sat on the mat", position=2)
    assert small.flow.shape == (len(small.tokens),) and small.flow_position == 2
