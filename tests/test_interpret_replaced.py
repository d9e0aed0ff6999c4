"""bertlab.interpret.replaced on a tiny random ELECTRA pair: P(replaced) is the discriminator's own
logit through a sigmoid, a generator's corruption masks 15% and replaces only masked tokens, the same
seed gives the same corruption, and a model without the head asked for is refused with a way out."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertlab.errors import InputError
from bertlab.figures.answers import ORANGE, replaced_tokens_figure
from bertlab.inference import load_model
from bertlab.interpret.replaced import corrupt_and_detect, detect_replaced

TEXT = "the quick brown fox jumps over the lazy dog and the cat sat on the mat ."


@pytest.fixture(scope="module")
def halves(tiny_electra_pair):
    generator = load_model(tiny_electra_pair, device="cpu")
    return generator, load_model(generator.halves["discriminator"], device="cpu")


def test_a_typed_sentence_gets_the_discriminator_s_p_replaced_for_every_token(halves):
    _, disc = halves
    got = detect_replaced(disc, TEXT)
    enc = disc.tokenizer.encode(TEXT)
    with torch.no_grad():
        logits = disc.model(torch.tensor([enc.ids])).rtd_logits[0]
    assert got.tokens == got.original_tokens == enc.tokens
    assert got.special.tolist() == [s is None for s in enc.sequence_ids]
    np.testing.assert_allclose(got.p_replaced[~got.special], logits.sigmoid().numpy()[~got.special], atol=1e-6)
    assert (got.p_replaced[got.special] == 0).all()
    assert not got.masked.any() and not got.replaced.any() and got.accuracy is None
    assert got.p_replaced.dtype == np.float32 and got.p_replaced.shape == (len(enc.ids),)


def test_the_generator_corrupts_15_percent_as_in_training_and_the_same_seed_repeats(halves):
    gen, disc = halves
    got = corrupt_and_detect(gen, disc, TEXT, seed=3)
    words = int((~got.special).sum())
    assert got.masked.sum() == round(0.15 * words) and not (got.masked & got.special).any()
    assert got.replaced.any() and not (got.replaced & ~got.masked).any()  # only masked positions change
    changed = [a != b for a, b in zip(got.tokens, got.original_tokens, strict=True)]
    assert changed == got.replaced.tolist()
    assert 0.0 <= got.accuracy <= 1.0
    again = corrupt_and_detect(gen, disc, TEXT, seed=3)
    assert again.tokens == got.tokens and np.array_equal(again.p_replaced, got.p_replaced)
    others = {tuple(corrupt_and_detect(gen, disc, TEXT, seed=s).masked.tolist()) for s in range(4)}
    assert len(others) > 1  # the seed picks the positions
    # the discriminator judged what it was shown: its P(replaced) on the corrupted ids
    with torch.no_grad():
        ids = torch.tensor([disc.tokenizer.convert_tokens_to_ids(got.tokens)])
        expected = disc.model(ids).rtd_logits[0].sigmoid().numpy()
    np.testing.assert_allclose(got.p_replaced[~got.special], expected[~got.special], atol=1e-6)


def test_a_model_without_the_head_asked_for_is_refused_with_a_way_out(halves):
    gen, disc = halves
    with pytest.raises(InputError, match="no replaced-token detection head.*discriminator"):
        detect_replaced(gen, TEXT)
    with pytest.raises(InputError, match="no masked-LM head.*pair folder"):
        corrupt_and_detect(disc, disc, TEXT)
    with pytest.raises(InputError, match="empty"):
        detect_replaced(disc, "  ")
    with pytest.raises(InputError, match="mask_prob"):
        corrupt_and_detect(gen, disc, TEXT, mask_prob=0)


def test_the_figure_draws_one_bar_per_token_and_marks_the_replaced(halves):
    gen, disc = halves
    got = corrupt_and_detect(gen, disc, TEXT, seed=1)
    fig = replaced_tokens_figure(got.tokens, got.p_replaced, got.replaced, got.original_tokens, got.special)
    bar = fig.data[0]
    assert len(bar.y) == int((~got.special).sum())
    assert sum(c == ORANGE for c in bar.marker.color) == int(got.replaced.sum())
    assert all("(was " in x for x, c in zip(bar.x, bar.marker.color, strict=True) if c == ORANGE)
    with pytest.raises(InputError, match="only special tokens"):
        replaced_tokens_figure(["[CLS]"], [0.0], [False], ["[CLS]"], [True])
