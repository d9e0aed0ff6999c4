"""What each layer knows: a linear probe per layer on frozen hidden states (Tenney et al. 2019).

Owns `ProbeConfig`, `ProbeResult`, `word_features` (each word's first-WordPiece vector at every
layer), `train_probe` (one multinomial logistic regression, standardised features, L-BFGS),
`probe_layers` (one probe per layer, the embeddings included) and `centre_of_gravity`.

The centre of gravity is Tenney et al.'s "expected layer", sum_l l * D_l / sum_l D_l with
D_l = score(l) - score(l - 1): the layer at which, on average, the probe's accuracy is gained.
Tenney et al. read score(l) from cumulative probes (a scalar mix of layers 0..l), which never
lose accuracy as l grows; here each layer has its own probe, so score(l) is the best probe of
layers 0..l (what a cumulative probe could at least reach) and D_l >= 0.

A centre of gravity only means something when there is a gain to locate: `ProbeResult` reports
it (`reported_centre_of_gravity`) only when the probe beats always answering the commonest tag
and the later layers beat the embeddings by more than `noise_floor`, two standard errors of an
accuracy on that many evaluation words. (An NER probe on WNUT-17 scores 91.98% where always
answering O scores 91.81%: its "gain" of 0.05 points over layer 0 is noise, not a skill.)

Results are saved beside the model (`bertlab.interpret.saved`); the CLI is
`python -m bertlab.interpret probe`. Imports torch, numpy, bertlab.finetune (readers and the
tagging encoder), bertlab.interpret.targets and bertlab.interpret.saved.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError
from bertlab.finetune.data import TaggingExample
from bertlab.finetune.encoding import IGNORE, encode_tagging
from bertlab.interpret.targets import Subject, as_subject

log = logging.getLogger(__name__)

MAX_PAGE_SENTENCES = 200  # a probe the app runs while the user waits; the CLI takes more


@dataclass(frozen=True)
class ProbeConfig:
    """How a probing run samples and trains; saved with its result."""

    task: str  # upos | ner | any name for the tag set
    max_train_sentences: int = 2000  # sampled with `seed`; 2,000 EWT sentences are about 32k words
    max_eval_sentences: int = 500
    l2: float = 1e-3  # weight decay of the probe: a linear probe should read, not memorise
    max_iter: int = 100  # L-BFGS iterations, full batch
    batch_size: int = 32  # sentences per forward pass when reading hidden states
    seed: int = 0

    def __post_init__(self):
        if self.max_train_sentences < 1 or self.max_eval_sentences < 1:
            raise InputError("a probe needs at least one train and one evaluation sentence")


@dataclass
class ProbeResult:
    """Per-layer probe scores (layer 0 = the embeddings output).

    Attributes:
        accuracy / macro_f1: one per layer, on the evaluation words.
        majority: accuracy of always answering the most common training tag (`majority_label`).
        centre_of_gravity: the expected layer (see module docstring), None when no layer gains;
            as computed, however small the gain: read `reported_centre_of_gravity` to show it.
        majority_label: the most common training tag ("" in results saved before it was kept).
    """

    task: str
    model: str
    labels: list[str]
    layers: list[int]
    accuracy: list[float]
    macro_f1: list[float]
    majority: float
    centre_of_gravity: float | None
    train_words: int
    eval_words: int
    seconds: float
    config: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)  # train / eval file names
    majority_label: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ProbeResult:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def rows(self) -> list[dict]:
        """A row a layer, every score in points (percent) to one decimal, as the chart beside it reads."""
        return [
            {
                "layer": layer,
                "accuracy (%)": round(100 * acc, 1),
                "over commonest tag (points)": round(100 * (acc - self.majority), 1),
                "macro F1 (%)": round(100 * f1, 1),
            }
            for layer, acc, f1 in zip(self.layers, self.accuracy, self.macro_f1, strict=True)
        ]

    @property
    def commonest_tag(self) -> str:
        """The tag the majority baseline always answers: `majority_label`, or for results saved
        without it "O" when the tags are a BIO set (O plus B-/I- tags; outside any entity is by far
        the commonest tag of such corpora), else ""."""
        if self.majority_label:
            return self.majority_label
        others = [t for t in self.labels if t != "O"]
        bio = "O" in self.labels and others and all(t[:2] in ("B-", "I-") for t in others)
        return "O" if bio else ""

    @property
    def best_layer(self) -> int:
        """Index (into `layers`) of the most accurate probe."""
        return max(range(len(self.accuracy)), key=self.accuracy.__getitem__)

    @property
    def noise_floor(self) -> float:
        """Two standard errors of the best probe's accuracy on `eval_words` words, sqrt(p(1-p)/n) each:
        a rough yardstick below which a difference in accuracy (between layers, or from the
        majority baseline) is sampling noise rather than something the layer knows."""
        p = self.accuracy[self.best_layer]
        return 2 * math.sqrt(p * (1 - p) / self.eval_words) if self.eval_words > 0 else 0.0

    @property
    def gain_over_majority(self) -> list[float]:
        """Per layer, accuracy minus always answering the commonest tag: what the layer adds to it."""
        return [a - self.majority for a in self.accuracy]

    @property
    def majority_macro_f1(self) -> float:
        """Macro-F1 of always answering the commonest tag, as `macro_f1` counts it when every tag occurs
        among the evaluation words: that tag's F1, 2m / (1 + m) for accuracy m, over len(labels) tags."""
        m = self.majority
        return 2 * m / (1 + m) / max(1, len(self.labels))

    @property
    def beats_majority(self) -> bool:
        """Whether the best probe beats always answering the commonest tag by more than the noise floor."""
        return self.accuracy[self.best_layer] - self.majority > self.noise_floor

    @property
    def gain_over_embeddings(self) -> float | None:
        """The best later layer's accuracy minus layer 0's (None without layer 0 and a later layer)."""
        if len(self.layers) < 2 or self.layers[0] != 0:
            return None
        return max(self.accuracy[1:]) - self.accuracy[0]

    @property
    def reported_centre_of_gravity(self) -> float | None:
        """`centre_of_gravity` when there is a gain to locate: the probe beats the majority baseline
        and the later layers beat the embeddings by more than the noise floor; else None."""
        gain = self.gain_over_embeddings
        if self.centre_of_gravity is None or gain is None or not self.beats_majority or gain <= self.noise_floor:
            return None
        return self.centre_of_gravity


