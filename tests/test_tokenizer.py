"""bertlab.tokenizer: vocab loading, cased/uncased behaviour, specials, pairs, truncation,
offsets, training + save/load, and id-for-id agreement with transformers' BertTokenizer."""

from pathlib import Path

import pytest
from conftest import SAMPLE_TEXT, write_vocab

from bertlab.errors import CheckpointError, InputError
from bertlab.tokenizer import SPECIAL_TOKENS, BertTokenizer, guess_lowercase, read_vocab

# Sentences with punctuation, accents, capitals, an unknown character and a typed [MASK].
HARD_SENTENCES = [
    "The cat sat on the mat.",
    "Paris is the capital of France!",
    "The quick (brown) fox: jumps, over the lazy dog?",
    "Café, naïve and résumé walked.",
    "She played with a ☃ in the park [MASK].",
    "THE BIG RED DOG RAN",
    "it's 'quoted' - \"really\"",
    "tabs\tand\nnewlines   and spaces",
]


@pytest.fixture(scope="module")
def cased_vocab_file(tmp_path_factory) -> Path:
    """The conftest vocabulary plus capitalised words and accented letters, so it reads as cased."""
    path = write_vocab(tmp_path_factory.mktemp("cased") / "vocab.txt")
    extra = ["The", "Paris", "France", "Cat", "é", "##é", "Café", "##ï"]
    path.write_text(path.read_text(encoding="utf-8") + "\n".join(extra) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cased(cased_vocab_file) -> BertTokenizer:
    return BertTokenizer.from_vocab(cased_vocab_file)


# --- loading --------------------------------------------------------------------------------
def test_loads_vocab_with_specials_at_bert_ids(tokenizer, vocab_file):
    lines = vocab_file.read_text(encoding="utf-8").splitlines()
    assert len(tokenizer) == len(lines)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert tokenizer.convert_tokens_to_ids(["cat", "nonsense-token"]) == [lines.index("cat"), tokenizer.unk_id]
    assert tokenizer.convert_ids_to_tokens([lines.index("dog")]) == ["dog"]


def test_vocab_errors_name_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        read_vocab(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CheckpointError, match="empty"):
        read_vocab(empty)
    no_specials = tmp_path / "plain.txt"
    no_specials.write_text("a\nb\nc\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"\[PAD\]"):
        BertTokenizer.from_vocab(no_specials)
    with pytest.raises(CheckpointError, match="vocab.txt"):
        BertTokenizer.from_dir(tmp_path)


# --- cased / uncased --------------------------------------------------------------------------
def test_guesses_uncased_and_cased(tokenizer, cased):
    assert tokenizer.lowercase is True
    assert cased.lowercase is False
    assert guess_lowercase({t: i for i, t in enumerate(list(SPECIAL_TOKENS) + ["[unused0]", "a", "##b"])})
    assert not guess_lowercase({t: i for i, t in enumerate(list(SPECIAL_TOKENS) + ["A"])})
    # Google's uncased vocab still holds a few non-ASCII capitals (Greek, Cyrillic)
    assert guess_lowercase({t: i for i, t in enumerate(list(SPECIAL_TOKENS) + ["a", "Σ", "Д"])})


def test_uncased_lowercases_and_strips_accents(tokenizer):
    assert tokenizer.tokenize("The CAT") == ["the", "cat"]
    # BERT uncased: NFD + drop combining marks, so "é" becomes "e"
    assert tokenizer.tokenize("Café") == tokenizer.tokenize("cafe")
    assert tokenizer.tokenize("naïve") == tokenizer.tokenize("naive")


def test_cased_keeps_case_and_accents(cased):
    assert cased.tokenize("The the") == ["The", "the"]
    assert cased.tokenize("Café") == ["Café"]
    assert cased.tokenize("cafe") != cased.tokenize("Café")


def test_explicit_lowercase_overrides_the_guess(cased_vocab_file):
    forced = BertTokenizer.from_vocab(cased_vocab_file, lowercase=True)
    assert forced.lowercase is True
    assert forced.tokenize("The") == ["the"]


# --- special tokens and pairs -------------------------------------------------------------
@pytest.mark.parametrize("text", ["the [MASK] sat.", "the[MASK]sat", "The cat [MASK][MASK]."])
def test_typed_mask_stays_one_token(tokenizer, text):
    enc = tokenizer.encode(text)
    assert enc.ids.count(tokenizer.mask_id) == text.count("[MASK]")
    assert "[" not in enc.tokens and "mask" not in enc.tokens


@pytest.mark.parametrize("text", ["the [mask] sat.", "the [Mask] sat.", "the cat [mask][MASK]."])
def test_mask_in_any_case_is_the_mask_token(tokenizer, text):
    """Encoding a typed text takes [mask] as [MASK] (the Fill-mask page's layer view read '[' for it)."""
    enc = tokenizer.encode(text)
    assert enc.ids.count(tokenizer.mask_id) == text.lower().count("[mask]")
    start, end = enc.offsets[enc.ids.index(tokenizer.mask_id)]
    assert text[start:end].lower() == "[mask]"  # offsets still point into the text as typed
    # corpora and tagged words are read as BERT's own tokenizer reads them: only "[MASK]" is the mask
    assert tokenizer.tokenize(text).count("[MASK]") == text.count("[MASK]")
    assert tokenizer.tokenize_batch([text])[0].count(tokenizer.mask_id) == text.count("[MASK]")


def test_single_sentence_is_cls_a_sep(tokenizer):
    enc = tokenizer.encode("the cat sat")
    assert enc.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert enc.type_ids == [0] * 5
    assert enc.special_mask == [1, 0, 0, 0, 1]
    assert not enc.truncated and enc.num_dropped == 0


def test_pair_is_cls_a_sep_b_sep_with_segments(tokenizer):
    enc = tokenizer.encode("the cat sat", "it ran")
    assert enc.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]", "it", "ran", "[SEP]"]
    assert enc.type_ids == [0, 0, 0, 0, 0, 1, 1, 1]
    assert enc.sequence_ids == [None, 0, 0, 0, None, 1, 1, None]


def test_batch_equals_one_by_one(tokenizer):
    batch = tokenizer.encode_batch(SAMPLE_TEXT)
    assert [e.ids for e in batch] == [tokenizer.encode(t).ids for t in SAMPLE_TEXT]
    with pytest.raises(InputError, match="second sentences"):
        tokenizer.encode_batch(["a", "b"], ["c"])
    with pytest.raises(InputError, match="string"):
        tokenizer.encode_batch([None])  # type: ignore[list-item]


# --- truncation ----------------------------------------------------------------------------
def test_truncation_keeps_specials_and_reports_dropped(tokenizer):
    text = " ".join(["the cat sat on the mat"] * 5)  # 30 words, 32 tokens with specials
    full = tokenizer.encode(text, max_length=100)
    enc = tokenizer.encode(text, max_length=10)
    assert len(enc) == 10
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    assert enc.truncated and enc.num_dropped == len(full) - 10
    assert enc.ids[1:-1] == full.ids[1:9]  # cut from the end
    assert len(enc.offsets) == len(enc.word_ids) == len(enc.type_ids) == 10


def test_pair_truncation_is_longest_first(tokenizer):
    a = " ".join(["cat"] * 20)
    b = "the dog ran"
    enc = tokenizer.encode(a, b, max_length=12)
    assert len(enc) == 12
    assert enc.tokens.count("[SEP]") == 2 and enc.tokens[0] == "[CLS]"
    assert enc.tokens[-4:] == ["the", "dog", "ran", "[SEP]"]  # the short side is untouched
    assert enc.truncated and enc.num_dropped == 20 + 3 + 3 - 12


def test_default_max_length_is_model_max_length(vocab_file):
    tok = BertTokenizer.from_vocab(vocab_file, model_max_length=8)
    enc = tok.encode("the cat sat on the mat and the dog ran")
    assert len(enc) == 8 and enc.truncated


def test_truncate_false_raises(tokenizer):
    with pytest.raises(InputError, match="at most 6"):
        tokenizer.encode("the cat sat on the mat", max_length=6, truncate=False)
    assert len(tokenizer.encode("the cat", max_length=6, truncate=False)) == 4


def test_max_length_without_room_raises(tokenizer):
    with pytest.raises(InputError, match="no room"):
        tokenizer.encode("the cat", "the dog", max_length=2)


# --- offsets -------------------------------------------------------------------------------
def test_offsets_map_pieces_back_to_text(tokenizer):
    text = "The Cats  played, Café!"
    enc = tokenizer.encode(text)
    pieces = [
        (t, text[s:e])
        for t, (s, e), special in zip(enc.tokens, enc.offsets, enc.special_mask, strict=True)
        if not special
    ]
    assert pieces[0] == ("the", "The")
    assert ("cat", "Cat") in pieces and ("##s", "s") in pieces
    assert ("played", "played") in pieces and (",", ",") in pieces
    assert enc.offsets[0] == (0, 0) and enc.offsets[-1] == (0, 0)
    # every piece covers characters of its word, in order
    starts = [s for (s, _), special in zip(enc.offsets, enc.special_mask, strict=True) if not special]
    assert starts == sorted(starts)
    cat_word = enc.word_ids[enc.tokens.index("cat")]
    assert enc.word_ids[enc.tokens.index("##s")] == cat_word


def test_offsets_in_pair_are_relative_to_each_text(tokenizer):
    enc = tokenizer.encode("the cat", "a dog")
    dog = enc.tokens.index("dog")
    assert "a dog"[slice(*enc.offsets[dog])] == "dog"


# --- training and saving ---------------------------------------------------------------------
def test_train_save_load_roundtrip(tmp_path):
    texts = SAMPLE_TEXT * 20
    tok = BertTokenizer.train(texts=texts, vocab_size=200, min_frequency=1)
    assert tok.convert_ids_to_tokens(range(5)) == list(SPECIAL_TOKENS)
    assert len(tok) <= 200
    assert "cat" in tok.vocab and "paris" in tok.vocab  # lowercased by default
    tok.save(tmp_path)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        assert (tmp_path / name).is_file()
    again = BertTokenizer.from_dir(tmp_path)
    assert again.lowercase is True and again.vocab == tok.vocab
    for text in texts[:5] + ["unseen words like zebra [MASK]."]:
        assert again.encode(text).ids == tok.encode(text).ids
    assert again.decode(again.encode("the cat sat").ids) == "the cat sat"


def test_train_from_files_and_cased(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SAMPLE_TEXT * 10), encoding="utf-8")
    tok = BertTokenizer.train([corpus], vocab_size=150, lowercase=False, min_frequency=1)
    assert tok.lowercase is False and "The" in tok.vocab
    tok.save(tmp_path / "tok")
    assert BertTokenizer.from_dir(tmp_path / "tok").lowercase is False
    with pytest.raises(InputError, match="files"):
        BertTokenizer.train()


