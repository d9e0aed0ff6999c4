"""bertlab.interpret.rollout: rollout and flow by hand, and on a model whose attention is the identity."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_config
from interpret_models import finetuned, identity_attention, pretrained

from bertlab.errors import InputError
from bertlab.finetune.models import HeadConfig, build_task_model
from bertlab.finetune.predict import FinetunedModel, TaskSetup
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


def _same_encoder(tokenizer):
    """A fine-tuned classifier and a pretrained model that share its encoder's weights."""
    fm = finetuned(tokenizer, seed=5)
    lm = pretrained(tokenizer)
    lm.model.bert.load_state_dict(fm.model.bert.state_dict())
    return fm, lm


def test_attention_maps_of_a_finetuned_model_are_its_encoders(tokenizer):
    fm, lm = _same_encoder(tokenizer)
    got, expected = attention_maps(fm, "the cat sat", position=2), attention_maps(lm, "the cat sat", position=2)
    assert got.tokens == expected.tokens
    np.testing.assert_allclose(got.raw, expected.raw, atol=1e-6)
    np.testing.assert_allclose(got.rollout, expected.rollout, atol=1e-6)
    np.testing.assert_allclose(got.flow, expected.flow, atol=1e-6)
    mask = torch.ones(2, 4)
    mask[1, 0] = 0
    np.testing.assert_allclose(
        attention_maps(fm, "the cat sat", head_mask=mask).raw,
        attention_maps(lm, "the cat sat", head_mask=mask).raw,
        atol=1e-6,
    )
    with pytest.raises(InputError, match=r"\(2, 4\)"):
        attention_maps(fm, "the cat sat", head_mask=torch.ones(3, 3))
    with pytest.raises(InputError, match="empty"):
        attention_maps(fm, "  ")
    # a feature-based model (frozen encoder) takes no gradients, but its attention is there to see
    head = HeadConfig("single", 2, mode="feature")
    frozen = build_task_model(tiny_config(len(tokenizer)), head).eval()
    setup = TaskSetup("custom", "single", ("neg", "pos"), head, max_seq_length=64)
    feature = FinetunedModel(frozen, tokenizer, setup, {}, "tiny-feature", torch.device("cpu"))
    assert attention_maps(feature, "the cat sat", flow=False).raw.shape == (2, 5, 5)


def test_bad_positions_and_residuals_are_refused():
    att = np.broadcast_to(np.eye(4), (2, 2, 4, 4))
    for position in (1.5, "1", True, -1, 4):
        with pytest.raises(InputError, match="position"):
            attention_flow(att, position)
    for residual in (2.0, -0.1, float("nan"), "0.5"):
        with pytest.raises(InputError, match="between 0 and 1"):
            attention_rollout(att, residual=residual)
    assert attention_rollout(np.full((1, 1, 2, 2), 0.5), residual=1.0).min() >= 0


def test_attention_maps_refuse_a_position_outside_the_input(tokenizer):
    lm = pretrained(tokenizer)
    with pytest.raises(InputError, match="whole number"):
        attention_maps(lm, "the cat sat", position=1.5)
    with pytest.raises(InputError, match="outside the 5 tokens"):
        attention_maps(lm, "the cat sat", position=9, flow=False)  # the flow figure reads that row too


def test_a_note_says_when_the_raw_or_rollout_map_is_capped():
    """Why it answered's maps are capped on long inputs like the Attention page's one-head map; only
    their colour-bar titles said so."""
    from bertlab.interpret.answer_views import capped_maps_note
    from bertlab.interpret.rollout import AttentionMaps

    T = 300
    spread = np.zeros((1, T, T))
    for i in range(T):  # half on [CLS], half on ten neighbours: white but for [CLS] on a 0-0.5 scale
        spread[0, i, [(i + k) % T for k in range(1, 11)]] = 0.05
    spread[0, :, 0] += 0.5
    names = [f"t{i}" for i in range(T)]
    long = AttentionMaps(names, names, spread, np.full((1, T, T), 1 / T), None, 0, 0.0)
    note = capped_maps_note(long, 0)
    assert note.startswith("The raw attention map’s colours stop at the 99th-percentile weight")
    short = AttentionMaps(["a", "b"], ["a", "b"], np.full((1, 2, 2), 0.5), np.full((1, 2, 2), 0.5), None, 0, 0.0)
    assert capped_maps_note(short, 0) == ""
