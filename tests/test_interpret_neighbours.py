"""Nearest words in a corpus (bertlab.interpret.neighbours) on the tiny random model: the index holds
every word at every layer, the search finds the word itself where the vectors must be equal, leaves
the query out, and refuses bad input plainly; the page's tab runs on a typed corpus."""

from __future__ import annotations

import pytest
import torch

from bertlab.errors import InputError
from bertlab.inference import load_model
from bertlab.interpret.layer_views import (
    index_caption,
    nearest_notes,
    neighbour_lines,
    neighbours_figure,
    neighbours_reading,
)
from bertlab.interpret.neighbours import (
    build_index,
    corpus_sample,
    nearest_words,
    same_word_ceiling,
    sentence_words,
    sentences_that_fit,
    unique_sentences,
)

CORPUS = ["the cat sat on the mat .", "a dog ran in the park .", "the cat ran home .", "birds sang all day ."]


@pytest.fixture(scope="module")
def lm(tiny_checkpoint):
    return load_model(tiny_checkpoint, device="cpu")


def test_the_index_holds_every_word_at_every_layer_as_a_unit_vector(lm):
    seen = []
    index = build_index(lm, CORPUS + ["   "], progress=lambda done, total: seen.append((done, total)))
    words = [w for s in CORPUS for w, _, _ in sentence_words(lm, s)]
    assert [w.text for w in index.words] == words  # blank lines skipped, [CLS]/[SEP] are no words
    assert index.vectors.shape == (index.num_layers + 1, len(words), lm.model.config.hidden_size)
    assert index.vectors.dtype == torch.float16 and index.megabytes > 0
    assert torch.allclose(index.vectors.float().norm(dim=-1), torch.ones(1), atol=1e-2)
    assert seen == [(4, 4)]
    first = index.words[1]
    assert CORPUS[first.sentence][first.start : first.end] == "cat"


def test_the_same_word_at_the_same_place_is_nearest_at_the_embeddings(lm):
    """At layer 0 a word's vector is its token + position + segment embedding: 'cat' as the second word
    of another sentence is the very same vector (similarity 1), whatever follows it."""
    index = build_index(lm, CORPUS)
    result = nearest_words(lm, index, "the cat jumped over it .", 1, k=3)
    assert result.word == "cat" and result.occurrences == 2
    top = result.layers[0][0]
    assert top.text == "cat" and top.same_word and top.similarity == pytest.approx(1.0, abs=2e-3)
    assert top.before == "the " and top.after.startswith(" sat") or top.after.startswith(" ran")
    assert [n.similarity for n in result.layers[0]] == sorted((n.similarity for n in result.layers[0]), reverse=True)
    assert len(result.same_word_share) == index.num_layers + 1 and result.same_word_share[0] == 2 / 3
    assert same_word_ceiling(result) == 2 / 3
    # a query that is a sentence of the corpus: its own word (similarity 1 everywhere) is left out
    own = nearest_words(lm, index, "  the cat sat on the mat .", 1, k=3)
    assert own.occurrences == 1
    assert not any(n.sentence == 0 and n.text == "cat" for layer in own.layers for n in layer)
    assert result.word_counts(0)[0] == ("cat", 2)


def test_the_reading_and_the_lines_say_what_was_found(lm):
    index = build_index(lm, CORPUS + ["the *cat* [sat] $5 _here_ ."])
    result = nearest_words(lm, index, "the cat jumped .", 1, k=len(index.words))  # every word: every context
    same = sum(n.same_word for n in result.layers[0])
    assert same == 3 and result.occurrences == 3
    said = neighbours_reading(result, 0)
    assert said.startswith(f"At the embeddings (layer 0), **3 of the {result.k}** nearest words are <i>cat</i> itself")
    lines = neighbour_lines(result, 0)
    assert len(lines) == result.k and all(line.startswith("`") for line in lines)
    assert sum("<b>cat</b>" in line for line in lines) == 3  # HTML: markdown's **,** beside a letter is no bold
    assert any("<b>\\.</b>" in line for line in lines)  # punctuation bold too, escaped
    odd = [line for line in lines if "\\$5" in line]  # the marks of the last sentence shown as typed, escaped
    assert odd and all("\\*" in line for line in odd) and not any(" $5" in line for line in lines)
    fig = neighbours_figure(result, "t")
    assert [t.name.split(" ")[0] for t in fig.data] == ["“cat”", "the"] and max(fig.data[0].y) <= 100


