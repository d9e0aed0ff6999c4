"""Seconds an optimizer step of a training run takes, from the first of: an earlier run of the same job
shape on the same kind of device (`_measured_in_run`), a few steps of the job's model timed here now
(bertlab.jobs.estimates.timed_step), or, for a model too big to time here, its training FLOPs over a tabulated
FLOP/s (`TABULATED_FLOPS`). Also what the device is (`device_info`: its name, memory and FLOP/s).

Imports the standard library and bertlab.config / hardware / jobs.runs and storage.runfolder (earlier
runs) / training.timed_step; never torch at import.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from bertlab.config import BertConfig
from bertlab.hardware import default_threads, gpu_stats
from bertlab.jobs.estimates.timed_step import PretrainingModel, timed_micro_batch
from bertlab.jobs.runs import run_dirs
from bertlab.storage.runfolder import read_metrics, read_run_config, read_status, runs_root

if TYPE_CHECKING:  # annotations only: the head's module imports torch
    from bertlab.finetune.models import HeadConfig

log = logging.getLogger(__name__)

# Effective training throughput in FLOP/s, used only for models too big to time here (see
# `step_seconds`): what PyTorch reaches on BERT-sized matmuls, not the datasheet peak. GPUs: ~35-40%
# of the bf16 dense peak, a usual model-FLOPs utilisation for BERT-base at sequence length 128.
TABULATED_FLOPS = {
    "cpu_per_core": 7e9,
    "H100": 3.5e14,
    "H200": 3.8e14,
    "A100": 1.1e14,
    "L4": 4.5e13,
    "T4": 1.5e13,
    "V100": 3.5e13,
    "cuda": 5e13,
}
STEP_OVERHEAD_S = {"cpu": 0.01, "cuda": 0.03}
MULTI_GPU_EFFICIENCY = 0.9  # DDP all-reduce costs ~10% at this scale


def device_info(device: str) -> tuple[str, float | None, float, str]:
    """(name, memory GB or None, effective FLOP/s, table key) of the first device of this kind."""
    if device == "cpu":
        cores = os.cpu_count() or 1
        mem = None
        with contextlib.suppress(OSError, ValueError):
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        return f"CPU, {cores} cores", mem, TABULATED_FLOPS["cpu_per_core"] * cores, "cpu"
    stats = gpu_stats()
    name = stats[0].name if stats else "CUDA GPU"
    mem = stats[0].memory_total_gb if stats else None
    key = next((k for k in TABULATED_FLOPS if k not in ("cpu_per_core", "cuda") and k in name), "cuda")
    return name, mem, TABULATED_FLOPS[key], key


def step_seconds(
    config, batch_size, micro, grad_accum, seq_length, padded_row, device, gpus, pretraining,
    max_predictions, trainable_fraction, runs_dir, task, threads, measure, flops_rate, key, name, head=None,
    max_seq_length=0, precision="auto", real_row=0.0, family=None,
) -> tuple[float, str]:  # fmt: skip
    """(seconds an optimizer step, where that comes from), the first of: an earlier run of the same job shape
    on this kind of device (`_measured_in_run`); a micro-batch of the job's padded length timed here now
    (`timed_step.timed_micro_batch`, for models up to MEASURE_MAX_PARAMETERS on a device this machine has);
    else 6 * N_matmul * tokens + 12 * L * S * H * tokens FLOPs (Kaplan et al. 2020) over `flops_rate`
    (`TABULATED_FLOPS`), plus a fixed per-step overhead (a BiLSTM head's FLOPs on the real tokens only: it
    runs on packed sequences). Arguments as `estimates.estimate`'s; `flops_rate`, `key` and `name` are the
    device's (`device_info`)."""
    if gpus == 1:
        measured = _measured_in_run(
            config, seq_length, padded_row, batch_size, device, task, runs_dir, head, max_seq_length, threads, family
        )
        if measured:
            return measured
    # the encoder computes on every padded token; a BiLSTM (packed sequences) only on the real ones
    flops = _flops_per_token(config, seq_length, pretraining, max_predictions) * padded_row
    flops += _bilstm_flops_per_token(config, head) * (real_row or padded_row)
    rate = flops_rate * gpus * (MULTI_GPU_EFFICIENCY if gpus > 1 else 1.0)
    tabulated_s = flops * batch_size * gpus / rate + STEP_OVERHEAD_S[device] * max(1, grad_accum)
    timed = None
    if measure:
        timed = timed_micro_batch(
            config, micro, padded_row, real_row, device, name, pretraining, max_predictions, trainable_fraction < 1.0,
            threads, head, precision, tabulated_s / max(1, grad_accum), family,
        )  # fmt: skip
    if timed is not None:
        micro_s, source = timed
        step_s = micro_s * max(1, grad_accum)
        if gpus > 1:
            step_s /= MULTI_GPU_EFFICIENCY
        return step_s, source
    return tabulated_s, f"tabulated for {key if key != 'cpu' else name}"


