"""A distillation student made from its teacher (DistilBERT, Sanh et al. 2019, §3): which of the
teacher's layers it keeps (`pick_layers`), its config, and its weights copied from the teacher
(`make_student`): the embeddings (segment embeddings included), the kept layers, the pooler and both
pretraining heads, so the student is a `BertForPreTraining` that opens wherever its teacher opened.

Unlike DistilBERT it keeps the segment embeddings, the pooler and the NSP head, so pair tasks and
next sentence prediction still work.

Imports torch, bertlab.config, bertlab.errors and bertlab.model.
"""

from __future__ import annotations

import re

import torch

from bertlab.config import BertConfig
from bertlab.errors import InputError
from bertlab.model import BertForPreTraining

_LAYER_KEY = re.compile(r"^bert\.encoder\.layer\.(\d+)\.(.*)$")


def pick_layers(teacher_layers: int, student_layers: int) -> tuple[int, ...]:
    """The teacher layers (0-based) a student of `student_layers` keeps: evenly spaced, ending at the
    teacher's top layer, whose output the masked-LM head was trained to read.

    Layer i of the student is the teacher's round((i + 1) * L / N) - 1: every other layer when N = L/2
    (4 -> 2 keeps layers 1 and 3; 12 -> 6 keeps 1, 3, 5, 7, 9, 11), every third when N = L/3. DistilBERT
    kept 0, 2, 4, 7, 9, 11 of BERT-base's twelve (its first and last layer); ours keeps the last and
    spaces the others evenly below it.

    Raises:
        InputError: N < 1, or N not fewer than the teacher's layers (nothing would be removed).
    """
    if student_layers < 1:
        raise InputError(f"--layers must be 1 or more, not {student_layers}")
    if student_layers >= teacher_layers:
        raise InputError(
            f"--layers {student_layers}: the teacher has {teacher_layers} layers, so a student must have fewer "
            f"(1 to {teacher_layers - 1}); e.g. --layers {max(1, teacher_layers // 2)} keeps every other layer"
        )
    return tuple(round((i + 1) * teacher_layers / student_layers) - 1 for i in range(student_layers))


def student_config(teacher: BertConfig, kept: tuple[int, ...]) -> BertConfig:
    """The teacher's config with only the kept layers; a pruned teacher's heads stay pruned in the
    layers that keep them (renumbered)."""
    pruned = tuple((i, teacher.pruned_in(t)) for i, t in enumerate(kept) if teacher.pruned_in(t))
    return teacher.replace(num_layers=len(kept), pruned_heads=pruned)


def student_state(teacher_state: dict[str, torch.Tensor], kept: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """The teacher's tensors a student keeps, under the student's names: every tensor outside the
    encoder's layers as it is, and teacher layer `kept[i]` as student layer i (cloned)."""
    where = {t: i for i, t in enumerate(kept)}
    out = {}
    for key, value in teacher_state.items():
        match = _LAYER_KEY.match(key)
        if match is None:
            out[key] = value.detach().clone()
        elif int(match.group(1)) in where:
            out[f"bert.encoder.layer.{where[int(match.group(1))]}.{match.group(2)}"] = value.detach().clone()
    return out


def make_student(teacher: torch.nn.Module, student_layers: int) -> tuple[BertForPreTraining, tuple[int, ...]]:
    """A student of `student_layers` layers initialised from `teacher` (a BERT with a masked-LM head);
    returns (the student in float32 on the CPU, in training mode; the teacher layers it keeps).

    Raises:
        InputError: the teacher is not a BERT (ALBERT shares one layer, ELECTRA is a pair, RoBERTa has no
            pooler or segments), or has no masked-LM head to distil, or `student_layers` does not fit.
    """
    config = getattr(teacher, "config", None)
    if type(teacher) is not BertForPreTraining or not isinstance(config, BertConfig) or config.model_type != "bert":
        family = getattr(config, "model_type", type(teacher).__name__)
        raise InputError(
            f"the teacher is a {family} model; distillation makes a student of a BERT (model_type bert) only"
        )
    kept = pick_layers(config.num_layers, student_layers)
    student = BertForPreTraining(student_config(config, kept))
    student.load_state_dict(student_state(teacher.state_dict(), kept))
    student.tie_weights()
    return student.float().train(), kept
