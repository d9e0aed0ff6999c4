"""bertlab.interpret.heads leaves the model it studies alone: the app caches one model object per
process and every session calls it, so while a study runs in one thread another thread's answers
must be the unpruned ones, and no hook, mode, flag or gradient may stay behind.

The study is stopped mid-way (inside `_loss_and_correct`, where the gates are on) and the main
thread uses the same model while it waits, so the check does not depend on timing."""

from __future__ import annotations

import pytest
import torch
from interpret_models import Pauses, finetuned, one_torch_thread, pretrained

from bertlab.data.batching import pad_batch
from bertlab.finetune.data import SequenceExample
from bertlab.interpret import heads
from bertlab.interpret.heads import LabelledSentences, MaskedSentences, study_heads

TEXTS = ["the cat sat on the mat", "a dog ran to the park", "the bird sang in the tree", "paris is a big city"] * 3
PROBE = "the cat sat on the [MASK]"


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


@pytest.fixture(autouse=True)
def _one_thread():
    with one_torch_thread():
        yield


@pytest.mark.parametrize("case", [_pretrained_case, _finetuned_case], ids=["masked-lm", "classifier"])
def test_another_thread_gets_unpruned_answers_while_a_study_runs(tokenizer, monkeypatch, case):
    model, module, data, answer = case(tokenizer)
    pauses = Pauses()
    original = heads._loss_and_correct

    def paused(subject, batch):
        out = original(subject, batch)
        pauses.pause()  # the study is mid-way, its gates on
        return out

    monkeypatch.setattr(heads, "_loss_and_correct", paused)
    study = lambda: study_heads(model, data, "t", points=3, random_orders=1, batch_size=4)  # noqa: E731
    checks, _, failure = pauses.check(study, module, answer)
    assert not failure, failure
    assert checks == 3 + 6  # 3 batches of importance, then 3 points x (importance order + 1 random order)


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
