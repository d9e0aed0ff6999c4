"""Reusing a pretraining job across suites: a row whose exact pretraining already ran, runs or can
resume in the runs folder uses that job instead of pretraining again (Table 5's MLM + NSP run is also
Table 8's 80/10/10 row and Table 6's 4/256/4 row at mini size).

Owns: what counts as the same recipe (`_recipe`: every resolved setting but the name, the model's
shape in place of the preset that gives it), finding a match (`matching_jobs`, `with_matching_reuse`)
and checking a named one (`reused_job`). Torch-free.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from bertlab.ablations.planning import RUN_SETTINGS, PlannedRun, SuiteSpec, flatten, plan
from bertlab.config import BertConfig
from bertlab.errors import BertLabError, InputError
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import Job, read_job
from bertlab.jobs.spec import parse_recipe_args, pretrain_config
from bertlab.storage.runfolder import JOB_FILE, REPO_ROOT, read_run_config


def _recipe(args: tuple[str, ...]) -> dict:
    """A pretraining job's resolved settings, from its arguments (see `_comparable`)."""
    cfg = pretrain_config(parse_recipe_args("pretrain", args), REPO_ROOT)
    return _comparable(asdict(cfg), asdict(cfg.model_config(cfg.vocab_size)))


def _job_recipe(job: Job) -> dict:
    """What a job pretrains: as its run recorded it (run_config.json), so a change to the base recipe
    since cannot pass for it; from its arguments while it has not started."""
    recorded = read_run_config(job.run_dir) or {}
    if isinstance(recorded.get("config"), dict) and isinstance(recorded.get("model_config"), dict):
        return _comparable(recorded["config"], recorded["model_config"])
    return _recipe(tuple(job.job.get("args") or ()))


def _comparable(config: dict, model_config: dict) -> dict:
    """Settings two jobs must share to train the same model the same way: all but the name, the device
    (compared apart) and how the run goes (RUN_SETTINGS: checkpoints, threads, compile), with the model's shape in place of the preset and overrides that give it
    (so Table 6's 4/256/4 row may reuse a mini run); flat, lists for tuples, as JSON reads them back."""
    recipe = json.loads(json.dumps({k: v for k, v in config.items() if k not in ("name", "size", "model_overrides")}))
    # a model field added since a run recorded its model_config (span_boundary_head) reads there as its
    # default, which is what that run built, so the older run still matches
    recipe["model"] = json.loads(json.dumps({**MODEL_DEFAULTS, **model_config}))
    return {k: v for k, v in flatten(recipe).items() if k not in RUN_SETTINGS}


MODEL_DEFAULTS = asdict(BertConfig())  # every model field's default (see `_comparable`)


def _job_device(job: Job) -> str:
    """cpu or cuda: where a job ran or will run ("cuda:1" -> "cuda")."""
    return (job.device or "cpu").split(":")[0]


def _reusable(job: Job) -> bool:
    """A job whose model exists or will: finished, on its way, or stopped mid-run (interrupted, or
    cancelled) with a checkpoint to continue from; not one that failed with an error of its own."""
    if job.state in ("failed", "cancelled"):
        return job.has_checkpoint and (job.state == "cancelled" or job.interrupted)
    return True


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
    device = spec.device_kind(registry.gpus)
    jobs = [j for j in registry.list(start_queued=False) if j.kind == "pretrain" and j.state in REUSE_ORDER]
    for job in sorted(jobs, key=lambda j: REUSE_ORDER.index(j.state)):  # stable: newest first within a state
        if not _reusable(job) or _job_device(job) != device:
            continue
        try:
            theirs = _job_recipe(job)
        except (BertLabError, ValueError, TypeError, AttributeError, KeyError):
            continue  # a job whose settings no longer parse matches nothing
        for variant, ours in recipes.items():
            if variant not in found and ours == theirs:
                found[variant] = job.id
    return tuple((v, found[v]) for v in wanted if v in found)


def with_matching_reuse(spec: SuiteSpec, registry: JobRegistry) -> SuiteSpec:
    """`spec` reusing, for each row that pretrains and reuses nothing yet, the job `matching_jobs` finds."""
    return replace(spec, reuse=spec.reuse + matching_jobs(spec, registry))


def reused_job(run: PlannedRun, spec: SuiteSpec, registry: JobRegistry) -> tuple[str, Path]:
    """The pretraining job `spec.reuse` names for `run`'s variant, checked to be a job of this runs
    folder that pretrains exactly what the suite would (every setting but the name), so the table
    still compares equal recipes. InputError naming the settings that differ."""
    job_id = spec.reused(run.variant) or ""
    run_dir = registry.root / job_id
    if not job_id or "/" in job_id or job_id.startswith(".") or not (run_dir / JOB_FILE).is_file():
        raise InputError(
            f"no job {job_id!r} in {registry.root} to reuse for {run.variant}; `bertlab jobs list` shows them"
        )
    job = read_job(run_dir)
    if job.kind != "pretrain":
        raise InputError(f"job {job_id} is a {job.kind} job; reuse needs a pretraining job")
    if not _reusable(job):
        why = "has no checkpoint to continue from" if not job.has_checkpoint else "failed with an error of its own"
        raise InputError(f"job {job_id} is {job.state} and {why}; there is nothing to reuse")
    theirs_device, ours_device = _job_device(job), spec.device_kind(registry.gpus)
    if theirs_device != ours_device:
        raise InputError(
            f"job {job_id} pretrains on {theirs_device}, the suite's jobs run on {ours_device}: the same recipe "
            "trains at another precision there; give the suite --device " + theirs_device
        )
    try:
        theirs = _job_recipe(job)
    except (BertLabError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise InputError(f"job {job_id}'s settings no longer read as a recipe ({exc}); it cannot be reused") from exc
    ours = _recipe(run.spec.args)
    differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    if differ:
        shown = "; ".join(f"{k}: the suite's {ours.get(k)!r}, the job's {theirs.get(k)!r}" for k in differ)
        raise InputError(f"job {job_id} does not pretrain what the suite's {run.variant} row would ({shown})")
    return job_id, run_dir
