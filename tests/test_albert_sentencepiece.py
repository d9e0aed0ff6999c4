"""bertlab.models.spiece_tokenizer and ALBERT's SentencePiece folders (#54): a tiny SentencePiece model,
trained here with ALBERT's special pieces, gives the ids transformers' AlbertTokenizer gives, read from
spiece.model or from the tokenizer.json AlbertTokenizer.save_pretrained writes; a tiny random
AlbertForMaskedLM saved by transformers opens with `load_model` and fills a mask as transformers'
does; pieces read as words without '▁'; a damaged spiece.model is a CheckpointError."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from bertlab.errors import CheckpointError, InputError
from bertlab.inference import load_model
from bertlab.models import albert
from bertlab.models.spiece_tokenizer import (
    SentencePieceTokenizer,
    holds_sentencepiece,
    read_spiece_model,
)
from bertlab.storage import hub

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

SENTENCES = (
    "Hello World!",
    "The Cat sat on the MAT.",
    "Café naïve über Ærø, crème brûlée.",
    "In 2019 they sold 1,000 cats for 3.50 euros (about 4%).",
    "``Quoted'' text, and   extra   spaces; tabs\tand\nnewlines?!",
    "The [MASK] sat on the mat.",
    "cat[MASK] [MASK][MASK] dogs.",
    "ﬁne ① Ｗｉｄｅ letters",  # NFKC's territory: the model's own normalisation map
    "",
)


def _sentences(rng: random.Random, n: int) -> list[str]:
    words = "the a cat dog sat on mat ran to park house big small red café naïve über paris france".split()
    syllables = "ka ro mi tu le sa no pe ri do ba ve".split()
    words += ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(120)]
    words += [str(rng.randint(0, 3000)) for _ in range(20)] + ["1,000", "3.50", "4%"]
    out = []
    for _ in range(n):
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        out.append(sentence[0].upper() + sentence[1:] + rng.choice(".!?,;"))
    return out


@pytest.fixture(scope="module")
def spiece_folder(tmp_path_factory) -> Path:
    """A folder holding only a ~200-piece unigram spiece.model with ALBERT's ids: <pad>=0 <unk>=1
    [CLS]=2 [SEP]=3 [MASK]=4 (Google's releases keep these five first)."""
    folder = tmp_path_factory.mktemp("spiece")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_sentences(random.Random(0), 400)),
        model_prefix=str(folder / "spiece"),
        vocab_size=200,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        pad_piece="<pad>",
        unk_piece="<unk>",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        user_defined_symbols=["[MASK]"],
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    (folder / "spiece.vocab").unlink()
    return folder


@pytest.fixture(scope="module")
def reference(spiece_folder):
    """transformers' AlbertTokenizer, converted from the spiece.model as transformers 5 does."""
    return transformers.AlbertTokenizer.from_pretrained(str(spiece_folder))


@pytest.fixture(scope="module")
def hf_albert(tmp_path_factory, spiece_folder, reference) -> tuple[Path, Path, object]:
    """A tiny random AlbertForMaskedLM saved by transformers twice: with what AlbertTokenizer.save_pretrained
    writes (tokenizer.json, tokenizer_config.json), and with only spiece.model, as Google's releases
    shipped it. Returns (the tokenizer.json folder, the spiece.model folder, the model)."""
    config = transformers.AlbertConfig(
        vocab_size=reference.backend_tokenizer.get_vocab_size(),
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.AlbertForMaskedLM(config).eval()
    saved_json = tmp_path_factory.mktemp("albert-json")
    model.save_pretrained(saved_json)
    reference.save_pretrained(saved_json)
    (saved_json / "spiece.model").unlink(missing_ok=True)  # transformers 5 writes none; the folder reads tokenizer.json
    saved_spm = tmp_path_factory.mktemp("albert-spm")
    model.save_pretrained(saved_spm)
    shutil.copy(spiece_folder / "spiece.model", saved_spm / "spiece.model")
    return saved_json, saved_spm, model


def test_ids_match_transformers_from_spiece_model_and_from_tokenizer_json(spiece_folder, reference, hf_albert):
    saved_json, _, _ = hf_albert
    assert (saved_json / "tokenizer.json").is_file() and not (saved_json / "spiece.model").exists()
    ours = SentencePieceTokenizer.from_dir(spiece_folder)
    from_json = SentencePieceTokenizer.from_dir(saved_json)
    for text in SENTENCES:
        want = reference(text)["input_ids"]
        assert ours.encode(text).ids == want, text
        assert from_json.encode(text).ids == want, text
        assert ours.tokenize(text) == reference.tokenize(text), text
    assert ours.lowercase and from_json.lowercase and not ours.keep_accents
    enc = ours.encode("the cat sat", "on the mat")
    assert enc.ids == reference("the cat sat", "on the mat")["input_ids"]
    assert enc.type_ids == [0] * 5 + [1] * 4
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]" and ours.mask_id == 4 and ours.pad_id == 0
    assert ours.decode(ours.encode("Hello World!").ids) == reference.decode(
        reference("Hello World!")["input_ids"], skip_special_tokens=True
    )