def test_bad_input_is_refused_plainly(lm, tiny_checkpoint, tmp_path):
    index = build_index(lm, CORPUS)
    for k in (0, 51, 2.5, True):
        with pytest.raises(InputError, match="k must be a whole number"):
            nearest_words(lm, index, "the cat", 0, k=k)
    with pytest.raises(InputError, match="word 9 of a sentence of 2 words"):
        nearest_words(lm, index, "the cat", 9)
    with pytest.raises(InputError, match="type a sentence"):
        nearest_words(lm, index, "   ", 0)
    with pytest.raises(InputError, match="no words to search"):
        build_index(lm, ["", "  "])
    with pytest.raises(InputError, match="list of sentences"):
        build_index(lm, "the cat sat")
    with pytest.raises(InputError, match="at most 5,000"):
        build_index(lm, ["a ."] * 5001)
    with pytest.raises(InputError, match="would pass 0 MB after 4 sentences"):
        build_index(lm, CORPUS, max_mb=1e-4)
    import shutil

    other_path = tmp_path / "other"
    shutil.copytree(tiny_checkpoint, other_path)
    with pytest.raises(InputError, match="build it again"):
        nearest_words(load_model(other_path, device="cpu"), index, "the cat", 1)
    # the same folder with new weights (a run still saving, a model trained again) is another model too
    rewritten = load_model(tiny_checkpoint, device="cpu")
    with torch.no_grad():
        next(rewritten.model.parameters()).add_(0.5)
    with pytest.raises(InputError, match="build it again"):
        nearest_words(rewritten, index, "the cat", 1)


def test_a_sample_spreads_over_documents_and_the_size_follows_the_model():
    docs = [[f"d{d}s{s}" for s in range(8)] for d in range(3)]
    assert corpus_sample(docs, 7, per_document=2) == ["d0s0", "d0s1", "d1s0", "d1s1", "d2s0", "d2s1", "d0s2"]
    assert len(corpus_sample(docs, 100)) == 24  # all there is
    mini, base = sentences_that_fit(4, 256), sentences_that_fit(12, 768)
    assert 3000 < mini < 5000 and 300 < base < 600 and sentences_that_fit(1, 8) == 5000


def test_a_typed_corpus_counts_each_sentence_once_and_names_words_as_written(lm):
    assert unique_sentences(["  b a .", "", "b a .", "c .", 3]) == ("b a .", "c .")
    index = build_index(lm, ["Paris is big .", "paris is old .", "PARIS is here .", "a cat sat ."])
    result = nearest_words(lm, index, "Paris is grand .", 0, k=3)
    counts = dict(result.word_counts(0, top=10))
    assert "paris" not in counts or counts.get("Paris") is None  # one name for the word in any case
    assert sum(c for w, c in counts.items() if w.casefold() == "paris") == sum(n.same_word for n in result.layers[0])
    assert nearest_notes(result, 1, 3) == []
    alone = nearest_words(lm, build_index(lm, ["a cat sat ."]), "the dog ran .", 1, k=50)
    notes = nearest_notes(alone, 2, 50)
    assert notes[0].startswith("“dog” is 2 WordPieces for this model: its vector is their mean")
    assert notes[1] == "“dog” is nowhere else in this corpus: none of the nearest can be the word itself."
    assert notes[2] == f"The corpus has only {alone.k} other words: all of them are shown, not 50."
    assert len(neighbours_figure(alone).data) == 1  # no 'most possible' line at 0%
    assert index_caption(index).startswith("4 sentences, 16 words, under 0.1 MB")
