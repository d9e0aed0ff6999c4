"""How long an ablation suite takes: each run's estimate (the Train page's estimate of the same job)
and the totals, one after another or side by side on several GPUs.

Owns: `RunEstimate`, `SuiteEstimate`, `estimate_suite`, `budget_text` and STARTUP_S (a job's start-up,
added to each estimate). Torch-free at import; `estimate_suite` asks bertlab.estimates for each job,
which may time a training step of the model here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from bertlab.ablations.planning import SuiteSpec, plan
from bertlab.errors import InputError
from bertlab.estimates import estimate_spec
from bertlab.formatting import format_duration
from bertlab.hardware import gpu_count
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job
from bertlab.jobs.spec import JobError, parse_recipe_args, pretrain_config
from bertlab.runfolder import REPO_ROOT

STARTUP_S = 15.0  # a job's start-up before its first step (imports, data, model), on top of its estimate


@dataclass(frozen=True)
class RunEstimate:
    """One job of a suite before it runs, with the Train page's estimate of the same job."""

    variant: str
    column: str  # "pretraining" or the task column
    seed: int
    name: str  # the job's name, as the Jobs page will list it
    steps: int | None
    seconds: float  # estimated training (and compiling) time plus STARTUP_S
    source: str  # where the seconds a step come from (an earlier run, timed here now, tabulated)


@dataclass(frozen=True)
class SuiteEstimate:
    """How long a suite takes: each run's estimate, and the totals one after another or side by side."""

    runs: tuple[RunEstimate, ...]
    on_gpu: bool
    slots: int  # jobs the queue runs at once (one per GPU; one on CPU)
    budget: str  # each variant's pretraining budget in words ("" when the table pretrains nothing)

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
    def side_by_side_s(self) -> float:
        """With several GPUs: the pretraining runs in rounds of `slots` (the longest of each round), then
        the fine-tuning runs spread over the slots."""
        pre = sorted((r.seconds for r in self.runs if r.column == "pretraining"), reverse=True)
        rounds = sum(pre[i] for i in range(0, len(pre), self.slots))
        return rounds + self.finetuning_s / self.slots

    @property
    def text(self) -> str:
        reused = sum(r.source.startswith("reuses job") for r in self.runs)
        pre = f"{self.pretraining_runs - reused} pretraining run(s)" + (f" ({self.budget} each)" if self.budget else "")
        pre += f", {reused} reused from earlier jobs (counted for what is left of them)" if reused else ""
        text = (
            f"{pre} and {self.finetuning_runs} fine-tuning runs on {'GPU' if self.on_gpu else 'CPU'}: about "
            f"{format_duration(self.total_s)} one after another"
        )
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
                "seed": "" if r.column == "pretraining" else r.seed,
                "steps": r.steps,
                "time": format_duration(r.seconds),
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
    spec: SuiteSpec, gpus: int | None = None, measure: bool = True, registry: JobRegistry | None = None
) -> SuiteEstimate:
    """Every run of the suite with the estimate the Train page gives the same job
    (bertlab.estimates.estimate_spec: the real model, the task's real token counts, throughput
    measured in an earlier run or timed here), plus STARTUP_S each. A fine-tuning run of a variant
    that is still to be pretrained is estimated on that variant's model shape. A reused pretraining
    job (`spec.reuse`, read from `registry`) counts for what is left of it. gpus: None = this
    machine's; with several, the queue runs one job per GPU side by side. Jobs sharing a GPU
    ($BERTLAB_JOBS_PER_GPU) are not modelled: each is timed as if it had its GPU to itself, so with
    sharing the side-by-side total is an upper bound only when the GPU has room to spare."""
    gpus = gpu_count() if gpus is None else gpus
    device = spec.device_kind(gpus)
    on_gpu = device == "cuda"
    shipped = str(REPO_ROOT / "checkpoints" / "bertlab-mini")
    shapes: dict[str, object] = {}  # variant -> the config of the model its pretraining job writes
    seen: dict[tuple, tuple[int | None, float, str]] = {}  # a job's arguments but its seed -> its estimate
    out = []
    for r in plan(spec, "estimate"):
        job = replace(r.spec, device=device)
        model_config = None
        if r.column == "pretraining":
            cfg = pretrain_config(parse_recipe_args("pretrain", job.args), REPO_ROOT)
            shapes[r.variant] = cfg.model_config(cfg.vocab_size)
        elif r.needs:  # the model is written by an earlier job: its shape, the shipped model's vocabulary
            job = replace(job, args=tuple(shipped if a == "{model}" else a for a in job.args))
            model_config = shapes[r.needs]
        left, reused = 1.0, spec.reused(r.variant) if r.column == "pretraining" else None
        if reused:
            left = _left_of(reused, registry)
            if not left:
                out.append(RunEstimate(r.variant, r.column, 0, job.name, None, 0.0, f"reuses job {reused}"))
                continue
        key = (job.kind, tuple(a for i, a in enumerate(job.args) if i == 0 or job.args[i - 1] != "--seed"), r.needs)
        if key not in seen:
            try:
                est = estimate_spec(job, REPO_ROOT, measure=measure, model_config=model_config, gpus=gpus)
            except JobError as exc:
                raise InputError(f"cannot estimate {job.name}: {exc}") from exc
            seen[key] = (est.steps, (est.total_s or 0.0) + STARTUP_S, est.throughput_source)
        steps, seconds, source = seen[key]
        if reused:
            steps, seconds = None if steps is None else round(steps * left), seconds * left
            source = f"reuses job {reused}, {1 - left:.0%} done ({source})"
        out.append(RunEstimate(r.variant, r.column, r.seed, job.name, steps, seconds, source))
    return SuiteEstimate(tuple(out), on_gpu, max(1, gpus) if on_gpu else 1, budget_text(spec))


def _left_of(job_id: str, registry: JobRegistry | None) -> float:
    """The share of a reused pretraining job still to run (0 when finished, or when no registry says)."""
    if registry is None:
        return 0.0
    try:
        job = read_job(registry.root / job_id)
    except OSError:
        return 0.0
    if job.state == "finished":
        return 0.0
    return min(1.0, max(0.0, 1.0 - float(job.progress or 0.0)))
