"""Seconds of a training step timed here now: a few real steps (forward, backward, AdamW) of the job's own
model and head on random tokens, in the precision and on the CPU threads the job will train with
(`measured_step_seconds`); a micro-batch too long to time whole is extended along a line through two
smaller ones (`_micro_batch_seconds`). `timed_micro_batch` is what the estimates call.

Imports the standard library and bertlab.config / hardware / training.memory_estimate (a model too big to
build here) / training.types (the precision a job asks for) / data.objectives and models.registry (a
pretraining job's family and loss, torch-free until a model is built); torch, the model classes, the pretraining loss
(bertlab.losses) and the optimizer's precision rules only inside the functions that time (deferred so the
jobs CLI starts without torch).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bertlab.config import BertConfig
from bertlab.data.objectives import get_objective
from bertlab.hardware import default_threads
from bertlab.jobs.estimates.memory import count_parameters
from bertlab.models.registry import build_model, family_for
from bertlab.training import types as train_types

if TYPE_CHECKING:  # annotations only: the head's module imports torch
    from collections.abc import Callable

    import torch

    from bertlab.finetune.models import HeadConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PretrainingModel:
    """What a pretraining job builds beyond BERT's shape, so that its step is timed on its own model and
    loss: its family (config.json's `model_type`), its objective (bertlab.data.objectives: the heads and
    the loss) and the family's own settings (`PretrainConfig.family_overrides`: ALBERT's embedding_size
    and sharing, ELECTRA's generator_size). Hashable: the timing is cached per shape."""

    model_type: str = "bert"
    objective: str = "mlm_nsp"
    overrides: tuple[tuple[str, Any], ...] = ()


MEASURE_MAX_PARAMETERS = 60_000_000  # larger models are not built here just to time them (memory, minutes)
MEASURE_MAX_STEP_S = 0.5  # a step the table expects to take longer is timed on fewer rows and scaled up
MEASURE_WHOLE_MAX_STEP_S = 1.0  # ...unless the smaller steps' line puts the whole one under this: then it is timed


@functools.lru_cache(maxsize=64)  # an estimate times up to ~log2(rows) + 3 shapes
def measured_step_seconds(
    config: BertConfig,
    rows: int,
    length: int,
    device: str = "cpu",
    pretraining: bool = True,
    max_predictions: int = 20,
    frozen_encoder: bool = False,
    threads: int = 0,
    head: HeadConfig | None = None,
    precision: str = "auto",
    real_length: float = 0.0,
    trial: int = 0,
    family: PretrainingModel | None = None,
) -> float:
    """Seconds of a training step (forward, backward, AdamW) of the real model on one micro-batch of
    `rows` x `length` random tokens: the faster of two steps after an untimed one (the faster one
    is the less disturbed by other work on the machine). Cached per shape and `trial`: another
    `trial` times the same shape again (`_micro_batch_seconds` keeps the faster of two, another shape timed
    between them).

    `real_length`: the mean real (unpadded) tokens of a row, for a head whose cost follows the real
    tokens rather than the padded batch (`_real_tokens_row`): the timed batch is padded as the job's are
    (one row `length` long, the others shorter, `real_length` on average). 0: every row `length` tokens.

    `precision`: the job's, resolved as the trainer resolves it (`optimization.resolve_precision`):
    bf16 autocast on a GPU or a CPU with bf16 instructions, where a step takes ~0.6x fp32's.

    `head`: a fine-tuning job's real output layer and what feeds it (a BiLSTM, the layers it reads,
    a tagging or span head); None times a sentence classifier.

    `threads` > 0 times with that many CPU threads, as a job with --threads runs; 0 with those a job
    gets by default (`default_threads`); torch's thread count is put back afterwards.

    `family`: a pretraining job's family and objective (None: BERT with MLM + NSP, `config` as given),
    so an ALBERT, a RoBERTa or an ELECTRA pair is timed with its own model and loss."""
    import torch

    from bertlab.finetune.models import HeadConfig, build_task_model  # deferred: torch
    from bertlab.losses import get_loss  # deferred: torch
    from bertlab.training.optimization import autocast_context  # deferred: torch

    g = torch.Generator().manual_seed(0)
    torch_device = torch.device(device)
    head = head or HeadConfig(shape="single", num_labels=2)
    family = family or PretrainingModel()
    built = build_model(_family_config(config, family)) if pretraining else build_task_model(config, head)
    model = built.to(torch_device)
    objective_loss = get_loss(get_objective(family.objective).loss)
    model.train()
    if frozen_encoder:
        for p in model.bert.parameters():
            p.requires_grad_(False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(5, config.vocab_size, (rows, length), generator=g)  # (B, T)
    batch = {
        k: v.to(torch_device) for k, v in _random_batch(ids, pretraining, head, max_predictions, real_length).items()
    }
    amp = autocast_context(torch_device, _autocast_dtype(precision, torch_device))
    old_threads = torch.get_num_threads()
    if device == "cpu":  # the job's threads, not this process's (the app answers on fewer)
        torch.set_num_threads(threads or default_threads())
    try:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            with amp:
                # pretraining: the job's objective owns its loss; a task model returns its own
                loss = objective_loss(model, batch).loss if pretraining else model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old_threads)
    return min(times[1:])


