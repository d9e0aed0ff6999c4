"""bertlab.interpret.contextual: finding the word, self-similarity, anisotropy, PCA, the caps."""

from __future__ import annotations

import numpy as np
import pytest
from interpret_models import finetuned, pretrained

from bertlab.errors import InputError
from bertlab.interpret.contextual import MAX_SENTENCES, contextual_word, find_word, mean_cosine, pca_2d


def test_the_same_sentence_twice_gives_self_similarity_one(tokenizer):
    lm = pretrained(tokenizer)
    r = contextual_word(lm, "river", ["the river ran in the park", "The River ran in the park"])
    L1 = lm.config.num_layers + 1
    assert r.vectors.shape == (L1, 2, lm.config.hidden_size)
    np.testing.assert_allclose(r.self_similarity, 1.0, atol=1e-5)  # same context, same vector, every layer
    assert r.projection.shape == (L1, 2, 2) and r.explained.shape == (L1, 2)
    assert np.all(np.abs(r.anisotropy) <= 1)
    np.testing.assert_allclose(r.adjusted_self_similarity, r.self_similarity - r.anisotropy)


def test_senses_and_rows(tokenizer):
    lm = pretrained(tokenizer)
    sentences = ["the bird sang by the river", "a bird sang in the tree", "the river ran to the city", "a big river"]
    r = contextual_word(lm, "river", sentences[:1] + sentences[2:], senses=["a", "b", "b"])
    assert [o.sentence_index for o in r.occurrences] == [0, 1, 2]
    assert not np.isnan(r.within_sense).any() and not np.isnan(r.across_sense).any()
    rows = r.rows()
    assert len(rows) == lm.config.num_layers + 1 and "same sense" in rows[0] and rows[0]["layer"] == 0
    no_senses = contextual_word(lm, "bird", sentences[:2])
    assert np.isnan(no_senses.within_sense).all() and "same sense" not in no_senses.rows()[0]


def test_find_word_takes_whole_words_only(tokenizer):
    lm = pretrained(tokenizer)
    found = find_word(lm, "cat", "the cat and the cats sat , Cat !")
    assert [s for s, _ in found] == ["cat", "Cat"]
    assert all(len(p) == 1 for _, p in found)
    assert find_word(lm, "walking", "he was walking")[0][1] != []


def test_plain_messages(tokenizer):
    lm = pretrained(tokenizer)
    with pytest.raises(InputError, match="does not contain"):
        contextual_word(lm, "cat", ["the cat sat", "the dog sat"])
    with pytest.raises(InputError, match="at least two"):
        contextual_word(lm, "cat", ["the cat sat"])
    with pytest.raises(InputError, match=f"at most {MAX_SENTENCES}"):
        contextual_word(lm, "cat", ["the cat"] * (MAX_SENTENCES + 1))
    with pytest.raises(InputError, match="one word"):
        contextual_word(lm, "the cat", ["the cat", "the cat"])
    with pytest.raises(InputError, match="one sense per sentence"):
        contextual_word(lm, "cat", ["the cat", "a cat"], senses=["x"])


def test_mean_cosine_and_pca():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert mean_cosine(a) == pytest.approx((0 + 1 + 0) * 2 / 6)
    assert mean_cosine(a, groups=np.array([0, 1, 0])) == pytest.approx(0.0)  # same-sentence pairs left out
    proj, share = pca_2d(np.array([[0.0, 0, 0], [2, 0, 0], [4, 0, 0]]))
    np.testing.assert_allclose(np.abs(proj[:, 0]), [2, 0, 2])
    assert share[0] == pytest.approx(1.0)
    one, _ = pca_2d(np.ones((1, 3)))
    assert one.shape == (1, 2)


def test_sense_lines():
    from bertlab.interpret.contextual import BANK_EXAMPLE, parse_sense_lines

    sentences, senses = parse_sense_lines(["river: the bank of the river", "", "the bank: a money place"])
    assert sentences == ["the bank of the river", "the bank: a money place"] and senses == ["river", ""]
    assert parse_sense_lines(["a bank", "the bank"]) == (["a bank", "the bank"], None)
    assert parse_sense_lines(BANK_EXAMPLE)[1] == ["river"] * 3 + ["money"] * 3


def test_pca_legend_names_cut_sentences_at_a_word_boundary(tokenizer):
    from bertlab.interpret.layer_views import pca_figure

    lm = pretrained(tokenizer)
    long = "the bird sang by the river in the park and the city and the tree"
    fig = pca_figure(contextual_word(lm, "river", [long, "a big river"], senses=["x", "y"]))
    names = [t.name for t in fig.data if t.showlegend]
    assert names == ["1 (x): the bird sang by the river in the park…", "2 (y): a big river"]


def test_a_finetuned_model_reads_as_its_encoder(tokenizer):
    fm = finetuned(tokenizer, seed=5)
    lm = pretrained(tokenizer)
    lm.model.bert.load_state_dict(fm.model.bert.state_dict())
    sentences = ["the bird sang by the river", "the river ran to the city"]
    got, expected = contextual_word(fm, "river", sentences), contextual_word(lm, "river", sentences)
    np.testing.assert_allclose(got.vectors, expected.vectors, atol=1e-6)
    np.testing.assert_allclose(got.self_similarity, expected.self_similarity, atol=1e-6)
    np.testing.assert_allclose(got.anisotropy, expected.anisotropy, atol=1e-6)
    assert [s for s, _ in find_word(fm, "river", sentences[0])] == ["river"]


