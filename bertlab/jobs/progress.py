"""How far a run is and how long it has left, as the Jobs page shows it: its recent pace from the train
lines of this attempt (`recent_pace`), the ETA at that pace (`eta_s`), and a step and progress that never
lag its metric lines (`caught_up`).

Imports bertlab.jobs.runs (the `Job`) and bertlab.jobs.metric_lines; never plotly or streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bertlab.jobs.metric_lines import finite
from bertlab.jobs.runs import Job

# How many of the latest train lines of a run's current attempt set its pace: a slowdown shows within
# three lines, and a window with an evaluation or a checkpoint save in it counts for a third, not all.
PACE_LINES = 4


def recent_pace(job: Job, train: Sequence[dict]) -> float | None:
    """The share of the run done per wall-clock second lately (progress per second, 0-1), from the last
    `PACE_LINES` train lines that this attempt wrote (`train`: `split_metrics`'s, sorted by step).

    Wall-clock, as the tokens/s beside it is: evaluations and saves between the lines count. Only
    lines written since the attempt started (status "started") count, so neither the hours a run spent
    cancelled nor a faster pace before a resume leak in. With one such line, its own window's pace: its
    tokens/s over the tokens a unit of progress takes (from the line before it, or from the start).
    None when the lines cannot say (no time stamps, no progress, nothing logged in this attempt yet)."""
    started = job.status.get("started")
    mine = [
        m
        for m in train
        if finite(_progress(job, m)) and finite(m.get("time")) and (not finite(started) or m["time"] >= started)
    ][-PACE_LINES:]
    if len(mine) >= 2:
        done = _progress(job, mine[-1]) - _progress(job, mine[0])
        took = mine[-1]["time"] - mine[0]["time"]
        return done / took if done > 0 and took > 0 else None
    if not mine or not finite(mine[-1].get("tokens_per_s")) or not finite(mine[-1].get("tokens")):
        return None
    last = mine[-1]
    before = next((m for m in reversed(train) if m["step"] < last["step"]), None)  # tokens count on across a resume
    done_before, tokens_before = (_progress(job, before), before.get("tokens")) if before else (0.0, 0)
    if not (finite(done_before) and finite(tokens_before)):
        return None
    tokens, done = last["tokens"] - tokens_before, _progress(job, last) - done_before
    return last["tokens_per_s"] * done / tokens if tokens > 0 and done > 0 else None


def _progress(job: Job, line: dict) -> float | None:
    """How far the run was at a train line (0-1): its own 'progress', else its step over the total."""
    if finite(line.get("progress")):
        return line["progress"]
    return line["step"] / job.total_steps if job.total_steps and finite(line.get("step")) else None


def eta_s(job: Job, train: Sequence[dict]) -> float | None:
    """Seconds left for a running run at its recent pace (`recent_pace`), from its last train line;
    the trainer's own estimate (status.json) where the lines cannot say. None unless running.

    The trainer's estimate projects its training time so far over the whole run, every attempt
    together, so a run resumed on a machine now shared with another job kept the pace it had alone
    (issue: 'ETA 37 s' beside 957 tokens/s, with four minutes of steps left)."""
    if job.state != "running":
        return None
    pace = recent_pace(job, train)
    done = _progress(job, train[-1]) if train else None
    if pace is None or not finite(done):
        return job.eta_s if finite(job.eta_s) else None
    return max(0.0, 1.0 - done) / pace


def caught_up(job: Job, metrics: Sequence[dict]) -> Job:
    """`job` with its step and progress at least those of its newest metric line, train or eval.

    status.json can lag metrics.jsonl: the trainer writes it just after each line, and one that
    wrote its step with train lines only (runs trained before it wrote it at evaluations too) had an
    evaluation every 10 steps under a train line every 20 show 'Step 0 / 30' beside 'Eval mlm acc
    8.0%' and curves up to step 10. A resumed run's metrics are cut back to its checkpoint, and a
    restarted one's set aside, so no line is ahead of the run."""
    step, progress = job.step, job.progress
    for line in metrics:
        if isinstance(line.get("step"), int) and not isinstance(line["step"], bool) and line["step"] > step:
            step = line["step"]
        if line.get("split", "train") == "train" and finite(line.get("progress")):
            progress = max(progress or 0.0, float(line["progress"]))
    if job.total_steps and step > job.step:  # a step budget: the progress is at least its share of steps
        progress = max(progress or 0.0, step / job.total_steps)
    if step == job.step and progress == job.progress:
        return job
    return replace(job, step=step, progress=progress)