def test_mask_in_any_case_casing_and_accents_as_tokenizer_config_says(spiece_folder, reference, tmp_path):
    ours = SentencePieceTokenizer.from_dir(spiece_folder)
    assert ours.encode("The [mask] sat.").ids == reference("The [MASK] sat.")["input_ids"]  # bertlab's rule
    cased = tmp_path / "cased"
    cased.mkdir()
    shutil.copy(spiece_folder / "spiece.model", cased / "spiece.model")
    (cased / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "keep_accents": True}))
    theirs = transformers.AlbertTokenizer.from_pretrained(str(cased), do_lower_case=False, keep_accents=True)
    mine = SentencePieceTokenizer.from_dir(cased)
    assert not mine.lowercase and mine.keep_accents
    for text in SENTENCES:
        assert mine.encode(text).ids == theirs(text)["input_ids"], text
    assert mine.encode("Café").ids != ours.encode("Café").ids


def test_save_writes_what_transformers_and_bertlab_reopen(spiece_folder, reference, tmp_path):
    ours = SentencePieceTokenizer.from_dir(spiece_folder)
    ours.save(tmp_path)
    assert (tmp_path / "spiece.model").is_file() and not (tmp_path / "vocab.txt").exists()
    again = SentencePieceTokenizer.from_dir(tmp_path)
    theirs = transformers.AlbertTokenizer.from_pretrained(str(tmp_path))
    for text in SENTENCES:
        assert again.encode(text).ids == theirs(text)["input_ids"] == reference(text)["input_ids"], text
    with pytest.raises(InputError, match="save"):
        ours.save_vocab(tmp_path / "vocab.txt")


@pytest.mark.parametrize("which", ["tokenizer.json", "spiece.model"])
def test_load_model_opens_a_transformers_albert_and_fills_masks_as_transformers_does(hf_albert, reference, which):
    saved_json, saved_spm, model = hf_albert
    folder = saved_json if which == "tokenizer.json" else saved_spm
    assert holds_sentencepiece(folder)
    lm = load_model(folder, device="cpu")
    assert isinstance(lm.tokenizer, SentencePieceTokenizer)
    text = "The cat [MASK] on the mat."
    result = lm.fill_mask(text, top_k=5)
    batch = reference(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits[0]  # (T, V)
    position = batch["input_ids"][0].tolist().index(reference.mask_token_id)
    assert result.masks[0].position == position
    probs = logits[position].softmax(-1)
    top = probs.topk(5)
    assert [c.token_id for c in result.masks[0].candidates] == top.indices.tolist()
    assert_close(torch.tensor([c.score for c in result.masks[0].candidates]), top.values, atol=1e-5, rtol=1e-4)
    ids = torch.tensor([lm.tokenizer.encode(text).ids])
    with torch.no_grad():
        ours = lm.model(ids, torch.zeros_like(ids), torch.ones_like(ids)).mlm_logits[0]
    assert_close(ours, logits, atol=1e-5, rtol=1e-5)
    for c in result.masks[0].candidates:
        assert "▁" not in c.word and c.word == c.word.strip()
    assert "▁" not in result.joint_text and "[MASK]" not in result.joint_text


def test_pieces_read_as_words_without_the_word_start_mark(spiece_folder):
    tok = SentencePieceTokenizer.from_dir(spiece_folder)
    assert tok.readable_tokens(["[CLS]", "▁mat", "s", "▁", "[MASK]"]) == ["[CLS]", "␣mat", "s", "␣", "[MASK]"]
    tokens = ["[CLS]", "▁the", "▁cat", "[MASK]", "[SEP]"]
    assert tok.whole_word(tokens, 3, "▁mat") == "mat"
    assert tok.whole_word(tokens, 3, "s", attached=True) == "cats"
    assert tok.whole_word(tokens, 3, "s", attached=False) == "cat + s"
    assert tok.whole_word(["[CLS]", "▁", "c", "a", "[SEP]"], 2, "c") == "ca"
    enc = tok.encode("the cat[MASK] sat")
    p = enc.tokens.index("[MASK]")
    assert tok.attached_to_left(enc, p)
    assert tok.fill_text("the cat[MASK] sat", enc, [p], ["s"]) == "the cats sat"
    assert tok.fill_text("the cat[MASK] sat", enc, [p], ["▁ran"]) == "the cat ran sat"
    enc = tok.encode("the [MASK] sat")
    p = enc.tokens.index("[MASK]")
    assert tok.fill_text("the [MASK] sat", enc, [p], ["▁cat"]) == "the cat sat"
    assert tok.fill_text("the [MASK] sat", enc, [p], ["s"]) == "the + s sat"


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # cut off mid-download
        lambda b: b"",
        lambda b: bytes(random.Random(1).randrange(256) for _ in range(4096)),
        lambda b: b"<html>404 Not Found</html>",
    ],
    ids=["truncated", "empty", "noise", "html"],
)
def test_a_damaged_spiece_model_is_a_checkpoint_error_that_says_so(hf_albert, tmp_path, damage):
    _, saved_spm, _ = hf_albert
    folder = tmp_path / "broken"
    shutil.copytree(saved_spm, folder)
    (folder / "spiece.model").write_bytes(damage((saved_spm / "spiece.model").read_bytes()))
    with pytest.raises(CheckpointError, match=r"spiece\.model.*(SentencePiece|special tokens|unknown piece|pieces)"):
        load_model(folder, device="cpu")


