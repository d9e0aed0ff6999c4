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
pretrained with the shipped model's recipe (configs/default-model.yaml) and its vocabulary, at the
suite's size and wall-clock budget, so that only the ablated knob differs.

Torch-free at import: imports bertlab.ablations.tables / paper, bertlab.jobs and its torch-free neighbours
(jobspec, runs, estimates, runfolder, hardware); `estimate` builds a model on the meta device to count its
parameters.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from bertlab.ablations.tables import TABLES, Column, TableSpec, Variant
from bertlab.atomic import write_json_atomic
from bertlab.config import PRESETS, preset
from bertlab.errors import InputError
from bertlab.estimates import estimate
from bertlab.formatting import format_duration
from bertlab.hardware import gpu_count
from bertlab.jobs import JobRegistry
from bertlab.jobspec import DEFAULT_TASK_DATA, FINETUNE_TASKS, JobSpec, default_task_data
from bertlab.runfolder import JOB_FILE, REPO_ROOT, model_dir
from bertlab.runs import read_job, waiting_for

SUITES_DIR = "ablations"  # under the runs folder
SUITE_FILE = "suite.json"
BASE_RECIPE = "configs/default-model.yaml"
BASE_VOCAB = "checkpoints/bertlab-mini/vocab.txt"
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
TYPICAL_LENGTH = {
    "sst2": 40,
    "cola": 24,
    "mrpc": 64,
    "rte": 96,
    "qnli": 64,
    "mnli": 64,
    "stsb": 48,
    "upos": 40,
    "ner": 48,
    "squad": 384,
}


@dataclass(frozen=True)
class SuiteSpec:
    """A suite before it runs: which table, on what, at what scale."""

    table: str  # table5 | table6 | table7 | table8
    tasks: tuple[str, ...] = ()  # () = the table's default_tasks
    seeds: int = 3  # fine-tuning restarts per variant and task (mean +- std)
    size: str = "tiny"  # model preset of every pretrained variant (Table 6: the grid instead)
    budget_s: float = 600.0  # wall-clock pretraining seconds per variant
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
        if self.table_spec.pretrains and not self.budget_s > 0:
            raise InputError("give a pretraining budget in seconds (more than 0)")
        for layers, hidden, heads in self.grid:
            if min(layers, hidden, heads) < 1 or hidden % heads:
                raise InputError(f"grid entry L={layers} H={hidden} A={heads}: the width must divide by the heads")

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
        return cls(**data)


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
        f"train.max_time_s={float(spec.budget_s)}",
        "train.max_steps=0",
        "train.max_tokens=0",
        "train.snapshots=false",
        f"vocab={BASE_VOCAB}",
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


def estimate_suite(spec: SuiteSpec, gpus: int | None = None) -> dict:
    """Rough total time: the pretraining budgets plus each fine-tuning run's estimated training
    time and ~15 s of start-up, one after another; and with several GPUs (gpus: None = this
    machine's), the time when the queue runs one job per GPU side by side."""
    gpus = gpu_count() if gpus is None else gpus
    on_gpu = spec.device == "cuda" or (spec.device == "auto" and gpus > 0)  # as the queue resolves "auto"
    vs = variants(spec)
    n_pretrain = sum(1 for v in vs if v.pretrain is not None and v.shares is None)
    cfg = preset("mini" if not spec.table_spec.pretrains and not spec.model else spec.size)
    device = "cuda" if on_gpu else "cpu"
    per_run = []
    for col in columns(spec):
        n = spec.max_train_examples or 10000
        steps = max(1, math.ceil(n * (spec.epochs or 3.0) / 32))
        seq = TYPICAL_LENGTH.get(col.task, 96)  # batches are padded to their longest example, not to 128
        est = estimate(cfg, batch_size=32, seq_length=seq, max_steps=steps, device=device, pretraining=False)
        per_run.append((est.seconds or 0.0) + 15.0)
    n_finetune = len(vs) * spec.seeds
    finetune_s = n_finetune * sum(per_run)
    total = n_pretrain * spec.budget_s + finetune_s
    slots = max(1, gpus) if on_gpu else 1  # the queue runs one job per GPU, one CPU job at a time by default
    side_by_side = math.ceil(n_pretrain / slots) * spec.budget_s + finetune_s / slots
    text = (
        f"{n_pretrain} pretraining run(s) of {format_duration(spec.budget_s)} and "
        f"{n_finetune * len(per_run)} fine-tuning runs on {'GPU' if on_gpu else 'CPU'}: about "
        f"{format_duration(total)} one after another"
    )
    if slots > 1:
        text += f", about {format_duration(side_by_side)} on this machine's {slots} GPUs side by side"
    return {
        "pretraining_runs": n_pretrain,
        "finetuning_runs": n_finetune * len(per_run),
        "pretraining_s": n_pretrain * spec.budget_s,
        "finetuning_s": finetune_s,
        "total_s": total,
        "gpus": slots if on_gpu else 0,
        "side_by_side_s": side_by_side,
        "text": text,
    }


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
        if spec.model and not (model / "config.json").is_file():
            raise InputError(f"model {spec.model} is not a checkpoint folder (no config.json)")
    for task in spec.task_list:
        data = _task_args(spec, task)[3]
        if not Path(data).exists():
            raise InputError(
                f"the {task} data is not at {data}; give the folder that holds glue/, ud_en_ewt/, wnut17/ and squad/"
            )
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
        "estimate": estimate_suite(spec),
        "runs": [],
    }
    pretrained: dict[str, tuple[str, Path]] = {}
    try:
        for r in runs:
            job_spec = r.spec
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
