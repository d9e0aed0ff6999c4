"""What the Train and Jobs pages draw about training jobs: tables, live numbers, curves, predictions.

Figures take plain data (metric lines from metrics.jsonl, `Job` snapshots, prediction fields) and
return plotly figures, HTML snippets or rows (the runs table, with the columns that fit the page and
their widths); nothing here runs a model or touches a process.

Also owns what a run's state means to the person watching it (`state_messages`, what can be done
with it now), so that the Jobs page draws messages instead of testing state names.

Imports plotly and bertlab.estimates / formatting / runs (what it draws) / runfolder (a run's task
labels, for chance levels; the state names) / figures (colours); never streamlit.
"""

from __future__ import annotations

import html
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.estimates import Estimate
from bertlab.figures import BLUE, FONT, GREY, ORANGE, percent
from bertlab.finetune.tasks import label_text
from bertlab.formatting import format_duration
from bertlab.jobs.runs import Job
from bertlab.runfolder import ACTIVE_STATES, read_run_config, result_link

GREEN = "#3b8f5a"
# Streamlit's bundled Material icons: they draw without an emoji font (headless browsers often lack one).
STATE_ICONS = {
    "queued": ":material/schedule:",
    "preparing": ":material/settings:",
    "running": ":material/directions_run:",
    "finished": ":material/check_circle:",
    "failed": ":material/error:",
    "cancelled": ":material/stop_circle:",
}
# Eval metrics worth a line on the accuracy panel (fine-tuning tasks report theirs by name).
_SCORE = re.compile(r"(acc|accuracy|f1|mcc|matthews|pearson|spearman|exact|^em$)", re.I)
_TAG_COLOURS = ["#e8f0fb", "#fdeede", "#e6f4ea", "#fef7e0", "#f3e8fd", "#fce8e6", "#e0f7fa", "#eceff1"]


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


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------
def split_metrics(metrics: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """(train, eval) lines, one per step (a resumed run logs some steps twice: the later line wins)."""
    by_split: dict[str, dict[int, dict]] = {"train": {}, "eval": {}}
    for m in metrics:
        split = m.get("split", "train")
        if split in by_split and isinstance(m.get("step"), int):
            by_split[split][m["step"]] = m
    return [by_split["train"][s] for s in sorted(by_split["train"])], [
        by_split["eval"][s] for s in sorted(by_split["eval"])
    ]


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _series(lines: Sequence[dict], key: str) -> tuple[list[int], list[float]]:
    pts = [(m["step"], m[key]) for m in lines if _finite(m.get(key))]
    return [p[0] for p in pts], [p[1] for p in pts]


def _line_mode(x: Sequence) -> str:
    return "lines" if len(x) > 2 else "lines+markers"  # one or two points: a line alone would not show


# Train lines name a score more briefly than eval lines do: a fine-tuned classifier's train "acc" is
# the accuracy its eval lines call "accuracy" (the same name on the page, and the same chance level).
_SAME_AS = {"acc": "accuracy"}


def _score_name(key: str) -> str:
    """'accuracy' for a train line's 'acc'; 'mlm acc' for 'mlm_acc'."""
    return _SAME_AS.get(key, key).replace("_", " ")


def score_keys(train: Sequence[dict], evals: Sequence[dict]) -> tuple[list[str], list[str]]:
    """Accuracy-like keys of train lines (acc, x_acc: what the trainer's tasks log) and of eval lines
    (accuracy, f1, mcc, ...)."""
    tk = sorted(
        {k for m in train for k, v in m.items() if _finite(v) and (k in ("acc", "accuracy") or k.endswith("_acc"))}
    )
    ek = sorted({k for m in evals for k, v in m.items() if _finite(v) and _SCORE.search(k) and "loss" not in k})
    return tk, ek


def chance_levels(job: Job) -> dict[str, float]:
    """What guessing scores, per accuracy key of a run: 50% for next-sentence prediction; for a
    fine-tuned classifier (sentence or pair: accuracy), always answering the dev set's most frequent
    label (recorded by the run), else one over its number of labels."""
    levels = {"nsp_acc": 0.5}
    config = read_run_config(job.run_dir) or {}
    setup = config.get("task_setup") or {}
    labels = setup.get("labels") or []
    if setup.get("shape") in ("single", "pair") and len(labels) > 1:
        majority = config.get("dev_majority")
        levels["accuracy"] = majority if isinstance(majority, int | float) and majority > 0 else 1 / len(labels)
    return levels


def curves_figure(metrics: Sequence[dict], title: str = "", chance: dict[str, float] | None = None) -> go.Figure | None:
    """Loss, accuracy and learning rate against the step, train lines solid, eval points dashed;
    the step axis from 0 (one point is not a lonely dot on a 19-21 axis); `chance`: a dotted
    line at what guessing scores for each accuracy shown (see `chance_levels`), named in the legend.

    The panels share one legend, so no two traces share a colour and dash there: a score is one
    colour, solid for train and dashed for eval; an eval loss that is not the train loss's quantity
    (pretraining's 'mlm loss' beside the MLM + NSP 'loss') has a colour of its own."""
    train, evals = split_metrics(metrics)
    if not train and not evals:
        return None
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("Loss", "Accuracy", "Learning rate"),
        horizontal_spacing=0.07,
        shared_xaxes="all",
    )  # one step axis: a lone eval point sits where it belongs
    x, y = _series(train, "loss")
    if x:
        fig.add_trace(go.Scatter(x=x, y=y, name="train loss", mode=_line_mode(x), line=dict(color=BLUE)), 1, 1)
    eval_loss = "loss" if any(_finite(m.get("loss")) for m in evals) else "mlm_loss"
    x, y = _series(evals, eval_loss)
    if x:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=f"eval {eval_loss.replace('_', ' ')}",
                mode="lines+markers",
                line=dict(color=BLUE if eval_loss == "loss" else ORANGE, dash="dash"),
            ),
            1,
            1,
        )
    _add_score_traces(fig, train, evals)  # the middle panel
    x, y = _series(train, "lr")
    if x:
        fig.add_trace(go.Scatter(x=x, y=y, name="learning rate", mode=_line_mode(x), line=dict(color=GREY)), 1, 3)
    fig.update_xaxes(title_text="step", showgrid=True, gridcolor="#eee", rangemode="tozero")
    last_step = max([x for t in fig.data for x in (t.x or ()) if _finite(x)], default=0)
    if last_step and last_step < 10:  # plotly's auto range around a few early steps still reads oddly
        fig.update_xaxes(range=[0, last_step * 1.1 + 1])
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    train_keys, eval_keys = score_keys(train, evals)
    drawn: set[float] = set()  # eval accuracy and train acc share one level: one line
    for key in [*eval_keys, *train_keys]:
        level = _chance_of(key, chance or {})
        if level is not None and level not in drawn:
            drawn.add(level)
            fig.add_hline(y=level, line=dict(color=GREY, dash="dot"), row=1, col=2)
            # named in the legend, not on the plot: a label beside the line covered the scores near
            # chance that it is there to judge (an untrained model's NSP accuracy sits on it)
            fig.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    name=f"chance ({_score_name(key)}): {level:.0%}",
                    mode="lines",
                    line=dict(color=GREY, dash="dot"),
                    hoverinfo="skip",
                ),
                1,
                2,
            )
    scores = [v for t in fig.data if t.xaxis == "x2" for v in (t.y or ()) if _finite(v)]  # not the chance entry
    fig.update_yaxes(
        tickformat=".0%",
        row=1,
        col=2,
        **({"range": [0, 1.02]} if scores and min(scores) >= 0 and max(scores) <= 1 else {}),
    )
    fig.update_yaxes(exponentformat="e", rangemode="tozero", row=1, col=3)  # warm-up and decay read from zero
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
        font=FONT,
        height=340,
        plot_bgcolor="white",
        paper_bgcolor="white",
        margin=dict(l=10, r=10, t=50 if title else 30, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
        hovermode="x unified",
    )
    return fig


