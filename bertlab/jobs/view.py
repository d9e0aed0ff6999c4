"""What the Train and Jobs pages show of training jobs in numbers: the runs table (with the columns that fit
the page and their widths), a run's live numbers, and an estimate's caption and rows. Curves are
bertlab.jobs.curves', pace and ETA bertlab.jobs.progress', what a state means bertlab.jobs.states', a
fine-tuned model's predictions bertlab.jobs.predictions'; nothing here runs a model or touches a process.

Imports bertlab.formatting / jobs (runs, metric_lines, progress, states) / training.estimates (the
`Estimate` it writes out); never plotly or streamlit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

from bertlab.formatting import format_duration
from bertlab.jobs.estimates.estimate import Estimate
from bertlab.jobs.metric_lines import (
    chance_levels,
    chance_of,
    finite,
    score_keys,
    score_name,
    score_text,
    split_metrics,
)
from bertlab.jobs.progress import caught_up, eta_s
from bertlab.jobs.runs import Job
from bertlab.jobs.states import WAITING_STATES


def format_count(n: int | float | None) -> str:
    """1_552_898 -> '1.55M', 12_345 -> '12.3k'."""
    if n is None:
        return "?"
    n = float(n)
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.3g}{unit}"
    return f"{n:.0f}"


def format_gb(gb: float | None) -> str:
    if gb is None:
        return "?"
    return f"{gb * 1024:.0f} MB" if gb < 1 else f"{gb:.1f} GB"


def live_numbers(job: Job, metrics: Sequence[dict]) -> list[tuple[str, str]]:
    """(label, value) pairs for the metric row: step, loss, accuracy (with what chance scores
    beside it), throughput, ETA, GPU memory, and steps skipped for non-finite gradients, if any.
    The step and progress never lag the metric lines (`caught_up`)."""
    job = caught_up(job, metrics)
    train, evals = split_metrics(metrics)
    last = train[-1] if train else (job.status.get("last_train") or {})
    out = [("Step", f"{job.step:,}" + (f" / {job.total_steps:,}" if job.total_steps else ""))]
    if job.progress is not None and not job.total_steps:
        # the step goes in the label: a value this long was cut to "100% (st…" in a five-metric row
        out[0] = (f"Progress (step {job.step:,})", f"{job.progress:.0%}")
    if finite(last.get("loss")):
        out.append(("Train loss", f"{last['loss']:.3f}"))
    train_keys, eval_keys = score_keys(train, evals)
    if evals and eval_keys:
        split, key, value = "Eval", eval_keys[0], evals[-1].get(eval_keys[0])
    elif train_keys:
        split, key, value = "Train", train_keys[0], last.get(train_keys[0])
    else:
        split, key, value = "", "", None
    if finite(value):
        level = chance_of(key, chance_levels(job))
        beside = f" (chance {level:.0%})" if level is not None else ""
        out.append((f"{split} {score_name(key)}{beside}", score_text(key, value)))
    if finite(last.get("tokens_per_s")):
        out.append(("Tokens/s", format_count(last["tokens_per_s"])))
    eta = eta_s(job, train)
    if eta is not None:
        out.append(("ETA", format_duration(eta)))
    elif job.is_final:
        started, ended = job.status.get("started"), job.status.get("ended")
        if finite(started) and finite(ended) and ended >= started:
            out.append(("Took", format_duration(ended - started)))
    if finite(last.get("gpu_mem_gb")):
        out.append(("GPU memory (peak)", format_gb(last["gpu_mem_gb"])))
    if finite(last.get("skipped_steps")) and last["skipped_steps"] > 0:  # non-finite gradients: no update made
        out.append(("Skipped (NaN)", f"{int(last['skipped_steps']):,} steps"))
    return out


def jobs_table(
    jobs: Sequence[Job], now: float | None = None, metrics: Mapping[str, Sequence[dict]] | None = None
) -> list[dict]:
    """One row per run for st.dataframe; every cell text but the progress fraction, empty where a run
    has no value yet (a missing number would read "None"). `metrics`: the metric lines of the running
    runs, by id, for an ETA at their recent pace (`eta_s`) and a step that does not lag them
    (`caught_up`); a run without them gets its last line's. The progress is rounded down to a whole
    percent: the bar's label reads '21%', not '21.33%', and '100%' only once the run is done."""
    now = time.time() if now is None else now
    rows = []
    for j in jobs:
        last = j.status.get("last_train") or {}
        lines = (metrics or {}).get(j.id)
        j = caught_up(j, lines or [])
        step = f"{j.step:,}" + (f" / {j.total_steps:,}" if j.total_steps else "")
        eta = eta_s(j, split_metrics(lines if lines is not None else [last])[0])
        rows.append(
            {
                "run": j.id,
                "kind": j.kind or "?",
                "state": j.state,
                "step": step,
                "progress": _whole_percent(j.progress) if finite(j.progress) else float(j.state == "finished"),
                "loss": f"{last['loss']:.3f}" if finite(last.get("loss")) else "",
                "ETA": format_duration(eta) if eta is not None else "",
                "device": (j.device or "") + (f" ×{j.num_gpus}" if j.num_gpus > 1 else ""),
                "submitted": f"{format_duration(now - j.submitted)} ago" if j.submitted else "",
            }
        )
    return rows


