"""The paper's fine-tuning grid (Devlin et al. 2019, Section 3.2 and Appendix A.3) as jobs.

"The optimal hyperparameter values are task-specific, but we found the following range of possible
values to work well across all tasks: batch size 16, 32; learning rate (Adam) 5e-5, 3e-5, 2e-5;
number of epochs 2, 3, 4." The best setting is picked on the dev set; for small data sets the paper
also ran several random restarts and kept the best on dev.

Owns: `PAPER_GRID`, `grid_args` (one `bertlab finetune` argument list per setting and restart),
`submit_grid` (one job each in a JobRegistry, recorded in RUNS/grids/<id>/grid.json), `grid_rows`
(every setting with its dev score so far, the best marked) and `grid_status` (that table as text,
for `bertlab finetune --grid-status FOLDER`), and `run_cli`, `bertlab finetune`'s entry: the grid flags, or one
run (bertlab.finetune.cli). Imports the job queue and bertlab.finetune's command line (torch, through its recipe).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path

from bertlab.errors import InputError
from bertlab.finetune import cli as finetune_cli
from bertlab.finetune.args import add_args
from bertlab.finetune.cli import config_from_args
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job
from bertlab.jobs.spec import JobSpec
from bertlab.storage.runfolder import JOB_FILE

PAPER_GRID = {"batch_size": (16, 32), "lr": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}
GRIDS_DIR = "grids"
GRID_FILE = "grid.json"
_OWN_FLAGS = ("--batch-size", "--lr", "--epochs", "--seed", "--max-steps", "--max-time-s", "--grid", "--restarts")


@dataclass(frozen=True)
class Setting:
    batch_size: int
    lr: float
    epochs: int
    seed: int

    @property
    def label(self) -> str:
        return f"batch {self.batch_size}, lr {self.lr:g}, {self.epochs} epochs, seed {self.seed}"


def settings(restarts: int = 1) -> list[Setting]:
    if not 1 <= restarts <= 10:
        raise InputError(f"restarts must be between 1 and 10, not {restarts}")
    return [
        Setting(b, lr, e, s)
        for (b, lr, e), s in itertools.product(itertools.product(*PAPER_GRID.values()), range(restarts))
    ]


def grid_args(base_args: list[str] | tuple[str, ...], restarts: int = 1) -> list[tuple[Setting, tuple[str, ...]]]:
    """`bertlab finetune` arguments for every setting: the user's arguments without the flags the
    grid sets (batch size, learning rate, epochs, seed, budgets), plus the setting's."""
    base = []
    skip = False
    for a in base_args:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in _OWN_FLAGS:
            skip = "=" not in a
            continue
        base.append(a)
    return [
        (
            s,
            (
                *base,
                "--batch-size",
                str(s.batch_size),
                "--lr",
                f"{s.lr:g}",
                "--epochs",
                str(s.epochs),
                "--seed",
                str(s.seed),
            ),
        )
        for s in settings(restarts)
    ]


def submit_grid(
    base_args: list[str] | tuple[str, ...],
    registry: JobRegistry | None = None,
    restarts: int = 1,
    cwd: str | Path | None = None,
    device: str = "auto",
    name: str = "",
) -> Path:
    """Queue one fine-tuning job per setting; returns the grid's folder (its grid.json lists the jobs)."""
    registry = registry or JobRegistry()
    plan = grid_args(base_args, restarts)
    grid_id = f"{name or 'grid'}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = registry.root / GRIDS_DIR / grid_id
    folder.mkdir(parents=True)
    record = {"id": grid_id, "base_args": list(base_args), "restarts": restarts, "created": time.time(), "runs": []}
    try:
        for s, args in plan:
            job = registry.submit(
                JobSpec(
                    "finetune", args, device, name=f"{name or 'grid'}-b{s.batch_size}-lr{s.lr:g}-e{s.epochs}-s{s.seed}"
                ),
                cwd=cwd,
                start=False,
            )
            record["runs"].append({**s.__dict__, "job": job.id})
    finally:
        (folder / GRID_FILE).write_text(json.dumps(record, indent=1))
    registry.tick()
    return folder


