"""How long an ablation suite takes: each run's estimate (the Train page's estimate of the same job, plus
what the job spends before its first step and after its last) and the totals, one after another or side
by side on several GPUs or CPU slots (`cpu_sharing`: how much a CPU job slows beside the others).

Owns: `RunEstimate`, `SuiteEstimate`, `estimate_suite`, `budget_text`, `cpu_slots`, `cpu_sharing`, and
`JobOverhead` with `job_overhead` (a job's start-up and end: read from earlier finished jobs of the same kind,
device and data in the runs folder, else `DEFAULT_OVERHEAD`, measured). Torch-free at import; `estimate_suite`
asks bertlab.jobs.estimates.spec for each job, which may time a training step of the model here.

Imports bertlab.ablations.planning, bertlab.errors, bertlab.jobs.estimates.estimate / job_estimates, bertlab.formatting,
bertlab.hardware, bertlab.jobs (registry, runs, spec) and bertlab.storage.runfolder.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bertlab.ablations.planning import PlannedRun, SuiteSpec, plan
from bertlab.errors import InputError
from bertlab.formatting import format_duration
from bertlab.hardware import cpu_slots_setting, default_threads, gpu_count
from bertlab.jobs.estimates.estimate import TIME_BUDGET_NOTE
from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job, run_dirs
from bertlab.jobs.spec import JobError, JobSpec, parse_recipe_args, pretrain_config
from bertlab.storage.runfolder import REPO_ROOT, read_job_file, read_metrics, read_run_config, read_status


@dataclass(frozen=True)
class JobOverhead:
    """What a job spends besides its training steps, which the Train page's estimate leaves out."""

    start_s: float  # launch to the first step: Python and torch, reading (and tokenizing) its data, its model
    end_s: float  # the last step to the process's end: the final evaluation, saving the model, exiting
    source: str  # "measured default" or the earlier jobs it was read from


# Measured on this project's 2-core CPU, one job at a time (a tiny Table 5 suite: 3 pretraining and 4 MRPC
# runs; 7 tiny NER runs), launch to first step and last step to the job's end. Pretraining: 5.4 s to start
# (~2 s importing torch and the package, ~3 s reading the corpus and loading its cached instances) and
# 1.1-2.2 s to end (held-out evaluation, saving, exiting); making the instances afresh adds seconds for a
# small corpus, minutes for a large one. Fine-tuning: 2.4-3.4 s and 0.9-2.4 s. Earlier jobs of the same
# kind, device and data replace these (`job_overhead`).
DEFAULT_OVERHEAD = {
    "pretrain": JobOverhead(5.5, 1.5, "measured default"),
    "finetune": JobOverhead(2.7, 1.0, "measured default"),
}
# Several CPU jobs at a time ($BERTLAB_CPU_SLOTS, JobRegistry.cpu_slots), measured on this project's 2-core CPU
# with a tiny Table 8 suite (6 pretraining runs of 8 s, 12 UPOS runs of 200 sentences, half of them frozen features
# and a BiLSTM), 2 jobs at a time against 1. On one thread each (--threads 1) a job's steps took ~1.05x their time
# alone (fine-tuning 0.62-0.68 s of steps against 0.61-0.63, frozen features 1.12-1.18 against 1.08-1.12,
# pretraining 96-98 steps in 8 s against 99-101): the suite took 73 s against 140 s one at a time. On torch's
# default threads (one a core: 2 a job, 4 on 2 cores) the jobs' threads wait on each other: the 12 fine-tuning
# runs' steps took 43x their time alone in all (3.7x-81x; a frozen-feature BiLSTM run 7 steps in 7-65 s
# against 0.8 s), their final evaluations up to 15 s against 1 s, and the suite 255 s against 150 s one at a time
# (time-budgeted pretraining kept its 8 s but made 5-42 steps against 125-166).
CPU_SIDE_BY_SIDE = 1.05  # a job's steps beside others, when the jobs' threads together fit the cores
CPU_OVERSUBSCRIBED = 43.0  # ... when they do not: the mean of a spread of 3.7x-81x, so per run a guess only
EARLIER_JOBS = 5  # the newest finished jobs of the same kind and data that a job's overhead is the median of
SCANNED_RUNS = 50  # run folders looked at for them, newest first


