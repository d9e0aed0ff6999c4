"""The paper's ablations (Devlin et al. 2019, Tables 5-8) as suites of ordinary jobs.

Owns: what each suite runs (`SuiteSpec` -> `plan`, from its table's `TableSpec` in
bertlab.ablations.tables),
launching a suite into a `JobRegistry` (one pretraining job per variant, then one fine-tuning job per
variant x task column x seed, each waiting for its pretraining job) and a suite's progress
(`suite_runs`, `progress_matrix`). The paper's tables that the suites
reproduce are bertlab.ablations.paper's; the results and the comparison with the paper are
bertlab.ablations.results'.

A suite lives in RUNS/ablations/<suite id>/suite.json (its spec and the ids of its jobs); every run in
it is a normal run folder in RUNS, listed, resumable and deletable on the Jobs page. Every variant is
pretrained with the shipped model's recipe (configs/default-model.yaml, at the steadier peak learning
rate of `SUITE_RECIPE`) and its vocabulary, at the suite's size and budget (equal tokens, or equal
wall-clock), so that only the ablated knob differs.

Torch-free at import: imports bertlab.ablations.tables / paper, bertlab.jobs and its torch-free neighbours
(jobs.spec, jobs.runs, estimates, runfolder, hardware); `estimate_suite` asks bertlab.estimates for each job,
as the Train page does (it may time a training step of the model here).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from bertlab.ablations.tables import TABLES, Column, TableSpec, Variant
from bertlab.atomic import write_json_atomic
from bertlab.config import PRESETS
from bertlab.errors import InputError
from bertlab.estimates import estimate_spec
from bertlab.formatting import format_duration
from bertlab.hardware import gpu_count
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job, waiting_for
from bertlab.jobs.spec import (
    DEFAULT_TASK_DATA,
    FINETUNE_TASKS,
    JobError,
    JobSpec,
    default_task_data,
    parse_recipe_args,
    pretrain_config,
)
from bertlab.modelfolder import has_config
from bertlab.runfolder import JOB_FILE, REPO_ROOT, model_dir

SUITES_DIR = "ablations"  # under the runs folder
SUITE_FILE = "suite.json"
BASE_RECIPE = "configs/default-model.yaml"
BASE_VOCAB = "checkpoints/bertlab-mini/vocab.txt"
# The base recipe's one change for the suites: a peak learning rate of 1e-3 instead of 1.5e-3. At
# 1.5e-3 (a step from the 2e-3 that the recipe study saw collapse) short runs fell into the unigram
# guess for good -- three Table 8 mixes never left 5% (their mix may share the blame), and a 600-s
# time-to-quality run sat at 5.0% from step 20 to 500 -- since a budget's 5% warm-up is only tens of
# steps there; at 1e-3 every run of the recipe study (warm-ups of ~20 steps) left it, and so did the
# time-to-quality run. A suite's own `--set train.learning_rate=...` wins.
SUITE_RECIPE = ("train.learning_rate=1e-3",)
CSV_COLUMNS = ("table", "variant", "task", "metric", "value", "seed", "run")
PERCENT_METRICS = (
    "accuracy",
    "f1",
    "precision",
    "recall",
    "exact_match",
    "matthews",
    "pearson",
    "spearman",
    "mlm_acc",
    "nsp_acc",
)


# --------------------------------------------------------------------------------------
# What a suite runs
# --------------------------------------------------------------------------------------
STARTUP_S = 15.0  # a job's start-up before its first step (imports, data, model), on top of its estimate


@dataclass(frozen=True)
class SuiteSpec:
    """A suite before it runs: which table, on what, at what scale."""

    table: str  # table5 | table6 | table7 | table8
    tasks: tuple[str, ...] = ()  # () = the table's default_tasks
    seeds: int = 3  # fine-tuning restarts per variant and task (mean +- std)
    size: str = "tiny"  # model preset of every pretrained variant (Table 6: the grid instead)
    budget_s: float = 600.0  # wall-clock pretraining seconds per variant (when budget_tokens is 0)
    budget_tokens: int = 0  # pretraining input tokens per variant: equal tokens, so speed decides nothing
    grid: tuple[tuple[int, int, int], ...] = ()  # Table 6: (layers, hidden, heads); () = DEFAULT_GRID
    model: str = ""  # Table 7: the pretrained model to probe ("" = the shipped model)
    data: str = ""  # folder holding glue/, ud_en_ewt/, wnut17/, squad/ ("" = this workspace's ../shared/data)
    corpus: str = ""  # pretraining corpus ("" = the base recipe's)
    max_train_examples: int = 2000  # per fine-tuning run (0 = all)
    max_eval_examples: int = 1000
    epochs: float = 2.0
    finetune_lr: float = 1e-4  # fine-tuning mode (feature mode uses 1e-3)
    threads: int = 0  # CPU threads per job (0 = torch's default)
    device: str = "auto"
    name: str = ""
    overrides: tuple[str, ...] = ()  # extra `bertlab pretrain` overrides for every variant (KEY=VALUE), last
    # (variant, job id): a pretraining job already submitted (running, finished or resumable) that the suite
    # uses for that variant instead of pretraining it again; launch checks it pretrains the same recipe
    reuse: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.table not in TABLES:
            raise InputError(f"unknown table {self.table!r}; choose one of {', '.join(TABLES)}")
        for t in self.tasks:
            if t not in FINETUNE_TASKS:
                raise InputError(f"unknown task {t!r}; choose from {', '.join(FINETUNE_TASKS)}")
        if not 1 <= self.seeds <= 20:
            raise InputError(f"seeds must be between 1 and 20, not {self.seeds}")
        if self.size not in PRESETS:
            raise InputError(f"unknown size {self.size!r}; choose one of {', '.join(PRESETS)}")
        if self.budget_tokens < 0:
            raise InputError(f"the token budget must be 0 (use budget_s) or more, not {self.budget_tokens}")
        if self.table_spec.pretrains and not (self.budget_s > 0 or self.budget_tokens > 0):
            raise InputError("give a pretraining budget: tokens per variant, or seconds (more than 0)")
        for layers, hidden, heads in self.grid:
            if min(layers, hidden, heads) < 1 or hidden % heads:
                raise InputError(f"grid entry L={layers} H={hidden} A={heads}: the width must divide by the heads")
        pretrained = [v.key for v in self.table_spec.variants(self.grid) if v.pretrain is not None and not v.shares]
        for variant, _job in self.reuse:
            if variant not in pretrained:
                raise InputError(
                    f"cannot reuse a pretraining job for {variant!r}: {self.table}'s pretrained rows are "
                    + (", ".join(pretrained) or "none")
                )

    @property
    def table_spec(self) -> TableSpec:
        return TABLES[self.table]

    @property
    def task_list(self) -> tuple[str, ...]:
        return self.tasks or self.table_spec.default_tasks

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SuiteSpec:
        known = {f for f in cls.__dataclass_fields__}
        data = {k: v for k, v in data.items() if k in known}
        data["tasks"] = tuple(data.get("tasks") or ())
        data["grid"] = tuple(tuple(g) for g in data.get("grid") or ())
        data["overrides"] = tuple(data.get("overrides") or ())
        data["reuse"] = tuple(tuple(r) for r in data.get("reuse") or ())
        return cls(**data)

    def reused(self, variant: str) -> str | None:
        """The id of the job `reuse` names for `variant`, if any."""
        return dict(self.reuse).get(variant)


DEFAULT_BUDGET_TOKENS = 40_000_000  # pretraining tokens per variant the page offers: a mini model leaves the plateau


def suggested_spec(table: str) -> SuiteSpec:
    """The suite the page suggests for a table: a pretrained table at equal tokens (DEFAULT_BUDGET_TOKENS,
    mini models), one thread per job as on a small shared machine; Table 7 on the shipped model."""
    if not TABLES[table].pretrains:
        return SuiteSpec(table, threads=1)
    return SuiteSpec(table, size="mini", budget_tokens=DEFAULT_BUDGET_TOKENS, threads=1)


def command(spec: SuiteSpec) -> str:
    """The `bertlab ablate run` line that launches `spec` from a terminal (settings left at their
    defaults are left out)."""
    default = SuiteSpec(spec.table)
    args = ["bertlab ablate run", spec.table]
    if spec.tasks:
        args += ["--tasks", ",".join(spec.tasks)]
    if spec.table_spec.pretrains:
        if not spec.table_spec.shape_grid:
            args += ["--size", spec.size]
        args += ["--budget-tokens", f"{spec.budget_tokens / 1e6:g}M"] if spec.budget_tokens else []
        args += ["--budget-s", f"{spec.budget_s:g}"] if not spec.budget_tokens else []
    if spec.grid:
        args += ["--grid", ",".join(f"{a}/{b}/{c}" for a, b, c in spec.grid)]
    if spec.model:
        args += ["--model", spec.model]
    for name, flag in (
        ("seeds", "--seeds"),
        ("max_train_examples", "--max-train-examples"),
        ("max_eval_examples", "--max-eval-examples"),
        ("epochs", "--epochs"),
        ("finetune_lr", "--lr"),
        ("threads", "--threads"),
        ("data", "--data"),
        ("corpus", "--corpus"),
    ):
        if getattr(spec, name) != getattr(default, name):
            args += [
                flag,
                f"{getattr(spec, name):g}" if isinstance(getattr(spec, name), float) else str(getattr(spec, name)),
            ]
    args += [f"--set {o}" for o in spec.overrides]
    args += [f"--reuse {v}={job}" for v, job in spec.reuse]
    return " ".join(args)


def parse_grid(text: str) -> tuple[tuple[int, int, int], ...]:
    """'2/128/2, 4/256/4' -> ((2, 128, 2), (4, 256, 4))."""
    out = []
    for part in text.replace(";", ",").split(","):
        if not part.strip():
            continue
        bits = part.strip().lower().replace("l", "").replace("h", "").replace("a", "").replace("-", "/").split("/")
        try:
            layers, hidden, heads = (int(b) for b in bits)
        except ValueError:
            raise InputError(f"grid entry {part.strip()!r}: write layers/hidden/heads, e.g. 4/256/4") from None
        out.append((layers, hidden, heads))
    if not out:
        raise InputError("the grid is empty; write layers/hidden/heads entries, e.g. 2/128/2, 4/256/4")
    return tuple(out)


def variants(spec: SuiteSpec) -> tuple[Variant, ...]:
    """The rows of the suite's table, in the paper's order."""
    return spec.table_spec.variants(spec.grid)


def columns(spec: SuiteSpec) -> tuple[Column, ...]:
    """The task columns (a table with feature columns trains each task both ways)."""
    return spec.table_spec.columns(spec.task_list)


@dataclass(frozen=True)
class PlannedRun:
    """One job of a suite, before it is submitted."""

    variant: str
    column: str  # "pretraining" for a pretraining job
    seed: int
    spec: JobSpec
    needs: str | None = None  # the variant whose pretraining job this one waits for


def _task_args(spec: SuiteSpec, task: str) -> list[str]:
    path = str(Path(spec.data).expanduser() / DEFAULT_TASK_DATA[task]) if spec.data else default_task_data(task)
    args = ["--task", task, "--data", path]
    if task in ("qnli", "squad"):  # no train set here: train on 80% of the dev set (see DATA_NOTES)
        args += ["--split-dev", "0.8"]
    return args


def _prefix(spec: SuiteSpec) -> str:
    return spec.name or spec.table


def pretrain_args(spec: SuiteSpec, variant: Variant, suite_id: str) -> tuple[str, ...]:
    args = [
        "--config",
        BASE_RECIPE,
        f"name={_prefix(spec)}-{variant.key}",
        f"size={spec.size}",
        f"train.max_time_s={0.0 if spec.budget_tokens else float(spec.budget_s)}",
        "train.max_steps=0",
        f"train.max_tokens={int(spec.budget_tokens)}",
        "train.snapshots=false",
        f"vocab={BASE_VOCAB}",
        *SUITE_RECIPE,
    ]
    if spec.threads:
        args.append(f"train.num_threads={spec.threads}")
    if spec.corpus:
        parts = [c.strip() for c in spec.corpus.split(",") if c.strip()]
        args.append("corpus=[" + ", ".join(parts) + "]")
    return tuple(args) + tuple(variant.pretrain or ()) + tuple(spec.overrides)


def finetune_args(spec: SuiteSpec, variant: Variant, column: Column, seed: int, model: str) -> tuple[str, ...]:
    extra = [*column.finetune, *variant.finetune]
    feature = "feature" in extra
    args = [
        *_task_args(spec, column.task),
        "--model",
        model,
        "--seed",
        str(seed),
        "--lr",
        str(1e-3 if feature else spec.finetune_lr),
    ]
    if spec.epochs:
        args += ["--epochs", str(spec.epochs)]
    if spec.max_train_examples:
        args += ["--max-train-examples", str(spec.max_train_examples)]
    if spec.max_eval_examples:
        args += ["--max-eval-examples", str(spec.max_eval_examples)]
    if spec.threads:
        args += ["--threads", str(spec.threads)]
    # later flags win in argparse: the variant's feature choice overrides a column's default
    return tuple(args + extra)


def plan(spec: SuiteSpec, suite_id: str) -> list[PlannedRun]:
    """Every job of the suite: pretraining first, then fine-tuning (model paths are filled in at launch)."""
    runs: list[PlannedRun] = []
    vs = variants(spec)
    for v in vs:
        if v.pretrain is not None and v.shares is None:
            runs.append(
                PlannedRun(
                    v.key,
                    "pretraining",
                    0,
                    JobSpec("pretrain", pretrain_args(spec, v, suite_id), spec.device, name=f"{_prefix(spec)}-{v.key}"),
                )
            )
    for v in vs:
        source = v.shares or (v.key if v.pretrain is not None else None)
        for col in columns(spec):
            for seed in range(spec.seeds):
                model = "{model}" if source else (spec.model or str(REPO_ROOT / "checkpoints" / "bertlab-mini"))
                runs.append(
                    PlannedRun(
                        v.key,
                        col.key,
                        seed,
                        JobSpec(
                            "finetune",
                            finetune_args(spec, v, col, seed, model),
                            spec.device,
                            name=f"{_prefix(spec)}-{v.key}-{col.key}-s{seed}",
                        ),
                        needs=source,
                    )
                )
    return runs


# --------------------------------------------------------------------------------------
# Launching and following a suite
# --------------------------------------------------------------------------------------
def suites_root(registry: JobRegistry) -> Path:
    return registry.root / SUITES_DIR


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
        pre = f"{self.pretraining_runs} pretraining run(s)" + (f" ({self.budget} each)" if self.budget else "")
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


def estimate_suite(spec: SuiteSpec, gpus: int | None = None, measure: bool = True) -> SuiteEstimate:
    """Every run of the suite with the estimate the Train page gives the same job
    (bertlab.estimates.estimate_spec: the real model, the task's real token counts, throughput
    measured in an earlier run or timed here), plus STARTUP_S each. A fine-tuning run of a variant
    that is still to be pretrained is estimated on that variant's model shape. gpus: None = this
    machine's; with several, the queue runs one job per GPU side by side."""
    gpus = gpu_count() if gpus is None else gpus
    on_gpu = spec.device == "cuda" or (spec.device == "auto" and gpus > 0)  # as the queue resolves "auto"
    device = "cuda" if on_gpu else "cpu"
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
        if r.column == "pretraining" and spec.reused(r.variant):
            out.append(RunEstimate(r.variant, r.column, 0, job.name, None, 0.0, f"reuses job {spec.reused(r.variant)}"))
            continue
        key = (job.kind, tuple(a for i, a in enumerate(job.args) if i == 0 or job.args[i - 1] != "--seed"), r.needs)
        if key not in seen:
            try:
                est = estimate_spec(job, REPO_ROOT, measure=measure, model_config=model_config, gpus=gpus)
            except JobError as exc:
                raise InputError(f"cannot estimate {job.name}: {exc}") from exc
            seen[key] = (est.steps, (est.total_s or 0.0) + STARTUP_S, est.throughput_source)
        steps, seconds, source = seen[key]
        out.append(RunEstimate(r.variant, r.column, r.seed, job.name, steps, seconds, source))
    return SuiteEstimate(tuple(out), on_gpu, max(1, gpus) if on_gpu else 1, budget_text(spec))


