"""Adopting plain `bertlab finetune` runs into a suite, each checked against the suite's plan.

A pilot is often run by hand first (`bertlab finetune ... --run-dir RUNS/pilot-cat4`) and only later found
worth a table's column: running it again as a suite would spend the same hours twice. `adopt` writes a
suite record (RUNS/ablations/<id>/suite.json, `suites.new_suite_dir`) whose runs are those folders, after
checking that each one ran exactly what the suite would have queued for its row, column and seed (the
same `bertlab finetune` arguments, parsed; only the run folder and progress bar may differ) and finished.
The suite then reads, collects and merges (`bertlab ablate collect ID --into`) as any other; its record
says the runs were adopted.

Only a table that pretrains nothing (Table 7) can be adopted whole: a table that pretrains reuses its
pretraining jobs instead (`--reuse`).

Torch-free: imports argparse, bertlab.ablations (planning, suites), bertlab.finetune.args, jobs, runfolder.
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Mapping
from pathlib import Path

from bertlab.ablations.planning import BASE_RECIPE, SuiteSpec, plan
from bertlab.ablations.suites import SUITE_FILE, commit_id, hardware_text, new_suite_dir
from bertlab.atomic import write_json_atomic
from bertlab.errors import InputError
from bertlab.finetune.args import add_args
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job
from bertlab.runfolder import REPO_ROOT, is_run_dir, read_run_config

# arguments that change where a run writes or what it prints, not what it computes
_HOW_IT_IS_SHOWN = ("run_dir", "no_progress", "resume")
_PATHS = ("model", "data", "vocab", "train_file", "dev_file")


def _parsed(argv: list[str]) -> dict:
    p = argparse.ArgumentParser(prog="bertlab finetune", add_help=False)
    add_args(p)
    try:
        args, unknown = p.parse_known_args(argv)
    except SystemExit:
        raise InputError(f"cannot read the arguments {shlex.join(argv)!r}") from None
    if unknown:
        raise InputError(f"unknown arguments {shlex.join(unknown)!r}")
    out = {k: v for k, v in vars(args).items() if k not in _HOW_IT_IS_SHOWN}
    for k in _PATHS:  # a relative path was relative to the repository, where runs start
        if out.get(k) and not str(out[k]).startswith("hf:"):
            out[k] = str((REPO_ROOT / Path(out[k]).expanduser()).resolve())
    return out


def run_argv(run_dir: str | Path) -> list[str]:
    """The `bertlab finetune` arguments a plain run was started with (from its run_config.json)."""
    config = read_run_config(run_dir) or {}
    words = shlex.split(str(config.get("command") or ""))
    if config.get("kind") != "finetune" or words[:2] != ["bertlab", "finetune"]:
        raise InputError(f"{run_dir}: not a `bertlab finetune` run (its run_config.json has no such command)")
    return words[2:]


def differences(planned: list[str], ran: list[str]) -> list[str]:
    """What a run did otherwise than planned, one 'name: ran X, planned Y' per argument."""
    a, b = _parsed(planned), _parsed(ran)
    return [f"{k}: ran {b.get(k)!r}, planned {a.get(k)!r}" for k in sorted(a) if a.get(k) != b.get(k)]


def adopt(
    spec: SuiteSpec, run_dirs: Mapping[tuple[str, str, int], str | Path], registry: JobRegistry | None = None
) -> Path:
    """Write a suite record for `spec` whose runs are the finished plain runs `run_dirs`, keyed
    (variant, column, seed) and each in the registry's runs folder; returns the suite's folder. Raises
    InputError, writing nothing, when the table pretrains, a planned run has no folder (or a folder is not
    in the plan), or a run is not finished or ran other arguments than the plan's."""
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
        raise InputError(f"{extra[0][0]}/{extra[0][1]}/{extra[0][2]} is not a run of this suite's plan")
    missing = [f"{r.variant}/{r.column}/{r.seed}" for r in planned if (r.variant, r.column, r.seed) not in run_dirs]
    if missing:
        raise InputError(f"{len(missing)} of the suite's {len(planned)} runs have no folder (e.g. {missing[0]})")
    root = registry.root.resolve()
    runs = []
    for r in planned:
        run_dir = Path(run_dirs[(r.variant, r.column, r.seed)]).expanduser().resolve()
        where = f"{r.variant}/{r.column}/{r.seed} ({run_dir})"
        if run_dir.parent != root or not is_run_dir(run_dir):
            raise InputError(f"{where}: not a run folder in the runs folder {root}")
        if (state := read_job(run_dir).state) != "finished":
            raise InputError(f"{where}: the run is {state}; adopt takes finished runs only")
        if diff := differences(list(r.spec.args), run_argv(run_dir)):
            raise InputError(f"{where} ran otherwise than the suite would: " + "; ".join(diff))
        runs.append({"variant": r.variant, "column": r.column, "seed": r.seed, "job": run_dir.name, "adopted": True})
    suite_dir = new_suite_dir(spec, registry)
    record = {
        "id": suite_dir.name,
        "table": spec.table,
        "spec": spec.to_dict(),
        "created": time.time(),
        "commit": commit_id(),
        "hardware": hardware_text(spec, registry),
        "base_recipe": BASE_RECIPE,
        "recipe_changes": [],
        "adopted": "plain `bertlab finetune` runs, each checked to have run the suite's own arguments",
        "runs": runs,
    }
    write_json_atomic(suite_dir / SUITE_FILE, record, indent=1)
    return suite_dir