@dataclass(frozen=True)
class RunEstimate:
    """One job of a suite before it runs, with the Train page's estimate of the same job."""

    variant: str
    column: str  # "pretraining" or the task column
    seed: int
    name: str  # the job's name, as the Jobs page will list it
    steps: int | None
    seconds: float  # the run's whole wall time: training (and compiling, x slowdown), start_s and end_s
    source: str  # where the seconds a step come from (an earlier run, timed here now, tabulated)
    start_s: float  # of `seconds`, before the first step (JobOverhead)
    end_s: float  # of `seconds`, after the last step: final evaluation, saving, exiting
    overhead_source: str  # where start_s and end_s come from (JobOverhead.source)
    slowdown: float = 1.0  # of its steps beside the queue's other CPU jobs (`cpu_sharing`); in `seconds` already


@dataclass(frozen=True)
class SuiteEstimate:
    """How long a suite takes: each run's estimate, and the totals one after another or side by side."""

    runs: tuple[RunEstimate, ...]
    on_gpu: bool
    slots: int  # jobs the queue runs at once (one per GPU; its CPU slots on CPU)
    budget: str  # each variant's pretraining budget in words ("" when the table pretrains nothing)
    sharing: str = ""  # what running CPU jobs side by side does to each (`cpu_sharing`); "" with one slot or on GPUs

    @property
    def pretraining_runs(self) -> int:
        return sum(r.column == "pretraining" for r in self.runs)

    @property
    def finetuning_runs(self) -> int:
        return len(self.runs) - self.pretraining_runs

    @property
    def pretraining_s(self) -> float:
        return sum(r.seconds for r in self.runs if r.column == "pretraining")

    @property
    def finetuning_s(self) -> float:
        return sum(r.seconds for r in self.runs if r.column != "pretraining")

    @property
    def total_s(self) -> float:
        return self.pretraining_s + self.finetuning_s

    @property
    def one_at_a_time_s(self) -> float:
        """The runs one after another, none slowed by another beside it (the total with one slot)."""
        return sum(r.start_s + (r.seconds - r.start_s - r.end_s) / r.slowdown + r.end_s for r in self.runs)

    @property
    def side_by_side_s(self) -> float:
        """With several slots (GPUs, or CPU slots): the pretraining runs in rounds of `slots` (the longest of
        each round), then the fine-tuning runs spread over the slots; each run as slowed beside the others."""
        pre = sorted((r.seconds for r in self.runs if r.column == "pretraining"), reverse=True)
        rounds = sum(pre[i] for i in range(0, len(pre), self.slots))
        return rounds + self.finetuning_s / self.slots

    @property
    def text(self) -> str:
        reused = sum(r.source.startswith("reuses job") for r in self.runs)
        pre = f"{self.pretraining_runs - reused} pretraining run(s)" + (f" ({self.budget} each)" if self.budget else "")
        pre += f", {reused} reused from earlier jobs (counted for what is left of them)" if reused else ""
        runs = f"{pre} and {self.finetuning_runs} fine-tuning runs on {'GPU' if self.on_gpu else 'CPU'}"
        if self.slots > 1 and not self.on_gpu:
            return (
                f"{runs}: about {format_duration(self.side_by_side_s)} with the queue's {self.slots} CPU jobs at a "
                f"time ({self.sharing}), about {format_duration(self.one_at_a_time_s)} one at a time"
            )
        text = f"{runs}: about {format_duration(self.total_s)} one after another"
        if self.slots > 1:
            text += f", about {format_duration(self.side_by_side_s)} on this machine's {self.slots} GPUs side by side"
        return text

    def rows(self) -> list[dict]:
        """One row per run for a table: variant, column, seed, steps, time and the estimate's source."""
        return [
            {
                "run": r.name,
                "variant": r.variant,
                "task": r.column,
                "seed": "" if r.column == "pretraining" else str(r.seed),  # one type: a table column
                "steps": r.steps,
                "time": format_duration(r.seconds),
                "start + end": format_duration(r.start_s + r.end_s),
                "from": r.source,
            }
            for r in self.runs
        ]

    def to_dict(self) -> dict:
        return {
            "pretraining_runs": self.pretraining_runs,
            "finetuning_runs": self.finetuning_runs,
            "pretraining_s": self.pretraining_s,
            "finetuning_s": self.finetuning_s,
            "total_s": self.total_s,
            "gpus": self.slots if self.on_gpu else 0,
            "side_by_side_s": self.side_by_side_s,
            "cpu_slots": 0 if self.on_gpu else self.slots,
            "one_at_a_time_s": self.one_at_a_time_s,
            "text": self.text,
            "runs": [asdict(r) for r in self.runs],
        }


