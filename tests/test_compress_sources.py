"""bertlab.compress on a fine-tuned classifier (bertlab.compress.source) and the pages' refusal of
int8 models where gradients are needed (NoGradientsError): a tiny SST-2 run is quantized and pruned,
reopened with load_finetuned as the Jobs and Why-it-answered pages open it, and gives the same
answers as the model held in memory; its record holds dev accuracy before and after."""

from __future__ import annotations

import json

import pytest
import torch

from bertlab.cli import main
from bertlab.compress.measure import RECORD_FILE
from bertlab.compress.prune import prune
from bertlab.compress.quantize import quantize
from bertlab.errors import InputError, NoGradientsError
from bertlab.finetune.predict import load_finetuned
from bertlab.inference import load_model
from bertlab.interpret.attribution import attribute
from bertlab.interpret.heads import LabelledSentences, head_importance
from bertlab.storage import quantized
from bertlab.storage.catalog import is_finetuned

FAST = dict(repeats=2, threads=(1,))
SENTENCES = ("the cat sat on the mat", "a big red bird sang", "the lazy fox")


def _probabilities(model):
    return torch.tensor([list(model.predict(s).probabilities.values()) for s in SENTENCES])


@pytest.fixture(scope="module")
def classifier(sst2_run):
    return sst2_run / "model", sst2_run.parent / "dev.tsv"


@pytest.fixture(scope="module")
def int8_classifier(classifier, tmp_path_factory):
    model, dev = classifier
    out = tmp_path_factory.mktemp("q") / "sst2-int8"
    record, compressed = quantize(model, out, "int8-dynamic", dev=dev, **FAST)
    return out, record, compressed


def test_int8_classifier_reopens_where_fine_tuned_models_open(int8_classifier, classifier):
    out, record, compressed = int8_classifier
    assert is_finetuned(out)
    reloaded = load_finetuned(out)
    assert quantized.is_int8(reloaded.model) and reloaded.task == "sst2" and reloaded.labels == ["0", "1"]
    torch.testing.assert_close(_probabilities(reloaded), _probabilities(compressed), rtol=0, atol=0)
    torch.testing.assert_close(
        _probabilities(reloaded), _probabilities(load_finetuned(classifier[0])), atol=0.05, rtol=0
    )
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"] and config["id2label"] == {"0": "0", "1": "1"}
    assert config["bertlab"]["compressed_from"] == str(classifier[0])
    assert json.loads((out / "model_card.json").read_text())["task"] == "sst2"  # the card (dev file) travels


def test_classifier_record_holds_dev_accuracy_before_and_after(int8_classifier, classifier):
    out, record, _ = int8_classifier
    saved = json.loads((out / RECORD_FILE).read_text())
    assert saved["kind"] == "classifier" and saved["dev"] == str(classifier[1])
    for side in ("before", "after"):
        assert 0 <= saved[side]["dev_accuracy"] <= 1 and saved[side]["mlm_accuracy"] is None
    assert saved["after"]["weights_bytes"] < saved["before"]["weights_bytes"]


def test_pruned_classifier_by_its_importance_on_dev(classifier, tmp_path):
    model, dev = classifier
    record, pruned = prune(model, tmp_path / "p", heads=0.5, dev=dev, **FAST)
    assert record.details["heads_removed"] == 4 and record.details["order"].startswith("importance on 8 examples")
    reloaded = load_finetuned(tmp_path / "p")
    assert reloaded.model.config.pruned_heads == pruned.model.config.pruned_heads != ()
    torch.testing.assert_close(_probabilities(reloaded), _probabilities(pruned), rtol=0, atol=1e-6)
    assert record.after.parameters < record.before.parameters and record.after.dev_accuracy is not None


