"""bertlab/finetune/predict.py: the saved fine-tuned format loads back and predicts (untrained model)."""

import pytest
import torch
from conftest import tiny_config

from bertlab.errors import InputError
from bertlab.finetune.models import HeadConfig, build_task_model
from bertlab.finetune.predict import TaskSetup, load_finetuned, save_finetuned


def test_a_saved_classifier_loads_back_with_its_labels_and_weights(tmp_path, tokenizer):
    torch.manual_seed(0)
    head = HeadConfig("single", 2)
    model = build_task_model(tiny_config(len(tokenizer)), head).eval()
    setup = TaskSetup("sst2", "single", ("0", "1"), head, max_seq_length=32)
    save_finetuned(tmp_path / "m", model, tokenizer, setup, {"task": "sst2"})
    loaded = load_finetuned(tmp_path / "m", device="cpu")
    assert (loaded.task, loaded.task_shape, loaded.labels) == ("sst2", "single", ["0", "1"])
    for k, v in model.state_dict().items():
        torch.testing.assert_close(loaded.model.state_dict()[k], v)
    p = loaded.predict("the cat sat")
    assert p.label in ("0", "1") and sum(p.probabilities.values()) == pytest.approx(1.0)
    with pytest.raises(InputError, match="empty"):
        loaded.predict("  ")


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory, tokenizer):
    head = HeadConfig("single", 2)
    model = build_task_model(tiny_config(len(tokenizer)), head).eval()
    setup = TaskSetup("sst2", "single", ("0", "1"), head, max_seq_length=32)
    return save_finetuned(tmp_path_factory.mktemp("ft") / "m", model, tokenizer, setup)


@pytest.mark.parametrize("device", ["xpu", "meta", "gpu"])
def test_a_device_this_machine_lacks_is_an_input_error(saved_classifier, device):
    if device == "xpu" and getattr(torch, "xpu", None) is not None and torch.xpu.is_available():
        pytest.skip("this machine has an XPU")
    with pytest.raises(InputError, match="device"):
        load_finetuned(saved_classifier, device=device)


@pytest.mark.parametrize("path", [5, None, b"runs/sst2/model"])
def test_a_path_of_the_wrong_type_is_an_input_error(path):
    with pytest.raises(InputError, match="checkpoint folder"):
        load_finetuned(path, device="cpu")


def test_is_finetuned_config_reads_ours_and_transformers_task_classes(saved_classifier, tiny_checkpoint):
    import json

    from bertlab.finetune.predict import is_finetuned_config

    assert is_finetuned_config(json.loads((saved_classifier / "config.json").read_text()))
    assert not is_finetuned_config(json.loads((tiny_checkpoint / "config.json").read_text()))
    assert is_finetuned_config({"architectures": ["BertForTokenClassification"]})
    assert not is_finetuned_config({"architectures": ["BertForMaskedLM"], "bertlab": None})
    assert not is_finetuned_config({"architectures": "BertForSequenceClassification"})