def _commit() -> str:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def launch(spec: SuiteSpec, registry: JobRegistry | None = None) -> Path:
    """Submit every job of the suite (validated first, so a bad setting queues nothing) and write
    suite.json. Returns the suite folder."""
    registry = registry or JobRegistry()
    suite_id = f"{spec.name or spec.table}-{time.strftime('%Y%m%d-%H%M%S')}"
    runs = plan(spec, suite_id)
    if not spec.table_spec.pretrains:
        model = Path(spec.model or REPO_ROOT / "checkpoints" / "bertlab-mini").expanduser()
        if spec.model and not has_config(model):
            raise InputError(f"model {spec.model} is not a checkpoint folder (no config.json)")
    for task in spec.task_list:
        data = _task_args(spec, task)[3]
        if not Path(data).exists():
            raise InputError(
                f"the {task} data is not at {data}; give the folder that holds glue/, ud_en_ewt/, wnut17/ and squad/"
            )
    pretrained = {r.variant: _reused_job(r, spec, registry) for r in runs if spec.reused(r.variant) and not r.needs}
    stamp, n = suite_id, 1
    while (suites_root(registry) / suite_id).exists():  # two suites launched in one second get their own folders
        n += 1
        suite_id = f"{stamp}-{n}"
    suite_dir = suites_root(registry) / suite_id
    suite_dir.mkdir(parents=True, exist_ok=False)
    record = {
        "id": suite_id,
        "table": spec.table,
        "spec": spec.to_dict(),
        "created": time.time(),
        "commit": _commit(),
        "hardware": f"{platform.machine()} {platform.system()}, {_cpu_count()} CPU cores",
        "base_recipe": BASE_RECIPE,
        "estimate": estimate_suite(spec).to_dict(),
        "runs": [],
    }
    try:
        for r in runs:
            job_spec = r.spec
            if r.column == "pretraining" and r.variant in pretrained:
                record["runs"].append(
                    {
                        "variant": r.variant,
                        "column": r.column,
                        "seed": 0,
                        "job": pretrained[r.variant][0],
                        "reused": True,
                    }
                )
                continue
            if r.needs:
                job_id, run_dir = pretrained[r.needs]
                args = tuple(str(model_dir(run_dir)) if a == "{model}" else a for a in job_spec.args)
                job_spec = replace(job_spec, args=args, after=(job_id,))
            job = registry.submit(job_spec, cwd=REPO_ROOT, start=False)
            if r.column == "pretraining":
                pretrained[r.variant] = (job.id, job.run_dir)
            record["runs"].append({"variant": r.variant, "column": r.column, "seed": r.seed, "job": job.id})
    finally:
        write_json_atomic(suite_dir / SUITE_FILE, record, indent=1)
    registry.tick()
    return suite_dir


