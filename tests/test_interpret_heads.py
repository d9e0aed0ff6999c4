"""bertlab.interpret.heads: gates (on a private copy) equal the model's own head_mask, importance
on a model whose heads are known by construction, pruning curves, the saved study and the `heads` command."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config
from interpret_models import finetuned, one_live_head, pretrained

from bertlab.errors import InputError
from bertlab.finetune.data import SequenceExample
from bertlab.finetune.predict import save_finetuned
from bertlab.inference import load_model
from bertlab.interpret import cli, heads
from bertlab.interpret.heads import (
    HeadStudy,
    LabelledSentences,
    MaskedSentences,
    evaluate_gates,
    gated,
    head_importance,
    pruning_curve,
    study_heads,
)
from bertlab.interpret.saved import read_results
from bertlab.interpret.targets import as_subject
from bertlab.jobs.spec import JobError, parse_recipe_args

TEXTS = ["the cat sat on the mat", "a dog ran to the park", "the bird sang in the tree", "paris is a big city"] * 3


def own_labels(fm, texts):
    """The classifier's own answers as labels: the whole model scores 100%."""
    return [SequenceExample(t, None, fm.predict(t).label) for t in texts]


def test_gates_equal_the_models_head_mask(tokenizer):
    lm = pretrained(tokenizer)
    batch = lm._batch(lm.tokenizer.encode_batch(["the cat sat on the mat"]))
    mask = torch.ones(2, 4)
    mask[0, 1] = mask[1, 3] = 0
    view = gated(as_subject(lm), mask)
    with torch.no_grad():
        expected = lm.model(**batch, head_mask=mask).mlm_logits
        plain = lm.model(**batch).mlm_logits
        got = view.module(**batch).mlm_logits
        after = lm.model(**batch).mlm_logits
        mask.fill_(1.0)  # the copy reads the gates it was given: now every head is on
        reopened = view.module(**batch).mlm_logits
    torch.testing.assert_close(got, expected)
    assert not torch.allclose(plain, expected)
    assert torch.equal(after, plain)  # the gates are on a private copy, never on the model itself
    torch.testing.assert_close(reopened, plain)
    assert view.module is not lm.model
    shared, private = (
        lm.model.bert.embeddings.word_embeddings.weight,
        view.module.bert.embeddings.word_embeddings.weight,
    )
    assert private.data_ptr() == shared.data_ptr() and not private.requires_grad  # same storage, read-only
    assert view.module.cls.predictions.decoder.weight is private  # tied weights stay tied
    with pytest.raises(InputError, match=r"\(2, 4\)"):
        gated(as_subject(lm), torch.ones(3, 4))


def test_gates_on_a_shared_albert_are_each_layers_own(tiny_albert_checkpoint):
    """ALBERT's shared layers are one module run L times: the gates reach layer i as the head mask's
    row i, so each layer's gradients are its own, equal to central differences of the loss taken
    through the model's head_mask (float64), one gate at a time."""
    lm = load_model(tiny_albert_checkpoint, device="cpu", dtype=torch.float64)
    layers = lm.model.bert.encoder.layer
    assert lm.config.parameter_sharing == "all" and len({id(layer) for layer in layers}) == 1
    subject = as_subject(lm)
    (batch,) = heads._batches(subject, MaskedSentences(TEXTS[:4], mask_prob=0.3), batch_size=4)
    L, A = lm.config.num_layers, lm.config.num_heads
    gates = torch.ones(L, A, dtype=torch.float64, requires_grad=True)
    loss, _, _ = heads._loss_and_correct(gated(subject, gates), batch)
    (grad,) = torch.autograd.grad(loss, gates)

    select = batch.labels != -100

    def loss_with(mask: torch.Tensor) -> float:  # in float64 throughout (the study's loss is float32)
        with torch.no_grad():
            logits = lm.model(**batch.inputs, mlm_positions=select, head_mask=mask).mlm_logits  # (N, V)
            return float(F.cross_entropy(logits, batch.labels[select]))

    eps = 1e-5
    reference = torch.zeros(L, A, dtype=torch.float64)
    for layer in range(L):
        for head in range(A):
            up, down = torch.ones(L, A, dtype=torch.float64), torch.ones(L, A, dtype=torch.float64)
            up[layer, head], down[layer, head] = 1 + eps, 1 - eps
            reference[layer, head] = (loss_with(up) - loss_with(down)) / (2 * eps)
    torch.testing.assert_close(grad, reference, rtol=1e-5, atol=1e-8)
    assert not torch.allclose(grad[0], grad[1])  # a hook on the shared module would gate both layers alike
    imp = head_importance(lm, MaskedSentences(TEXTS[:4], mask_prob=0.3), batch_size=4)
    np.testing.assert_allclose(imp.raw, grad.abs().numpy(), rtol=1e-6)


