"""bertlab.explore: clickable words, whole-word masking, plain-language input notes, examples."""

from __future__ import annotations

import pytest

from bertlab.data.pretraining_data import DataConfig
from bertlab.errors import InputError
from bertlab.explore import (
    FACT_PROBE,
    FILL_MASK_EXAMPLES,
    NSP_EXAMPLES,
    chosen_count_text,
    embedding_row_note,
    independent_text,
    input_notes,
    mask_words,
    maskable_words,
    model_limits,
    notes_of_two,
    split_words,
    truncation_point,
    unknown_words,
)
from bertlab.inference import Candidate, LayerGuess, load_model


def test_split_words_keeps_masks_and_punctuation():
    words = split_words("The cat's [MASK] sat, happily.")
    assert [w.text for w in words] == ["The", "cat's", "[MASK]", "sat", ",", "happily", "."]
    assert words[2].is_mask and words[4].is_punctuation and not words[1].is_punctuation
    assert [w.text for w in maskable_words("The cat's [MASK] sat, happily.")] == ["The", "cat's", "sat", "happily"]
    assert split_words("") == []


def test_mask_words_one_mask_per_piece(tokenizer):
    text = "the dog walked to the park ."
    assert mask_words(text, [1]) == "the [MASK] walked to the park ."
    assert mask_words(text, [1, 4], tokenizer) == "the [MASK] walked to [MASK] park ."
    pieces = len(tokenizer.tokenize("walked"))
    assert mask_words(text, [2], tokenizer) == "the dog " + " ".join(["[MASK]"] * pieces) + " to the park ."
    assert mask_words(text, [2], tokenizer, whole_word=False) == "the dog [MASK] to the park ."
    assert mask_words(text, []) == text
    with pytest.raises(InputError, match="does not exist"):
        mask_words(text, [99])


def test_unknown_words_and_notes(tokenizer):
    assert unknown_words(tokenizer, "the cat sat .") == []
    assert unknown_words(tokenizer, "the ☃ sat", "a ☃ and €") == ["☃", "€"]
    notes = input_notes(tokenizer, 64, "the ☃ sat")
    assert len(notes) == 1 and notes[0].level == "warning" and "'☃'" in notes[0].message and "[UNK]" in notes[0].message
    (long,) = input_notes(tokenizer, 64, "☃" * 5000)  # a pasted wall is named by its start and length
    assert "'" + "☃" * 30 + "… (5,000 characters)'" in long.message and len(long.message) < 300


def test_truncation_says_where(tokenizer):
    text = "the cat sat on the mat . " * 10
    assert truncation_point(tokenizer, "the cat sat .", 16) == []
    (msg,) = truncation_point(tokenizer, text, 16)
    assert "the text is 70 tokens and only the first 14 fit" in msg
    assert "after '…on the mat . the cat sat on the mat .' (character 49)" in msg
    pair = truncation_point(tokenizer, "the cat .", 16, "the dog ran to the park . " * 5)
    assert len(pair) == 1 and pair[0].startswith("sentence B is")
    assert input_notes(tokenizer, 16, text)[0].message.startswith("Input too long")
    assert "[CLS] and [SEP] included" in msg


def test_truncation_names_the_tokenizer_s_own_special_tokens():
    """RoBERTa's byte-level tokenizer wraps a text in <s> ... </s>, not [CLS] ... [SEP]."""
    from conftest import SAMPLE_TEXT

    from bertlab.models.roberta_tokenizer import RobertaTokenizer

    bpe = RobertaTokenizer.train(texts=SAMPLE_TEXT * 5, vocab_size=300)
    (msg,) = truncation_point(bpe, "the cat sat on the mat . " * 10, 16)
    assert "<s> and </s> included" in msg and "[CLS]" not in msg


def test_a_note_names_tokens_past_the_pretrained_length(tokenizer):
    """A 340-token sentence put its [MASK] past the 128 positions the shipped model was pretrained on,
    and no page said so (Compare then answered ',')."""
    text = "the cat sat on the mat . " * 10  # 70 tokens, with [CLS] and [SEP] 72
    assert input_notes(tokenizer, 128, text, pretrained=128) == []
    assert input_notes(tokenizer, 128, text) == []  # a card that does not say: nothing made up
    (note,) = input_notes(tokenizer, 128, text, pretrained=64)
    assert note.level == "info" and "reads 72 tokens" in note.message and "at most 64" in note.message
    assert "the last 8 sit at positions whose embeddings it never trained" in note.message
    assert input_notes(tokenizer, 64, text, pretrained=64)[0].message.startswith("Input too long")  # cut, not past