def _chance_of(key: str, chance: dict[str, float]) -> float | None:
    """What guessing scores on `key` (see `chance_levels`); a train 'acc' as its eval 'accuracy'."""
    return chance.get(key, chance.get(_SAME_AS.get(key, key)))


# The accuracy panel's colours, one per score (not the loss panel's blue and orange, nor the grey
# of the learning rate and chance); past the sixth score, dotted lines tell the next six apart.
_SCORE_COLOURS = [GREEN, "#8e5bd0", "#c24d7c", "#2a9d8f", "#d64545", "#e8a33d"]
_SCORE_DASHES = [("solid", "dash"), ("dot", "dashdot")]  # (train, eval)


def _add_score_traces(fig: go.Figure, train: list[dict], evals: list[dict]) -> None:
    """The accuracy panel's lines: one colour per score, its train line solid and its eval line
    dashed (a fine-tuned classifier's train 'acc' and eval 'accuracy' are one score)."""
    train_keys, eval_keys = score_keys(train, evals)
    names = list(dict.fromkeys(_score_name(k) for k in [*train_keys, *eval_keys]))

    def line(key: str, split: int) -> dict:
        n = names.index(_score_name(key))
        colour, dashes = _SCORE_COLOURS[n % len(_SCORE_COLOURS)], _SCORE_DASHES[n // len(_SCORE_COLOURS) % 2]
        return dict(color=colour, dash=dashes[split])

    for key in train_keys:
        x, y = _series(train, key)
        fig.add_trace(
            go.Scatter(x=x, y=y, name=f"train {_score_name(key)}", mode=_line_mode(x), line=line(key, 0)), 1, 2
        )
    for key in eval_keys:
        x, y = _series(evals, key)
        fig.add_trace(
            go.Scatter(x=x, y=y, name=f"eval {_score_name(key)}", mode="lines+markers", line=line(key, 1)), 1, 2
        )


def _score_text(key: str, value: float) -> str:
    """Accuracies and F1 as percentages; correlations (mcc, pearson, spearman) as numbers."""
    return f"{value:.3f}" if re.search(r"mcc|matthews|pearson|spearman", key) else f"{value:.1%}"


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
        if _finite(_progress(job, m)) and _finite(m.get("time")) and (not _finite(started) or m["time"] >= started)
    ][-PACE_LINES:]
    if len(mine) >= 2:
        done = _progress(job, mine[-1]) - _progress(job, mine[0])
        took = mine[-1]["time"] - mine[0]["time"]
        return done / took if done > 0 and took > 0 else None
    if not mine or not _finite(mine[-1].get("tokens_per_s")) or not _finite(mine[-1].get("tokens")):
        return None
    last = mine[-1]
    before = next((m for m in reversed(train) if m["step"] < last["step"]), None)  # tokens count on across a resume
    done_before, tokens_before = (_progress(job, before), before.get("tokens")) if before else (0.0, 0)
    if not (_finite(done_before) and _finite(tokens_before)):
        return None
    tokens, done = last["tokens"] - tokens_before, _progress(job, last) - done_before
    return last["tokens_per_s"] * done / tokens if tokens > 0 and done > 0 else None


