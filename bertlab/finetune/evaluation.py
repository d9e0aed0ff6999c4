"""Running a task model over encoded features, and scoring its answers with the task's metric.

Used by training (dev evaluation), prediction and the CLI. Imports torch and bertlab.finetune.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import torch

from bertlab.finetune import metrics
from bertlab.finetune.data import Example
from bertlab.finetune.encoding import Feature, SpanAnswer, collate, decode_qa, decode_tagging
from bertlab.finetune.tasks import TaskSpec


@torch.no_grad()
def run_model(
    model: torch.nn.Module,
    features: Sequence[Feature],
    shape: str,
    pad_id: int,
    device: torch.device | str = "cpu",
    batch_size: int = 64,
    autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> list:
    """Model outputs per feature, on the CPU in float32, padding removed:
    (C,) logits for sequence tasks, (T_i, C) for tagging, ((T_i,), (T_i,)) start/end for QA."""
    was_training = model.training
    model.eval()
    # sorting by length keeps padding (and time) low; results go back in the original order
    order = sorted(range(len(features)), key=lambda i: len(features[i].input_ids))
    by_index: dict[int, object] = {}
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        batch = collate([features[i] for i in idx], pad_id, shape)
        inputs = {k: batch[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")}
        with autocast() if autocast is not None else contextlib.nullcontext():
            out = model(**inputs)
        logits = out.logits.float().cpu()  # one transfer per batch, then slices
        for row, i in enumerate(idx):
            n = len(features[i].input_ids)
            if shape == "qa":
                by_index[i] = (logits[row, :n, 0], logits[row, :n, 1])
            elif shape == "tagging":
                by_index[i] = logits[row, :n]
            else:
                by_index[i] = logits[row]
    outputs = [by_index[i] for i in range(len(features))]
    model.train(was_training)
    return outputs


def decode(
    spec_shape: str,
    examples: Sequence[Example],
    features: Sequence[Feature],
    outputs: list,
    labels: Sequence[str],
    n_best: int = 20,
    max_answer_length: int = 30,
) -> list:
    """Task answers per example: a label (str), a score (float), a tag list, or a SpanAnswer."""
    if spec_shape == "qa":
        return decode_qa(
            examples, features, [o[0] for o in outputs], [o[1] for o in outputs], n_best, max_answer_length
        )
    if spec_shape == "tagging":
        return decode_tagging(examples, features, outputs, labels)
    if spec_shape == "regression":
        return [float(o[0]) for o in outputs]
    return [labels[int(o.argmax())] for o in outputs]


def score(spec: TaskSpec, examples: Sequence[Example], answers: list) -> dict[str, float]:
    """The task's official metrics (fractions in [0, 1]), main metric first."""
    if spec.shape == "qa":
        result = metrics.squad_scores(
            [a.text if isinstance(a, SpanAnswer) else a for a in answers], [e.answer_texts for e in examples]
        )
    elif spec.shape == "tagging":
        golds = [e.tags for e in examples]
        if spec.name == "upos":
            result = {"accuracy": metrics.token_accuracy(answers, golds)}
        else:
            result = metrics.entity_f1(answers, golds)
            result["accuracy"] = metrics.token_accuracy(answers, golds)
    elif spec.shape == "regression":
        golds = [float(e.label) for e in examples]
        result = {"pearson": metrics.pearson(answers, golds), "spearman": metrics.spearman(answers, golds)}
    else:
        golds = [e.label for e in examples]
        result = {"accuracy": metrics.accuracy(answers, golds)}
        if "f1" in spec.metrics:
            result["f1"] = metrics.f1_binary(answers, golds, positive="1")
        if "matthews" in spec.metrics:
            result["matthews"] = metrics.matthews_corrcoef(answers, golds)
    ordered = {k: result[k] for k in spec.metrics if k in result}
    ordered.update({k: v for k, v in result.items() if k not in ordered})
    return ordered