def budget_text(spec: SuiteSpec) -> str:
    """Each variant's pretraining budget in words: 'on 40M tokens' or 'for 10 min'."""
    if not spec.table_spec.pretrains:
        return ""
    if spec.budget_tokens:
        return f"{spec.budget_tokens / 1e6:g}M tokens"
    return format_duration(spec.budget_s)


def estimate_suite(
    spec: SuiteSpec,
    gpus: int | None = None,
    measure: bool = True,
    registry: JobRegistry | None = None,
    progress: Callable[[str], None] | None = None,
) -> SuiteEstimate:
    """Every run of the suite with the estimate the Train page gives the same job
    (bertlab.jobs.estimates.spec.estimate_spec: the real model, the task's real token counts, throughput
    measured in an earlier run or timed here), plus the job's start-up and end (`job_overhead`,
    from earlier jobs in `registry`'s folder, else measured defaults). A fine-tuning run of a variant
    that is still to be pretrained is estimated on that variant's model shape. A reused pretraining
    job (`spec.reuse`, read from `registry`) counts for what is left of it. gpus: None = `registry`'s
    (the GPUs its queue runs jobs on), else this machine's; with several, the queue runs one job per GPU side by side. Jobs sharing a GPU
    ($BERTLAB_JOBS_PER_GPU) are not modelled: each is timed as if it had its GPU to itself, so with
    sharing the side-by-side total is an upper bound only when the GPU has room to spare. A CPU queue of
    several slots (`cpu_slots`) runs its jobs side by side too, each job's steps slowed by `cpu_sharing` (a
    time-budgeted job keeps its time and makes fewer steps).

    `progress` is called with a job's name before its estimate is made (its tokens counted and,
    unless an earlier run measured it, a training step timed here: up to tens of seconds each on a
    CPU), so that a terminal can say what it waits for."""
    if gpus is None:  # the queue's GPUs decide where its jobs run (a JobRegistry made with gpus=0 queues CPU jobs)
        gpus = registry.gpus if registry is not None else gpu_count()
    queue = _queue(spec, gpus, registry)
    runs_dir = registry.root if registry is not None else None
    shapes: dict[str, object] = {}  # variant -> the config of the model its pretraining job writes
    seen: dict[tuple, tuple[int | None, float, str, bool]] = {}  # a job's arguments but its seed -> its estimate
    overheads: dict[tuple, JobOverhead] = {}  # a job's kind and data -> its start-up and end
    out = []
    for r in plan(spec, "estimate"):
        job, data, model_config = _planned_job(r, queue.device, shapes)
        if (job.kind, data) not in overheads:
            overheads[job.kind, data] = job_overhead(job.kind, queue.device, data, runs_dir)
        reused = spec.reused(r.variant) if r.column == "pretraining" else None
        left, running = _left_of(reused, registry) if reused else (1.0, False)
        if reused and not left:
            out.append(RunEstimate(r.variant, r.column, 0, job.name, None, 0.0, f"reuses job {reused}", 0.0, 0.0, ""))
            continue
        key = (job.kind, tuple(a for i, a in enumerate(job.args) if i == 0 or job.args[i - 1] != "--seed"), r.needs)
        if key not in seen:
            if progress is not None:
                progress(job.name)
            seen[key] = _training_estimate(job, runs_dir, measure, model_config, gpus)
        out.append(_run_estimate(r, job, seen[key], overheads[job.kind, data], queue.slowdown, reused, left, running))
    return SuiteEstimate(tuple(out), queue.on_gpu, queue.slots, budget_text(spec), queue.sharing)


@dataclass(frozen=True)
class _Queue:
    """Where a suite's jobs run: the device, how many at once, and how much a CPU job's steps slow beside
    the others (`cpu_sharing`)."""

    device: str  # "cpu" or "cuda"
    slots: int
    slowdown: float
    sharing: str

    @property
    def on_gpu(self) -> bool:
        return self.device == "cuda"