def test_pruning_the_most_important_head_hurts_more_than_the_least(tokenizer):
    fm = one_live_head(tokenizer, layer=0, head=1)
    data = LabelledSentences(own_labels(fm, TEXTS))
    imp = head_importance(fm, data, batch_size=4)
    assert imp.metric == 1.0
    assert imp.order()[-1] == (0, 1)  # the one head that carries anything is the most important
    assert imp.raw[0, 1] > 0 and np.count_nonzero(imp.raw) == 1  # constant heads get no gradient
    most, least = torch.ones(2, 4), torch.ones(2, 4)
    most[imp.order()[-1]] = 0
    least[imp.order()[0]] = 0
    acc_most, loss_most = evaluate_gates(fm, data, most)
    acc_least, loss_least = evaluate_gates(fm, data, least)
    assert loss_least == pytest.approx(imp.loss, abs=1e-6) and acc_least == 1.0  # pruning a dead head changes nothing
    assert loss_most > loss_least + 1e-3


def test_importance_is_normalised_per_layer(tokenizer):
    fm = finetuned(tokenizer)
    imp = head_importance(fm, LabelledSentences(own_labels(fm, TEXTS)), batch_size=1)
    np.testing.assert_allclose(np.linalg.norm(imp.scores, axis=1), 1.0)
    assert imp.examples == len(TEXTS)
    assert len(imp.order()) == 8 and len(set(imp.order())) == 8


def test_pruning_curve_runs_from_none_to_all_heads(tokenizer):
    fm = one_live_head(tokenizer)
    data = LabelledSentences(own_labels(fm, TEXTS))
    imp = head_importance(fm, data)
    curve = pruning_curve(fm, data, imp, points=5, random_orders=2)
    assert curve.pruned == [0, 2, 4, 6, 8] and curve.share == [0, 0.25, 0.5, 0.75, 1.0]
    assert curve.by_importance[0] == curve.random[0] == 1.0
    assert curve.by_importance[-1] == pytest.approx(curve.random[-1])  # everything pruned either way
    # least important first keeps the live head until the very end: no loss until then
    assert curve.by_importance_loss[3] == pytest.approx(imp.loss, abs=1e-6)
    assert all(
        lo <= m + 1e-12 <= hi + 2e-12
        for lo, m, hi in zip(curve.random_min, curve.random, curve.random_max, strict=True)
    )


def test_masked_lm_study_on_a_pretrained_model(tokenizer):
    lm = pretrained(tokenizer)
    data = MaskedSentences(TEXTS, seed=1)
    study = study_heads(lm, data, "mlm", points=3, random_orders=1)
    assert np.array(study.importance).shape == (2, 4)
    assert study.pruning.pruned == [0, 4, 8]
    assert HeadStudy.from_dict(study.to_dict()) == study
    with pytest.raises(InputError, match="pretrained"):
        head_importance(finetuned(tokenizer), data)
    with pytest.raises(InputError, match="classifier"):
        head_importance(lm, LabelledSentences([SequenceExample("the cat", None, "pos")]))


def test_the_heads_command(tmp_path, tokenizer, tiny_checkpoint):
    fm = one_live_head(tokenizer)
    model = tmp_path / "model"
    save_finetuned(model, fm.model, tokenizer, fm.setup)
    tsv = tmp_path / "dev.tsv"
    rows = [f"{e.text_a}\t{1 if e.label == 'pos' else 0}" for e in own_labels(fm, TEXTS)]
    tsv.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    # the model's labels are neg/pos, SST-2's are 0/1: a plain error
    assert cli.main(["heads", "--model", str(model), "--task", "sst2", "--data", str(tsv), "--points", "3"]) == 2
    pre = tmp_path / "pre"
    shutil.copytree(tiny_checkpoint, pre)
    (tmp_path / "s.txt").write_text("\n".join(TEXTS), encoding="utf-8")
    args = ["heads", "--model", str(pre), "--task", "mlm", "--sentences", str(tmp_path / "s.txt"), "--points", "3"]
    assert cli.main([*args, "--random-orders", "1"]) == 0
    saved = HeadStudy.from_dict(read_results(pre, "heads")["mlm"])
    assert saved.data == {"file": "s.txt", "examples": len(TEXTS)} and saved.pruning.pruned == [0, 4, 8]


