"""bertlab.interpret.attribution leaves the model it explains alone: the app caches one model object
per process and every session calls it, so while Captum explains in one thread another thread must
get its usual answers (not Captum's interpolated embeddings), its calls must not change what Captum
computes, and no hook, mode, flag or gradient may stay behind.

The attribution is stopped at every forward pass (inside `target_probability`, where Captum's hooks
are on) and the main thread uses the same model while it waits, so the check does not depend on
timing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from interpret_models import Pauses, finetuned, one_torch_thread, pretrained

from bertlab.data.batching import pad_batch
from bertlab.interpret import attribution
from bertlab.interpret.attribution import attribute

PROBE = "the cat sat on the [MASK] ."
TEXTS = ["the cat sat on the mat", "a dog ran to the park", "the bird sang in the tree", "paris is a big city"]


def _pretrained_case(tokenizer):
    lm = pretrained(tokenizer)
    batch = lm._batch(lm.tokenizer.encode_batch(["the dog ran to the [MASK] in the park"]))

    def answer():
        with torch.no_grad():
            logits = lm.model(**batch).mlm_logits
        return logits, lm.fill_mask(PROBE, top_k=3, joint=False)

    return lm, lm.model, PROBE, answer


def _finetuned_case(tokenizer):
    fm = finetuned(tokenizer)
    encs = fm.tokenizer.encode_batch(TEXTS)
    batch = pad_batch([e.ids for e in encs], fm.tokenizer.pad_id, [e.type_ids for e in encs])

    def answer():
        with torch.no_grad():
            logits = fm.model(**batch).logits
        return logits, [fm.predict(t) for t in TEXTS]

    return fm, fm.model, "the dog ran to the park .", answer


def _explain(model, text):
    return attribute(model, text, steps=4, max_steps=4)


def _assert_same(got, expected):
    assert got.tokens == expected.tokens and got.target == expected.target
    assert (got.prediction, got.baseline_prediction, got.delta) == (
        expected.prediction,
        expected.baseline_prediction,
        expected.delta,
    )
    np.testing.assert_array_equal(got.gradient_x_input, expected.gradient_x_input)
    np.testing.assert_array_equal(got.integrated_gradients, expected.integrated_gradients)


@pytest.fixture(autouse=True)
def _one_thread():
    with one_torch_thread():
        yield


@pytest.mark.parametrize("case", [_pretrained_case, _finetuned_case], ids=["masked-lm", "classifier"])
def test_another_thread_gets_its_usual_answers_while_attribution_runs(tokenizer, monkeypatch, case):
    model, module, text, answer = case(tokenizer)
    original = attribution.target_probability
    passes = [0]

    def counted(*args):
        passes[0] += 1
        return original(*args)

    monkeypatch.setattr(attribution, "target_probability", counted)
    alone = _explain(model, text)
    pauses = Pauses()

    def paused(*args):
        out = counted(*args)
        pauses.pause()  # a forward pass is done, Captum's hooks still on
        return out

    monkeypatch.setattr(attribution, "target_probability", paused)
    passes[0] = 0
    checks, explained, failure = pauses.check(lambda: _explain(model, text), module, answer)
    assert not failure, failure
    assert checks == passes[0] >= 5  # input, baseline, gradient x input, integrated gradients' steps and delta
    _assert_same(explained[0], alone)  # the main thread's calls did not reach Captum either


def test_a_hook_someone_else_has_on_the_model_stays_out_of_attribution(tokenizer):
    """Captum's hook from an attribution that runs on the shared model (as before, or in code that
    is not ours) must neither run in this one nor change its numbers."""
    lm = pretrained(tokenizer)
    plain = _explain(lm, PROBE)
    calls = []

    def foreign(module, args, output):
        calls.append(1)
        return output * 0.5

    handle = lm.model.bert.embeddings.word_embeddings.register_forward_hook(foreign)
    try:
        hooked = _explain(lm, PROBE)
    finally:
        handle.remove()
    assert not calls
    _assert_same(hooked, plain)