def _queue(spec: SuiteSpec, gpus: int, registry: JobRegistry | None) -> _Queue:
    """Where the queue runs the suite's jobs: one a GPU on `gpus` GPUs, else its CPU slots side by side."""
    device = spec.device_kind(gpus)
    if device == "cuda":
        return _Queue(device, max(1, gpus), 1.0, "")
    slots = cpu_slots(registry)
    return _Queue(device, slots, *cpu_sharing(slots, spec.threads or default_threads(slots), os.cpu_count()))


def _planned_job(r: PlannedRun, device: str, shapes: dict[str, object]) -> tuple[JobSpec, tuple, object | None]:
    """A planned run's job on `device`, the data its start-up and end depend on (`_data_key`), and the shape
    of its starting model where an earlier job of the suite writes it (a fine-tuning run of a variant still
    to be pretrained: that shape, with the shipped model's vocabulary). A pretraining run puts the shape of
    the model it writes into `shapes`, for the fine-tuning runs after it."""
    job = replace(r.spec, device=device)
    ns = parse_recipe_args(job.kind, job.args)
    if r.column == "pretraining":
        cfg = pretrain_config(ns, REPO_ROOT)
        shapes[r.variant] = cfg.model_config(cfg.vocab_size)
        return job, _data_key("pretrain", {"corpus": cfg.corpus}), None
    data = _data_key("finetune", vars(ns))
    if not r.needs:
        return job, data, None
    shipped = str(REPO_ROOT / "checkpoints" / "bertlab-mini")
    job = replace(job, args=tuple(shipped if a == "{model}" else a for a in job.args))
    return job, data, shapes[r.needs]


def _training_estimate(
    job: JobSpec, runs_dir: Path | None, measure: bool, model_config: object | None, gpus: int
) -> tuple[int | None, float, str, bool]:
    """(steps, seconds until its last step, where the seconds a step come from, whether its time budget ends
    it first) of one job, as the Train page estimates it."""
    try:
        est = estimate_spec(job, REPO_ROOT, runs_dir=runs_dir, measure=measure, model_config=model_config, gpus=gpus)
    except JobError as exc:
        raise InputError(f"cannot estimate {job.name}: {exc}") from exc
    return est.steps, est.total_s or 0.0, est.throughput_source, TIME_BUDGET_NOTE in est.notes


def _run_estimate(
    r: PlannedRun,
    job: JobSpec,
    training: tuple[int | None, float, str, bool],
    overhead: JobOverhead,
    slowdown: float,
    reused: str | None,
    left: float,
    running: bool,
) -> RunEstimate:
    """One run's wall time: its training (`_training_estimate`; a reused job's for the `left` share still to
    run), slowed beside the queue's other CPU jobs (a time budget keeps its time and makes fewer steps),
    plus its start-up and end."""
    steps, training_s, source, time_bound = training
    start_s = 0.0 if running else overhead.start_s  # a reused job still running has started already
    if reused:
        steps, training_s = None if steps is None else round(steps * left), training_s * left
        source = f"reuses job {reused}, {1 - left:.0%} done ({source})"
    run_slowdown = slowdown
    if time_bound and slowdown != 1.0:  # a time budget keeps its time beside other jobs: fewer steps fit in it
        steps, run_slowdown = None if steps is None else max(1, round(steps / slowdown)), 1.0
    seconds = start_s + training_s * run_slowdown + overhead.end_s
    return RunEstimate(
        r.variant,
        r.column,
        r.seed,
        job.name,
        steps,
        seconds,
        source,
        start_s,
        overhead.end_s,
        overhead.source,
        run_slowdown,
    )


def cpu_slots(registry: JobRegistry | None) -> int:
    """The CPU jobs the queue runs at once: `registry`'s, else what a registry made now would take
    ($BERTLAB_CPU_SLOTS, else 1)."""
    return max(1, registry.cpu_slots if registry is not None else cpu_slots_setting())