def _random_batch(
    ids: torch.Tensor, pretraining: bool, head: HeadConfig, max_predictions: int, real_length: float
) -> dict[str, torch.Tensor]:
    """A batch of random token ids (B, T) as the job's are shaped: padded to `real_length` real tokens on
    average where asked, with the labels its loss reads (masked positions and a sentence-pair label, or
    the head's)."""
    import torch  # deferred: torch (the estimates' own modules start without it)

    rows, length = ids.shape
    mask = torch.ones_like(ids)
    if 0 < real_length < length:
        mask[1:, _other_rows_length(rows, length, real_length) :] = 0
    batch = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}
    if pretraining:
        labels = torch.full_like(ids, -100)
        labels[:, 1 : 1 + min(max_predictions, length - 1)] = ids[:, 1 : 1 + min(max_predictions, length - 1)]
        pair_labels = torch.zeros(rows, dtype=torch.long)  # NSP's or sentence order's, whichever the loss reads
        return batch | {"mlm_labels": labels, "nsp_labels": pair_labels, "sop_labels": pair_labels}
    if head.shape == "qa":
        return batch | {
            "start_positions": torch.ones(rows, dtype=torch.long),
            "end_positions": torch.ones(rows, dtype=torch.long),
        }
    if head.shape == "tagging":
        return batch | {"labels": torch.zeros_like(ids)}
    return batch | {"labels": torch.zeros(rows, dtype=torch.float if head.num_labels == 1 else torch.long)}


def _family_config(config: BertConfig, family: PretrainingModel) -> BertConfig:
    """`config` (BERT's shape, as `PretrainConfig.model_config` gives it) read as the job's family reads
    it, with the family's own settings: what bertlab.training.pretrain.family_config builds for the run."""
    if family == PretrainingModel():
        return config
    sop = get_objective(family.objective).pair_head == "sop"
    raw = {**config.to_hf_dict(extra={"use_sop_head": sop}), **dict(family.overrides), "model_type": family.model_type}
    return family_for(raw, "the job's model_type").load().config_from_hf(raw, "the job's model")


def timed_micro_batch(
    config: BertConfig,
    micro: int,
    padded_row: float,
    real_row: float,
    device: str,
    device_name: str,
    pretraining: bool,
    max_predictions: int,
    frozen_encoder: bool,
    threads: int,
    head: HeadConfig | None,
    precision: str,
    tabulated_s: float,
    family: PretrainingModel | None = None,
) -> tuple[float, str] | None:
    """(seconds of a `micro`-row step of the job's model timed here now, where they come from: 'timed here
    now (...)'), or None where it cannot be timed here (`_can_time_here`; out of memory, a device in use):
    then the table stands in. Rows are `padded_row` tokens long, or pad as the job's do where its cost follows
    the `real_row` real tokens (`_real_tokens_row`); `tabulated_s`, the table's seconds for the micro-batch,
    decides how many rows are timed first (`_micro_batch_seconds`)."""
    if not _can_time_here(config, device):
        return None
    length = max(2, math.ceil(padded_row))
    real = _real_tokens_row(real_row, padded_row, pretraining, head)

    def timed(rows: int, trial: int = 0) -> float:
        return measured_step_seconds(
            config, rows, length, device, pretraining, max_predictions, frozen_encoder, threads, head,
            precision, real, trial, family,
        )  # fmt: skip

    try:
        micro_s, rows = _micro_batch_seconds(timed, micro, tabulated_s, _rows_for_real_length(length, real))
    except (RuntimeError, MemoryError) as exc:  # out of memory, a device in use: fall back to the table
        log.info("could not time a step here (%s); using the tabulated throughput", exc)
        return None
    where = f"CPU, {threads} of {os.cpu_count() or 1} cores" if threads and device == "cpu" else device_name
    return micro_s, f"timed here now ({rows} x {length} tokens on {where}, {_precision_label(precision, device)})"


def _real_tokens_row(real_row: float, padded_row: float, pretraining: bool, head: HeadConfig | None) -> float:
    """The real tokens a row to time a step on, where the job's cost follows them (a BiLSTM head runs on
    packed sequences); 0 where it follows the padded batch (every other model and head)."""
    bilstm = not pretraining and head is not None and head.use_bilstm
    return real_row if bilstm and real_row < padded_row else 0.0


def _other_rows_length(rows: int, length: int, real_length: float) -> int:
    """The length of every row but the first (which is `length` long, as a batch's longest row) for the
    rows to average `real_length` real tokens; at least 1."""
    if rows < 2:
        return length
    return max(1, min(length, round((rows * real_length - length) / (rows - 1))))


