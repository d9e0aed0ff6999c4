"""bertlab.attention: per-head statistics on hand-made attention maps, sample averages, head masks, ablation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertlab.attention import (
    HEAD_STATS,
    SAMPLE_PAIRS,
    average_head_statistics,
    compare_ablation,
    head_label,
    head_statistics,
    heads_off,
    is_punctuation,
    make_head_mask,
    parse_head_label,
    token_roles,
)
from bertlab.errors import InputError
from bertlab.inference import load_model

TOKENS = ["[CLS]", "a", ".", "[SEP]"]


def hand_made() -> np.ndarray:
    """(1 layer, 4 heads, 4, 4): all-to-[SEP], previous token, uniform, switched off."""
    T = len(TOKENS)
    att = np.zeros((1, 4, T, T))
    att[0, 0, :, 3] = 1.0  # every token -> [SEP]
    for i in range(T):
        att[0, 1, i, max(i - 1, 0)] = 1.0  # previous token ([CLS] -> itself)
    att[0, 2] = 1.0 / T  # uniform
    return att  # head 3 stays all zeros: switched off


@pytest.fixture(scope="module")
def lm(tiny_checkpoint):
    return load_model(tiny_checkpoint, device="cpu")


def test_roles_and_punctuation():
    roles = token_roles(TOKENS)
    assert roles["cls"].tolist() == [True, False, False, False]
    assert roles["sep"].tolist() == [False, False, False, True]
    assert roles["punct"].tolist() == [False, False, True, False]
    assert is_punctuation("##.") and is_punctuation("!?") and not is_punctuation("a.") and not is_punctuation("")


def test_head_statistics_on_hand_made_maps():
    s = head_statistics(hand_made(), TOKENS)
    v = s.values
    assert set(v) == set(HEAD_STATS)
    # head 0: all attention on [SEP]
    assert v["sep"][0, 0] == pytest.approx(1.0)
    assert v["cls"][0, 0] == pytest.approx(0.0)
    assert v["punct"][0, 0] == pytest.approx(0.0)
    assert v["self"][0, 0] == pytest.approx(1 / 4)  # only [SEP] attends to itself
    assert v["next"][0, 0] == pytest.approx(1 / 3)  # only '.' -> [SEP] is a next-token step
    assert v["prev"][0, 0] == pytest.approx(0.0)
    assert v["entropy"][0, 0] == pytest.approx(0.0)
    # head 1: previous token
    assert v["prev"][0, 1] == pytest.approx(1.0)
    assert v["cls"][0, 1] == pytest.approx(2 / 4)  # [CLS] -> itself and 'a' -> [CLS]
    assert v["punct"][0, 1] == pytest.approx(1 / 4)  # [SEP] -> '.'
    # head 2: uniform
    for name in ("cls", "sep", "punct", "prev", "next", "self"):
        assert v[name][0, 2] == pytest.approx(1 / 4)
    assert v["entropy"][0, 2] == pytest.approx(2.0)  # log2(4) bits
    # head 3: switched off -> NaN, not zero
    assert all(np.isnan(v[name][0, 3]) for name in HEAD_STATS)
    assert s.num_tokens == 4 and s.shape == (1, 4)


def test_top_heads_and_rows():
    s = head_statistics(hand_made(), TOKENS)
    assert s.top_heads("sep", k=1) == [(0, 0, pytest.approx(1.0))]
    assert [h for _, h, _ in s.top_heads("entropy", k=4)] == [2, 0, 1]  # off head left out
    assert s.top_heads("entropy", k=1, largest=False)[0][1] in (0, 1)
    rows = s.rows()
    assert len(rows) == 4 and rows[0]["layer"] == 1 and rows[2]["head"] == 3
    with pytest.raises(InputError, match="unknown statistic"):
        s.top_heads("nope")


def test_head_statistics_checks_shapes():
    with pytest.raises(InputError, match=r"\(L, A, T, T\)"):
        head_statistics(np.zeros((4, 4)), TOKENS)
    with pytest.raises(InputError, match="3 tokens"):
        head_statistics(hand_made(), TOKENS[:3])


def test_statistics_of_a_real_model_are_shares(lm):
    ins = lm.inspect("the cat sat on the mat .", "it was a big cat .")
    s = head_statistics(ins.attentions, ins.tokens)
    L, A = lm.config.num_layers, lm.config.num_heads
    for name in ("cls", "sep", "punct", "prev", "next", "self"):
        assert s.values[name].shape == (L, A)
        assert np.all((s.values[name] >= 0) & (s.values[name] <= 1 + 1e-6))
    T = len(ins.tokens)
    assert np.all(s.values["entropy"] <= np.log2(T) + 1e-6)


def test_sample_average_weights_by_tokens(lm):
    pairs = [("the cat sat .", None), ("the dog ran to the park .", "he played .")]
    avg = average_head_statistics(lm, pairs)
    assert avg.num_inputs == 2
    singles = [lm.inspect(a, b) for a, b in pairs]
    assert avg.num_tokens == sum(len(i.tokens) for i in singles)
    # token-weighted mean of the per-input [SEP] shares
    per = [head_statistics(i.attentions, i.tokens).values["sep"] * len(i.tokens) for i in singles]
    expected = sum(per) / avg.num_tokens
    np.testing.assert_allclose(avg.values["sep"], expected, rtol=1e-5)
    assert len(SAMPLE_PAIRS) >= 10


def test_sample_average_with_heads_off(lm):
    mask = make_head_mask(lm.config.num_layers, lm.config.num_heads, [(0, 1)])
    avg = average_head_statistics(lm, [("the cat sat .", None)], head_mask=mask)
    assert np.isnan(avg.values["sep"][0, 1])
    assert not np.isnan(avg.values["sep"][0, 0])
    with pytest.raises(InputError, match="no sentences"):
        average_head_statistics(lm, [])


def test_head_masks_and_labels():
    mask = make_head_mask(3, 4, [(0, 1), (2, 3)])
    assert mask.shape == (3, 4) and mask.dtype == torch.float32
    assert mask.sum().item() == 10
    assert heads_off(mask) == [(0, 1), (2, 3)]
    assert heads_off(mask.numpy()) == [(0, 1), (2, 3)]
    assert heads_off(None) == []
    assert head_label(0, 1) == "L1-H2"
    for text in ("L1-H2", "1-2", "1:2", "l1 h2", " 1 / 2 "):
        assert parse_head_label(text, 3, 4) == (0, 1)
    with pytest.raises(InputError, match="does not exist"):
        parse_head_label("L4-H1", 3, 4)
    with pytest.raises(InputError, match="not a head"):
        parse_head_label("head one", 3, 4)
    with pytest.raises(InputError, match="does not exist"):
        make_head_mask(3, 4, [(0, 4)])


def test_compare_ablation_changes_answers(lm):
    L, A = lm.config.num_layers, lm.config.num_heads
    everything_off = make_head_mask(L, A, [(layer, head) for layer in range(L) for head in range(A)])
    cmp = compare_ablation(
        lm,
        everything_off,
        mask_text="the cat sat on the [MASK] .",
        text_a="the cat sat .",
        text_b="it was big .",
        top_k=5,
    )
    assert len(cmp.off) == L * A
    assert len(cmp.fill_base.masks[0].candidates) == 5
    base = [c.score for c in cmp.fill_base.masks[0].candidates]
    ablated = [c.score for c in cmp.fill_ablated.masks[0].candidates]
    assert base != pytest.approx(ablated)
    assert 0 <= cmp.nsp_base.is_next_prob <= 1 and 0 <= cmp.nsp_ablated.is_next_prob <= 1
    rows = cmp.fill_rows(0)
    assert {"token", "all heads", "heads off"} <= set(rows[0])
    assert rows[0]["all heads"] == pytest.approx(base[0])


def test_compare_ablation_without_inputs_and_bad_mask(lm):
    L, A = lm.config.num_layers, lm.config.num_heads
    cmp = compare_ablation(lm, make_head_mask(L, A, [(0, 0)]))
    assert cmp.fill_base is None and cmp.nsp_base is None and cmp.fill_rows() == []
    with pytest.raises(InputError, match="needs"):
        compare_ablation(lm, torch.ones(L + 1, A), mask_text="a [MASK] .")
    with pytest.raises(InputError, match="no \\[MASK\\]"):
        compare_ablation(lm, make_head_mask(L, A), mask_text="no mask here")