def test_pruned_classifier_follows_its_saved_head_study(classifier, tmp_path):
    model, _ = classifier
    study = tmp_path / "m"
    study.mkdir()
    for f in model.iterdir():
        (study / f.name).write_bytes(f.read_bytes())
    (study / "interpret").mkdir()  # where `bertlab interpret heads` saves its study (bertlab.interpret.saved)
    scores = [[0.9, 0.1, 0.8, 0.7], [0.6, 0.5, 0.05, 0.4]]  # least important: 1:2, then 0:1
    (study / "interpret" / "heads-sst2.json").write_text(json.dumps({"importance": scores}))
    record, _ = prune(study, tmp_path / "p", heads=0.25, **FAST)
    assert record.details["pruned_heads"] == {"0": [1], "1": [2]}
    assert record.details["order"] == "the model's saved head study (sst2)"


def test_classifier_sparsity_and_bf16(classifier, tmp_path):
    model, dev = classifier
    record, _ = prune(model, tmp_path / "s", sparsity=0.5, dev=dev, **FAST)
    assert record.details["sparsity"] == pytest.approx(0.5, abs=0.01) and record.kind == "classifier"
    record, _ = quantize(model, tmp_path / "b", "bf16", dev=dev, **FAST)
    assert load_finetuned(tmp_path / "b").predict("a big red bird sang").label in ("0", "1")


def test_classifier_without_study_or_dev_and_dev_for_a_masked_lm_are_one_line(classifier, tiny_checkpoint, tmp_path):
    with pytest.raises(InputError, match="no head study saved beside it; give its task's dev file"):
        prune(classifier[0], tmp_path / "p", heads=0.5, **FAST)
    with pytest.raises(InputError, match="--dev is a fine-tuned classifier's dev file"):
        quantize(tiny_checkpoint, tmp_path / "q", dev=classifier[1], **FAST)
    assert not (tmp_path / "p").exists() and not (tmp_path / "q").exists()


def test_cli_prints_dev_accuracy(classifier, tmp_path, capsys):
    model, dev = classifier
    assert main(["compress", "quantize", "--model", str(model), "--out", str(tmp_path / "q"), "--dev", str(dev),
                 "--repeats", "2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "dev acc" in out and "classification p50 at 2 thread(s)" in out


def test_gradients_pages_refuse_int8_and_name_the_source(int8_classifier, classifier, tiny_checkpoint, tmp_path):
    out, _, _ = int8_classifier
    with pytest.raises(NoGradientsError, match="dynamic int8 copy") as caught:
        attribute(load_finetuned(out), "the cat sat on the mat")
    assert caught.value.source == str(classifier[0])
    data = LabelledSentences([])
    with pytest.raises(NoGradientsError):
        head_importance(load_finetuned(out), data)
    quantize(tiny_checkpoint, tmp_path / "lm8", **FAST)
    with pytest.raises(NoGradientsError) as caught:
        attribute(load_model(tmp_path / "lm8"), "the cat sat on the [MASK] .")
    assert caught.value.source == str(tiny_checkpoint)
    assert attribute(load_model(tiny_checkpoint), "the cat sat on the [MASK] .", steps=4, max_steps=4).tokens


def test_a_discriminator_s_timing_says_it_is_one_forward_pass(tiny_electra_pair, tiny_checkpoint, tmp_path):
    """A model without a masked LM is timed on one forward pass, and its rows say so, not 'fill-mask'."""
    from bertlab.compress.lab import comparison_rows, read_record

    record, _ = quantize(tiny_electra_pair / "discriminator", tmp_path / "d8", "int8-dynamic", **FAST)
    assert record.before.timed == record.after.timed == "one forward pass"
    timing = [row[""] for row in comparison_rows(read_record(tmp_path / "d8")) if "p50" in row[""]]
    assert timing and all(t.startswith("one forward pass p50 / p95") for t in timing)
    masked_lm, _ = quantize(tiny_checkpoint, tmp_path / "b8", "int8-dynamic", **FAST)
    assert masked_lm.before.timed == "fill-mask"