def test_from_dir_reads_do_lower_case_and_max_length(tmp_path, vocab_file):
    tok = BertTokenizer.from_vocab(vocab_file, lowercase=False, model_max_length=32)
    tok.save(tmp_path)
    again = BertTokenizer.from_dir(tmp_path)
    assert again.lowercase is False and again.model_max_length == 32
    assert BertTokenizer.from_dir(tmp_path, model_max_length=16).model_max_length == 16
    (tmp_path / "tokenizer_config.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(CheckpointError, match="tokenizer_config.json"):
        BertTokenizer.from_dir(tmp_path)


# --- agreement with transformers ---------------------------------------------------------------
transformers = pytest.importorskip("transformers")


def _reference_tokenizers(vocab_file: Path, lowercase: bool):
    """transformers 5: `BertTokenizerLegacy` is the pure-Python (slow) one that reads vocab_file;
    `BertTokenizer(vocab=path)` is the Rust-backed one. (`BertTokenizer(vocab_file=...)` and
    `BertTokenizerFast(vocab_file=...)` silently ignore the file and give all [UNK].)"""
    refs = [transformers.BertTokenizer(vocab=str(vocab_file), do_lower_case=lowercase)]
    legacy = getattr(transformers, "BertTokenizerLegacy", None)
    if legacy is not None:
        refs.append(legacy(vocab_file=str(vocab_file), do_lower_case=lowercase))
    return refs


@pytest.mark.parametrize("which", ["uncased", "cased"])
def test_ids_match_transformers(which, vocab_file, cased_vocab_file, tokenizer, cased):
    ours, path = (tokenizer, vocab_file) if which == "uncased" else (cased, cased_vocab_file)
    for ref in _reference_tokenizers(path, ours.lowercase):
        for text in HARD_SENTENCES:
            assert ours.encode(text).ids == ref(text)["input_ids"], (type(ref).__name__, text)
        pair = ref(HARD_SENTENCES[0], HARD_SENTENCES[3], return_token_type_ids=True)
        enc = ours.encode(HARD_SENTENCES[0], HARD_SENTENCES[3])
        assert enc.ids == pair["input_ids"]
        assert enc.type_ids == pair["token_type_ids"]


def test_tokenizer_json_without_vocab_txt(tmp_path, tokenizer):
    import json

    from bertlab.errors import CheckpointError
    from bertlab.tokenizer import BertTokenizer, read_tokenizer_json

    tokenizer.save(tmp_path)
    (tmp_path / "vocab.txt").unlink()
    (tmp_path / "tokenizer_config.json").unlink()
    vocab, lowercase = read_tokenizer_json(tmp_path / "tokenizer.json")
    assert vocab == tokenizer.vocab and lowercase is tokenizer.lowercase
    again = BertTokenizer.from_dir(tmp_path)
    assert again.encode("The cat sat.").ids == tokenizer.encode("The cat sat.").ids
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {}}}))
    with pytest.raises(CheckpointError, match="not a WordPiece"):
        BertTokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no vocab.txt or tokenizer.json"):
        BertTokenizer.from_dir(tmp_path)


def test_non_utf8_vocab_names_the_file(tmp_path):
    # (#14) used to raise UnicodeDecodeError with a traceback
    bad = tmp_path / "vocab.txt"
    bad.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n")
    with pytest.raises(CheckpointError, match=r"vocab.txt: is not UTF-8"):
        read_vocab(bad)
    with pytest.raises(CheckpointError, match="UTF-8"):
        BertTokenizer.from_dir(tmp_path)


def test_save_vocab_is_atomic(tmp_path, tokenizer, monkeypatch):
    # (#14) a kill while writing left half a vocab.txt; now a temp file is renamed into place
    import os

    path = tmp_path / "vocab.txt"
    path.write_text("old\n", encoding="utf-8")
    replaced = []
    real_replace = os.replace

    def watch(src, dst):
        assert Path(dst).read_text(encoding="utf-8") == "old\n"  # untouched until the rename
        replaced.append((Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watch)
    tokenizer.save_vocab(path)
    assert replaced and replaced[0][1] == "vocab.txt"
    assert read_vocab(path) == tokenizer.vocab
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vocab.txt"]