def _recipe(args: tuple[str, ...]) -> dict:
    """A pretraining job's resolved settings, less its name, with the model's shape in place of the
    preset and overrides that give it: two jobs with equal recipes train the same model the same way
    (so Table 6's 4/256/4 row may reuse a mini run)."""
    cfg = pretrain_config(parse_recipe_args("pretrain", args), REPO_ROOT)
    recipe = asdict(cfg)
    for key in ("name", "size", "model_overrides"):
        recipe.pop(key)
    recipe["model"] = asdict(cfg.model_config(cfg.vocab_size))
    return _flat(recipe)


REUSE_ORDER = ("finished", "running", "preparing", "queued", "failed", "cancelled")  # most useful first


def matching_jobs(spec: SuiteSpec, registry: JobRegistry) -> tuple[tuple[str, str], ...]:
    """For each row of `spec` that pretrains and has no `reuse` yet: the pretraining job in the runs
    folder that pretrains exactly its recipe (finished first, then running, queued, and resumable ones;
    newest first), as `reuse` entries. Rows with no such job are left out."""
    wanted = {r.variant: r for r in plan(spec, "match") if r.column == "pretraining" and not spec.reused(r.variant)}
    if not wanted:
        return ()
    recipes = {v: _recipe(r.spec.args) for v, r in wanted.items()}
    found: dict[str, str] = {}
    jobs = [j for j in registry.list(start_queued=False) if j.kind == "pretrain" and j.state in REUSE_ORDER]
    for job in sorted(jobs, key=lambda j: REUSE_ORDER.index(j.state)):  # stable: newest first within a state
        if job.state in ("failed", "cancelled") and not job.has_checkpoint:
            continue
        try:
            theirs = _recipe(tuple(job.job.get("args") or ()))
        except (JobError, InputError, SystemExit, ValueError, TypeError):
            continue  # a job whose arguments no longer parse matches nothing
        for variant, ours in recipes.items():
            if variant not in found and ours == theirs:
                found[variant] = job.id
    return tuple((v, found[v]) for v in wanted if v in found)


