"""bertlab.finetune.models: the output layers on a tiny encoder: feature choices, the [CLS]-only
last layer of a sentence classifier, left-to-right classifiers, and clear errors."""

import pytest
import torch
from conftest import tiny_config

from bertlab.errors import InputError
from bertlab.finetune.models import HeadConfig, build_task_model


@pytest.mark.parametrize(
    "features,size", [("last", 32), ("layer:1", 32), ("layer:-1", 32), ("sum4", 32), ("cat4", 64), ("mix", 32)]
)
def test_feature_choices_shapes(tokenizer, features, size):
    cfg = tiny_config(len(tokenizer))  # 2 layers, hidden 32: "the last four" are both layers
    model = build_task_model(cfg, HeadConfig("tagging", 3, mode="feature", features=features))
    assert model.layer_features.out_size == size
    ids = torch.tensor([[2, 10, 11, 3]])
    out = model(ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([[-100, 0, 1, -100]]))
    assert out.logits.shape == (1, 4, 3) and out.loss.requires_grad
    assert all(not p.requires_grad for p in model.bert.parameters())
    model.train()
    assert not model.bert.training  # the frozen encoder never runs dropout


@pytest.mark.parametrize("mode", ["finetune", "feature"])
def test_sentence_classifier_runs_the_last_layer_at_cls_only(tokenizer, mode):
    """A sentence classifier reads only [CLS] from the last layer: the same loss and gradients
    as running that layer everywhere, with padding in the batch."""
    torch.manual_seed(0)
    cfg = tiny_config(len(tokenizer), hidden_dropout=0.0, attention_dropout=0.0)
    model = build_task_model(cfg, HeadConfig("single", 3, mode=mode)).train()
    ids = torch.randint(5, len(tokenizer), (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    labels = torch.tensor([0, 2, 1])
    out = model(ids, attention_mask=mask, labels=labels)
    enc = model.bert(ids, None, mask)  # the whole last layer
    x = enc.pooled_output if mode == "finetune" else enc.last_hidden_state[:, 0]
    if model.mlp is not None:
        x = model.mlp(x)
    full = torch.nn.functional.cross_entropy(model.classifier(x), labels)
    torch.testing.assert_close(out.loss, full, atol=1e-6, rtol=1e-5)
    trainable = [p for p in model.parameters() if p.requires_grad]
    g_fast = torch.autograd.grad(out.loss, trainable, allow_unused=True)
    g_full = torch.autograd.grad(full, trainable, allow_unused=True)
    for a, b in zip(g_fast, g_full, strict=True):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_bad_feature_choice_is_an_input_error(tokenizer):
    with pytest.raises(InputError, match="features"):
        HeadConfig("single", 2, features="top3")
    with pytest.raises(InputError, match="layers 0"):
        build_task_model(tiny_config(len(tokenizer)), HeadConfig("single", 2, features="layer:5"))


@pytest.mark.parametrize("mode", ["finetune", "feature"])
def test_left_to_right_classifier_reads_where_it_has_seen_the_input(tokenizer, mode):
    """With causal attention [CLS] at position 0 sees only itself: reading it would give every
    input the same features (only the majority class could be learned). The LTR model reads the
    last real token instead, so changing the input (even only its last word) changes the logits."""
    torch.manual_seed(0)
    cfg = tiny_config(len(tokenizer), attention_direction="left_to_right", use_nsp_head=False)
    model = build_task_model(cfg, HeadConfig("single", 3, mode=mode)).eval()
    enc = tokenizer.encode_batch(["the cat sat on the mat", "the cat sat on the dog", "a b"])
    T = max(len(e.ids) for e in enc)
    ids = torch.tensor([e.ids + [tokenizer.pad_id] * (T - len(e.ids)) for e in enc])
    mask = torch.tensor([[1] * len(e.ids) + [0] * (T - len(e.ids)) for e in enc])
    with torch.no_grad():
        logits = model(ids, torch.zeros_like(ids), mask).logits
    assert not torch.allclose(logits[0], logits[1], atol=1e-5)  # only the last word differs
    assert not torch.allclose(logits[0], logits[2], atol=1e-5)
    # padding after the last real token changes nothing
    with torch.no_grad():
        alone = model(ids[2:, : len(enc[2].ids)], torch.zeros_like(ids[2:, : len(enc[2].ids)])).logits
    assert torch.allclose(alone[0], logits[2], atol=1e-5)
