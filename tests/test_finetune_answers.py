"""A fine-tuned classifier's answers to every example of a labelled file (bertlab.finetune.answers),
on tiny random models: the accuracy is the one the dev evaluation computes, the confusion matrix
counts every example once, the picks sort and filter as said, and bad input is a plain InputError."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config

from bertlab.errors import BertLabError, InputError
from bertlab.finetune import metrics
from bertlab.finetune.answers import answer_file, training_accuracy
from bertlab.finetune.models import HeadConfig, build_task_model
from bertlab.finetune.predict import FinetunedModel, TaskSetup
from bertlab.interpret.answer_views import confusion_figure

SST2 = ["the cat sat on the mat", "a dog ran", "what a film", "the bird sang all day", "it was bad", "good"]


def _model(tokenizer, task: str, shape: str, seed: int = 0) -> FinetunedModel:
    torch.manual_seed(seed)
    head = HeadConfig(shape, 2)
    model = build_task_model(tiny_config(len(tokenizer), initializer_range=0.2), head).eval()
    labels = ("0", "1") if task in ("sst2", "mrpc") else ("entailment", "not_entailment")
    return FinetunedModel(
        model,
        tokenizer,
        TaskSetup(task, shape, labels, head, max_seq_length=32),
        {},
        f"tiny-{task}",
        torch.device("cpu"),
    )


def _with_setup(model: FinetunedModel, setup: TaskSetup) -> FinetunedModel:
    """The same weights read as another task's model (labels or shape)."""
    return FinetunedModel(model.model, model.tokenizer, setup, {}, setup.task, torch.device("cpu"))


def _sst2(tmp_path, labels=("0", "1", "1", "0", "0", "1")):
    path = tmp_path / "dev.tsv"
    path.write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in zip(SST2, labels, strict=True)))
    return path


def test_every_example_is_answered_as_the_dev_evaluation_does(tokenizer, tmp_path):
    model = _model(tokenizer, "sst2", "single")
    seen = []
    got = answer_file(model, _sst2(tmp_path), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(6, 6)] and [a.index for a in got.answers] == list(range(6))
    assert [a.text_a for a in got.answers] == SST2 and [a.gold for a in got.answers] == ["0", "1", "1", "0", "0", "1"]
    # the same numbers as running the model over the encoded examples, one at a time
    for a in got.answers:
        probs = model.predict(a.text_a).probabilities
        assert a.predicted == max(probs, key=probs.get)
        assert a.confidence == pytest.approx(probs[a.predicted], abs=1e-5)
        assert a.gold_probability == pytest.approx(probs[a.gold], abs=1e-5)
    assert got.accuracy == sum(a.correct for a in got.answers) / 6 and got.mistakes == 6 - sum(
        a.correct for a in got.answers
    )
    confusion = got.confusion()
    assert sum(map(sum, confusion)) == 6 and confusion[0][0] + confusion[1][1] == 6 - got.mistakes
    assert got.majority() == ("0", 0.5)
    fig = confusion_figure(got)
    assert list(fig.data[0].x) == list(fig.data[0].y) == ["0 (negative)", "1 (positive)"]  # what 0 and 1 mean
    assert fig.data[0].text[0][0] == f"{confusion[0][0]:,}<br>{confusion[0][0] / 3:.0%}"  # 3 examples of gold 0


def test_the_picks_sort_and_filter(tokenizer, tmp_path):
    got = answer_file(_model(tokenizer, "sst2", "single"), _sst2(tmp_path))
    worst = got.pick("mistakes")
    assert all(not a.correct for a in worst) and len(worst) == got.mistakes
    assert [a.confidence for a in worst] == sorted((a.confidence for a in worst), reverse=True)
    unsure = got.pick("unsure")
    assert len(unsure) == 6 and [a.confidence for a in unsure] == sorted(a.confidence for a in unsure)
    assert [a.index for a in got.pick("all", gold="1")] == [1, 2, 5]
    assert [a.text_a for a in got.pick("all", search="THE ")] == ["the cat sat on the mat", "the bird sang all day"]
    with pytest.raises(InputError, match="which must be"):
        got.pick("worst")
    # a cell of the confusion matrix: gold and answer together
    cell = got.pick("all", gold="1", answered="0")
    assert [a.index for a in cell] == [a.index for a in got.answers if a.gold == "1" and a.predicted == "0"]
    assert len(cell) == got.confusion()[1][0]
    assert got.scores() == {"accuracy": got.accuracy}


def test_a_pair_task_reads_both_sentences(tokenizer, tmp_path):
    path = tmp_path / "dev.tsv"
    rows = [("1", "the cat sat", "a cat sat"), ("0", "a dog ran", "birds sang all day")]
    path.write_text(
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(f"{q}\t1\t2\t{a}\t{b}\n" for q, a, b in rows)
    )
    model = _model(tokenizer, "mrpc", "pair")
    got = answer_file(model, path)
    assert [(a.text_a, a.text_b, a.gold) for a in got.answers] == [(a, b, q) for q, a, b in rows]
    predicted = [a.predicted for a in got.answers]
    assert list(got.scores()) == ["f1", "accuracy"]  # MRPC's own measure first, as its dev evaluation
    assert got.scores()["f1"] == metrics.f1_binary(predicted, ["1", "0"], positive="1")
    assert (
        got.answers[1].predicted
        == max(model.predict("a dog ran", "birds sang all day").probabilities.items(), key=lambda kv: kv[1])[0]
    )


def test_bad_input_is_a_plain_error(tokenizer, tmp_path):
    model = _model(tokenizer, "sst2", "single")
    with pytest.raises(InputError, match="no such file"):
        answer_file(model, tmp_path / "missing.tsv")
    with pytest.raises(InputError, match="is a folder: give a file in it \\(its dev set is dev.tsv\\)"):
        answer_file(model, tmp_path)
    with pytest.raises(BertLabError, match=r"dev.tsv:3: label '2' is not one of"):  # the task's reader says where
        answer_file(model, _sst2(tmp_path, ("0", "2", "7", "1", "0", "1")))
    (tmp_path / "empty.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(BertLabError, match="empty.tsv: no examples"):
        answer_file(model, tmp_path / "empty.tsv")
    rte = _with_setup(model, TaskSetup("sst2", "single", ("neg", "pos"), HeadConfig("single", 2)))
    with pytest.raises(InputError, match=r"labels 0, 1 are not among this model's \(neg, pos\)"):
        answer_file(rte, _sst2(tmp_path))
    (tmp_path / "wrong.tsv").write_text("text\tgold\nthe cat\t1\n")
    with pytest.raises(BertLabError, match="lacks the column"):
        answer_file(model, tmp_path / "wrong.tsv")
    tagger = _with_setup(model, TaskSetup("upos", "tagging", ("NOUN",), HeadConfig("tagging", 1)))
    with pytest.raises(InputError, match="a sentence or pair classifier"):
        answer_file(tagger, _sst2(tmp_path))


def test_the_training_runs_own_accuracy_is_found_only_for_the_file_it_was_scored_on(tokenizer, tmp_path):
    dev = _sst2(tmp_path)
    model = _model(tokenizer, "sst2", "single")
    assert training_accuracy(model, dev) is None  # no card
    model.card = {"dev_data": str(dev), "metrics": {"accuracy": 0.75}}
    assert training_accuracy(model, dev) == 0.75
    assert training_accuracy(model, tmp_path / "other.tsv") is None
    model.card = {"dev_data": str(dev), "metrics": {"f1": 0.8}}
    assert training_accuracy(model, dev) is None
