"""bertlab/data/objectives.py: each pretraining objective is one spec that the data, the model config,
the trainer's task and the card read; a new objective is one spec plus its masker."""

from __future__ import annotations

import json
import random

import pytest
from test_pretrain import _config

from bertlab.data import maskers
from bertlab.data.objectives import OBJECTIVES, Objective, get_objective
from bertlab.data.pretraining_data import DataConfig, collate, create_instances, tokenize_documents
from bertlab.errors import InputError
from bertlab.storage import model_card
from bertlab.training.pretrain import run_pretraining


def test_the_papers_objectives():
    assert tuple(OBJECTIVES)[:3] == ("mlm_nsp", "mlm", "ltr")  # the successors' follow
    nsp, mlm, ltr = (OBJECTIVES[k] for k in ("mlm_nsp", "mlm", "ltr"))
    assert nsp.paired and nsp.nsp and nsp.masker == "bert" and nsp.static_shapes
    assert mlm.paired and not mlm.nsp and mlm.masker == "bert"  # No NSP keeps the packing, drops the loss
    assert not ltr.paired and ltr.masker is None and ltr.next_token_labels and not ltr.static_shapes
    assert ltr.attention_direction == "left_to_right"
    assert model_card.objective_text("mlm") == mlm.description
    with pytest.raises(InputError, match=r"objective must be one of \('mlm_nsp', 'mlm', 'ltr', .*\), not 'soup'"):
        DataConfig(objective="soup")
    with pytest.raises(InputError, match="not 'soup'"):
        get_objective("soup")


def test_span_sbo_is_span_masking_plus_the_boundary_head():
    span, sbo = OBJECTIVES["span"], OBJECTIVES["span_sbo"]
    assert (sbo.paired, sbo.nsp, sbo.masker, sbo.loss) == (False, False, "span_sbo", "masked_lm_sbo")
    assert sbo.heads == ("sbo",) and span.heads == () and OBJECTIVES["mlm_nsp"].heads == ("nsp",)
    assert sbo.static_shapes and sbo.span_boundary and not span.span_boundary


class FirstWordMasker:
    """A toy masker: the first token after [CLS] is replaced by [MASK] and predicted."""

    def __init__(self, tokenizer, config: DataConfig):
        self.mask_id = tokenizer.mask_id

    def __call__(self, ids, rng: random.Random):
        out = list(ids)
        out[1] = self.mask_id
        return out, [1], [ids[1]], [maskers.KIND_MASK]


TOY = Objective(
    "first_word",
    paired=False,
    nsp=False,
    masker="first_word",
    next_token_labels=False,
    attention_direction="bidirectional",
    description="guess the first word of each stretch of text",
    short="first-word LM",
    loss="masked_lm",
)


@pytest.fixture
def toy_objective(monkeypatch):
    """One spec and one masker, registered for this test only."""
    monkeypatch.setitem(OBJECTIVES, TOY.name, TOY)
    monkeypatch.setitem(maskers.MASKERS, "first_word", FirstWordMasker)
    return TOY


def test_a_toy_objective_makes_its_own_instances_and_labels(toy_objective, tokenizer):
    config = DataConfig(objective="first_word", max_seq_length=16, dupe_factor=1)
    docs = tokenize_documents([["the cat sat on the mat .", "the dog ran ."]] * 3, tokenizer)
    instances = create_instances(docs, tokenizer, config, seed=0)
    assert instances and all(x.masked_positions == [1] for x in instances)
    assert all(tokenizer.cls_id not in x.input_ids[1:] for x in instances)  # unpaired: [CLS] text [SEP]
    batch = collate(instances, config)
    assert "nsp_labels" not in batch and not batch["token_type_ids"].any()  # no NSP, one segment
    assert (batch["mlm_labels"] != -100).sum(dim=1).tolist() == [1] * len(instances)


def test_a_toy_objective_pretrains(toy_objective, tmp_path, vocab_file):
    import dataclasses

    cfg = _config(tmp_path, vocab_file, max_steps=2)
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, objective="first_word"))
    result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert result.state == "finished"
    config = json.loads((tmp_path / "run" / "model" / "config.json").read_text())
    assert config["bertlab"]["use_nsp_head"] is False and config["bertlab"]["objective"] == "first_word"
    card = json.loads((tmp_path / "run" / "model" / "model_card.json").read_text())
    assert card["objective"] == "first_word"
    assert "guess the first word" in model_card.objective_text(card["objective"])


def test_sentences_are_tokenized_as_running_text(tokenizer):
    """A paragraph's later sentences read with the space before them: RoBERTa's byte-level BPE then marks their
    first word as inside running text ('Ġthe'), as its own text would read it; WordPiece's ids do not change,
    and only a tokenizer that marks spaces gets a new data-cache key."""
    from conftest import SAMPLE_TEXT

    from bertlab.data.data_config import DataConfig
    from bertlab.data.pretraining_data import data_cache_key, running_text, tokenize_documents
    from bertlab.models.roberta_tokenizer import RobertaTokenizer

    doc = ["the cat sat down.", "the dog ran off."]
    assert running_text(doc) == ["the cat sat down.", " the dog ran off."]
    bpe = RobertaTokenizer.train(texts=SAMPLE_TEXT * 20, vocab_size=320)
    (sents,) = tokenize_documents([doc], bpe)
    first, second = bpe.convert_ids_to_tokens(sents[0]), bpe.convert_ids_to_tokens(sents[1])
    assert not first[0].startswith("Ġ") and second[0] == "Ġthe"  # the text's start, then inside the paragraph
    assert sents[0] + sents[1] == bpe.tokenize_batch(["the cat sat down. the dog ran off."])[0]
    (wordpiece,) = tokenize_documents([doc], tokenizer)
    assert wordpiece == tokenizer.tokenize_batch(doc)
    config = DataConfig()
    assert data_cache_key("c", tokenizer, config, 0, "train") == data_cache_key("c", tokenizer, config, 0, "train")
    assert len({data_cache_key("c", t, config, 0, "train") for t in (tokenizer, bpe)}) == 2