def test_a_model_cut_off_between_fields_or_with_a_damaged_map_is_refused(spiece_folder, tmp_path):
    data = (spiece_folder / "spiece.model").read_bytes()
    spec = read_spiece_model(spiece_folder / "spiece.model")
    charsmap_at = data.index(spec.precompiled_charsmap)
    pieces_end = 0
    while data[pieces_end] == 0x0A:  # ModelProto.pieces: tag, varint length, message; trainer_spec follows
        size, shift, pieces_end = 0, 0, pieces_end + 1
        while True:
            size, shift, pieces_end = size | (data[pieces_end] & 0x7F) << shift, shift + 7, pieces_end + 1
            if data[pieces_end - 1] < 0x80:
                break
        pieces_end += size
    assert data[pieces_end] == 0x12
    (tmp_path / "spiece.model").write_bytes(data[:pieces_end])  # a protobuf has no length: this parses
    with pytest.raises(CheckpointError, match="without its trainer or normaliser settings"):
        read_spiece_model(tmp_path / "spiece.model")
    damaged = bytearray(data)
    damaged[charsmap_at : charsmap_at + 4] = (len(spec.precompiled_charsmap) * 4).to_bytes(4, "little")
    (tmp_path / "spiece.model").write_bytes(bytes(damaged))
    with pytest.raises(CheckpointError, match="normalisation map is damaged"):
        read_spiece_model(tmp_path / "spiece.model")


def test_a_model_file_of_another_kind_is_refused_by_name(tmp_path):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_sentences(random.Random(2), 200)),
        model_prefix=str(tmp_path / "spiece"),
        vocab_size=100,
        model_type="bpe",
        num_threads=1,
        minloglevel=2,
    )
    with pytest.raises(CheckpointError, match="BPE SentencePiece model; BERT Lab reads unigram"):
        read_spiece_model(tmp_path / "spiece.model")


def test_albert_folders_choose_their_tokenizer_by_what_they_hold(spiece_folder, tmp_path, tokenizer):
    config = albert.AlbertConfig(vocab_size=200, hidden_size=32, num_heads=2, num_layers=1, intermediate_size=64)
    assert isinstance(albert.load_tokenizer(spiece_folder, config), SentencePieceTokenizer)
    tokenizer.save(tmp_path)  # an ALBERT trained here: WordPiece vocab.txt and tokenizer.json
    shutil.copy(spiece_folder / "spiece.model", tmp_path / "spiece.model")
    assert not holds_sentencepiece(tmp_path)
    assert not isinstance(albert.load_tokenizer(tmp_path, config), SentencePieceTokenizer)
    with pytest.raises(CheckpointError, match="no spiece.model or tokenizer.json"):
        SentencePieceTokenizer.from_dir(tmp_path / "nothing")


def test_the_hub_list_offers_albert_base_v2_with_its_sentencepiece_model():
    model = next(m for m in hub.SUCCESSORS if m.repo_id == "albert-base-v2")
    assert model.opens and "not read" not in model.note
    assert "spiece.model" in hub.OTHER_FILES