def read_grid(folder: str | Path) -> dict:
    try:
        record = json.loads((Path(folder) / GRID_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{folder}: no readable {GRID_FILE} ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
        raise InputError(f"{folder}/{GRID_FILE} is not a grid record")
    return record


def grid_rows(record: dict, registry: JobRegistry | None = None) -> list[dict]:
    """Every setting with its state and dev scores; the best finished one (by the task's main
    metric, the first one the run reports) gets best=True."""
    registry = registry or JobRegistry()
    rows = []
    for r in record["runs"]:
        run_dir = registry.root / str(r.get("job", ""))
        job = read_job(run_dir) if (run_dir / JOB_FILE).is_file() else None
        scores = job.status.get("last_eval") if job is not None and job.state == "finished" else None
        scores = scores if isinstance(scores, dict) else {}
        main = next((k for k in scores if not k.endswith("loss")), None)
        rows.append(
            {
                "batch_size": r.get("batch_size"),
                "lr": r.get("lr"),
                "epochs": r.get("epochs"),
                "seed": r.get("seed"),
                "state": job.state if job else "missing",
                "job": r.get("job"),
                "metric": main,
                "score": scores.get(main) if main else None,
                "best": False,
            }
        )
    done = [row for row in rows if isinstance(row["score"], (int, float))]
    if done:
        max(done, key=lambda row: row["score"])["best"] = True
    return rows


def grid_status(folder: str | Path, registry: JobRegistry | None = None) -> str:
    """The grid in `folder` as a text table: every setting, its job's state and dev score, the best
    finished one marked '*' and named on the last line. Reads only (starts nothing)."""
    folder = Path(folder).expanduser()
    record = read_grid(folder)
    # the grid folder is RUNS/grids/<id>: its jobs are in RUNS
    registry = registry or JobRegistry(folder.resolve().parent.parent, gpus=0)
    rows = grid_rows(record, registry)
    metric = next((r["metric"] for r in rows if r["metric"]), "dev score")
    lines = [
        f"grid {record.get('id', folder.name)}: {len(rows)} runs (the paper's grid, "
        f"{record.get('restarts', 1)} restart(s) per setting) in {registry.root}",
        f"  {'batch':>5} {'lr':>7} {'epochs':>6} {'seed':>4}  {'state':<9} {metric:>10}  job",
    ]
    for r in rows:
        score = f"{r['score']:.4f}" if isinstance(r["score"], (int, float)) else "-"
        lines.append(
            f"{'*' if r['best'] else ' '} {r['batch_size']!s:>5} {r['lr']:>7g} {r['epochs']!s:>6} "
            f"{r['seed']!s:>4}  {r['state']:<9} {score:>10}  {r['job']}"
        )
    best = next((r for r in rows if r["best"]), None)
    counts = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    done = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    if best is None:
        lines.append(f"no setting has finished yet ({done})")
    else:
        lines.append(
            f"best on dev so far ({done}): batch {best['batch_size']}, lr {best['lr']:g}, "
            f"{best['epochs']} epochs, seed {best['seed']}: {best['metric']} {best['score']:.4f} "
            f"(job {best['job']}; its model is in {registry.root / str(best['job'])})"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# `bertlab finetune --grid paper | --grid-status FOLDER`
# --------------------------------------------------------------------------------------
# flags that are about the grid itself or the one run folder: never passed on to a grid's jobs
_NOT_FOR_GRID_JOBS = ("grid", "restarts", "grid_status", "run_dir", "resume", "help")


def _argv_of(args: argparse.Namespace) -> list[str]:
    """The `bertlab finetune` arguments `args` were parsed from, options at their default left out."""
    p = argparse.ArgumentParser(add_help=False)
    add_args(p)
    out: list[str] = []
    for action in p._actions:
        if not action.option_strings or action.dest in _NOT_FOR_GRID_JOBS:
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default or value is None:
            continue
        flag = max(action.option_strings, key=len)
        out += [flag] if isinstance(action, argparse._StoreTrueAction) else [flag, str(value)]
    return out


def _cli_grid(args: argparse.Namespace) -> int:
    """`bertlab finetune --grid paper ...`: queue the grid as jobs and say where to watch it."""
    if args.resume or args.run_dir:
        raise InputError(
            "--grid queues one job per setting, each in its own run folder: leave out --run-dir and --resume"
        )
    cfg = config_from_args(args)  # the user's mistakes (no --data, --model with --size) before anything is queued
    n = len(settings(args.restarts))
    print(
        f"starting from {cfg.model}"
        if cfg.model
        else f"starting from random weights (size {cfg.size}: no pretraining)",
        flush=True,
    )
    folder = submit_grid(
        _argv_of(args), restarts=args.restarts, cwd=Path.cwd(), device=args.device, name=f"{cfg.task}-grid"
    )
    grid = " x ".join(f"{k.replace('_', ' ')} {'/'.join(f'{v:g}' for v in vals)}" for k, vals in PAPER_GRID.items())
    print(
        f"queued the paper's fine-tuning grid: {n} jobs ({grid}"
        f"{f', {args.restarts} seeds each' if args.restarts > 1 else ''}); they run one at a time per slot"
    )
    print(f"grid folder: {folder}")
    print(f"watch it: bertlab finetune --grid-status {folder}   (each job: bertlab jobs list, bertlab jobs show ID)")
    return 0


def run_cli(args: argparse.Namespace) -> int:
    """`bertlab finetune`: report a --grid-status, queue a --grid, or else one run (bertlab.finetune.cli.run)."""
    if args.grid_status:
        print(grid_status(args.grid_status))
        return 0
    if args.grid:
        return _cli_grid(args)
    return finetune_cli.run(args)