def _flops_per_token(config: BertConfig, seq_length: int, pretraining: bool, max_predictions: int) -> float:
    """Training FLOPs per input token of the model without a BiLSTM: 6 per matmul weight plus attention's
    12 L S H (see `step_seconds`)."""
    L, H, F, V = config.num_layers, config.hidden_size, config.intermediate_size, config.vocab_size  # noqa: N806
    n_matmul = L * (4 * H * H + 2 * H * F) + (
        H * H + H * V * min(1.0, max_predictions / seq_length) if pretraining else H
    )
    return 6 * n_matmul + 12 * L * seq_length * H


def _bilstm_flops_per_token(config: BertConfig, head: HeadConfig | None) -> float:
    """Training FLOPs per real token of a BiLSTM head: 6 per weight, 4 gates x (input + hidden) x hidden,
    both directions, each layer (0 without a BiLSTM)."""
    if head is None or not head.use_bilstm:
        return 0.0
    H = config.hidden_size  # noqa: N806
    width, size = head.lstm_hidden or H, H * (4 if head.features == "cat4" else 1)
    weights = sum(2 * 4 * ((size if layer == 0 else 2 * width) + width) * width for layer in range(head.lstm_layers))
    return 6.0 * weights


def _run_seq_length(run_config: dict) -> int | None:
    """max_seq_length of a pretraining (config.data.max_seq_length) or fine-tuning run (the length it used,
    task_setup.max_seq_length, else config.max_seq_length)."""
    cfg = run_config.get("config")
    if not isinstance(cfg, dict):
        return None
    used = (run_config.get("task_setup") or {}).get("max_seq_length")
    if isinstance(used, int) and used > 0:
        return used
    data = cfg.get("data")
    value = data.get("max_seq_length") if isinstance(data, dict) else cfg.get("max_seq_length")
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _run_threads(run_config: dict) -> int:
    """The CPU threads a run trained on: its train.num_threads, else (0: torch's default) `default_threads`."""
    cfg = run_config.get("config")
    train = run_config.get("effective_train") or (cfg.get("train") if isinstance(cfg, dict) else None)
    n = train.get("num_threads") if isinstance(train, dict) else None
    return int(n) if isinstance(n, (int, float)) and n > 0 else default_threads()


_HEAD_KEYS = ("mode", "features", "bilstm", "lstm_hidden", "lstm_layers")


def _measured_in_run(
    config: BertConfig,
    seq_length: int,
    padded_per_row: float,
    batch_size: int,
    device: str,
    task: str | None,
    root,
    head: HeadConfig | None = None,
    max_seq_length: int = 0,
    threads: int = 0,
    family: PretrainingModel | None = None,
) -> tuple[float, str] | None:
    """(seconds a step, source) from the newest earlier run of the same job shape on the same kind
    of device: a pretraining run of the same model shape and about the same sequence length (its
    sequences/s times its length: the tokens it computed on), or a fine-tuning run of the same task,
    model shape, batch size, max_seq_length and head (mode, features, BiLSTM: its sequences/s,
    since its batches are padded as this job's will be). On a CPU the run must have trained on as many
    threads as this job will (`threads`, 0: `default_threads`): a step on 1 thread took ~1.4x one on 2."""
    root = Path(root) if root else runs_root()
    # the objective shows in the shape too: a left-to-right model predicts every token, not 15% of them
    keys = ("num_layers", "hidden_size", "num_heads", "intermediate_size", "attention_direction", "use_nsp_head")
    defaults = {"attention_direction": "bidirectional", "use_nsp_head": True}  # run folders from before those fields
    shape = tuple(getattr(config, k) for k in keys)
    for run in run_dirs(root)[:50]:
        try:
            rc = read_run_config(run) or {}
            mc = rc.get("model_config") or {}
            if tuple(mc.get(k, defaults.get(k)) for k in keys) != shape:
                continue
            if not str(read_status(run).get("device", "")).startswith(device):
                continue
            if device == "cpu" and _run_threads(rc) != (threads or default_threads()):
                continue
            run_seq = _run_seq_length(rc) or seq_length
            cfg = rc.get("config") or {}
            if task is None:
                if rc.get("kind", "pretrain") != "pretrain" or not (0.8 * seq_length <= run_seq <= 1.25 * seq_length):
                    continue
                if cfg.get("model_type", "bert") != (family or PretrainingModel()).model_type:
                    continue  # an ALBERT of BERT's shape steps at another speed
            elif rc.get("kind") != "finetune" or cfg.get("task") != task or run_seq != (max_seq_length or seq_length):
                continue
            elif ((rc.get("effective_train") or cfg.get("train") or {}).get("batch_size")) != batch_size:
                continue
            elif head is not None and any(cfg.get(k) != getattr(head, k) for k in _HEAD_KEYS):
                continue
            rates = sorted(
                float(r["seq_per_s"]) for r in read_metrics(run)[1:] if r.get("split") == "train" and r.get("seq_per_s")
            )
        except (AttributeError, TypeError, ValueError, OSError) as exc:  # a run folder from another version
            log.debug("skipping %s for throughput: %s", run, exc)
            continue
        if len(rates) >= 2:
            seq_per_s = rates[len(rates) // 2]
            if task is None:  # padded tokens a second, at this job's padded rows
                return batch_size * padded_per_row / (seq_per_s * run_seq), f"measured in run {run.name}"
            return batch_size / seq_per_s, f"measured in run {run.name}"
    return None
