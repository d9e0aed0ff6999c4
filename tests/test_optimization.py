"""bertlab.optimization: the LR schedule's warm-up and decays, AdamW's decay groups, mixed precision."""

import logging
import math

import pytest
import torch
from conftest import tiny_config

from bertlab.errors import InputError
from bertlab.model import BertForPreTraining
from bertlab.optimization import (
    autocast_context,
    build_optimizer,
    lr_factor,
    resolve_precision,
    warmup_fraction,
)
from bertlab.training import TrainConfig


def test_lr_schedule_warms_up_then_decays_linearly():
    assert lr_factor(0.0, 0.1) == 0.0
    assert lr_factor(0.05, 0.1) == pytest.approx(0.5)
    assert lr_factor(0.1, 0.1) == pytest.approx(1.0)
    assert lr_factor(0.55, 0.1) == pytest.approx(0.5)
    assert lr_factor(1.0, 0.1) == 0.0
    assert warmup_fraction(TrainConfig(max_steps=1000, warmup=100)) == pytest.approx(0.1)
    with pytest.raises(InputError, match="max_steps"):
        warmup_fraction(TrainConfig(max_time_s=60, warmup=100))


def test_lr_schedule_decay_shapes():
    assert lr_factor(0.05, 0.1, "cosine") == pytest.approx(0.5)  # the same warm-up
    assert lr_factor(0.1, 0.1, "cosine") == pytest.approx(1.0)
    assert lr_factor(0.55, 0.1, "cosine") == pytest.approx(0.5)  # half-way through the decay
    assert lr_factor(0.325, 0.1, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor(1.0, 0.1, "cosine") == pytest.approx(0.0)
    assert lr_factor(0.5, 0.1, "constant") == lr_factor(1.0, 0.1, "constant") == 1.0


def test_no_weight_decay_on_biases_and_layernorm():
    model = BertForPreTraining(tiny_config(50))
    opt = build_optimizer(model, TrainConfig(max_steps=1, weight_decay=0.01))
    decay, no_decay = opt.param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(not names[id(p)].endswith("bias") and "LayerNorm" not in names[id(p)] for p in decay["params"])
    assert any("LayerNorm" in names[id(p)] for p in no_decay["params"])
    n_params = len({id(p) for p in model.parameters()})
    assert len(decay["params"]) + len(no_decay["params"]) == n_params  # tied decoder counted once


def test_cpu_trains_in_fp32_whatever_precision_is_asked_for(caplog):
    cpu = torch.device("cpu")
    assert resolve_precision(TrainConfig(max_steps=1), cpu) is None
    with caplog.at_level(logging.WARNING, logger="bertlab"):
        assert resolve_precision(TrainConfig(max_steps=1, precision="bf16"), cpu) is None
    assert "training in fp32" in caplog.text
    with autocast_context(cpu, None):
        assert not torch.is_autocast_enabled()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bf16_autocast_on_cuda():
    cfg = TrainConfig(max_steps=1)
    assert resolve_precision(cfg, torch.device("cuda")) in (torch.bfloat16, torch.float16)
    assert resolve_precision(TrainConfig(max_steps=1, precision="fp32"), torch.device("cuda")) is None
    model = BertForPreTraining(tiny_config(50)).cuda()
    ids = torch.randint(5, 50, (2, 8), device="cuda")
    with autocast_context(torch.device("cuda"), torch.bfloat16):
        out = model(ids, mlm_labels=ids)
    out.loss.backward()
    assert torch.isfinite(out.loss)
