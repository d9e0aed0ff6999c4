"""Adopting plain `bertlab finetune` runs into a suite, each checked against the suite's plan.

A pilot is often run by hand first (`bertlab finetune ... --run-dir RUNS/pilot-cat4`) and only later found
worth a table's column: running it again as a suite would spend the same hours twice. `adopt` writes a
suite record (RUNS/ablations/<id>/suite.json, `suites.new_suite_dir`) whose runs are those folders, after
checking that each one ran exactly what the suite would have queued for its row, column and seed (the
same `bertlab finetune` arguments, parsed, relative paths from where the run started; only the run folder
and progress bar may differ; the settings it recorded agree; on the suite's device) and finished in one go
(a resumed run records the resume's command, not what it started with).
The suite then reads, collects and merges (`bertlab ablate collect ID --into`) as any other; its record
says the runs were adopted.

Only a table that pretrains nothing (Table 7) can be adopted whole: a table that pretrains reuses its
pretraining jobs instead (`--reuse`).

Torch-free: imports bertlab.ablations (planning, suites), atomic, errors, jobs (registry, runs, spec), runfolder.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping
from pathlib import Path

from bertlab.ablations.planning import BASE_RECIPE, SuiteSpec, plan
from bertlab.ablations.suites import SUITE_FILE, commit_id, hardware_text, new_suite_dir
from bertlab.atomic import write_json_atomic
from bertlab.errors import InputError
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job
from bertlab.jobs.spec import JobError, parse_recipe_args
from bertlab.storage.runfolder import REPO_ROOT, is_run_dir, read_run_config, read_status

# arguments that change where a run writes or what it prints, not what it computes; the device is compared
# apart (a launched job gets --device from the suite, which its planned arguments leave out)
_HOW_IT_IS_SHOWN = ("run_dir", "no_progress", "resume", "device")
_PATHS = ("model", "data", "vocab", "train_file", "dev_file")
# what a run recorded it trained with (run_config.json "config") against the argument that sets it
_RECORDED = {
    "task": "task",
    "mode": "mode",
    "features": "features",
    "max_train_examples": "max_train_examples",
    "max_eval_examples": "max_eval_examples",
    "epochs": "epochs",
    "train.learning_rate": "lr",
    "train.seed": "seed",
}


def _without_run_folder(argv: list[str]) -> list[str]:
    """`argv` less --run-dir (and its value) and --no-progress, which the job registry adds itself."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--run-dir":
            skip = True
        elif not a.startswith("--run-dir=") and a != "--no-progress":
            out.append(a)
    return out


def _parsed(argv: list[str], cwd: Path) -> dict:
    try:
        args = parse_recipe_args("finetune", tuple(_without_run_folder(argv)))
    except JobError as e:
        raise InputError(f"cannot read the arguments {shlex.join(argv)!r}: {e}") from None
    out = {k: v for k, v in vars(args).items() if k not in _HOW_IT_IS_SHOWN}
    for k in _PATHS:
        if out.get(k) and not str(out[k]).startswith("hf:"):
            out[k] = str((cwd / Path(out[k]).expanduser()).resolve())
    return out


def run_command(run_dir: str | Path, config: dict) -> tuple[list[str], Path]:
    """The `bertlab finetune` arguments a plain run was started with and the folder its relative paths start
    from (recorded since runs record it; before, the repository, where jobs start), from its run_config.json
    (`config`)."""
    try:
        words = shlex.split(str(config.get("command") or ""))
    except ValueError:
        raise InputError(f"{run_dir}: its recorded command cannot be read back ({config.get('command')!r})") from None
    if config.get("kind") != "finetune" or words[:2] != ["bertlab", "finetune"]:
        raise InputError(f"{run_dir}: not a `bertlab finetune` run (its run_config.json has no such command)")
    words = words[2:]
    if words[:1] == ["finetune"]:  # `bertlab -v finetune ...` was once recorded as `bertlab finetune finetune ...`
        words = words[1:]
    if "--resume" in words:
        raise InputError(
            f"{run_dir}: it was resumed, and a resumed run records the resume's command, not the settings it "
            "started with; adopt takes runs that ran in one go"
        )
    return words, Path(str(config.get("cwd") or REPO_ROOT))


def differences(planned: list[str], ran: list[str], cwd: Path = REPO_ROOT, recorded: dict | None = None) -> list[str]:
    """What a run did otherwise than planned, one 'name: ran X, planned Y' per setting: its command's arguments
    (relative paths from `cwd`), and, where given, the settings it recorded (run_config.json "config")."""
    a, b = _parsed(planned, REPO_ROOT), _parsed(ran, cwd)
    out = [f"{k}: ran {b.get(k)!r}, planned {a.get(k)!r}" for k in sorted(a) if a.get(k) != b.get(k)]
    flat = {**(recorded or {}), **{f"train.{k}": v for k, v in ((recorded or {}).get("train") or {}).items()}}
    for key, arg in _RECORDED.items():
        if recorded is not None and key in flat and a.get(arg) is not None and flat[key] != a[arg]:
            out.append(f"{key}: recorded {flat[key]!r}, planned {a[arg]!r}")
    return out


