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
