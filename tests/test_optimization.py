"""bertlab.training.optimization: the LR schedule's warm-up and decays, AdamW's decay groups, mixed precision."""

import logging
import math

import pytest
import torch
from conftest import tiny_config

from bertlab.errors import InputError
from bertlab.losses import masked_lm_nsp
from bertlab.model import BertForPreTraining
from bertlab.training.optimization import (
    autocast_context,
    build_optimizer,
    compile_pays,
    compile_plan,
    group_lr,
    lr_factor,
    precision_label,
    resolve_precision,
    warmup_fraction,
)
from bertlab.training.trainer import TrainConfig


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
    assert lr_factor(0.05, 0.1, "wsd") == pytest.approx(0.5)  # warm-up, stable until the last fifth, decay
    assert lr_factor(0.5, 0.1, "wsd") == 1.0 and lr_factor(0.8, 0.1, "wsd") == pytest.approx(1.0)
    assert lr_factor(0.9, 0.1, "wsd") == pytest.approx(0.5) and lr_factor(1.0, 0.1, "wsd") == 0.0


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


def test_a_head_learning_rate_gives_the_task_layers_their_own_rate():
    """With head_lr the weights a task adds (here a fresh BiLSTM and output layer) train at their own peak
    rate and the pretrained encoder at the learning rate, both scaled by the schedule; without it every
    weight shares one rate in the two groups of before."""
    from bertlab.finetune.models import HeadConfig, build_task_model

    model = build_task_model(tiny_config(50), HeadConfig("tagging", 5, bilstm=True))
    opt = build_optimizer(model, TrainConfig(max_steps=1, learning_rate=1e-3, head_lr=1e-2))
    rate = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    encoder = {id(p) for p in model.bert.parameters()}
    added = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in encoder]
    assert any(n.startswith("lstm.") for n in added) and any(n.startswith("classifier.") for n in added), added
    assert {rate[id(p)] for p in model.bert.parameters() if p.requires_grad} == {1e-3}
    assert {round(rate[id(p)], 12) for n, p in model.named_parameters() if n in added} == {1e-2}
    assert [group_lr(g, 1e-3, 0.5) for g in opt.param_groups] == pytest.approx([5e-4, 5e-4, 5e-3, 5e-3])
    assert all(g["weight_decay"] == 0.0 for g in opt.param_groups[1::2])  # biases: no decay, in either part
    plain = build_optimizer(model, TrainConfig(max_steps=1, learning_rate=1e-3))
    assert len(plain.param_groups) == 2 and {g["lr"] for g in plain.param_groups} == {1e-3}
    assert group_lr(plain.param_groups[0], 1e-3, 0.5) == 5e-4


def test_cpu_without_bf16_instructions_trains_in_fp32(monkeypatch, caplog):
    monkeypatch.setattr("bertlab.training.optimization.cpu_bf16_instructions", lambda: None)
    cpu = torch.device("cpu")
    assert resolve_precision(TrainConfig(max_steps=1), cpu) is None  # auto
    with caplog.at_level(logging.WARNING, logger="bertlab"):
        assert resolve_precision(TrainConfig(max_steps=1, precision="bf16"), cpu) is None
        assert resolve_precision(TrainConfig(max_steps=1, precision="fp16"), cpu) is None
    assert "without bf16 instructions" in caplog.text and "fp16 autocast is for GPUs" in caplog.text
    assert precision_label(None, cpu) == "fp32"
    with autocast_context(cpu, None):
        assert not torch.is_autocast_enabled()


@pytest.mark.parametrize("instructions", ["AVX-512 BF16", "AMX"])
def test_auto_picks_bf16_on_a_cpu_with_bf16_instructions(monkeypatch, instructions):
    monkeypatch.setattr("bertlab.training.optimization.cpu_bf16_instructions", lambda: instructions)
    cpu = torch.device("cpu")
    assert resolve_precision(TrainConfig(max_steps=1), cpu) is torch.bfloat16
    assert resolve_precision(TrainConfig(max_steps=1, precision="bf16"), cpu) is torch.bfloat16
    assert resolve_precision(TrainConfig(max_steps=1, precision="fp32"), cpu) is None
    assert precision_label(torch.bfloat16, cpu) == f"bf16 autocast (CPU, {instructions})"