def sample_sentences(examples: Sequence[TaggingExample], n: int, seed: int) -> list[TaggingExample]:
    """At most `n` sentences, drawn with `seed` (all of them, in order, when there are fewer)."""
    if len(examples) <= n:
        return list(examples)
    picked = sorted(random.Random(seed).sample(range(len(examples)), n))
    return [examples[i] for i in picked]


@torch.inference_mode()
def word_features(
    model, examples: Sequence[TaggingExample], label_to_id: dict[str, int], batch_size: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """Every word's first-WordPiece vector at every layer, and its tag.

    Returns:
        features: (L+1, N, H) float32 for the N words; labels: (N,) int64.
    """
    subject: Subject = as_subject(model, gradients=False)
    unknown = sorted({t for ex in examples for t in ex.tags if t not in label_to_id})
    if unknown:
        raise InputError(f"tags {unknown[:5]} are not in the label set; add them or drop those sentences")
    feats = encode_tagging(examples, subject.tokenizer, subject.max_length, label_to_id)
    chunks, labels = [], []
    for start in range(0, len(feats), batch_size):
        part = feats[start : start + batch_size]
        batch = pad_batch([f.input_ids for f in part], subject.tokenizer.pad_id, [f.token_type_ids for f in part])
        batch = {k: v.to(subject.device) for k, v in batch.items()}
        enc = subject.module.bert(**batch, output_hidden_states=True)
        states = torch.stack(enc.hidden_states, 0).float()  # (L+1, B, T, H)
        T = states.shape[2]
        token_labels = torch.tensor([f.token_labels + [IGNORE] * (T - len(f.token_labels)) for f in part])
        keep = (token_labels != IGNORE).to(states.device)  # (B, T)
        chunks.append(states[:, keep].cpu().numpy())  # (L+1, n, H)
        labels.append(token_labels[token_labels != IGNORE].numpy())
    if not chunks:
        raise InputError("no words to probe")
    return np.concatenate(chunks, 1), np.concatenate(labels)


def train_probe(
    train_x: np.ndarray,
    train_y: np.ndarray,
    eval_x: np.ndarray,
    eval_y: np.ndarray,
    num_classes: int,
    l2: float = 1e-3,
    max_iter: int = 100,
    seed: int = 0,
) -> np.ndarray:
    """Fit a linear softmax classifier on (N, H) features and return its (M,) predictions for `eval_x`.

    Features are standardised with the training mean and deviation; the weights start at zero
    (L-BFGS then is deterministic; `seed` only matters for ties)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.as_tensor(train_x, dtype=torch.float32)
    y = torch.as_tensor(train_y, dtype=torch.long)
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    x = (x - mean) / std
    w = torch.zeros(x.shape[1], num_classes, requires_grad=True)
    b = (torch.randn(num_classes, generator=gen) * 1e-6).requires_grad_()
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ w + b, y) + l2 * (w * w).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        ex = (torch.as_tensor(eval_x, dtype=torch.float32) - mean) / std
        return (ex @ w + b).argmax(-1).numpy()


def macro_f1(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Mean F1 over the classes that occur in `gold` or `predicted`."""
    scores = []
    for c in np.union1d(gold, predicted):
        tp = float(((gold == c) & (predicted == c)).sum())
        fp = float(((gold != c) & (predicted == c)).sum())
        fn = float(((gold == c) & (predicted != c)).sum())
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(scores)) if scores else 0.0