def _rows_for_real_length(length: int, real_length: float) -> int:
    """The fewest rows whose padded batch (`_other_rows_length`) averages `real_length` without cutting the
    short rows at one token: fewer would make a line through two timed steps see a row's cost as a token's."""
    return math.ceil((length - 1) / (real_length - 1)) if real_length > 1 else 1


def _micro_batch_seconds(
    timed: Callable[..., float], micro: int, tabulated_s: float, min_rows: int = 1
) -> tuple[float, str]:
    """Seconds of a `micro`-row step and the rows timed to find it. The whole micro-batch is timed where
    the table expects it to take under MEASURE_MAX_STEP_S. Otherwise steps of doubling row counts are
    timed (from the table's guess) while the next would stay under it, going by a line, a fixed cost plus a
    cost per row, through the last two (the last time scaled by its rows, while there is one). Both points
    of the line are then timed a second time (`timed(rows, 1)`, the other point timed in between), and each
    keeps its faster time: extending the line multiplies a disturbed point's error. Where the line puts the whole
    micro-batch under MEASURE_WHOLE_MAX_STEP_S it is timed whole after all: a step mostly fixed cost (a
    BiLSTM's, which follows the longest row) makes the line nearly flat, and a flat line extended 4-8x
    multiplies its noise (a frozen-feature UPOS job on a busy CPU: 0.8-3.5x its whole step). Otherwise
    the line is extended to `micro` rows: scaling one small step up would count its fixed cost once a row
    (mini under bf16 autocast on a CPU: 1 row 0.10 s, 32 rows 1.30 s, not 3.3 s).
    No step is timed on fewer than `min_rows` rows (or the whole micro-batch, when it is smaller)."""

    def predicted(points: list[tuple[int, float]], rows: int) -> float:
        if len(points) < 2:
            return points[-1][1] * rows / points[-1][0]
        (r1, t1), (r2, t2) = points[-2:]
        per_row = max((t2 - t1) / (r2 - r1), t2 / r2 / 4)  # noise can flatten the line: at least 1/4 the mean
        return max(0.0, t2 - per_row * r2) + per_row * rows

    floor = max(1, min(micro, min_rows))
    rows = max(floor, min(micro, math.floor(micro * MEASURE_MAX_STEP_S / max(tabulated_s, 1e-9))))
    points = [(rows, timed(rows))]
    while rows < micro and predicted(points, min(micro, 2 * rows)) <= MEASURE_MAX_STEP_S:
        rows = min(micro, 2 * rows)
        points.append((rows, timed(rows)))
    if rows == micro:
        return points[-1][1], str(micro)
    if len(points) == 1:  # the table's guess already took long: a second point for the line, smaller if it can be
        other = rows // 2 if rows // 2 >= floor else min(micro, 2 * rows)
        if other == micro:
            return timed(micro), str(micro)
        points.append((other, timed(other)))
    # both points again in the order first timed, so the other one is timed between a point's two timings
    points = sorted((r, min(t, timed(r, 1))) for r, t in points[-2:])
    if predicted(points, micro) <= MEASURE_WHOLE_MAX_STEP_S:
        return timed(micro), str(micro)
    return predicted(points, micro), f"{points[-2][0]} and {points[-1][0]}"


def _autocast_dtype(precision: str, torch_device: torch.device) -> torch.dtype | None:
    """The autocast dtype (None: fp32) a job asking for `precision` trains in on `torch_device`, resolved as the
    trainer resolves it."""
    from bertlab.training.optimization import resolve_precision  # deferred: torch

    return resolve_precision(train_types.TrainConfig(max_steps=1, precision=precision), torch_device)


def _precision_label(precision: str, device: str) -> str:
    """The precision the job's steps run in, as its log will say it ('bf16 autocast (CPU, AVX-512 BF16)')."""
    import torch

    from bertlab.training.optimization import precision_label  # deferred: torch

    torch_device = torch.device(device)
    return precision_label(_autocast_dtype(precision, torch_device), torch_device)


def busy_note() -> str:
    """A note when other work keeps this machine's cores busy: steps timed now run slower than they
    will on a quiet machine (and as slow as the job will, if the machine stays this busy)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return ""
    cores = os.cpu_count() or 1
    if load < cores:
        return ""
    return (
        f"this machine is busy now (load average {load:.1f} on {cores} cores): the timed steps shared the CPU, "
        "so the time is what the job takes if the machine stays this busy, longer than on a quiet one"
    )


def _can_time_here(config: BertConfig, device: str) -> bool:
    """Whether a step of `config`'s model can be timed on `device` here: a model of up to
    MEASURE_MAX_PARAMETERS, on a kind of device this machine has."""
    if count_parameters(config) > MEASURE_MAX_PARAMETERS:
        return False
    if device == "cuda":
        import torch  # deferred: only when timing

        return torch.cuda.is_available()
    return True