def _progress(job: Job, line: dict) -> float | None:
    """How far the run was at a train line (0-1): its own 'progress', else its step over the total."""
    if _finite(line.get("progress")):
        return line["progress"]
    return line["step"] / job.total_steps if job.total_steps and _finite(line.get("step")) else None


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
    if pace is None or not _finite(done):
        return job.eta_s if _finite(job.eta_s) else None
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
        if line.get("split", "train") == "train" and _finite(line.get("progress")):
            progress = max(progress or 0.0, float(line["progress"]))
    if job.total_steps and step > job.step:  # a step budget: the progress is at least its share of steps
        progress = max(progress or 0.0, step / job.total_steps)
    if step == job.step and progress == job.progress:
        return job
    return replace(job, step=step, progress=progress)


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
    if _finite(last.get("loss")):
        out.append(("Train loss", f"{last['loss']:.3f}"))
    train_keys, eval_keys = score_keys(train, evals)
    if evals and eval_keys:
        split, key, value = "Eval", eval_keys[0], evals[-1].get(eval_keys[0])
    elif train_keys:
        split, key, value = "Train", train_keys[0], last.get(train_keys[0])
    else:
        split, key, value = "", "", None
    if _finite(value):
        level = _chance_of(key, chance_levels(job))
        beside = f" (chance {level:.0%})" if level is not None else ""
        out.append((f"{split} {_score_name(key)}{beside}", _score_text(key, value)))
    if _finite(last.get("tokens_per_s")):
        out.append(("Tokens/s", format_count(last["tokens_per_s"])))
    eta = eta_s(job, train)
    if eta is not None:
        out.append(("ETA", format_duration(eta)))
    elif job.is_final:
        started, ended = job.status.get("started"), job.status.get("ended")
        if _finite(started) and _finite(ended) and ended >= started:
            out.append(("Took", format_duration(ended - started)))
    if _finite(last.get("gpu_mem_gb")):
        out.append(("GPU memory (peak)", format_gb(last["gpu_mem_gb"])))
    if _finite(last.get("skipped_steps")) and last["skipped_steps"] > 0:  # non-finite gradients: no update made
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
                "progress": _whole_percent(j.progress) if _finite(j.progress) else float(j.state == "finished"),
                "loss": f"{last['loss']:.3f}" if _finite(last.get("loss")) else "",
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


