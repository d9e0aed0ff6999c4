"""Tiny models the interpret tests build for themselves: random ones, and constructed ones whose
attention or heads are known by construction. CPU, offline, no ../shared."""

from __future__ import annotations

import contextlib
import threading

import torch
from conftest import tiny_config

from bertlab.finetune.models import HeadConfig, build_task_model
from bertlab.finetune.predict import FinetunedModel, TaskSetup
from bertlab.inference import LoadedModel
from bertlab.model import BertForPreTraining


def pretrained(tokenizer, seed: int = 0, std: float = 0.2) -> LoadedModel:
    """A random tiny BERT; a wide init so its answers depend on the words."""
    torch.manual_seed(seed)
    model = BertForPreTraining(tiny_config(len(tokenizer), initializer_range=std))
    model.tie_weights()
    return LoadedModel(model, tokenizer)


def finetuned(tokenizer, shape: str = "single", labels=("neg", "pos"), seed: int = 0) -> FinetunedModel:
    torch.manual_seed(seed)
    head = HeadConfig(shape, 2 if shape == "qa" else len(labels))
    model = build_task_model(tiny_config(len(tokenizer), initializer_range=0.2), head).eval()
    setup = TaskSetup("custom", shape, () if shape == "qa" else tuple(labels), head, max_seq_length=64)
    return FinetunedModel(model, tokenizer, setup, {}, f"tiny-{shape}", torch.device("cpu"))


def identity_attention(tokenizer) -> LoadedModel:
    """A model whose every head attends only to the token itself (inputs of at most 7 tokens).

    Words and segments embed to zero; position p embeds to a row of an 8x8 Hadamard matrix (not
    the all-ones row) repeated once per head, so every head sees positions as orthogonal, zero-mean
    vectors that LayerNorm leaves as they are. Query = key = 4 x identity makes a token's score
    with itself 8 x 16 / sqrt(8) = 45 above any other (softmax: 1 - 1e-19). Value, attention output
    and feed-forward output are zero, so each layer passes its input on unchanged."""
    config = tiny_config(len(tokenizer), hidden_size=32, num_heads=4, hidden_dropout=0.0, attention_dropout=0.0)
    model = BertForPreTraining(config).eval()
    h = torch.tensor([[1.0]])
    while h.shape[0] < 8:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)  # Sylvester: 8 x 8 Hadamard
    with torch.no_grad():
        emb = model.bert.embeddings
        emb.word_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        emb.position_embeddings.weight.zero_()
        emb.position_embeddings.weight[:7] = h[1:].repeat(1, 4)  # (7, 32), rows zero-mean, per head orthogonal
        for layer in model.bert.encoder.layer:
            att = layer.attention.self
            att.query.weight.copy_(4 * torch.eye(32))
            att.key.weight.copy_(4 * torch.eye(32))
            for linear in (att.query, att.key, att.value, layer.attention.output.dense, layer.output.dense):
                linear.bias.zero_()
            att.value.weight.zero_()
            layer.attention.output.dense.weight.zero_()
            layer.output.dense.weight.zero_()
    return LoadedModel(model, tokenizer)


def one_live_head(tokenizer, layer: int = 0, head: int = 1) -> FinetunedModel:
    """A classifier in which only head (`layer`, `head`) moves information: every other head's value
    weights are zero, so its output is a constant and its gate gets no gradient."""
    fm = finetuned(tokenizer, seed=3)
    hs = fm.model.config.head_size
    with torch.no_grad():
        for i, block in enumerate(fm.model.bert.encoder.layer):
            value = block.attention.self.value
            keep = value.weight[head * hs : (head + 1) * hs].clone() * 5
            value.weight.zero_()
            value.bias.zero_()
            if i == layer:
                value.weight[head * hs : (head + 1) * hs] = keep
    return fm


def model_state(module: torch.nn.Module) -> tuple[list, list]:
    """What a study or an explanation could change on a shared model: modes and hooks of every module,
    flags, gradients and contents (storage and version) of every weight."""
    modules = [
        (name, m.training, {k: len(v) for k, v in vars(m).items() if "hooks" in k and isinstance(v, dict)})
        for name, m in module.named_modules()
    ]
    weights = [
        (name, p.requires_grad, p.grad is None, p.data_ptr(), p._version) for name, p in module.named_parameters()
    ]
    return modules, weights


class Pauses:
    """Runs work on a shared model in a worker thread that stops at fixed points (`pause()`, called from
    a function the test patches), where the main thread uses the same model and checks that its
    answers and state are as before: a check that does not depend on timing."""

    TIMEOUT_S = 600  # the main thread's waits only: a hang fails the test instead of the whole run

    def __init__(self) -> None:
        # no timeout on the worker's side: on a busy CI machine the main thread's checks once took long
        # enough for a 60 s barrier timeout to break the barrier mid-check
        self.meet = threading.Barrier(2)

    def pause(self) -> None:
        self.meet.wait()  # the work is mid-way: the main thread uses the model now
        self.meet.wait()  # ... and is done

    def check(self, work, module: torch.nn.Module, answer) -> tuple[int, list, list]:
        """(checks made, what `work` returned, what it raised) after running it; `answer()` returns
        (logits, results) of the main thread's own call, compared with its answer before the work.
        Run it under `one_torch_thread` (answers then compare bit for bit whichever thread computes
        them, and no thread pools compete for a 2-core machine's cores)."""
        logits_before, result_before = answer()
        state_before = model_state(module)
        returned, failure = [], []

        def run():
            try:
                returned.append(work())
            except BaseException as e:  # noqa: BLE001 (reported in the main thread)
                failure.append(e)
            finally:
                self.meet.abort()  # the main thread stops waiting

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        checks = 0
        try:
            while True:
                try:
                    self.meet.wait(self.TIMEOUT_S)
                except threading.BrokenBarrierError:
                    break
                logits, result = answer()
                assert torch.equal(logits, logits_before), f"a changed answer at check {checks + 1}"
                assert result == result_before
                assert model_state(module) == state_before, f"the model was changed at check {checks + 1}"
                checks += 1
                try:
                    self.meet.wait(self.TIMEOUT_S)
                except threading.BrokenBarrierError:
                    # this thread got here first and the worker's arrival released both, but the worker then
                    # ran to its end and aborted the barrier before this thread woke: the check was made
                    break
        finally:
            self.meet.abort()
            worker.join(self.TIMEOUT_S)
        assert not worker.is_alive()
        assert model_state(module) == state_before
        logits_after, result_after = answer()
        assert torch.equal(logits_after, logits_before) and result_after == result_before
        return checks, returned, [e for e in failure if not isinstance(e, threading.BrokenBarrierError)]


@contextlib.contextmanager
def one_torch_thread():
    """Torch on one thread while two Python threads take turns with a model (see `Pauses`)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
