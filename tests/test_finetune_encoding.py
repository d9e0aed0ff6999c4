"""bertlab.finetune.encoding: tagging labels only first pieces, long inputs are chunked or windowed,
QA windows map answers to tokens and back to the original characters, and batches are padded."""

import torch

from bertlab.finetune.data import QAExample, SequenceExample, TaggingExample
from bertlab.finetune.encoding import (
    IGNORE,
    collate,
    decode_qa,
    decode_tagging,
    encode_qa,
    encode_sequences,
    encode_tagging,
)


def test_tagging_labels_first_piece_only(tokenizer):
    ex = TaggingExample(["the", "cats", "walked"], ["DET", "NOUN", "VERB"])
    label_to_id = {"DET": 0, "NOUN": 1, "VERB": 2}
    (f,) = encode_tagging([ex], tokenizer, 32, label_to_id)
    tokens = tokenizer.convert_ids_to_tokens(f.input_ids)
    assert tokens == ["[CLS]", "the", "cat", "##s", "walked", "[SEP]"]
    assert f.token_labels == [IGNORE, 0, 1, IGNORE, 2, IGNORE]
    assert f.word_starts == [1, 2, 4]
    batch = collate([f], tokenizer.pad_id, "tagging")
    assert batch["labels"].tolist() == [f.token_labels]


def test_long_sentences_are_chunked_so_every_word_is_tagged(tokenizer):
    words = ["cats"] * 7  # 14 pieces; 6 fit beside [CLS]/[SEP] in 8 tokens
    ex = TaggingExample(words, ["NOUN"] * 7)
    feats = encode_tagging([ex], tokenizer, 8, {"NOUN": 0, "X": 1})
    assert [len(f.word_starts) for f in feats] == [3, 3, 1]
    assert [f.word_offset for f in feats] == [0, 3, 6]
    logits = [torch.tensor([[0.0, 1.0]] * len(f.input_ids)) for f in feats]
    assert decode_tagging([ex], feats, logits, ["NOUN", "X"]) == [["X"] * 7]


def test_sequence_pairs_truncate_and_carry_labels(tokenizer):
    ex = [SequenceExample("the cat sat on the mat", "the dog ran", "1")]
    (f,) = encode_sequences(ex, tokenizer, 8, {"0": 0, "1": 1})
    assert len(f.input_ids) == 8 and f.truncated and f.label == 1
    assert f.token_type_ids[-1] == 1
    (r,) = encode_sequences([SequenceExample("a", "b", 3.5)], tokenizer, 16, None)
    assert collate([r], 0, "regression")["labels"].dtype == torch.float


def test_qa_windows_positions_and_offsets(tokenizer):
    context = "The cat sat on the mat. The dog ran to the park. The bird sang in the tree."
    answer = "the park"
    ex = QAExample("q1", "where did the dog run?", context, [(answer, context.index(answer))])
    feats = encode_qa([ex], tokenizer, max_length=24, doc_stride=3, max_query_length=64, with_answers=True)
    assert len(feats) > 2  # the context needs several windows
    for f in feats:
        assert len(f.input_ids) <= 24
        assert f.token_type_ids[0] == 0 and f.token_type_ids[-1] == 1
    holding = [f for f in feats if f.start_position > 0]
    assert holding, "some window must contain the answer"
    for f in holding:
        s, e = f.token_to_char[f.start_position][0], f.token_to_char[f.end_position][1]
        assert context[s:e] == answer
    assert all(f.start_position == 0 == f.end_position for f in feats if f not in holding)
    # logits that point at the gold tokens decode back to the exact characters of the context
    starts, ends = [], []
    for f in feats:
        s, e = torch.full((len(f.input_ids),), -5.0), torch.full((len(f.input_ids),), -5.0)
        if f.start_position:
            s[f.start_position], e[f.end_position] = 5.0, 5.0
        starts.append(s)
        ends.append(e)
    (ans,) = decode_qa([ex], feats, starts, ends)
    assert (ans.text, ans.start, ans.end) == (answer, context.index(answer), context.index(answer) + len(answer))
    assert 0 < ans.score <= 1


def test_qa_decode_respects_order_and_max_length(tokenizer):
    context = "the cat sat on the mat"
    ex = QAExample("q", "what sat?", context)
    (f,) = encode_qa([ex], tokenizer, 64, 32, 64, with_answers=False)
    first_ctx = f.token_type_ids.index(1)
    s = torch.full((len(f.input_ids),), -5.0)
    e = torch.full((len(f.input_ids),), -5.0)
    s[first_ctx + 3] = 9.0  # the best start lies after the best end: not a valid span
    e[first_ctx + 1] = 9.0
    s[first_ctx + 1] = 8.0
    (ans,) = decode_qa([ex], [f], [s], [e])
    assert ans.text == "cat"
    (none,) = decode_qa([ex], [f], [s], [e], max_answer_length=0)
    assert none.text == ""


def test_collate_pads_and_counts_real_tokens(tokenizer):
    feats = encode_sequences(
        [SequenceExample("the cat sat", None, "1"), SequenceExample("the", None, "0")], tokenizer, 16, {"0": 0, "1": 1}
    )
    batch = collate(feats, tokenizer.pad_id, "single")
    lengths = [len(f.input_ids) for f in feats]
    assert batch["input_ids"].shape == (2, max(lengths)) and batch["num_tokens"] == sum(lengths)
    assert batch["attention_mask"].sum(1).tolist() == lengths and batch["labels"].tolist() == [1, 0]
