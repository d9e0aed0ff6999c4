"""bertlab.models.roberta_tokenizer: RoBERTa's byte-level BPE, trained here, read and written as transformers'
RobertaTokenizer reads and writes it, with BertTokenizer's interface.

Training in `tokenizers` may break ties differently from run to run: nothing here depends on which
merges were learnt, only on the ids, the specials and the agreement with transformers on one trained
vocabulary."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import SAMPLE_TEXT

from bertlab.errors import CheckpointError, InputError
from bertlab.models.roberta_tokenizer import MERGES_TXT, VOCAB_JSON, RobertaTokenizer
from bertlab.tokenizer import BertTokenizer

SENTENCES = [
    "The cat sat on the mat.",
    "Café, naïve and résumé walked.",
    "She played with a ☃ in the park 😀!",
    "tabs\tand\nnewlines   and  spaces",
    "THE BIG RED DOG RAN",
]


@pytest.fixture(scope="module")
def bpe() -> RobertaTokenizer:
    return RobertaTokenizer.train(texts=SAMPLE_TEXT * 20, vocab_size=320)


@pytest.fixture(scope="module")
def bpe_folder(bpe, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    bpe.save(folder)
    return folder


def test_trains_roberta_specials_at_roberta_ids_and_the_vocabulary_size_asked(bpe):
    assert isinstance(bpe, BertTokenizer)  # the interface the package and the pages use
    assert (bpe.cls_id, bpe.pad_id, bpe.sep_id, bpe.unk_id) == (0, 1, 2, 3)
    assert bpe.mask_id == len(bpe) - 1 and bpe.id_to_token[bpe.mask_id] == "<mask>"  # last, as RoBERTa's
    big = RobertaTokenizer.train(texts=SAMPLE_TEXT * 20 + SENTENCES * 20, vocab_size=8192)
    assert len(big) <= 8192 and big.mask_id == len(big) - 1  # a tiny corpus has fewer merges than asked
    assert not bpe.lowercase


def test_pairs_are_roberta_s_with_one_segment_and_mask_typed_as_bert_s(bpe):
    e = bpe.encode("The cat sat on the [mask].", "It was big.")
    assert e.tokens[0] == "<s>" and e.tokens.count("</s>") == 3
    first_end = e.tokens.index("</s>")
    assert e.tokens[first_end + 1] == "</s>" and e.tokens[-1] == "</s>"  # <s> A </s></s> B </s>
    assert set(e.type_ids) == {0}  # RoBERTa has one segment row
    assert e.ids.count(bpe.mask_id) == 1 and "<mask>" in e.tokens
    at = e.tokens.index("<mask>")
    assert e.offsets[at] == (19, 25)  # "[mask]" in the text: same length, offsets hold
    assert e.word_ids[1] == 0 and e.word_ids[0] is None and e.sequence_ids[first_end + 2] == 1
    assert bpe.decode(bpe.encode("Café ☃ 😀").ids) == "Café ☃ 😀"  # byte-level: nothing is unknown
    assert bpe.unk_id not in bpe.encode(SENTENCES[2]).ids


def test_truncation_keeps_the_specials(bpe):
    e = bpe.encode(" ".join(["the cat sat on the mat"] * 20), "a dog ran", max_length=16)
    assert len(e.ids) == 16 and e.truncated and e.num_dropped > 0
    assert e.ids[0] == bpe.cls_id and e.ids[-1] == bpe.sep_id
    with pytest.raises(InputError, match="at most 16"):
        bpe.encode(" ".join(["the cat"] * 20), max_length=16, truncate=False)


def test_saves_and_loads_back_from_vocab_json_or_tokenizer_json(bpe, bpe_folder, tmp_path):
    assert {VOCAB_JSON, MERGES_TXT, "tokenizer.json", "tokenizer_config.json"} <= {p.name for p in bpe_folder.iterdir()}
    assert json.loads((bpe_folder / VOCAB_JSON).read_text())["<mask>"] == bpe.mask_id
    assert RobertaTokenizer.from_dir(bpe_folder, model_max_length=30).model_max_length == 30
    again = RobertaTokenizer.from_dir(bpe_folder)
    only_json = tmp_path / "json"
    only_json.mkdir()
    shutil.copy(bpe_folder / "tokenizer.json", only_json)
    from_json = RobertaTokenizer.from_dir(only_json)
    for s in SENTENCES:
        assert again.encode(s).ids == bpe.encode(s).ids == from_json.encode(s).ids
    with pytest.raises(CheckpointError, match="vocab.json"):
        RobertaTokenizer.from_dir(tmp_path / "json" / "..")
    with pytest.raises(InputError, match="cased"):
        RobertaTokenizer.from_vocab(bpe_folder / VOCAB_JSON, lowercase=True)


def test_transformers_reads_the_folder_id_for_id(bpe, bpe_folder):
    transformers = pytest.importorskip("transformers")
    for theirs in (
        transformers.RobertaTokenizer.from_pretrained(bpe_folder),
        transformers.AutoTokenizer.from_pretrained(bpe_folder),
    ):
        assert theirs.mask_token_id == bpe.mask_id and theirs.pad_token_id == bpe.pad_id
        for s in SENTENCES:
            assert theirs(s)["input_ids"] == bpe.encode(s).ids
        pair = theirs("The cat sat on the <mask>.", "It was big.")["input_ids"]
        assert pair == bpe.encode("The cat sat on the [MASK].", "It was big.").ids


# --------------------------------------------------------------------------------------
# Answers as words: 'Ġ' starts a word, a piece without it continues the word on its left
# --------------------------------------------------------------------------------------
def test_whole_word_reads_byte_level_pieces(bpe):
    assert bpe.piece_text("Ġmat") == " mat" and bpe.piece_text("Ã©") == "é"
    tokens = ["<s>", "The", "Ġcat", "<mask>", ".", "</s>"]
    assert bpe.whole_word(tokens, 3, "Ġmat") == "mat"  # a word of its own, without its space; '.' stays apart
    assert bpe.whole_word(["<s>", "The", "Ġcat", "<mask>", "Ġsat", "</s>"], 3, ".") == "."  # nor onto a word
    assert bpe.whole_word(["<s>", "The", "<mask>", "s", "Ġsat", "</s>"], 2, "Ġcat") == "cats"  # right pieces join
    assert bpe.whole_word(["<s>", "Ġthe", "<mask>", "</s>"], 2, "mat", attached=False) == "the + mat"
    assert bpe.whole_word(["<s>", "Ġthe", "<mask>", "</s>"], 2, "se", attached=True) == "these"
    assert bpe.whole_word(["<s>", "<mask>", "</s>"], 1, "The") == "The"  # the first word has no 'Ġ'
    assert bpe.whole_word(["<s>", "Ġ", "mat", ".", "</s>"], 2, "mat") == "mat"  # a lone 'Ġ' starts the word


def test_fill_text_writes_byte_level_answers_into_the_typed_text(bpe):
    def filled(text: str, *answers: str) -> str:
        enc = bpe.encode(text)
        return bpe.fill_text(text, enc, [i for i, t in enumerate(enc.tokens) if t == "<mask>"], list(answers))

    assert filled("The cat sat on the [MASK].", "Ġmat") == "The cat sat on the mat."
    assert filled("The cat[MASK] sat.", "s") == "The cats sat."  # typed inside the word: glued
    assert filled("The cat[MASK] sat.", "Ġran") == "The cat ran sat."  # the model starts a word
    assert filled("The cat sat on the [MASK].", "mat") == "The cat sat on the + mat."  # a piece after a word
    assert filled("[MASK] cat sat.", "The") == "The cat sat."
    assert filled("[MASK] [MASK] sat.", "Ġcat", "s") == "cats sat."  # one masked word, two pieces
    assert filled("the [MASK]", ".") == "the ."


def test_fill_mask_answers_read_as_words_for_roberta(tmp_path, bpe):
    transformers = pytest.importorskip("transformers")
    import torch

    from bertlab.inference import load_model

    config = transformers.RobertaConfig(
        vocab_size=len(bpe), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=40, type_vocab_size=1, pad_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.RobertaForMaskedLM(config).save_pretrained(tmp_path)
    bpe.save(tmp_path)
    answer = load_model(tmp_path, device="cpu").fill_mask("The cat sat on the [MASK] and [MASK].", top_k=20)
    for m in answer.masks:
        for c in m.candidates:
            assert "Ġ" not in c.word and c.word == bpe.whole_word(answer.tokens, m.position, c.token, False)
    assert "Ġ" not in answer.joint_text and answer.joint_text.startswith("The cat sat on the ")