def adopt(
    spec: SuiteSpec,
    run_dirs: Mapping[tuple[str, str, int], str | Path],
    registry: JobRegistry | None = None,
    partial: bool = False,
) -> Path:
    """Write a suite record for `spec` whose runs are the finished plain runs `run_dirs`, keyed
    (variant, column, seed) and each in the registry's runs folder; returns the suite's folder. Raises
    InputError, writing nothing, when the table pretrains, a planned run has no folder (or a folder is not
    in the plan), or a run is not finished or ran other arguments than the plan's.

    `partial`: a suite still under way (the successors' fine-tuning on a CPU takes days): the planned runs
    without a folder are left out of the record, which says how many of the plan it holds; the runs given
    are checked as strictly."""
    registry = registry or JobRegistry()
    if spec.table_spec.pretrains:
        raise InputError(
            f"{spec.table} pretrains its rows: adopt takes a table that pretrains nothing (table7); "
            "reuse pretraining jobs with --reuse instead"
        )
    planned = [r for r in plan(spec, "adopted") if r.column != "pretraining"]
    keys = {(r.variant, r.column, r.seed) for r in planned}
    extra = sorted(set(run_dirs) - keys)
    if extra:
        named = ", ".join("/".join(map(str, k)) for k in sorted(keys)[:4])
        raise InputError(
            f"{'/'.join(map(str, extra[0]))} is not a run of this suite's plan ({len(keys)} runs, e.g. {named})"
        )
    missing = [f"{r.variant}/{r.column}/{r.seed}" for r in planned if (r.variant, r.column, r.seed) not in run_dirs]
    if missing and not partial:
        raise InputError(
            f"{len(missing)} of the suite's {len(planned)} runs have no folder (e.g. {missing[0]}); "
            "--partial adopts the runs given and leaves the rest out"
        )
    if not run_dirs:
        raise InputError("no run to adopt: give each one with --run VARIANT/COLUMN/SEED=RUN")
    n_planned = len(planned)
    planned = [r for r in planned if (r.variant, r.column, r.seed) in run_dirs]
    root = registry.root.resolve()
    runs, devices, started = [], set(), []
    for r in planned:
        run_dir = Path(run_dirs[(r.variant, r.column, r.seed)]).expanduser().resolve()
        where = f"{r.variant}/{r.column}/{r.seed} ({run_dir})"
        if run_dir.parent != root or not is_run_dir(run_dir):
            raise InputError(f"{where}: not a run folder in the runs folder {root}")
        if (state := read_job(run_dir).state) != "finished":
            raise InputError(f"{where}: the run is {state}; adopt takes finished runs only")
        config = read_run_config(run_dir) or {}
        argv, cwd = run_command(run_dir, config)
        recorded = config.get("config")
        if diff := differences(list(r.spec.args), argv, cwd, recorded if isinstance(recorded, dict) else {}):
            raise InputError(f"{where} ran otherwise than the suite would: " + "; ".join(diff))
        status = read_status(run_dir)
        device = str(status.get("device") or "").split(":")[0]
        if spec.device in ("cpu", "cuda") and device != spec.device:
            raise InputError(f"{where} ran on {device or 'an unrecorded device'}; the suite runs on {spec.device}")
        devices.add(device or "an unrecorded device")
        started.append(float(status.get("started") or time.time()))
        runs.append({"variant": r.variant, "column": r.column, "seed": r.seed, "job": run_dir.name, "adopted": True})
    suite_dir = new_suite_dir(spec, registry)
    record = {
        "id": suite_dir.name,
        "table": spec.table,
        "spec": spec.to_dict(),
        "created": min(started),  # when its first run started
        "commit": f"{commit_id()} (when adopted; the runs' own commit is not recorded)",
        "hardware": f"{hardware_text(spec, registry)} (where adopted); the runs ran on {', '.join(sorted(devices))}",
        "base_recipe": BASE_RECIPE,
        "recipe_changes": [],
        "adopted": "plain `bertlab finetune` runs, each checked to have run the suite's own arguments"
        + (
            f"; {len(runs)} of the plan's {n_planned} (partial: the others had not run)"
            if len(runs) < n_planned
            else ""
        ),
        "runs": runs,
    }
    write_json_atomic(suite_dir / SUITE_FILE, record, indent=1)
    return suite_dir