def test_sentences_must_be_a_list_of_sentences(tokenizer):
    lm = pretrained(tokenizer)
    with pytest.raises(InputError, match="list of sentences.*NoneType"):
        contextual_word(lm, "cat", None)
    with pytest.raises(InputError, match="got one string"):
        contextual_word(lm, "cat", "the cat sat on the mat")  # not 22 one-character sentences
    with pytest.raises(InputError, match="item 1 is int"):
        contextual_word(lm, "cat", [1, 2])
    with pytest.raises(InputError, match="word must be a string"):
        contextual_word(lm, 5, ["the cat", "a cat"])
    with pytest.raises(InputError, match="senses must be a list"):
        contextual_word(lm, "cat", ["the cat", "a cat"], senses="ab")


def test_a_blank_sentence_is_named_not_dropped(tokenizer):
    lm = pretrained(tokenizer)
    # dropping it would leave 2 sentences for 3 senses, and shift every sentence_index after it
    with pytest.raises(InputError, match="sentence 2 of 3 is blank"):
        contextual_word(lm, "cat", ["the cat", "", "a cat"], senses=["x", "y", "x"])
    with pytest.raises(InputError, match="sentence 3 of 3 is blank"):
        contextual_word(lm, "cat", ["the cat", "a cat", "  "])


def test_sentences_without_a_sense_stay_out_of_the_sense_comparison(tokenizer):
    from bertlab.interpret.contextual import parse_sense_lines
    from bertlab.interpret.layer_views import sense_note

    lm = pretrained(tokenizer)
    lines = ["x: the river ran to the city", "x: a big river", "the bird sang by the river", "the river sang"]
    sentences, senses = parse_sense_lines(lines)
    r = contextual_word(lm, "river", sentences, senses)
    n = r.vectors / np.linalg.norm(r.vectors, axis=-1, keepdims=True)
    # 'same sense' is the one labelled pair; the two unlabelled sentences are not a sense called '?'
    np.testing.assert_allclose(r.within_sense, (n[:, 0] * n[:, 1]).sum(-1), atol=1e-6)
    assert r.unlabelled_sentences == [2, 3]
    assert "other sense" not in r.rows()[0] and "same sense" in r.rows()[0]
    note = sense_note(r)
    assert "Sentences 3 and 4 have no sense" in note and "no 'other sense' to show" in note
    assert np.isnan(r.across_sense).all()  # one named sense: nothing to compare it with
    assert len(r.occurrences) == 4 and r.projection.shape[1] == 4  # still drawn, still in self-similarity
    labelled = contextual_word(lm, "river", sentences[:2], senses[:2])
    assert labelled.unlabelled_sentences == []
    assert sense_note(labelled) == "Only one sense is named, so there is no 'other sense' to show."
    one_each = contextual_word(lm, "river", sentences, ["x", "y", "", ""])
    assert "same sense" not in one_each.rows()[0] and "other sense" in one_each.rows()[0]


def test_the_same_position_gives_the_same_layer_0_vector(tokenizer):
    from bertlab.interpret.layer_views import layer0_note, pca_caption

    lm = pretrained(tokenizer)
    r = contextual_word(lm, "river", ["the river ran", "a river sang", "the big river"], senses=["x", "x", "y"])
    assert [o.token_positions for o in r.occurrences] == [[2], [2], [3]]
    assert r.identical_at_layer_0() == [[0, 1]]
    note = layer0_note(r)
    assert "position" in note and "sentences 1 and 2 (position 2" in note
    two = contextual_word(lm, "river", ["the river ran", "a river sang"])
    assert two.explained[0].tolist() == [0.0, 0.0]  # one point: no variance, not the rounding error's
    caption = pca_caption(two, [0, 1])
    assert "layer 0: 0%" not in caption and "layer 0: none, every vector the same" in caption


def test_pca_of_rows_equal_up_to_rounding_keeps_no_variance():
    row = np.array([0.1, 0.7, -0.3])
    rows = np.stack([row, row * (1 + 1e-9), row])
    proj, share = pca_2d(rows)
    assert share.tolist() == [0.0, 0.0] and np.all(proj == 0)


def test_a_word_the_tokenizer_splits_is_found_as_adjacent_words(tokenizer):
    from bertlab.interpret.layer_views import pieces_note

    lm = pretrained(tokenizer)
    assert tokenizer.encode("cat !!!").tokens[2:5] == ["!", "!", "!"]  # punctuation: a word each
    (found,) = find_word(lm, "!!!", "the cat !!! sat")
    assert found == ("!!!", [3, 4, 5])
    assert find_word(lm, "!!", "the cat ! ! sat") == []  # never across a space
    r = contextual_word(lm, "!!!", ["the cat !!! sat", "a dog !!!"])
    assert [o.pieces for o in r.occurrences] == [["!", "!", "!"]] * 2
    assert "3 pieces, ! · ! · !" in pieces_note(r)
    assert pieces_note(contextual_word(lm, "cat", ["the cat", "a cat"])) == ""