def test_pruning_curves_need_two_points_and_a_random_order(tokenizer):
    fm = one_live_head(tokenizer)
    data = LabelledSentences(own_labels(fm, TEXTS[:4]))
    imp = head_importance(fm, data)
    with pytest.raises(InputError, match="random_orders.*at least 1, got 0"):
        pruning_curve(fm, data, imp, points=3, random_orders=0)  # used to fail in numpy's min()
    for points in (-3, 1, 2.5):
        with pytest.raises(InputError, match="points"):
            pruning_curve(fm, data, imp, points=points)
    with pytest.raises(InputError, match="random_orders"):
        study_heads(fm, data, "sst2", random_orders=0)  # refused before the importance pass
    assert pruning_curve(fm, data, imp, points=2, random_orders=1).pruned == [0, 8]


def test_bad_head_data_and_batch_sizes_are_input_errors(tokenizer):
    lm = pretrained(tokenizer)
    for batch_size in (0, -1, 2.5):
        with pytest.raises(InputError, match="batch_size"):
            head_importance(lm, MaskedSentences(TEXTS), batch_size=batch_size)
    for mask_prob in (5.0, -1, 0, "0.15"):
        with pytest.raises(InputError, match="mask_prob"):
            MaskedSentences(TEXTS, mask_prob=mask_prob)
    with pytest.raises(InputError, match="MaskedSentences\\(sentences\\)"):
        head_importance(lm, list(TEXTS))
    with pytest.raises(InputError, match="one string"):
        MaskedSentences("the cat sat on the mat")
    with pytest.raises(InputError, match="sentence 2"):
        MaskedSentences(["the cat", ""])
    with pytest.raises(InputError, match="SequenceExample"):
        LabelledSentences([("the cat", None, "pos")])
    assert head_importance(lm, MaskedSentences(TEXTS[:2], mask_prob=1.0)).examples == 2