def test_cpu_bf16_instructions_read_from_the_cpu_flags(monkeypatch):
    from bertlab import hardware

    for flags, expected in [
        ({"avx2", "avx512f"}, None),
        ({"avx512f", "avx512_bf16"}, "AVX-512 BF16"),
        ({"amx_tile", "amx_bf16", "avx512_bf16"}, "AMX"),
        (set(), None),
    ]:
        monkeypatch.setattr(hardware, "cpu_flags", lambda f=flags: f)
        assert hardware.cpu_bf16_instructions() == expected


def test_bf16_cpu_training_step_matches_fp32_within_tolerance():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(60)).eval()  # no dropout: the two passes see one function
    ids = torch.randint(5, 60, (4, 16))
    labels = torch.where(torch.rand(4, 16) < 0.3, ids, torch.full_like(ids, -100))
    labels[:, 1] = ids[:, 1]
    nsp = torch.tensor([0, 1, 0, 1])
    batch = {"input_ids": ids, "mlm_labels": labels, "nsp_labels": nsp}
    fp32 = masked_lm_nsp(model, batch, prediction_cap=16)
    with autocast_context(torch.device("cpu"), torch.bfloat16):
        bf16 = masked_lm_nsp(model, batch, prediction_cap=16)
    assert bf16.loss.dtype == torch.float32  # the losses are taken in fp32 from bf16 logits
    assert float(bf16.loss.detach()) == pytest.approx(float(fp32.loss.detach()), rel=0.02)
    bf16.loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)  # fp32 master weights


def test_compile_plan_and_when_compiling_pays(monkeypatch):
    assert compile_plan(TrainConfig(max_steps=9, compile=True), static_shapes=False, world=1) == "now"
    assert compile_plan(TrainConfig(max_steps=9, compile=False), static_shapes=True, world=1) == "no"
    assert compile_plan(TrainConfig(max_steps=9), static_shapes=False, world=1) == "no"  # shapes follow the data
    assert compile_plan(TrainConfig(max_steps=9), static_shapes=True, world=1) == "decide"
    # CUDA: compiled steps are assumed faster, so a long run compiles and a short one does not
    assert compile_plan(TrainConfig(max_time_s=7200), True, world=2, device_type="cuda") == "now"
    assert compile_plan(TrainConfig(max_time_s=60), True, world=2, device_type="cuda") == "no"
    pays, why = compile_pays(3600, "cuda")
    assert pays and "compiling" in why
    pays, why = compile_pays(120, "cuda")
    assert not pays and "staying eager" in why
    # a CPU, with bf16 instructions or without: compiled steps measured no faster, so no run compiles
    # (the device the processes run on decides, not the configured name: "auto" on GPUs is CUDA)
    for instructions in ("AMX", "AVX-512 BF16", None):
        monkeypatch.setattr("bertlab.training.optimization.cpu_bf16_instructions", lambda i=instructions: i)
        assert compile_plan(TrainConfig(max_time_s=7200), static_shapes=True, world=2) == "no", instructions
        pays, why = compile_pays(36000, "cpu")
        assert not pays and "measured no faster" in why, instructions
    with pytest.raises(InputError, match="compile must be"):
        TrainConfig(max_steps=1, compile="sometimes")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bf16_autocast_on_cuda():
    cfg = TrainConfig(max_steps=1)
    assert resolve_precision(cfg, torch.device("cuda")) in (torch.bfloat16, torch.float16)
    assert resolve_precision(TrainConfig(max_steps=1, precision="fp32"), torch.device("cuda")) is None
    model = BertForPreTraining(tiny_config(50)).cuda()
    ids = torch.randint(5, 50, (2, 8), device="cuda")
    with autocast_context(torch.device("cuda"), torch.bfloat16):
        out = masked_lm_nsp(model, {"input_ids": ids, "mlm_labels": ids})
    out.loss.backward()
    assert torch.isfinite(out.loss)