def job_label(job: Job) -> str:
    """'bertlab-tiny-2026... (pretrain)': no state, since a picker label is not redrawn while the job moves on."""
    return f"{job.id} ({job.kind or '?'})"


def job_heading(job: Job) -> str:
    """Markdown heading text with the state's icon (Streamlit renders :material/...: in markdown)."""
    return f"{STATE_ICONS.get(job.state, '')} {job.id} — {job.kind or '?'}, {job.state}"


# --------------------------------------------------------------------------------------
# What a run's state means to the person watching it
# --------------------------------------------------------------------------------------
WAITING_STATES = ("queued", *ACTIVE_STATES)  # not ended yet: the page refreshes itself while one is


@dataclass(frozen=True)
class StateMessage:
    """One message about a run's state; the page draws it with st.error / st.warning / st.info."""

    level: str  # "error", "warning" or "info"
    text: str  # markdown
    icon: str | None = None  # Streamlit's bundled Material icon, or None for the level's own


def state_messages(job: Job) -> list[StateMessage]:
    """What to tell the user about a run's state, in the order to show it: a record that cannot be
    fully read (any state but failed), then what its state means and what Resume would do."""
    out = []
    if job.state != "failed" and job.error:  # shown despite a file it cannot read: say which and why
        out.append(
            StateMessage("warning", f"Part of this run's record cannot be read: {job.error}", ":material/warning:")
        )
    if job.state == "failed":
        error = (job.error or "no error recorded").strip()
        # a log's tail keeps its lines in a code block; a one-line message (bertlab's own errors, which
        # say what to change) reads as text, wrapped, instead of running off the side of a code block
        text = f"This run failed.\n\n```\n{error}\n```" if "\n" in error else f"This run failed: {error}"
        out.append(StateMessage("error", text, ":material/error:"))
    elif job.state == "cancelled" and job.alive:
        out.append(StateMessage("info", "Stopping: saving a checkpoint and exiting…"))
    elif job.state == "cancelled":
        resume = (
            f"Resume continues from its last checkpoint (step {job.status.get('checkpoint_step', '?')})."
            if job.has_checkpoint
            else "No checkpoint was saved; Resume starts it again."
        )
        out.append(StateMessage("info", "Cancelled. " + resume))
    elif job.state == "queued":
        out.append(StateMessage("info", "Waiting for a free device; it starts when the job ahead of it ends."))
    elif job.state == "preparing":
        out.append(StateMessage("info", "Preparing: reading the data and building the model…"))
    return out


def is_waiting(job: Job) -> bool:
    """Queued or active, or cancelled but still saving: the page keeps refreshing while one is."""
    return job.state in WAITING_STATES or job.alive


def progress_fraction(job: Job) -> float | None:
    """The progress bar's value (0-1) while the run is active and says how far it is; else None."""
    if job.state not in ACTIVE_STATES or job.progress is None:
        return None
    return min(1.0, max(0.0, float(job.progress)))


def expects_metrics(job: Job) -> bool:
    """False while queued or preparing (no metrics yet is no news then), and for an interpret study,
    which writes none: its result is saved beside its model."""
    return job.kind != "interpret" and job.state not in ("queued", "preparing")


def uses_gpu_now(job: Job) -> bool:
    """True while an active run trains on a GPU (worth showing the GPUs' load)."""
    return (job.device or "").startswith("cuda") and job.state in ACTIVE_STATES


def can_cancel(job: Job) -> bool:
    """Only a registry job that has not ended can be cancelled."""
    return job.managed and job.state in WAITING_STATES


def interrupted_text(jobs: list[Job], shown: int = 5) -> str:
    """What the Jobs page says of runs whose process went away mid-run (`Job.interrupted`)."""
    many = len(jobs) > 1
    names = ", ".join(j.id for j in jobs[:shown]) + ("…" if len(jobs) > shown else "")
    return (
        f"{len(jobs)} run{'s' if many else ''} stopped mid-run because {'their processes' if many else 'its process'} "
        f"went away (a restart, a closed laptop, a kill): {names}. Resumed, each continues from its last "
        "checkpoint, or from the start if it had none (`bertlab jobs resume --interrupted` does the same)."
    )