def test_the_heads_command_refuses_bad_counts_before_it_starts(tmp_path):
    sentences = tmp_path / "s.txt"
    sentences.write_text("the cat sat\n", encoding="utf-8")
    base = ["heads", "--model", "m", "--task", "mlm", "--sentences", str(sentences)]
    for bad in (["--random-orders", "0"], ["--points", "-3"], ["--points", "1"], ["--max-examples", "-3"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main([*base, *bad])
        assert exit_.value.code == 2
        with pytest.raises(JobError, match=">= "):
            parse_recipe_args("interpret", (*base, *bad))  # a job is refused when submitted
    probe = ["probe", "--model", "m", "--task", "upos", "--train", "t.conllu", "--eval", "e.conllu"]
    for bad in (["--max-train-sentences", "0"], ["--max-eval-sentences", "-1"], ["--threads", "0"]):
        with pytest.raises(JobError, match=">= "):  # the probe's counts too
            parse_recipe_args("interpret", (*probe, *bad))


def test_gradients_through_a_gpu_lstm_head_turn_cudnn_off_and_nothing_else(tokenizer, monkeypatch):
    """cuDNN runs an RNN's backward pass in training mode only, and attribution and head importance
    take gradients through eval-mode copies: on a GPU a model with Table 5's + BiLSTM head would stop
    with 'cudnn RNN backward can only be called in training mode'. (No GPU here: where the model sits
    is faked; that the context is used is checked by running both with it patched.)"""
    from bertlab.finetune.models import HeadConfig, build_task_model
    from bertlab.interpret import attribution, targets

    bilstm = build_task_model(tiny_config(len(tokenizer)), HeadConfig("single", 2, bilstm=True, lstm_hidden=8))
    assert not targets._rnn_on_cuda(bilstm)  # on the CPU: cuDNN is not involved
    cudnn = torch.backends.cudnn
    before = (cudnn.enabled, cudnn.benchmark, cudnn.deterministic)
    monkeypatch.setattr(targets, "_rnn_on_cuda", lambda module: True)
    with targets.gradients_through(bilstm):
        assert torch.is_grad_enabled() and not cudnn.enabled
        assert (cudnn.benchmark, cudnn.deterministic) == before[1:]
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == before
    used = []
    original = targets.gradients_through

    def recording(module):
        used.append(module)
        return original(module)

    monkeypatch.setattr(attribution, "gradients_through", recording)
    monkeypatch.setattr(heads, "gradients_through", recording)
    lm = pretrained(tokenizer)
    attribution.attribute(lm, "the cat sat on the [MASK] .", steps=4, max_steps=4)
    head_importance(lm, MaskedSentences(["the cat sat on the mat", "a dog ran to the park"], seed=1))
    assert len(used) == 2 and all(type(m) is type(lm.model) for m in used)  # the model or its private copy


# --------------------------------------------------------------------------------------
# The same on a real GPU: cuDNN itself refuses an eval-mode RNN backward (skipped without CUDA)
# --------------------------------------------------------------------------------------
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's LSTM kernels)")
CUDNN_REFUSES = "cudnn RNN backward can only be called in training mode"


def bilstm_model(tokenizer, shape: str = "single", labels=("neg", "pos"), device: str = "cuda"):
    """A tiny fine-tuned model with Table 5's + BiLSTM head on `device`; the same weights on every device."""
    from bertlab.finetune.models import HeadConfig, build_task_model
    from bertlab.finetune.predict import FinetunedModel, TaskSetup

    torch.manual_seed(0)
    head = HeadConfig(shape, len(labels), bilstm=True, lstm_hidden=8)
    model = build_task_model(tiny_config(len(tokenizer), initializer_range=0.2), head).to(device).eval()
    setup = TaskSetup("custom", shape, tuple(labels), head, max_seq_length=64)
    return FinetunedModel(model, tokenizer, setup, {}, f"tiny-{shape}-bilstm", torch.device(device))


def cudnn_settings() -> tuple:
    cudnn = torch.backends.cudnn
    return cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32


@needs_cuda
def test_attribution_of_a_bilstm_model_on_a_real_gpu(tokenizer, monkeypatch):
    """'Why it answered' on + BiLSTM classifier and tagger on CUDA: finite scores, one per token, the
    same as on the CPU; cuDNN as it was afterwards. Without the fix (cuDNN left on) cuDNN refuses."""
    from bertlab.interpret import targets
    from bertlab.interpret.attribution import attribute
    from bertlab.interpret.targets import TaskLabel

    before = cudnn_settings()
    cases = [
        ("single", ("neg", "pos"), TaskLabel("pos"), "the dog ran to the park ."),
        ("tagging", ("O", "B-X"), TaskLabel(position=1), "paris is big"),
    ]
    for shape, labels, target, text in cases:
        fm = bilstm_model(tokenizer, shape, labels)
        assert targets._rnn_on_cuda(fm.model)
        a = attribute(fm, text, target=target, steps=8, max_steps=8)
        assert cudnn_settings() == before
        assert len(a.tokens) == len(a.integrated_gradients) == len(a.gradient_x_input) >= 3
        assert np.isfinite(a.integrated_gradients).all() and np.isfinite(a.gradient_x_input).all()
        assert 0 < a.prediction < 1 and np.isfinite(a.delta) and a.steps == 8
        on_cpu = attribute(bilstm_model(tokenizer, shape, labels, "cpu"), text, target=target, steps=8, max_steps=8)
        assert a.tokens == on_cpu.tokens
        np.testing.assert_allclose(a.integrated_gradients, on_cpu.integrated_gradients, rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(a.gradient_x_input, on_cpu.gradient_x_input, rtol=1e-3, atol=1e-5)
    if torch.backends.cudnn.is_available():  # before the fix: cuDNN on for the eval-mode copy
        monkeypatch.setattr(targets, "_rnn_on_cuda", lambda module: False)
        monkeypatch.setattr(torch.backends.cudnn, "enabled", True)
        with pytest.raises(RuntimeError, match=CUDNN_REFUSES):
            attribute(fm, text, target=target, steps=8, max_steps=8)


@needs_cuda
def test_head_importance_of_a_bilstm_classifier_on_a_real_gpu(tokenizer, monkeypatch):
    """'Which heads matter' on a + BiLSTM classifier on CUDA: finite (layers, heads) scores, the same as
    on the CPU; cuDNN as it was afterwards. Without the fix (cuDNN left on) cuDNN refuses."""
    from bertlab.interpret import targets

    before = cudnn_settings()
    fm = bilstm_model(tokenizer)
    data = LabelledSentences(own_labels(fm, TEXTS))
    imp = head_importance(fm, data, batch_size=4)
    assert cudnn_settings() == before
    assert imp.scores.shape == imp.raw.shape == (2, 4) and imp.examples == len(TEXTS)
    assert np.isfinite(imp.scores).all() and np.isfinite(imp.raw).all() and imp.raw.sum() > 0
    assert imp.metric == 1.0 and np.isfinite(imp.loss)  # its own answers as labels
    on_cpu = head_importance(bilstm_model(tokenizer, device="cpu"), data, batch_size=4)
    np.testing.assert_allclose(imp.raw, on_cpu.raw, rtol=1e-3, atol=1e-7)
    assert imp.loss == pytest.approx(on_cpu.loss, rel=1e-4)
    if torch.backends.cudnn.is_available():  # before the fix: cuDNN on for the eval-mode copy
        monkeypatch.setattr(targets, "_rnn_on_cuda", lambda module: False)
        monkeypatch.setattr(torch.backends.cudnn, "enabled", True)
        with pytest.raises(RuntimeError, match=CUDNN_REFUSES):
            head_importance(fm, data, batch_size=4)
