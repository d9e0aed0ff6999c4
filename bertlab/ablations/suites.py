"""The paper's ablations (Devlin et al. 2019, Tables 5-8) as suites of ordinary jobs.

Owns: launching a suite into a `JobRegistry` (its `plan`, from bertlab.ablations.planning: one
pretraining job per variant, or a reused one, then one fine-tuning job per variant x task column x
seed, each waiting for its pretraining job), the suite record RUNS/ablations/<suite id>/suite.json
(its spec, estimate and the ids of its jobs) and a suite's progress (`suite_runs`, `progress_matrix`).
Every run in it is a normal run folder in RUNS, listed, resumable and deletable on the Jobs page; a
suite can also hold plain runs, adopted after they ran (bertlab.ablations.adopt: "adopted" in the record).

Torch-free at import; `launch` estimates the suite (bertlab.ablations.estimate), which may time a
training step here, unless told not to (`estimate=False`: `bertlab ablate run --no-estimate`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bertlab.ablations.estimate import estimate_suite
from bertlab.ablations.planning import BASE_RECIPE, PlannedRun, SuiteSpec, plan, recipe_changes, task_args
from bertlab.ablations.reuse import reused_job
from bertlab.atomic import write_json_atomic
from bertlab.errors import BertLabError, InputError
from bertlab.hardware import gpu_stats
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job, waiting_for
from bertlab.jobs.spec import validate
from bertlab.storage.modelfolder import has_config
from bertlab.storage.runfolder import JOB_FILE, REPO_ROOT, is_run_dir, model_dir

SUITES_DIR = "ablations"  # under the runs folder
SUITE_FILE = "suite.json"


def suites_root(registry: JobRegistry) -> Path:
    return registry.root / SUITES_DIR


def commit_id() -> str:
    """The repository's commit now (short), for a suite's record; where the checkout is no git repository
    (a copy sent to a lent GPU machine: bench/device/), $BERTLAB_COMMIT, the commit its sender recorded;
    else 'unknown'."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return head or os.environ.get("BERTLAB_COMMIT", "").strip() or "unknown"


