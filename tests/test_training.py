"""bertlab.training: schedule, optimizer groups, budgets, prefetching, graceful stop."""

import math

import pytest
import torch
from conftest import tiny_config

from bertlab.errors import InputError
from bertlab.model import BertForPreTraining
from bertlab.training import (
    Progress,
    TrainConfig,
    build_optimizer,
    is_snapshot_step,
    lr_factor,
    snapshot_steps,
    warmup_fraction,
)


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
    with pytest.raises(InputError, match="schedule"):
        TrainConfig(max_steps=10, schedule="exponential")


def test_snapshot_steps_are_log_spaced():
    assert snapshot_steps(1000) == [10, 20, 30, 50, 70, 100, 200, 300, 500, 700, 1000]
    assert [s for s in range(1, 2001) if is_snapshot_step(s)] == snapshot_steps(2000)


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


def test_budgets():
    with pytest.raises(InputError, match="budget"):
        TrainConfig()
    with pytest.raises(InputError, match="divisible"):
        TrainConfig(max_steps=1, batch_size=10, grad_accum=3)
    cfg = TrainConfig(max_steps=100, max_tokens=1000)
    p = Progress(step=10, tokens=500)
    assert p.fraction(cfg) == pytest.approx(0.5) and not p.done(cfg)
    assert Progress(step=100).done(cfg)
    assert Progress(train_time_s=30).fraction(TrainConfig(max_time_s=60)) == pytest.approx(0.5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bf16_autocast_on_cuda():
    from bertlab.training import resolve_precision

    cfg = TrainConfig(max_steps=1)
    assert resolve_precision(cfg, torch.device("cuda")) in (torch.bfloat16, torch.float16)
    model = BertForPreTraining(tiny_config(50)).cuda()
    ids = torch.randint(5, 50, (2, 8), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(ids, mlm_labels=ids)
    out.loss.backward()
    assert torch.isfinite(out.loss)
