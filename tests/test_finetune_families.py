"""Fine-tuning every family (bertlab.finetune through the family seam of bertlab.models.registry).

A BERT, ALBERT, ELECTRA (a discriminator, or a pair folder whose discriminator fine-tunes), RoBERTa (its
byte-level BPE) and DistilBERT folder, ours or saved by transformers, fine-tunes with `run_finetuning`; a
few steps reduce the loss; the fine-tuned folder is saved in the family's transformers layout and opens in
transformers with our logits, and in `load_finetuned`; transformers' own fine-tuned folders open here; the
RoBERTa pair and QA inputs are `<s> A </s></s> B </s>`. Tiny random models, no network, no ../shared.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from conftest import SAMPLE_TEXT, tiny_config
from torch.testing import assert_close

from bertlab.finetune.data import QAExample, SequenceExample, TaggingExample
from bertlab.finetune.encoding import IGNORE, decode_tagging, encode_qa, encode_sequences, encode_tagging
from bertlab.finetune.models import HeadConfig, build_task_model
from bertlab.finetune.predict import TaskSetup, load_finetuned, save_finetuned
from bertlab.finetune.recipe import FinetuneConfig, pretrained_task_model, run_finetuning
from bertlab.models import roberta
from bertlab.models.roberta_tokenizer import RobertaTokenizer
from bertlab.storage.checkpoint import read_weights, save_checkpoint
from bertlab.storage.runfolder import read_metrics
from bertlab.training.trainer import TrainConfig

transformers = pytest.importorskip("transformers")

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
ROWS = ["the cat sat on the mat\t1", "the dog ran to the park\t0", "a big red bird sang\t1", "the lazy fox\t0"] * 2
PAIRS = [
    "the cat sat\tthe cat sat on the mat\tentailment",
    "the dog ran\tthe bird sang in the tree\tnot_entailment",
    "paris is big\tparis is the capital of france\tentailment",
    "the sun\tthe dog ran to the park\tnot_entailment",
] * 2
SENTENCES = [("the cat sat on the mat", None), ("the dog ran to the park", "a big red bird sang in the tree")]


@pytest.fixture(scope="module")
def bpe() -> RobertaTokenizer:
    return RobertaTokenizer.train(texts=SAMPLE_TEXT * 20, vocab_size=320)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """SST-2 and RTE in their GLUE formats, eight examples each (the same file as train and dev)."""
    root = tmp_path_factory.mktemp("glue")
    (root / "SST-2").mkdir()
    (root / "RTE").mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (root / "SST-2" / name).write_text("sentence\tlabel\n" + "\n".join(ROWS) + "\n")
        lines = [f"{i}\t{row}" for i, row in enumerate(PAIRS)]
        (root / "RTE" / name).write_text("index\tsentence1\tsentence2\tlabel\n" + "\n".join(lines) + "\n")
    return root


def _hf_folder(tmp_path_factory, name: str, model, tokenizer):
    folder = tmp_path_factory.mktemp(name) / name
    model.save_pretrained(folder)
    tokenizer.save(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tokenizer, bpe, tiny_checkpoint, tiny_electra_pair, tiny_albert_checkpoint):
    """family/who saved it -> a pretrained folder: ours (conftest's and a RoBERTa) and transformers' tiny
    random models (BertForPreTraining, AlbertForPreTraining, ElectraForPreTraining, RobertaForMaskedLM,
    DistilBertForMaskedLM)."""
    torch.manual_seed(0)
    v, eager = len(tokenizer), {"attn_implementation": "eager"}
    ours_roberta = roberta.RobertaForMaskedLM(
        roberta.config_from_hf(
            transformers.RobertaConfig(vocab_size=len(bpe), max_position_embeddings=66, type_vocab_size=1, **TINY)
            .to_dict()
            .copy(),
            "test",
        )
    )
    hf = {
        "bert": transformers.BertForPreTraining(transformers.BertConfig(vocab_size=v, **TINY, **eager)),
        "albert": transformers.AlbertForPreTraining(
            transformers.AlbertConfig(vocab_size=v, embedding_size=16, hidden_act="gelu_new", **TINY, **eager)
        ),
        "electra": transformers.ElectraForPreTraining(
            transformers.ElectraConfig(vocab_size=v, embedding_size=16, **TINY, **eager)
        ),
        "roberta": transformers.RobertaForMaskedLM(
            transformers.RobertaConfig(
                vocab_size=len(bpe), max_position_embeddings=66, type_vocab_size=1, pad_token_id=1, **TINY, **eager
            )
        ),
        "distilbert": transformers.DistilBertForMaskedLM(
            transformers.DistilBertConfig(vocab_size=v, dim=32, n_layers=2, n_heads=4, hidden_dim=64, **eager)
        ),
    }
    out = {
        "bert/ours": tiny_checkpoint,
        "albert/ours": tiny_albert_checkpoint,
        "electra/ours-pair": tiny_electra_pair,
        "roberta/ours": save_checkpoint(tmp_path_factory.mktemp("roberta") / "ours", ours_roberta, bpe),
    }
    for name, model in hf.items():
        out[f"{name}/transformers"] = _hf_folder(tmp_path_factory, name, model, bpe if name == "roberta" else tokenizer)
    return out


# the transformers class each family's fine-tuned classifier saves as (a DistilBERT's is BERT's)
SAVED_AS = {
    "bert": "BertForSequenceClassification",
    "albert": "AlbertForSequenceClassification",
    "electra": "ElectraForSequenceClassification",
    "roberta": "RobertaForSequenceClassification",
    "distilbert": "BertForSequenceClassification",
}
SLOW = pytest.mark.slow  # each run is a few seconds; one folder of each family runs by default
KINDS = (
    "bert/ours",
    pytest.param("bert/transformers", marks=SLOW),
    pytest.param("albert/ours", marks=SLOW),
    "albert/transformers",
    "electra/ours-pair",
    pytest.param("electra/transformers", marks=SLOW),
    pytest.param("roberta/ours", marks=SLOW),
    "roberta/transformers",
    "distilbert/transformers",
)


def _batch(tokenizer, rows=SENTENCES) -> dict[str, torch.Tensor]:
    encs = [tokenizer.encode(a, b) for a, b in rows]
    width = max(len(e.ids) for e in encs)
    ids = torch.full((len(encs), width), tokenizer.pad_id)
    types = torch.zeros_like(ids)
    for i, e in enumerate(encs):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        types[i, : len(e.ids)] = torch.tensor(e.type_ids)
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": (ids != tokenizer.pad_id).long()}


def _transformers_inputs(batch: dict, model) -> dict:
    """RoBERTa's one segment row: transformers' RoBERTa reads the ids as given (all 0 from its tokenizer)."""
    if model.config.model_type in ("roberta", "distilbert"):
        return {k: v for k, v in batch.items() if k != "token_type_ids"}
    return batch


@pytest.mark.parametrize("kind", KINDS)
def test_every_family_fine_tunes_saves_in_its_layout_and_opens_in_transformers(tmp_path, data, folders, kind):
    family = kind.split("/")[0]
    steps = 20  # a tiny random encoder (init std 0.02) starts slowly: at 1e-3 twenty steps barely move it
    cfg = FinetuneConfig(
        task="sst2",
        data=str(data / "SST-2"),
        model=str(folders[kind]),
        max_seq_length=32,
        train=TrainConfig(
            learning_rate=5e-3,
            warmup=0.0,
            schedule="constant",
            precision="fp32",  # bf16 autocast (a CPU with bf16) is slower on models this small
            batch_size=8,
            max_steps=steps,
            eval_every=0,
            save_every=0,
            log_every=1,
        ),
    )
    assert run_finetuning(cfg, tmp_path / "run", progress_bar=False).state == "finished"
    losses = [m["loss"] for m in read_metrics(tmp_path / "run") if m.get("split") == "train"]
    assert len(losses) == steps and sum(losses[-3:]) / 3 < 0.9 * sum(losses[:3]) / 3, losses

    saved = tmp_path / "run" / "model"
    raw = json.loads((saved / "config.json").read_text())
    assert raw["architectures"] == [SAVED_AS[family]]
    ours = load_finetuned(saved, device="cpu")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(saved, attn_implementation="eager")
    assert type(theirs).__name__ == SAVED_AS[family]
    batch = _batch(ours.tokenizer)  # a sentence and a pair
    with torch.no_grad():
        mine = ours.model(**batch).logits
        ref = theirs.eval()(**_transformers_inputs(batch, theirs)).logits
    assert_close(mine, ref, atol=1e-5, rtol=1e-5)
    assert ours.predict("the cat sat on the mat").label in ("0", "1")


def test_an_electra_pair_folder_fine_tunes_its_discriminator(folders):
    pair = folders["electra/ours-pair"]
    model, _, source = pretrained_task_model(pair, HeadConfig("single", 2))
    assert source == str(pair / "discriminator")
    disc = read_weights(pair / "discriminator")
    for k, v in model.state_dict().items():
        if k.startswith("electra."):
            assert_close(v, disc[k])
    assert model.config.role == "discriminator"


TASK_CLASSES = {
    "tagging": ("ForTokenClassification", "AutoModelForTokenClassification"),
    "qa": ("ForQuestionAnswering", "AutoModelForQuestionAnswering"),
    "single": ("ForSequenceClassification", "AutoModelForSequenceClassification"),
}


@pytest.mark.parametrize("kind", ["albert/transformers", "electra/transformers", "roberta/transformers"])
@pytest.mark.parametrize("shape", ["tagging", "qa", "single"])
def test_each_task_shape_saves_for_transformers_with_equal_logits(tmp_path, folders, kind, shape):
    head = HeadConfig(shape, 2 if shape != "tagging" else 3)
    torch.manual_seed(1)
    model, tokenizer, _ = pretrained_task_model(folders[kind], head)
    labels = ("A", "B", "C") if shape == "tagging" else () if shape == "qa" else ("0", "1")
    save_finetuned(tmp_path / "m", model.eval(), tokenizer, TaskSetup("custom", shape, labels, head, 32))
    suffix, auto = TASK_CLASSES[shape]
    theirs = getattr(transformers, auto).from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    assert type(theirs).__name__.endswith(suffix)
    batch = _batch(tokenizer)
    with torch.no_grad():
        mine = model(**batch)
        ref = theirs(**_transformers_inputs(batch, theirs))
    keep = batch["attention_mask"].bool()
    if shape == "qa":
        assert_close(mine.start_logits[keep], ref.start_logits[keep], atol=1e-5, rtol=1e-5)
        assert_close(mine.end_logits[keep], ref.end_logits[keep], atol=1e-5, rtol=1e-5)
    elif shape == "tagging":
        assert_close(mine.logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
    else:
        assert_close(mine.logits, ref.logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["albert", "electra", "roberta"])
def test_a_classifier_fine_tuned_by_transformers_opens_in_load_finetuned(tmp_path, tokenizer, bpe, family):
    torch.manual_seed(2)
    configs = {
        "albert": transformers.AlbertConfig(vocab_size=len(tokenizer), embedding_size=16, **TINY),
        "electra": transformers.ElectraConfig(vocab_size=len(tokenizer), embedding_size=16, **TINY),
        "roberta": transformers.RobertaConfig(
            vocab_size=len(bpe), max_position_embeddings=66, type_vocab_size=1, pad_token_id=1, **TINY
        ),
    }
    config = configs[family]
    config.num_labels, config.attn_implementation = 2, "eager"
    theirs = transformers.AutoModelForSequenceClassification.from_config(config).eval()
    folder = _hf_folder_plain(tmp_path, theirs, bpe if family == "roberta" else tokenizer)
    ours = load_finetuned(folder, device="cpu")
    assert ours.task == "custom" and ours.labels == ["LABEL_0", "LABEL_1"]
    batch = _batch(ours.tokenizer)
    with torch.no_grad():
        assert_close(
            ours.model(**batch).logits, theirs(**_transformers_inputs(batch, theirs)).logits, atol=1e-5, rtol=1e-5
        )
    assert ours.setup.max_seq_length <= ours.tokenizer.model_max_length


def _hf_folder_plain(tmp_path, model, tokenizer):
    model.save_pretrained(tmp_path / "hf")
    tokenizer.save(tmp_path / "hf")
    return tmp_path / "hf"


def test_roberta_pairs_and_qa_windows_read_as_roberta_s_tokenizer_builds_them(tmp_path, bpe):
    bpe.save(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    a, b = "The cat sat on the mat.", "It was a big cat."
    (feature,) = encode_sequences([SequenceExample(a, b, "1")], bpe, 64, {"0": 0, "1": 1})
    assert feature.input_ids == theirs(a, b)["input_ids"]
    s, e, pad = bpe.cls_id, bpe.sep_id, bpe.pad_id
    assert (feature.input_ids[0], feature.input_ids[-1]) == (s, e) and pad not in feature.input_ids
    ends = [i for i, t in enumerate(feature.input_ids) if t == e]
    assert len(ends) == 3 and ends[1] == ends[0] + 1  # <s> A </s></s> B </s>
    question, context = "Who sat?", "The cat sat on the mat."
    (window,) = encode_qa([QAExample("q", question, context, [("The cat", 0)])], bpe, 64, 32, 16, True)
    assert window.input_ids == theirs(question, context)["input_ids"]
    answer = window.input_ids[window.start_position : window.end_position + 1]
    assert bpe.decode(answer).strip() == "The cat"


TAGGED = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Paris", "is", "the", "capital", "of", "France", "!"],
    ["a", "big", "red", "bird", "sang"],
]


def test_roberta_tagging_reads_each_word_with_its_space_as_transformers_does(tmp_path, bpe):
    """Tagged words come split; RoBERTa reads every word with the space before it, the first too ('Ġcat'),
    as transformers' tokenizer with add_prefix_space=True does on is_split_into_words input; each word's
    label sits on its first piece and comes back to the word."""
    bpe.save_vocab(tmp_path / "vocab.json")  # vocab.json + merges.txt alone: transformers builds from the files
    theirs = transformers.RobertaTokenizerFast.from_pretrained(tmp_path, add_prefix_space=True)
    labels = ["O", "X"]
    examples = [TaggingExample(words, [labels[i % 2] for i in range(len(words))]) for words in TAGGED]
    features = encode_tagging(examples, bpe, 64, {t: i for i, t in enumerate(labels)})
    logits = []
    for ex, feature in zip(examples, features, strict=True):
        reference = theirs(ex.words, is_split_into_words=True)
        assert feature.input_ids == reference["input_ids"]
        firsts = [reference.word_ids().index(w) for w in range(len(ex.words))]
        assert feature.word_starts == firsts
        assert all(bpe.convert_ids_to_tokens([feature.input_ids[p]])[0].startswith("Ġ") for p in firsts)
        assert [feature.token_labels[p] for p in firsts] == [labels.index(t) for t in ex.tags]
        assert all(label == IGNORE for p, label in enumerate(feature.token_labels) if p not in firsts)
        scores = torch.zeros(len(feature.input_ids), len(labels))
        scores[firsts, [labels.index(t) for t in ex.tags]] = 1.0  # a model right on every first piece
        logits.append(scores)
    assert decode_tagging(examples, features, logits, labels) == [ex.tags for ex in examples]


def test_a_distilbert_fine_tunes_as_the_bert_its_layers_are(folders):
    model, _, _ = pretrained_task_model(folders["distilbert/transformers"], HeadConfig("single", 2))
    assert model.config.model_type == "bert" and model.encoder_name == "bert"
    segments = model.bert.embeddings.token_type_embeddings.weight.detach()
    assert float(segments.abs().sum()) == 0.0  # DistilBERT has no segments: both rows add nothing


def test_a_random_init_model_still_fine_tunes_as_bert(tokenizer):
    model = build_task_model(tiny_config(len(tokenizer)), HeadConfig("single", 2))
    assert model.encoder_name == "bert" and "bert.pooler.dense.weight" in model.state_dict()
    assert dataclasses.is_dataclass(model.config)