def launch(spec: SuiteSpec, registry: JobRegistry | None = None, estimate: bool = True) -> Path:
    """Submit every job of the suite (validated first, so a bad setting queues nothing) and write
    suite.json. A reused pretraining job (`spec.reuse`) takes its row's place; one that was stopped
    (interrupted or cancelled) is resumed, since the row's fine-tuning waits for it. Returns the suite
    folder.

    `estimate=False` leaves out the suite's time estimate (the record's "estimate" is None): it times a
    training step of every distinct job first, minutes on a GPU lent for minutes. Every job is still
    checked (`check_jobs`) before any is queued."""
    registry = registry or JobRegistry()
    suite_id = _stamp(spec)
    runs = plan(spec, suite_id)
    if not spec.table_spec.pretrains:
        model = Path(spec.model or REPO_ROOT / "checkpoints" / "bertlab-mini").expanduser()
        if spec.model and not has_config(model):
            raise InputError(f"model {spec.model} is not a checkpoint folder (no config.json)")
        for variant, folder in spec.row_models:
            if not has_config(Path(folder).expanduser()):
                raise InputError(f"{variant}'s model {folder} is not a checkpoint folder (no config.json)")
        if spec.table_spec.row_models and not spec.row_models:
            raise InputError(f"{spec.table} fine-tunes each row's own model: give them with --row-model VARIANT=FOLDER")
    for task in spec.task_list:
        data = task_args(spec, task)[3]
        if not Path(data).exists():
            raise InputError(
                f"the {task} data is not at {data}; give the folder that holds glue/, ud_en_ewt/, wnut17/ and squad/"
            )
    pretrained = {r.variant: reused_job(r, spec, registry) for r in runs if spec.reused(r.variant) and not r.needs}
    if estimate:
        timing = estimate_suite(spec, registry=registry).to_dict()
    else:
        check_jobs(runs, registry)
        timing = None
    changes = recipe_changes(spec) if spec.table_spec.pretrains else []
    suite_dir = new_suite_dir(spec, registry, suite_id)
    suite_id = suite_dir.name
    record = {
        "id": suite_id,
        "table": spec.table,
        "spec": spec.to_dict(),
        "created": time.time(),
        "commit": commit_id(),
        "hardware": hardware_text(spec, registry),
        "base_recipe": BASE_RECIPE,
        # what every pretraining job changes in the base recipe, the suites' own change first
        "recipe_changes": changes,
        "estimate": timing,
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
    for job_id, run_dir in pretrained.values():  # the suite waits for a reused job: a stopped one continues
        if read_job(run_dir).state in ("failed", "cancelled"):
            registry.resume(job_id)
    registry.tick()
    return suite_dir


def check_jobs(runs: list[PlannedRun], registry: JobRegistry) -> None:
    """Check every planned job as its submission will (arguments, config, paths, device), before any is
    queued: the check the estimate makes on its way, without timing a step. A fine-tuning job of a model
    still to be pretrained is checked on the shipped model, as the estimate does. InputError names the job."""
    shipped = str(REPO_ROOT / "checkpoints" / "bertlab-mini")
    for r in runs:
        job = r.spec
        if r.needs:
            job = replace(job, args=tuple(shipped if a == "{model}" else a for a in job.args))
        try:
            validate(job, REPO_ROOT, gpus=registry.gpus)
        except BertLabError as exc:  # a bad argument, config key or path
            raise InputError(f"cannot queue {job.name}: {exc}") from exc


def _stamp(spec: SuiteSpec) -> str:
    """A suite's id before its folder exists: <name or table>-<time>."""
    return f"{spec.name or spec.table}-{time.strftime('%Y%m%d-%H%M%S')}"


def new_suite_dir(spec: SuiteSpec, registry: JobRegistry, suite_id: str = "") -> Path:
    """A new, empty folder for a suite's record: RUNS/ablations/<name or table>-<time>[-n] (two suites made in
    one second get their own folders)."""
    stamp = suite_id or _stamp(spec)
    suite_id, n = stamp, 1
    while (suites_root(registry) / suite_id).exists():
        n += 1
        suite_id = f"{stamp}-{n}"
    suite_dir = suites_root(registry) / suite_id
    suite_dir.mkdir(parents=True, exist_ok=False)
    return suite_dir


def hardware_text(spec: SuiteSpec, registry: JobRegistry) -> str:
    """Where the suite runs, for its record: the machine's CPUs and, for a suite on GPUs, their names
    and how many jobs share each."""
    text = f"{platform.machine()} {platform.system()}, {_cpu_count()} CPU cores"
    if spec.device_kind(registry.gpus) == "cuda":
        stats = gpu_stats()
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip().isdigit()]
        stats = [g for g in stats if str(g.index) in visible] if visible else stats
        names = [g.name for g in stats][: registry.gpus]  # the GPUs this registry schedules on
        text += "".join(f", {n} x{names.count(n)}" for n in dict.fromkeys(names)) or f", {registry.gpus} GPU(s)"
        if registry.jobs_per_gpu > 1:
            text += f", up to {registry.jobs_per_gpu} jobs per GPU"
    return text


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
    held: bool = False  # waiting for a job that failed or was cancelled: it starts only if that job is resumed


def suite_runs(record: dict, registry: JobRegistry | None = None) -> list[SuiteRun]:
    registry = registry or JobRegistry()
    out = []
    for r in record["runs"]:
        run_dir = registry.root / str(r.get("job", ""))
        adopted = r.get("adopted") and is_run_dir(run_dir)  # a plain run (bertlab.ablations.adopt): no job.json
        if not (run_dir / JOB_FILE).is_file() and not adopted:
            out.append(SuiteRun(r["variant"], r["column"], int(r.get("seed", 0)), str(r.get("job")), "missing"))
            continue
        job = read_job(run_dir)
        state, deps = job.state, []
        if state == "queued" and (deps := waiting_for(job)):
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
                any(d.endswith(("(failed)", "(cancelled)")) for d in deps),
            )
        )
    return out


ENDED = ("finished", "failed", "cancelled", "missing")


def wait(
    record: dict,
    registry: JobRegistry,
    max_s: float = 0.0,
    poll_s: float = 15.0,
    report: Callable[[list[SuiteRun]], None] | None = None,
) -> list[SuiteRun]:
    """Block until every run of the suite has ended (or waits for one that failed, so it cannot start)
    or `max_s` seconds have passed (0: no limit), moving the queue on as the app does; `report(runs)`
    is called whenever a run's state changes. Returns the runs as they stand; the jobs keep running
    after a timeout (or Ctrl-C), since each is its own process."""
    start, last = time.monotonic(), None
    while True:
        registry.tick()
        runs = suite_runs(record, registry)
        states = [(r.job, r.state) for r in runs]
        if report is not None and states != last:
            report(runs)
        last = states
        if all(r.state in ENDED or r.held for r in runs):
            return runs
        if max_s and time.monotonic() - start >= max_s:
            return runs
        time.sleep(poll_s)


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