def _whole_percent(fraction: float) -> float:
    """0.2133 -> 0.21, 0.999 -> 0.99 (not yet 100%), 0.29 -> 0.29 (not 0.28: 100 * 0.29 is 28.999...)."""
    return math.floor(100 * min(1.0, max(0.0, fraction)) + 1e-9) / 100


# The longest a refreshing cell grows: an ETA appears when a run starts, so its column is sized for
# its longest form (a run of days is rare; '12 min 05 s' is as long), not for what it holds at first.
_LONGEST_CELLS = {"ETA": format_duration(99 * 3600 + 59 * 60)}
_CHAR_PX = 7.0  # the widest of the table's characters, digits (Source Sans at 14 px; letters ~6 px)
_PADDING_PX = 20  # 8 px a side in the grid, and a little to spare
_PROGRESS_PX = 100  # the bar and "100%" beside it


def jobs_table_widths(rows: Sequence[dict]) -> dict[str, int]:
    """The columns of `jobs_table` that the Jobs page shows, in order, with their widths in pixels:
    each its name or its longest cell, whichever is longer (ETA: its longest form), so that neither
    is cut as the table refreshes itself, and together narrow enough for a laptop's page (~780 px
    beside the sidebar at 1280 px) without scrolling sideways (issue: the last column read "su…").

    So, left out: 'submitted' (a run's name ends with the time it was made, and the newest comes
    first); 'device' while every run has the same one (on a laptop, 'cpu' nine times); 'ETA' unless
    a run is queued or active, the only ones that can have one."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    devices = {r.get("device", "") for r in rows}
    waiting = any(r.get("state") in WAITING_STATES for r in rows)
    hidden = {"submitted"} | ({"device"} if len(devices) <= 1 else set()) | (set() if waiting else {"ETA"})
    widths = {}
    for name in names:
        if name in hidden:
            continue
        cells = [str(r.get(name, "")) for r in rows] + [name, _LONGEST_CELLS.get(name, "")]
        widths[name] = _PADDING_PX + round(_CHAR_PX * max(len(c) for c in cells))
    if "progress" in widths:
        widths["progress"] = _PROGRESS_PX
    return widths


def estimate_caption(est: Estimate) -> str:
    """One line under the estimate: what it is, its throughput in real tokens, and compiling."""
    text = (
        f"**An estimate**, not a measurement: ~{format_count(est.tokens_per_s)} tokens/s "
        f"({est.tokens_per_step:,} real tokens a step) on {est.device_name}, {est.throughput_source}."
    )
    if est.compile_s:
        text += f" Includes ~{format_duration(est.compile_s)} of torch.compile before the first step."
    return text


def estimate_rows(est: Estimate) -> list[tuple[str, str]]:
    """Where the memory goes and how the time was worked out, as (label, value) pairs."""
    trained = (
        f" ({format_count(est.trainable_parameters)} trained)" if est.trainable_parameters < est.parameters else ""
    )
    rows = [
        ("Parameters", f"{format_count(est.parameters)}{trained}"),
        ("Weights", format_gb(est.weights_gb)),
        ("Gradients + AdamW states", format_gb(est.optimizer_gb)),
        ("Activations (one micro-batch)", format_gb(est.activations_gb)),
        ("Framework overhead", format_gb(est.overhead_gb)),
        ("Real tokens per step", f"{est.tokens_per_step:,}"),
    ]
    if est.padded_tokens_per_step > est.tokens_per_step:
        rows.append(("With padding (what the model computes on)", f"{est.padded_tokens_per_step:,}"))
    rows += [
        ("Token counts from", est.lengths_source),
        ("Throughput", f"~{format_count(est.tokens_per_s)} real tokens/s"),
        ("Seconds a step from", est.throughput_source),
    ]
    if est.steps and est.seconds is not None:
        rows.append(("Training", f"{est.steps:,} steps, ~{format_duration(est.seconds)}"))
    if est.compile_s:
        rows.append(("Compiling (torch.compile)", f"~{format_duration(est.compile_s)} before the first step"))
    rows.append(("Device", est.device_name + (f", {format_gb(est.device_memory_gb)}" if est.device_memory_gb else "")))
    return rows