def centre_of_gravity(scores: Sequence[float]) -> float | None:
    """Expected layer sum_l l * D_l / sum_l D_l over l >= 1, D_l the gain of the running best score
    at layer l (see the module docstring); None when no layer beats the embeddings."""
    deltas = np.diff(np.maximum.accumulate(np.asarray(scores, dtype=np.float64)))
    total = deltas.sum()
    if total <= 0:
        return None
    return float((np.arange(1, len(scores)) * deltas).sum() / total)


def probe_layers(
    model,
    train: Sequence[TaggingExample],
    evaluate: Sequence[TaggingExample],
    config: ProbeConfig,
    labels: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
    on_layer: Callable[[int, int], None] | None = None,
) -> ProbeResult:
    """Train one probe per layer on `train`'s words and score it on `evaluate`'s.

    Args:
        labels: the tag set (default: every tag in `train` and `evaluate`, sorted).
        layers: which layers (default all, 0 = embeddings .. L).
        on_layer: called with (layers probed, layers in all) after each layer (a job's progress).
    """
    started = time.perf_counter()
    subject = as_subject(model, gradients=False)
    train_s = sample_sentences(train, config.max_train_sentences, config.seed)
    eval_s = sample_sentences(evaluate, config.max_eval_sentences, config.seed + 1)
    names = list(labels) if labels else sorted({t for ex in [*train_s, *eval_s] for t in ex.tags})
    label_to_id = {t: i for i, t in enumerate(names)}
    tx, ty = word_features(subject, train_s, label_to_id, config.batch_size)
    ex, ey = word_features(subject, eval_s, label_to_id, config.batch_size)
    chosen = list(range(tx.shape[0])) if layers is None else list(layers)
    for layer in chosen:
        if not 0 <= layer < tx.shape[0]:
            raise InputError(f"layer {layer}: this model has layers 0 (embeddings) to {tx.shape[0] - 1}")
    accuracy, f1 = [], []
    for layer in chosen:
        predicted = train_probe(tx[layer], ty, ex[layer], ey, len(names), config.l2, config.max_iter, config.seed)
        accuracy.append(float((predicted == ey).mean()))
        f1.append(macro_f1(ey, predicted))
        log.info("probe %s layer %d: accuracy %.3f", config.task, layer, accuracy[-1])
        if on_layer is not None:
            on_layer(len(accuracy), len(chosen))
    commonest = int(np.bincount(ty, minlength=len(names)).argmax())
    majority = float((ey == commonest).mean())
    return ProbeResult(
        task=config.task,
        model=subject.name,
        labels=names,
        layers=chosen,
        accuracy=accuracy,
        macro_f1=f1,
        majority=majority,
        centre_of_gravity=centre_of_gravity(accuracy) if chosen == list(range(len(chosen))) else None,
        train_words=int(len(ty)),
        eval_words=int(len(ey)),
        seconds=time.perf_counter() - started,
        config=asdict(config),
        majority_label=names[commonest],
    )
