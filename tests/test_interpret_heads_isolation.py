"""bertlab.interpret.heads leaves the model it studies alone: the app caches one model object per
process and every session calls it, so while a study runs in one thread another thread's answers
must be the unpruned ones, and no hook, mode, flag or gradient may stay behind.

The study is stopped mid-way (inside `_loss_and_correct`, where the gates are on) and the main
thread uses the same model while it waits, so the check does not depend on timing."""

from __future__ import annotations

import threading

import pytest
import torch
from interpret_models import finetuned, pretrained

from bertlab.batching import pad_batch
from bertlab.finetune.data import SequenceExample
from bertlab.interpret import heads
from bertlab.interpret.heads import LabelledSentences, MaskedSentences, study_heads

TEXTS = ["the cat sat on the mat", "a dog ran to the park", "the bird sang in the tree", "paris is a big city"] * 3
PROBE = "the cat sat on the [MASK]"


def _state(module: torch.nn.Module) -> tuple[list, list]:
    """What a study could change on a model: modes and hooks of every module, flags, gradients
    and contents (storage and version) of every weight."""
    modules = [
        (name, m.training, {k: len(v) for k, v in vars(m).items() if "hooks" in k and isinstance(v, dict)})
        for name, m in module.named_modules()
    ]
    weights = [
        (name, p.requires_grad, p.grad is None, p.data_ptr(), p._version) for name, p in module.named_parameters()
    ]
    return modules, weights


def _pretrained_case(tokenizer):
    lm = pretrained(tokenizer)
    batch = lm._batch(lm.tokenizer.encode_batch([PROBE]))

    def answer():
        with torch.no_grad():
            logits = lm.model(**batch).mlm_logits
        return logits, lm.fill_mask(PROBE, top_k=3, joint=False)

    return lm, lm.model, MaskedSentences(TEXTS, seed=1), answer


def _finetuned_case(tokenizer):
    fm = finetuned(tokenizer)
    encs = fm.tokenizer.encode_batch(TEXTS[:4])
    batch = pad_batch([e.ids for e in encs], fm.tokenizer.pad_id, [e.type_ids for e in encs])

    def answer():
        with torch.no_grad():
            logits = fm.model(**batch).logits
        return logits, [fm.predict(t) for t in TEXTS[:4]]

    data = LabelledSentences([SequenceExample(t, None, fm.predict(t).label) for t in TEXTS])
    return fm, fm.model, data, answer


@pytest.mark.parametrize("case", [_pretrained_case, _finetuned_case], ids=["masked-lm", "classifier"])
def test_another_thread_gets_unpruned_answers_while_a_study_runs(tokenizer, monkeypatch, case):
    model, module, data, answer = case(tokenizer)
    logits_before, result_before = answer()
    state_before = _state(module)
    meet = threading.Barrier(2, timeout=60)
    original = heads._loss_and_correct

    def paused(subject, batch):
        out = original(subject, batch)
        meet.wait()  # the study is mid-way, its gates on: the main thread uses the model now
        meet.wait()  # ... and is done
        return out

    monkeypatch.setattr(heads, "_loss_and_correct", paused)
    failure = []

    def study():
        try:
            study_heads(model, data, "t", points=3, random_orders=1, batch_size=4)
        except BaseException as e:  # noqa: BLE001 (reported in the main thread)
            failure.append(e)
        finally:
            meet.abort()  # the main thread stops waiting

    worker = threading.Thread(target=study, daemon=True)
    worker.start()
    checks = 0
    try:
        while True:
            try:
                meet.wait()
            except threading.BrokenBarrierError:
                break
            logits, result = answer()
            assert torch.equal(logits, logits_before), f"pruned answer at check {checks + 1}"
            assert result == result_before
            assert _state(module) == state_before, f"the model was changed at check {checks + 1}"
            checks += 1
            meet.wait()
    finally:
        meet.abort()
        worker.join(60)
    assert not failure or isinstance(failure[0], threading.BrokenBarrierError), failure
    assert not worker.is_alive()
    assert checks == 3 + 6  # 3 batches of importance, then 3 points x (importance order + 1 random order)
    assert _state(module) == state_before
    logits_after, result_after = answer()
    assert torch.equal(logits_after, logits_before) and result_after == result_before


def test_a_hook_someone_else_has_on_the_model_stays_out_of_the_study(tokenizer):
    """Captum hooks the shared model's embeddings while it explains; a study running meanwhile
    must neither run that hook nor have its numbers changed by it."""
    lm = pretrained(tokenizer)
    data = MaskedSentences(TEXTS[:4], seed=1)
    plain = study_heads(lm, data, "t", points=2, random_orders=1)
    calls = []

    def foreign(module, args, output):
        calls.append(1)
        return output * 0.0

    handle = lm.model.bert.embeddings.register_forward_hook(foreign)
    try:
        hooked = study_heads(lm, data, "t", points=2, random_orders=1)
    finally:
        handle.remove()
    assert not calls
    assert hooked.importance == plain.importance and hooked.curve == plain.curve