def cpu_sharing(slots: int, threads: int, cores: int | None) -> tuple[float, str]:
    """(how many times their time alone a CPU job's steps take beside the queue's other jobs, that in words)
    with `slots` jobs at a time of `threads` threads each on `cores` cores: 1 with one slot; CPU_SIDE_BY_SIDE
    while the jobs' threads together fit the cores; else CPU_OVERSUBSCRIBED, and the words say to give fewer
    threads (measured: see CPU_SIDE_BY_SIDE)."""
    if slots <= 1:
        return 1.0, ""
    cores = cores or 1
    if slots * threads <= cores:
        return CPU_SIDE_BY_SIDE, (
            f"each job's steps ~{CPU_SIDE_BY_SIDE:g}x their time alone, measured with {threads}-thread jobs side by "
            f"side on {cores} cores"
        )
    fit = max(1, cores // slots)
    return CPU_OVERSUBSCRIBED, (
        f"{slots} jobs of {threads} threads each oversubscribe this machine's {cores} cores: side by side their steps "
        f"measured {CPU_OVERSUBSCRIBED:g}x their time alone on average and 4-80x run by run, so the suite takes "
        f"longer than one job at a time; give --threads {fit} ({slots} x {fit} fit the cores) or run one job at a time"
    )


def job_overhead(kind: str, device: str, data: tuple, runs_dir: str | Path | None) -> JobOverhead:
    """The start-up and end of a `kind` job ("pretrain" or "finetune") on `device` ("cpu" or "cuda"):
    the medians over the newest EARLIER_JOBS finished jobs of the same kind, device and data
    (`_data_key`) in `runs_dir`, else DEFAULT_OVERHEAD[kind] (also when `runs_dir` is None). The data
    must match because it decides the start-up: a pretraining job reads and tokenizes its corpus
    (seconds to minutes), a fine-tuning job its task; its evaluation set, the final evaluation."""
    timings = []
    for run in run_dirs(runs_dir)[:SCANNED_RUNS] if runs_dir is not None else []:
        timing = _overhead_of(run, kind, device, data)
        if timing is not None:
            timings.append(timing)
            if len(timings) == EARLIER_JOBS:
                break
    if not timings:
        return DEFAULT_OVERHEAD[kind]
    return JobOverhead(
        statistics.median(t[0] for t in timings),
        statistics.median(t[1] for t in timings),
        f"median of {len(timings)} earlier {kind} job(s) here",
    )


def _data_key(kind: str, config: dict) -> tuple:
    """What a job's start-up and end depend on, from its config (a run_config.json's, or its parsed arguments):
    a pretraining job's corpus; a fine-tuning job's task and its train and dev examples."""
    if kind == "pretrain":
        return tuple(str(c) for c in config.get("corpus") or ())
    return (config.get("task"), config.get("max_train_examples"), config.get("max_eval_examples"))


def _overhead_of(run: Path, kind: str, device: str, data: tuple) -> tuple[float, float] | None:
    """(start-up, end) of a finished job launched once by the registry: its launch to its first step
    (status.json's `started`, written just before it), and its last train metric line to the job's end;
    None for a run of another kind, device or data, or one these times cannot be read from."""
    job, status = read_job_file(run), read_status(run)
    if job.get("kind") != kind or job.get("attempts") != 1 or status.get("state") != "finished":
        return None
    if not str(status.get("device", "")).startswith(device):
        return None
    config = (read_run_config(run) or {}).get("config")
    if _data_key(kind, config if isinstance(config, dict) else {}) != data:
        return None
    last = next((m for m in reversed(read_metrics(run)) if m.get("split") == "train"), {})
    try:
        launched, started, last_step, ended = (
            float(x) for x in (job["launched"], status["started"], last["time"], job["ended"])
        )
    except (KeyError, TypeError, ValueError):  # a run folder from another version
        return None
    if not launched <= started <= last_step <= ended:
        return None
    return started - launched, ended - last_step


def _left_of(job_id: str, registry: JobRegistry | None) -> tuple[float, bool]:
    """(the share of a reused pretraining job still to run, whether it is running now): 0 when finished,
    or when no registry says."""
    if registry is None:
        return 0.0, False
    try:
        job = read_job(registry.root / job_id)
    except OSError:
        return 0.0, False
    if job.state == "finished":
        return 0.0, False
    return min(1.0, max(0.0, 1.0 - float(job.progress or 0.0))), job.state == "running"