def with_matching_reuse(spec: SuiteSpec, registry: JobRegistry) -> SuiteSpec:
    """`spec` reusing, for each row that pretrains and reuses nothing yet, the job `matching_jobs` finds."""
    return replace(spec, reuse=spec.reuse + matching_jobs(spec, registry))


def _flat(d: dict, prefix: str = "") -> dict:
    """{'train': {'learning_rate': 1e-3}} -> {'train.learning_rate': 1e-3}, so a difference names its field."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _reused_job(run: PlannedRun, spec: SuiteSpec, registry: JobRegistry) -> tuple[str, Path]:
    """The pretraining job `spec.reuse` names for `run`'s variant, checked to be a job of this runs
    folder that pretrains exactly what the suite would (every setting but the name), so the table
    still compares equal recipes. InputError naming the settings that differ."""
    job_id = spec.reused(run.variant) or ""
    run_dir = registry.root / job_id
    if not job_id or "/" in job_id or not (run_dir / JOB_FILE).is_file():
        raise InputError(
            f"no job {job_id!r} in {registry.root} to reuse for {run.variant}; `bertlab jobs list` shows them"
        )
    job = read_job(run_dir)
    if job.kind != "pretrain":
        raise InputError(f"job {job_id} is a {job.kind} job; reuse needs a pretraining job")
    if job.state == "cancelled" and not job.has_checkpoint:
        raise InputError(f"job {job_id} was cancelled before its first checkpoint; there is nothing to reuse")
    try:
        theirs = _recipe(tuple(job.job.get("args") or ()))
    except (JobError, SystemExit) as exc:
        raise InputError(f"job {job_id}'s arguments no longer parse: {exc}") from exc
    ours = _recipe(run.spec.args)
    differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    if differ:
        shown = "; ".join(f"{k}: the suite's {ours.get(k)!r}, the job's {theirs.get(k)!r}" for k in differ)
        raise InputError(f"job {job_id} does not pretrain what the suite's {run.variant} row would ({shown})")
    return job_id, run_dir


def _cpu_count() -> int:
    return os.cpu_count() or 1


def list_suites(registry: JobRegistry | None = None) -> list[dict]:
    """Every suite under the runs folder, newest first (each suite.json's content plus its folder)."""
    root = suites_root(registry or JobRegistry())
    out = []
    if root.is_dir():
        for d in root.iterdir():
            record = read_suite(d)
            if record:
                out.append(record)
    return sorted(out, key=lambda r: r.get("created", 0), reverse=True)


def read_suite(suite_dir: str | Path) -> dict | None:
    path = Path(suite_dir) / SUITE_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
        return None
    record["dir"] = str(Path(suite_dir))
    return record


@dataclass
class SuiteRun:
    """One job of a suite as it stands now."""

    variant: str
    column: str
    seed: int
    job: str
    state: str  # queued | waiting | preparing | running | finished | failed | cancelled | missing
    progress: float | None = None
    metrics: dict = field(default_factory=dict)  # the final evaluation, once finished
    error: str | None = None


def suite_runs(record: dict, registry: JobRegistry | None = None) -> list[SuiteRun]:
    registry = registry or JobRegistry()
    out = []
    for r in record["runs"]:
        run_dir = registry.root / str(r.get("job", ""))
        if not (run_dir / JOB_FILE).is_file():
            out.append(SuiteRun(r["variant"], r["column"], int(r.get("seed", 0)), str(r.get("job")), "missing"))
            continue
        job = read_job(run_dir)
        state = job.state
        if state == "queued" and waiting_for(job):
            state = "waiting"
        metrics = job.status.get("last_eval") if state == "finished" else None
        out.append(
            SuiteRun(
                r["variant"],
                r["column"],
                int(r.get("seed", 0)),
                job.id,
                state,
                job.progress,
                metrics if isinstance(metrics, dict) else {},
                job.error,
            )
        )
    return out


SEED_MARKS = {"finished": "✓", "running": "▶", "preparing": "▶", "queued": "·", "waiting": "·"}  # else ✗


def progress_matrix(record: dict, runs: list[SuiteRun]) -> list[dict]:
    """variant x column cells: 'done/all', one mark per seed in seed order (✓ finished, ▶ running,
    · queued or waiting, ✗ failed, cancelled or missing) and what holds the cell up, for the page's table:
    '1/3 ✓▶· (running 40%)'."""
    cells: dict[tuple[str, str], list[SuiteRun]] = {}
    for r in runs:
        cells.setdefault((r.variant, r.column), []).append(r)
    order_v = list(dict.fromkeys(r["variant"] for r in record["runs"]))
    order_c = list(dict.fromkeys(r["column"] for r in record["runs"]))
    rows = []
    for v in order_v:
        row = {"variant": v}
        for c in order_c:
            rs = cells.get((v, c), [])
            if not rs:
                row[c] = ""
                continue
            done = sum(r.state == "finished" for r in rs)
            bad = [r.state for r in rs if r.state in ("failed", "cancelled", "missing")]
            active = [r for r in rs if r.state in ("preparing", "running")]
            marks = "".join(SEED_MARKS.get(r.state, "✗") for r in sorted(rs, key=lambda r: r.seed))
            text = f"{done}/{len(rs)} {marks}"
            if bad:
                text += f" ({len(bad)} {bad[0]})"
            elif active:
                p = active[0].progress
                text += f" (running {p:.0%})" if p is not None else " (running)"
            row[c] = text
        rows.append(row)
    return rows