def test_independent_text(tiny_checkpoint):
    lm = load_model(tiny_checkpoint, device="cpu")
    result = lm.fill_mask("the [MASK] sat on the [MASK] .", top_k=3)
    text = independent_text(lm.tokenizer, lm.max_length, result)
    assert "[MASK]" not in text and text.startswith("the ") and text.endswith(" .")
    first, second = (m.candidates[0].token for m in result.masks)
    assert first.lstrip("#") in text and second.lstrip("#") in text


def test_examples_are_well_formed():
    assert all(t.count("[MASK]") >= 1 for t in FILL_MASK_EXAMPLES)
    labels = [label for label, *_ in NSP_EXAMPLES]
    assert len(set(labels)) == len(labels)
    assert {truth for *_, truth in NSP_EXAMPLES} == {True, False}


def test_model_limits_reads_the_card():
    card = {
        "total_tokens": 52_857_495,
        "corpus": ["default"],
        "metrics": {"mlm_acc": 0.3047},
        "unseen_english": {"overall": {"mlm_acc": 0.2452}},
    }
    text = model_limits(card, 5_500_000, ["mr", "true", ".", "mrs"])
    assert text.startswith("A 5.5M-parameter model trained on 53M tokens of Wikipedia sample (default).")
    assert "**30.5%** of hidden words right on held-out text from its own corpus" in text
    assert "**24.5%** on English it has not seen" in text
    assert "more than facts about the world: “The capital of France is [MASK].” → mr, true, ., mrs." in text
    assert "It knows some facts" in model_limits(card, 5_500_000, [FACT_PROBE[1], "lyon"])
    continued = model_limits({**card, "init_from": "checkpoints/x"}, 5_500_000, [])  # rows say "(last stage)"
    assert continued.startswith("A 5.5M-parameter model trained on 53M tokens of Wikipedia sample (default).")
    bare = model_limits({}, 110_000_000, [])  # a Hub model: no card numbers, nothing made up
    assert bare == "A 110M-parameter model."


def test_embedding_row_note_says_there_is_no_context(tiny_checkpoint):
    lm = load_model(tiny_checkpoint, device="cpu")
    guesses = lm.layer_predictions("the cat sat on the [MASK] .", top_k=4)
    note = embedding_row_note(guesses[0], len(lm.tokenizer))
    assert "no context yet" in note and f"{len(lm.tokenizer):,} pieces" in note
    assert guesses[0].candidates[0].token in note
    # the embeddings output at a [MASK] depends only on where the mask stands, not on the words around it
    other = lm.layer_predictions("a dog ran to the [MASK] .", top_k=4)[0]
    assert [c.token for c in other.candidates] == [c.token for c in guesses[0].candidates]
    with pytest.raises(InputError, match="layer 0"):
        embedding_row_note(LayerGuess(1, guesses[1].candidates), 100)
    # 'nearly flat' only where it is: a first-place mask's best can take a quarter of the probability
    sure = LayerGuess(0, [Candidate("mr", 1, 0.244, "mr", "mr")])
    assert "nearly flat" not in embedding_row_note(sure, 30_000) and "at most 24.4%" in embedding_row_note(sure, 30_000)
    spread = LayerGuess(0, [Candidate("mr", 1, 0.0002, "mr", "mr")])
    assert "nearly flat" in embedding_row_note(spread, 30_000)


def test_chosen_count_text_says_what_was_rounded():
    config = DataConfig(max_seq_length=64, masked_lm_prob=0.15, max_predictions_per_seq=10)
    assert chosen_count_text(57, 9, config) == (
        "15% of the 57 tokens ([CLS] and [SEP] count, as in Google's script) = 8.55, rounded to **9** "
        "(the cap is 10 per example: 15% of the 64-token maximum, rounded up)"
    )
    capped = DataConfig(max_seq_length=64, masked_lm_prob=0.15, max_predictions_per_seq=5)
    assert ", rounded to 9, capped at **5** per example (max_predictions_per_seq)" in chosen_count_text(57, 5, capped)
    whole = DataConfig(max_seq_length=64, masked_lm_prob=0.15, max_predictions_per_seq=10, whole_word_mask=True)
    assert "whole-word masking chose 8 of these 9" in chosen_count_text(57, 8, whole)


def test_notes_of_two_models_say_which_model_each_is_about(tokenizer):
    """Compare models showed model A's notes only; model B reads the text with its own vocabulary."""
    text = "the cat sat on the mat . " * 10  # 72 tokens with [CLS] and [SEP]
    a, b = input_notes(tokenizer, 128, text, pretrained=64), input_notes(tokenizer, 128, text + " ☃", pretrained=64)
    notes = notes_of_two(a, a)
    assert notes == a  # the same model, or the same note: said once, as it is
    both = [n.message for n in notes_of_two(a, b)]
    assert both[0].startswith("Model A: The model reads 72 tokens") and both[1].startswith("Model B: The model reads")
    assert any(m.startswith("Model B: The vocabulary has no pieces for '☃'") for m in both)
