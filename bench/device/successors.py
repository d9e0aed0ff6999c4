"""BERT's successors (#54) on a lent GPU machine: their pretraining jobs, then the fine-tuning of the finished rows.

The successors suite is not a table that pretrains: five variants are pretrained by their own configs
(configs/successors/*.yaml, `bertlab.ablations.successors.job_args`: the suite's corpus, the shipped WordPiece
vocabulary), then `bertlab ablate run successors --row-model VARIANT=FOLDER ...` fine-tunes the finished rows.
ablate.sh's `successors*` modes (bench/device/successors.sh) call these, with the runs folder in $BERTLAB_RUNS:

    python -m bench.device.successors submit --device cuda [--variants bert,electra] [--set KEY=VALUE ...]
        # queue each variant's pretraining job unless one of its runs here is queued, running or finished;
        # prints every variant's job id on one line (stdout), what it did on stderr
    python -m bench.device.successors jobs                 # each variant's newest run here (ids, one line)
    python -m bench.device.successors rows [--from DIR]    # --row-model VARIANT=FOLDER, one word a line, for
        # each finished variant not yet in a successors suite here; a variant with no finished run here is
        # looked for in DIR (a folder of runs, e.g. .device/runs restored from an earlier call's files);
        # ROWS=bert,electra (environment or --rows) keeps only those
    python -m bench.device.successors suites               # the successors suites here with runs not ended

Imports bertlab (ablations.successors and suites, jobs.registry and spec); torch-free.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bertlab.ablations import successors as succ
from bertlab.ablations import suites as ab
from bertlab.errors import BertLabError
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import JobSpec
from bertlab.storage.runfolder import ACTIVE_STATES, REPO_ROOT

TABLE = "successors"
KEPT_STATES = (*ACTIVE_STATES, "queued", "finished")  # a run in one of these is not queued again


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _pick(variants: list[succ.SuccessorVariant], names: str) -> list[succ.SuccessorVariant]:
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {v.key for v in variants}
    for n in wanted:
        if n not in known:
            raise SystemExit(f"unknown variant {n!r}; the suite's are {', '.join(sorted(known))}")
    return [v for v in variants if not wanted or v.key in wanted]


def submit(registry: JobRegistry, device: str, variants: list[succ.SuccessorVariant], sets: list[str]) -> list[str]:
    """Queue each variant's pretraining job on `device` (its config's args, then `sets`, which win) unless a run
    of it in the runs folder is queued, running or finished (a second call on a still-warm machine); returns
    every variant's job id."""
    ids = []
    for v in variants:
        runs = succ.variant_runs(registry.root, v)
        if runs and runs[0].state in KEPT_STATES:
            note(f"{v.key}: kept {runs[0].id} ({runs[0].state})")
            ids.append(runs[0].id)
            continue
        spec = JobSpec("pretrain", (*succ.job_args(v), *sets), device)
        job = registry.submit(spec, cwd=REPO_ROOT, start=False)
        note(f"{v.key}: queued {job.id}: bertlab pretrain {' '.join(spec.args)}")
        ids.append(job.id)
    registry.tick()
    return ids


def newest_jobs(registry: JobRegistry, variants: list[succ.SuccessorVariant]) -> list[str]:
    """Each variant's newest run in the runs folder (a running one first), for those that have one."""
    return [runs[0].id for v in variants if (runs := succ.variant_runs(registry.root, v))]


def _suite_records(registry: JobRegistry) -> list[dict]:
    return [r for r in ab.list_suites(registry) if r.get("table") == TABLE]


def rows(registry: JobRegistry, variants: list[succ.SuccessorVariant], elsewhere: Path | None) -> list[str]:
    """`--row-model VARIANT=FOLDER` for each variant with a finished model, here or else in `elsewhere`, that
    no successors suite in the runs folder fine-tunes yet."""
    done = {str(v) for r in _suite_records(registry) for v, _ in r.get("spec", {}).get("row_models") or ()}
    found = dict(succ.finished_models(variants, registry.root))
    if elsewhere is not None and elsewhere.is_dir():
        for key, folder in succ.finished_models(variants, elsewhere):
            found.setdefault(key, str(Path(folder).resolve()))
    out = []
    for v in variants:
        if v.key in done:
            note(f"{v.key}: already in a successors suite here")
        elif v.key in found:
            out += ["--row-model", f"{v.key}={found[v.key]}"]
        else:
            note(f"{v.key}: no finished model here" + (f" nor in {elsewhere}" if elsewhere else ""))
    return out


def pending_suites(registry: JobRegistry) -> list[str]:
    return [
        r["id"] for r in _suite_records(registry) if any(s.state not in ab.ENDED for s in ab.suite_runs(r, registry))
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit")
    s.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    s.add_argument("--variants", default="", help="comma-separated (default: all five)")
    s.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="more overrides")
    sub.add_parser("jobs")
    r = sub.add_parser("rows")
    r.add_argument("--from", dest="elsewhere", type=Path, default=None, help="a runs folder to look in as well")
    r.add_argument("--rows", default=os.environ.get("ROWS", ""), help="comma-separated variants (default: all)")
    sub.add_parser("suites")
    args = p.parse_args(argv)
    registry = JobRegistry()
    variants = succ.suite_variants()
    try:
        if args.command == "submit":
            print(" ".join(submit(registry, args.device, _pick(variants, args.variants), args.sets)))
        elif args.command == "jobs":
            print(" ".join(newest_jobs(registry, variants)))
        elif args.command == "rows":
            print("\n".join(rows(registry, _pick(variants, args.rows), args.elsewhere)))
        else:
            print(" ".join(pending_suites(registry)))
    except BertLabError as exc:
        note(f"successors {args.command}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
