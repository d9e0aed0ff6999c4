"""bertlab.compress.distill, student and distill_loss: `bertlab compress distill` (#55) on a tiny 4-layer
teacher and corpus built here; the layer choice, the copied weights, the loss's parts by hand, a run
through the CLI that opens with load_model and in transformers, and resume equal to an uninterrupted run."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from bertlab.cli import main
from bertlab.compress.distill_loss import (
    DistillWeights,
    hidden_cosine_loss,
    layer_pairs,
    soft_cross_entropy,
    soft_entropy,
)
from bertlab.compress.student import make_student, pick_layers
from bertlab.errors import InputError
from bertlab.inference import load_model
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import save_checkpoint
from tests.conftest import tiny_config, write_corpus


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory, tokenizer):
    """A random 4-layer tiny BERT with both pretraining heads."""
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(len(tokenizer), num_layers=4))
    return save_checkpoint(tmp_path_factory.mktemp("teacher") / "t4", model, tokenizer)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", documents=40)


def _args(teacher, corpus, run_dir, steps, *extra):
    return [
        "compress",
        "distill",
        "--teacher",
        str(teacher),
        "--layers",
        "2",
        "--run-dir",
        str(run_dir),
        "--no-progress",
        "--repeats",
        "2",
        f"corpus={corpus}",
        f"cache_dir={run_dir.parent / 'cache'}",
        "data.max_seq_length=32",
        "data.max_predictions_per_seq=5",
        "data.masking=dynamic",
        "eval_instances=16",
        "dropout=0.0",
        f"train.max_steps={steps}",
        "train.batch_size=8",
        "train.learning_rate=1e-3",
        "train.warmup=0",
        "train.eval_every=0",
        "train.log_every=1",
        "train.precision=fp32",
        "train.compile=false",
        *extra,
    ]


# --------------------------------------------------------------------------------------
# the student
# --------------------------------------------------------------------------------------
def test_layers_are_evenly_spaced_and_every_other_at_half():
    assert pick_layers(4, 2) == (1, 3)
    assert pick_layers(12, 6) == (1, 3, 5, 7, 9, 11)
    assert pick_layers(12, 4) == (2, 5, 8, 11)
    assert pick_layers(6, 3) == (1, 3, 5)
    assert pick_layers(4, 1) == (3,)
    for n in range(1, 12):
        kept = pick_layers(12, n)
        assert len(set(kept)) == n and kept[-1] == 11 and list(kept) == sorted(kept)
    for bad in (0, -1, 4, 5):
        with pytest.raises(InputError, match="--layers"):
            pick_layers(4, bad)


def test_student_starts_as_the_teachers_kept_layers(teacher_dir):
    teacher = load_model(teacher_dir).model
    student, kept = make_student(teacher, 2)
    assert kept == (1, 3) and student.config.num_layers == 2
    t, s = teacher.state_dict(), student.state_dict()
    for i, layer in enumerate(kept):
        for name, value in s.items():
            if name.startswith(f"bert.encoder.layer.{i}."):
                torch.testing.assert_close(value, t[name.replace(f".layer.{i}.", f".layer.{layer}.")], rtol=0, atol=0)
    for name in s:
        if not name.startswith("bert.encoder."):
            torch.testing.assert_close(s[name], t[name], rtol=0, atol=0)  # embeddings (segments too), pooler, heads
    assert student.cls.seq_relationship is not None and "token_type_embeddings" in str(list(s))
    # the copies are the student's own: training it leaves the teacher alone
    student.bert.encoder.layer[0].output.dense.weight.data.add_(1.0)
    assert not torch.equal(
        student.bert.encoder.layer[0].output.dense.weight, teacher.bert.encoder.layer[1].output.dense.weight
    )
    # a layer of the student computes what the teacher's layer it came from computes
    x = torch.randn(2, 5, teacher.config.hidden_size)
    student.eval()
    torch.testing.assert_close(
        student.bert.encoder.layer[1](x, None, None, False)[0], teacher.bert.encoder.layer[3](x, None, None, False)[0]
    )


# --------------------------------------------------------------------------------------
# the loss's parts
# --------------------------------------------------------------------------------------
def test_soft_cross_entropy_is_kl_plus_the_teachers_entropy_times_t_squared():
    student = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    teacher = torch.tensor([[2.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    for temperature in (1.0, 2.0, 4.0):
        p = [[math.exp(v / temperature) for v in row] for row in teacher.tolist()]
        p = [[v / sum(row) for v in row] for row in p]
        q = [[math.exp(v / temperature) for v in row] for row in student.tolist()]
        q = [[v / sum(row) for v in row] for row in q]
        kl = [sum(pi * math.log(pi / qi) for pi, qi in zip(pr, qr, strict=True)) for pr, qr in zip(p, q, strict=True)]
        entropy = [-sum(pi * math.log(pi) for pi in pr) for pr in p]
        by_hand = sum(k + h for k, h in zip(kl, entropy, strict=True)) / 2 * temperature**2
        assert soft_cross_entropy(student, teacher, temperature).item() == pytest.approx(by_hand, rel=1e-5)
        assert soft_entropy(teacher, temperature).item() == pytest.approx(sum(entropy) / 2 * temperature**2, rel=1e-5)
        # KLDivLoss (DistilBERT's) differs by the teacher's entropy only, so the gradients are the same
        s = student.clone().requires_grad_(True)
        soft_cross_entropy(s, teacher, temperature).backward()
        s2 = student.clone().requires_grad_(True)
        kl_loss = F.kl_div(
            F.log_softmax(s2 / temperature, -1), F.softmax(teacher / temperature, -1), reduction="batchmean"
        )
        (kl_loss * temperature**2).backward()
        torch.testing.assert_close(s.grad, s2.grad)
    # matching the teacher is the minimum: no gradient left
    s = teacher.clone().requires_grad_(True)
    soft_cross_entropy(s, teacher, 3.0).backward()
    torch.testing.assert_close(s.grad, torch.zeros_like(s))


def test_temperature_softens_and_t_squared_keeps_the_gradient_size():
    torch.manual_seed(0)
    teacher, student = torch.randn(64, 50) * 3, torch.randn(64, 50) * 3

    def grad_norm(t):
        s = student.clone().requires_grad_(True)
        soft_cross_entropy(s, teacher, t).backward()
        return s.grad.norm().item()

    # without T² the gradient shrinks as 1/T (Hinton et al. 2015); with it, it stays the same size
    assert 0.3 < grad_norm(8.0) / grad_norm(1.0) < 3.0
    assert soft_cross_entropy(student, teacher, 1.0).item() == pytest.approx(
        F.cross_entropy(student, F.softmax(teacher, -1)).item(), rel=1e-5
    )


def test_cosine_loss_compares_the_paired_layers_over_real_tokens():
    a = torch.randn(2, 3, 8)
    b = torch.randn(2, 3, 8)
    same = hidden_cosine_loss((a, a), (b, a), ((1, 1),), None)
    assert same.item() == pytest.approx(0.0, abs=1e-6)
    assert hidden_cosine_loss((a, -a), (b, a), ((1, 1),), None).item() == pytest.approx(2.0, abs=1e-5)
    # padding does not count: only token 0 of each row is real and equal
    c = a.clone()
    c[:, 1:] = -a[:, 1:]
    mask = torch.tensor([[1, 0, 0], [1, 0, 0]])
    assert hidden_cosine_loss((c,), (a,), ((0, 0),), mask).item() == pytest.approx(0.0, abs=1e-6)
    expected = (1 - F.cosine_similarity(a, b, dim=-1)).mean().item()
    assert hidden_cosine_loss((a,), (b,), ((0, 0),), None).item() == pytest.approx(expected, rel=1e-5)
    assert layer_pairs((1, 3), "all") == ((1, 2), (2, 4)) and layer_pairs((1, 3), "last") == ((2, 4),)
    with pytest.raises(InputError, match="temperature"):
        DistillWeights(temperature=0)
    with pytest.raises(InputError, match="--alpha-ce"):
        DistillWeights(alpha_ce=-1)


# --------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def distilled(teacher_dir, corpus, tmp_path_factory):
    """A 20-step distillation through the CLI: (run folder, output folder)."""
    root = tmp_path_factory.mktemp("distill")
    out = root / "student"
    assert main(_args(teacher_dir, corpus, root / "run", 20, "--out", str(out))) == 0
    return root / "run", out


def test_cli_run_writes_a_student_that_opens_and_learned(distilled, teacher_dir):
    run_dir, out = distilled
    loaded = load_model(out)
    assert loaded.config.num_layers == 2 and loaded.fill_mask("the cat sat on the [MASK] .").masks
    train = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in train if r.get("split") == "train"]
    assert len(losses) == 20 and sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    assert {"ce_loss", "kl_loss", "cos_loss", "mlm_acc", "nsp_acc"} <= set(train[0])
    last = [r for r in train if r.get("split") == "train"][-1]
    assert 0 <= last["kl_loss"] < last["ce_loss"]
    record = json.loads((out / "compression.json").read_text())
    assert record["method"] == "distill" and record["details"]["kept_layers"] == [1, 3]
    assert record["after"]["parameters"] < record["before"]["parameters"]
    assert [lat["threads"] for lat in record["after"]["latency"]] == [1, 2]
    assert record["after"]["mlm_accuracy"] is not None and record["details"]["teacher_held_out"]["mlm_acc"] >= 0
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == 20
    card = json.loads((out / "model_card.json").read_text())
    assert card["distillation"]["teacher"] == str(teacher_dir) and "Distillation" in (out / "README.md").read_text()
    assert json.loads((run_dir / "run_config.json").read_text())["kind"] == "distill"


def test_student_opens_in_transformers_as_bert_for_pretraining(distilled):
    transformers = pytest.importorskip("transformers")
    _, out = distilled
    hf = transformers.BertForPreTraining.from_pretrained(out).eval()
    ours = load_model(out).model
    ids = torch.tensor([[2, 10, 11, 12, 3, 13, 14, 3]])
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1]])
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=types)
        mine = ours(ids, types)
    torch.testing.assert_close(theirs.prediction_logits, mine.mlm_logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(theirs.seq_relationship_logits, mine.nsp_logits, rtol=1e-4, atol=1e-4)


def test_resume_equals_an_uninterrupted_run(teacher_dir, corpus, tmp_path):
    from bertlab.compress.distill import DistillSettings, run_distillation
    from bertlab.training.pretrain_config import load_config_file

    assert main(_args(teacher_dir, corpus, tmp_path / "whole", 6)) == 0
    args = _args(teacher_dir, corpus, tmp_path / "cut", 6)
    overrides = [a for a in args if "=" in a and not a.startswith("--")]
    cfg = load_config_file(None, overrides)
    result, _, _ = run_distillation(
        cfg, DistillSettings(str(teacher_dir), 2), tmp_path / "cut", progress_bar=False, stop_after_steps=3
    )
    assert result.state == "cancelled" and result.progress.step == 3
    resume = ["compress", "distill", "--resume", "--run-dir", str(tmp_path / "cut"), "--no-progress", "--repeats", "2"]
    assert main(resume) == 0
    whole, cut = load_model(tmp_path / "whole" / "model").model, load_model(tmp_path / "cut" / "model").model
    for (name, a), (_, b) in zip(whole.state_dict().items(), cut.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_bad_input_is_one_line_and_makes_no_run(teacher_dir, corpus, tiny_albert_checkpoint, tmp_path, capsys):
    def fails(args, message):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err

    base = ["compress", "distill", "--teacher", str(teacher_dir), "--run-dir", str(tmp_path / "r")]
    fails([*base, "--layers", "4"], "the teacher has 4 layers")
    fails([*base, "--layers", "0"], "--layers must be 1 or more")
    fails([*base[:2], "--layers", "2"], "give --teacher MODEL and --layers N")
    fails([*base, "--layers", "2", "--temperature", "0"], "--temperature must be above 0")
    fails(["compress", "distill", "--resume", "--no-progress"], "--resume needs --run-dir")
    # a teacher without its masked-LM head (an encoder, as a fine-tuned classifier's)
    encoder = load_model(teacher_dir).model
    bare = {k: v for k, v in encoder.state_dict().items() if k.startswith("bert.")}
    headless = save_checkpoint(tmp_path / "headless", encoder, load_model(teacher_dir).tokenizer, weights=bare)
    fails(
        [*base[:2], "--teacher", str(headless), "--layers", "1", "--run-dir", str(tmp_path / "r")], "no masked-LM head"
    )
    fails([*base[:2], "--teacher", str(tiny_albert_checkpoint), "--layers", "1"], "students of BERTs only")
    fails([*base, "--layers", "2", "--out", str(teacher_dir)], "--out")
    assert not (tmp_path / "r").exists()


def test_a_distillation_is_a_job_with_an_estimate(teacher_dir, corpus, tmp_path):
    from bertlab.jobs.estimates.spec import estimate_spec
    from bertlab.jobs.spec import JobSpec, build_command, validate

    args = ("--teacher", str(teacher_dir), "--layers", "2", f"corpus={corpus}", "train.max_steps=40")
    spec = validate(JobSpec("distill", args, device="cpu"), cwd=tmp_path, gpus=0)
    argv = build_command(spec, tmp_path / "run", resume=True)
    at = argv.index("bertlab")
    assert (
        argv[at : at + 3] == ["bertlab", "compress", "distill"] and "--resume" in argv and str(tmp_path / "run") in argv
    )
    est = estimate_spec(spec, cwd=tmp_path, measure=False, gpus=0)
    assert est.steps == 40 and est.seconds and "teacher's forward pass" in est.notes[0]
    with pytest.raises(InputError, match="--teacher MODEL and --layers N"):
        validate(JobSpec("distill", ("--layers", "2"), device="cpu"), cwd=tmp_path, gpus=0)
    with pytest.raises(InputError, match="not found"):
        validate(JobSpec("distill", ("--teacher", "nowhere/x/y", "--layers", "2"), device="cpu"), cwd=tmp_path, gpus=0)


def test_a_fine_tuned_classifier_distilled_on_its_task(sst2_run, tiny_checkpoint, tmp_path, capsys):
    from bertlab.finetune.predict import load_finetuned

    out = tmp_path / "student"
    args = ["compress", "distill", "--teacher", str(sst2_run / "model"), "--layers", "1", "--task", "sst2"]
    args += ["--data", str(sst2_run.parent), "--run-dir", str(tmp_path / "run"), "--no-progress", "--repeats", "2"]
    assert main([*args, "--out", str(out), "train.max_steps=4", "train.batch_size=4", "train.log_every=1"]) == 0
    student = load_finetuned(out, device="cpu")
    assert student.model.config.num_layers == 1 and student.predict("the cat sat on the mat").label in ("0", "1")
    record = json.loads((out / "compression.json").read_text())
    assert record["kind"] == "classifier" and record["method"] == "distill" and record["dev"].endswith("dev.tsv")
    assert record["after"]["parameters"] < record["before"]["parameters"]
    assert record["after"]["dev_accuracy"] is not None and record["before"]["dev_accuracy"] is not None
    train = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {"ce_loss", "teacher_agreement", "acc"} <= set(train[0])
    capsys.readouterr()
    # the student's layer, embeddings and classifier are the teacher's at the start
    teacher = load_finetuned(sst2_run / "model", device="cpu").model
    from bertlab.compress.distill_classifier import make_student_classifier

    fresh, kept = make_student_classifier(teacher, load_finetuned(sst2_run / "model").setup, 1)
    assert kept == (1,)
    torch.testing.assert_close(fresh.classifier.weight, teacher.classifier.weight, rtol=0, atol=0)
    torch.testing.assert_close(
        fresh.bert.encoder.layer[0].output.dense.weight,
        teacher.bert.encoder.layer[1].output.dense.weight,
        rtol=0,
        atol=0,
    )
    # a pretraining folder is no classifier teacher
    bad = ["compress", "distill", "--teacher", str(tiny_checkpoint), "--layers", "1", "--task", "sst2"]
    assert main([*bad, "--data", str(sst2_run.parent), "--run-dir", str(tmp_path / "r2")]) == 2
    assert "\n" not in capsys.readouterr().err.strip()