def can_resume(job: Job) -> bool:
    """A cancelled or failed run whose processes are gone can be queued again."""
    return not job.alive and job.state in ("cancelled", "failed")


def log_expanded(job: Job) -> bool:
    """The log opens by itself when the run failed: its last lines say why."""
    return job.state == "failed"


def can_try(job: Job) -> bool:
    """A finished run whose model is written can be tried on the page."""
    return job.state == "finished" and job.has_model


# The page that shows an interpret study's result (read from beside its model), by study.
RESULT_PAGES = {"probe": "What each layer knows", "heads": "Which heads matter"}
RESULT_LINKS = {"probe": {"tab": "probing"}}  # the page's query parameters that open where the result is


def result_link_params(job: Job) -> dict[str, str]:
    """The query parameters of the link to a finished study's result page ({} where the page opens on it)."""
    return dict(RESULT_LINKS.get((read_run_config(job.run_dir) or {}).get("study"), {}))


def result_page(job: Job) -> str | None:
    """The title of the page that shows a finished interpret study's result (saved beside its
    model, linked from the run folder); None for any other run."""
    if job.kind != "interpret" or job.state != "finished" or result_link(job.run_dir) is None:
        return None
    return RESULT_PAGES.get((read_run_config(job.run_dir) or {}).get("study"))


def can_delete(job: Job) -> bool:
    """Not while a process of it lives or it is active (a queued run can go)."""
    return not job.alive and job.state not in ACTIVE_STATES


# --------------------------------------------------------------------------------------
# Estimates
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# Predictions of fine-tuned models (the "Try it" panel)
# --------------------------------------------------------------------------------------
def probabilities_figure(
    probabilities: dict, predicted: str | None = None, title: str = "", task: str | None = None
) -> go.Figure:
    """Horizontal bars of P(label), the predicted label highlighted, most likely on top."""
    items = sorted(probabilities.items(), key=lambda kv: kv[1], reverse=True)
    labels = [label_text(task, k) for k, _ in items]
    predicted = label_text(task, predicted) if predicted is not None else None
    scores = [float(v) for _, v in items]
    colours = [ORANGE if lab == str(predicted) else BLUE for lab in labels]
    fig = go.Figure(
        go.Bar(
            x=scores[::-1],
            y=labels[::-1],
            orientation="h",
            marker_color=colours[::-1],
            text=[percent(s) for s in scores[::-1]],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.2%}<extra></extra>",
        )
    )
    fig.update_xaxes(range=[0, 1.12], tickformat=".0%", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(automargin=True, type="category")  # labels like "0"/"1" are names, not numbers
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
        font=FONT,
        height=70 + 30 * len(labels),
        plot_bgcolor="white",
        paper_bgcolor="white",
        margin=dict(l=10, r=10, t=40 if title else 10, b=10),
    )
    return fig


def tags_html(tokens: Sequence[str], tags: Sequence[str]) -> str:
    """Words with their tag underneath, one colour per tag type ('O' plain)."""
    kinds: dict[str, str] = {}
    cells = []
    for tok, tag in zip(tokens, tags, strict=False):
        kind = re.sub(r"^[BI]-", "", str(tag))
        if kind not in ("O", "") and kind not in kinds:
            kinds[kind] = _TAG_COLOURS[len(kinds) % len(_TAG_COLOURS)]
        bg = kinds.get(kind, "transparent")
        cells.append(
            f"<span style='display:inline-block;text-align:center;margin:2px 3px;padding:2px 6px;border-radius:6px;"
            f"background:{bg}'><span style='font-size:15px'>{html.escape(str(tok))}</span><br>"
            f"<span style='font-size:11px;color:#555'>{html.escape(str(tag))}</span></span>"
        )
    return "<div style='line-height:1.3'>" + "".join(cells) + "</div>"


def answer_html(context: str, start: int | None, end: int | None) -> str:
    """The context with the answer span [start, end) highlighted (character offsets)."""
    if start is None or end is None or not (0 <= start <= end <= len(context)):
        return f"<div style='line-height:1.6'>{html.escape(context)}</div>"
    return (
        "<div style='line-height:1.6'>"
        + html.escape(context[:start])
        + f"<mark style='background:#fde9a9;padding:1px 3px;border-radius:4px;font-weight:600'>{html.escape(context[start:end])}</mark>"
        + html.escape(context[end:])
        + "</div>"
    )
