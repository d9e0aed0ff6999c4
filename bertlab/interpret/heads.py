"""Which heads matter: gradient-based head importance and pruning curves (Michel et al. 2019).

Owns `gated` (a gate xi_h on every head's output, as in the paper: 1 keeps the head, 0
prunes it), the two kinds of labelled data a head can matter for (`LabelledSentences` for a
fine-tuned classifier, `MaskedSentences` for a pretrained model's masked LM), `head_importance`,
`pruning_curve` and their saved form `HeadStudy`.

Importance is I_h = E_x |d loss(x) / d xi_h| (the paper's eq. 5), the gradient taken per batch
of `batch_size` examples (batch_size=1 is exactly per example; Hugging Face's bertology example
uses batches too), then normalised per layer by its L2 norm as the paper does. The gates are the
encoder's own `head_mask` (BertModel.forward, which every family's encoder runs: BERT, RoBERTa,
ALBERT, ELECTRA, DistilBERT), handed to the encoder of a private copy of the model's modules that
shares its weights: so they work on every family and both attention paths, pretrained and
fine-tuned (a task model's forward takes no head_mask; its encoder's does), on layers that share
one module (ALBERT: the encoder gives layer i the mask's row i, where a hook on the shared module
would fire on every layer's call), and never change the model itself, which the app shares between
sessions and threads.

Imports torch, numpy, bertlab.finetune (data and encoding), bertlab.interpret.targets.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError
from bertlab.finetune.data import SequenceExample
from bertlab.interpret.targets import Subject, as_subject, gradients_through, private_copy, whole_number

log = logging.getLogger(__name__)

MAX_PAGE_EXAMPLES = 64  # what the app computes while the user waits; the CLI takes more


# --------------------------------------------------------------------------------------
# Gates
# --------------------------------------------------------------------------------------
def gated(subject: Subject, gates: torch.Tensor) -> Subject:
    """`subject` with every head's output multiplied by `gates` (L, A), on a private copy of its modules.

    The caller's model is never touched: app sessions share one cached model object, and hooks on
    it pruned every other user's answers while a study ran. The copy (`targets.private_copy`) is the
    module tree only, about 40 ms for BERT-base; its weights share the same storage, needing no gradient
    (no extra memory), so gradients reach `gates` and never the weights (no `.grad`, no
    `requires_grad` change). It is in eval mode, as the paper measures. The copy's encoder reads
    `gates` itself at every call, so writing into it (`gates.fill_(1)`) re-gates the copy.

    The gates are the encoder's `head_mask` (a pre-hook on the copy's `module.bert` hands them in,
    times any mask the caller gave): the encoder, called once per forward, gives layer i row i, so
    an ALBERT whose L layers are one module gets each layer's own gates. The mask scales each
    head's attention probabilities, which equals scaling its context vector (probs @ v is linear in
    them). In a layer whose heads were pruned (bertlab compress prune) the kept heads' gates apply
    and a removed head's gate reaches nothing, so its importance is 0.

    Raises:
        InputError: `gates` is not (L, A).
    """
    L, A = subject.num_layers, subject.num_heads
    if tuple(gates.shape) != (L, A):
        raise InputError(f"gates have shape {tuple(gates.shape)}; this model needs ({L}, {A}) (layers, heads)")
    private = private_copy(subject.module)
    dtype = next(private.parameters()).dtype

    def with_gates(_encoder, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        # BertModel.forward(input_ids, token_type_ids, attention_mask, head_mask, ...)
        given = args[3] if len(args) > 3 else kwargs.get("head_mask")
        mask = gates.to(dtype) if given is None else gates.to(dtype) * given  # (L, A), differentiable in gates
        if len(args) > 3:
            return (*args[:3], mask, *args[4:]), kwargs
        return args, {**kwargs, "head_mask": mask}

    private.bert.register_forward_pre_hook(with_gates, with_kwargs=True)
    return replace(subject, module=private)


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
@dataclass
class LabelledSentences:
    """Sentences (or pairs) with their class, for a fine-tuned sequence classifier."""

    examples: list[SequenceExample]
    name: str = "labelled"

    def __post_init__(self) -> None:
        if isinstance(self.examples, str) or not isinstance(self.examples, Sequence):
            raise InputError(
                "LabelledSentences takes a list of SequenceExample(text_a, text_b, label), "
                f"got {type(self.examples).__name__}"
            )
        bad = next((e for e in self.examples if not isinstance(e, SequenceExample)), None)
        if bad is not None:
            raise InputError(
                f"LabelledSentences takes SequenceExample(text_a, text_b, label) items (bertlab.finetune.data), "
                f"got {type(bad).__name__} ({bad!r:.60})"
            )


@dataclass
class MaskedSentences:
    """Plain sentences; `mask_prob` of each one's tokens (at least one) become [MASK] and the
    masked LM must recover them. Chosen with `seed`, so every evaluation masks the same tokens."""

    sentences: list[str]
    mask_prob: float = 0.15
    seed: int = 0
    name: str = "mlm"

    def __post_init__(self) -> None:
        if isinstance(self.sentences, str) or not isinstance(self.sentences, Sequence):
            got = "one string" if isinstance(self.sentences, str) else type(self.sentences).__name__
            raise InputError(f"MaskedSentences takes a list of sentences (strings), got {got}")
        for i, sentence in enumerate(self.sentences):
            if not isinstance(sentence, str) or not sentence.strip():
                raise InputError(
                    f"MaskedSentences: sentence {i + 1} is {sentence!r:.60}; every sentence must be a non-blank string"
                )
        p = self.mask_prob
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise InputError(
                "mask_prob must be a share of each sentence's tokens, above 0 and at most 1 (BERT masks 0.15), "
                f"got {p!r}"
            )


HeadData = LabelledSentences | MaskedSentences


@dataclass
class _Batch:
    inputs: dict[str, torch.Tensor]
    labels: torch.Tensor  # (B,) classes, or (B, T) token ids with -100 where not masked


def _batches(subject: Subject, data: HeadData, batch_size: int) -> list[_Batch]:
    if not isinstance(data, LabelledSentences | MaskedSentences):
        raise InputError(
            f"data must be LabelledSentences(examples) for a fine-tuned classifier or MaskedSentences(sentences) "
            f"for a pretrained model, got {type(data).__name__}; wrap the list in one of them"
        )
    batch_size = whole_number(batch_size, "batch_size", 1)
    tok = subject.tokenizer
    out = []
    if isinstance(data, LabelledSentences):
        if subject.kind not in ("single", "pair"):
            raise InputError(f"labelled sentences need a fine-tuned classifier; this model is {subject.kind}")
        if not data.examples:
            raise InputError("no labelled sentences given")
        missing = sorted({str(e.label) for e in data.examples if str(e.label) not in subject.labels})
        if missing:
            raise InputError(f"labels {missing[:5]} are not this model's labels {list(subject.labels)}")
        for start in range(0, len(data.examples), batch_size):
            part = data.examples[start : start + batch_size]
            b_texts = [e.text_b or "" for e in part] if part[0].text_b is not None else None
            encs = tok.encode_batch([e.text_a for e in part], b_texts, max_length=subject.max_length)
            batch = pad_batch([e.ids for e in encs], tok.pad_id, [e.type_ids for e in encs])
            labels = torch.tensor([subject.labels.index(str(e.label)) for e in part])
            out.append(_Batch({k: v.to(subject.device) for k, v in batch.items()}, labels.to(subject.device)))
        return out
    if subject.kind != "pretraining":
        raise InputError("masked sentences need a pretrained model (with its masked-LM head)")
    if not data.sentences:
        raise InputError("no sentences given")
    rng = random.Random(data.seed)
    encs = tok.encode_batch(list(data.sentences), max_length=subject.max_length)
    for start in range(0, len(encs), batch_size):
        part = encs[start : start + batch_size]
        ids, labels = [], []
        for e in part:
            words = [p for p, s in enumerate(e.sequence_ids) if s is not None]
            if not words:
                raise InputError("a sentence has no tokens to mask")
            chosen = set(rng.sample(words, max(1, round(data.mask_prob * len(words)))))
            ids.append([tok.mask_id if p in chosen else x for p, x in enumerate(e.ids)])
            labels.append([x if p in chosen else -100 for p, x in enumerate(e.ids)])
        batch = pad_batch(ids, tok.pad_id, [e.type_ids for e in part])
        T = batch["input_ids"].shape[1]
        label_t = torch.tensor([row + [-100] * (T - len(row)) for row in labels])
        out.append(_Batch({k: v.to(subject.device) for k, v in batch.items()}, label_t.to(subject.device)))
    return out


def _loss_and_correct(subject: Subject, batch: _Batch) -> tuple[torch.Tensor, int, int]:
    """Mean loss of the batch, number right, number scored."""
    if subject.kind == "pretraining":
        select = batch.labels != -100
        out = subject.module(**batch.inputs, mlm_positions=select)
        logits, targets = out.mlm_logits.float(), batch.labels[select]  # (N, V), (N,)
    else:
        logits, targets = subject.module(**batch.inputs).logits.float(), batch.labels  # (B, C), (B,)
    loss = F.cross_entropy(logits, targets)
    return loss, int((logits.argmax(-1) == targets).sum()), int(targets.numel())


# --------------------------------------------------------------------------------------
# Importance and pruning
# --------------------------------------------------------------------------------------
@dataclass
class HeadImportance:
    """Importance per head.

    Attributes:
        scores: (L, A) float64, I_h normalised per layer (each layer's vector has L2 norm 1).
        raw: (L, A) float64, I_h before normalisation.
        metric / loss: accuracy and mean loss of the whole model on the data.
    """

    scores: np.ndarray
    raw: np.ndarray
    metric: float
    loss: float
    examples: int

    def order(self) -> list[tuple[int, int]]:
        """Heads (layer, head), least important first."""
        L, A = self.scores.shape
        flat = sorted(range(L * A), key=lambda k: (self.scores.flat[k], k))
        return [divmod(k, A) for k in flat]


def head_importance(model, data: HeadData, batch_size: int = 8) -> HeadImportance:
    """Michel et al.'s gradient-based importance of every head on `data` (see module docstring)."""
    subject = as_subject(model)
    batches = _batches(subject, data, batch_size)
    L, A = subject.num_layers, subject.num_heads
    gates = torch.ones(L, A, device=subject.device, requires_grad=True)
    view = gated(subject, gates)
    raw = torch.zeros(L, A, dtype=torch.float64)
    loss_sum, right, total, n = 0.0, 0, 0, 0
    with gradients_through(subject.module):
        for batch in batches:
            loss, r, t = _loss_and_correct(view, batch)
            (grad,) = torch.autograd.grad(loss, gates)
            raw += grad.abs().double().cpu()
            loss_sum += float(loss.detach()) * t
            right, total, n = right + r, total + t, n + len(batch.labels)
    raw /= len(batches)
    norms = raw.norm(dim=1, keepdim=True).clamp(min=1e-20)
    return HeadImportance((raw / norms).numpy(), raw.numpy(), right / max(total, 1), loss_sum / max(total, 1), n)


@torch.no_grad()
def _evaluate(view: Subject, batches: list[_Batch]) -> tuple[float, float]:
    loss_sum, right, total = 0.0, 0, 0
    for batch in batches:
        loss, r, t = _loss_and_correct(view, batch)
        loss_sum, right, total = loss_sum + float(loss) * t, right + r, total + t
    return right / max(total, 1), loss_sum / max(total, 1)


def evaluate_gates(model, data: HeadData, gates: torch.Tensor, batch_size: int = 32) -> tuple[float, float]:
    """(accuracy, mean loss) of the model with `gates` (L, A) applied."""
    subject = as_subject(model)
    return _evaluate(gated(subject, gates.to(subject.device)), _batches(subject, data, batch_size))


@dataclass
class PruningCurve:
    """Accuracy as heads are pruned, least important first and in random orders.

    Attributes:
        pruned: number of heads pruned at each point (0 .. L x A).
        by_importance / by_importance_loss: accuracy and loss, pruning least important first.
        random / random_loss: the same, averaged over `random_orders` random orders.
        random_min / random_max: the spread of the random orders' accuracy.
    """

    num_heads: int
    pruned: list[int]
    by_importance: list[float]
    by_importance_loss: list[float]
    random: list[float]
    random_loss: list[float]
    random_min: list[float]
    random_max: list[float]
    random_orders: int

    @property
    def share(self) -> list[float]:
        return [k / self.num_heads for k in self.pruned]


def _curve(view: Subject, gates: torch.Tensor, batches, order: Sequence[tuple[int, int]], counts: Sequence[int], step):
    """Accuracies and losses with the first k heads of `order` pruned, for each k in `counts`;
    `gates` is the one `view` reads."""
    accs, losses = [], []
    for k in counts:
        gates.fill_(1.0)
        for layer, head in order[:k]:
            gates[layer, head] = 0.0
        acc, loss = _evaluate(view, batches)
        accs.append(acc)
        losses.append(loss)
        step()
    return accs, losses


def _curve_args(points: int, random_orders: int) -> tuple[int, int]:
    return (
        whole_number(points, "points (pruning-curve points, none to all heads pruned)", 2),
        whole_number(random_orders, "random_orders (random pruning orders to compare with)", 1),
    )


def pruning_curve(
    model,
    data: HeadData,
    importance: HeadImportance,
    points: int = 9,
    random_orders: int = 3,
    seed: int = 0,
    batch_size: int = 32,
    on_step: Callable[[int, int], None] | None = None,
) -> PruningCurve:
    """Prune 0, ..., all heads in `points` steps, least important first and in random orders.

    `on_step` is called with (evaluations done, evaluations in all) after each point of each order
    (a job's progress).

    Raises:
        InputError: `points` not a whole number >= 2 (none and all heads pruned are always points),
            or `random_orders` not >= 1 (the random orders are the baseline the importance order is
            read against; the saved study and its figure always show them).
    """
    points, random_orders = _curve_args(points, random_orders)
    shape = importance.scores.shape
    total = shape[0] * shape[1]
    counts = sorted({round(i * total / (points - 1)) for i in range(points)})
    done, evaluations = [0], len(counts) * (1 + random_orders)

    def step() -> None:
        done[0] += 1
        if on_step is not None:
            on_step(done[0], evaluations)

    subject = as_subject(model)
    gates = torch.ones(shape, device=subject.device)
    view, batches = gated(subject, gates), _batches(subject, data, batch_size)
    by_imp, by_imp_loss = _curve(view, gates, batches, importance.order(), counts, step)
    rng = random.Random(seed)
    heads = [(layer, head) for layer in range(shape[0]) for head in range(shape[1])]
    rand_acc, rand_loss = [], []
    for _ in range(random_orders):
        order = heads[:]
        rng.shuffle(order)
        a, lo = _curve(view, gates, batches, order, counts, step)
        rand_acc.append(a)
        rand_loss.append(lo)
    ra, rl = np.array(rand_acc), np.array(rand_loss)
    return PruningCurve(
        total,
        counts,
        by_imp,
        by_imp_loss,
        ra.mean(0).tolist(),
        rl.mean(0).tolist(),
        ra.min(0).tolist(),
        ra.max(0).tolist(),
        random_orders,
    )


@dataclass
class HeadStudy:
    """Importance and pruning curve of one model on one data set, as saved beside the model."""

    task: str
    model: str
    importance: list[list[float]]
    raw_importance: list[list[float]]
    accuracy: float
    loss: float
    examples: int
    curve: dict
    seconds: float
    data: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> HeadStudy:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @property
    def pruning(self) -> PruningCurve:
        return PruningCurve(**self.curve)


def study_heads(
    model,
    data: HeadData,
    task: str,
    points: int = 9,
    random_orders: int = 3,
    seed: int = 0,
    batch_size: int = 8,
    on_step: Callable[[int, int], None] | None = None,
) -> HeadStudy:
    """`head_importance` then `pruning_curve`, in the form saved beside the model; `on_step`: the
    pruning curve's progress (see `pruning_curve`)."""
    _curve_args(points, random_orders)  # before the importance pass, not after it
    started = time.perf_counter()
    subject = as_subject(model)
    imp = head_importance(subject, data, batch_size)
    curve = pruning_curve(subject, data, imp, points, random_orders, seed, max(batch_size, 32), on_step)
    return HeadStudy(
        task=task,
        model=subject.name,
        importance=imp.scores.tolist(),
        raw_importance=imp.raw.tolist(),
        accuracy=imp.metric,
        loss=imp.loss,
        examples=imp.examples,
        curve=asdict(curve),
        seconds=time.perf_counter() - started,
    )
