"""`bertlab jobs list|submit|show|cancel|resume|delete|estimate|tick`: the job registry from a terminal.

The work is bertlab.jobs' (and bertlab.jobs.estimates.spec' for `estimate`); this module parses and prints.
`jobs submit --nodes N --master HOST:PORT` prints the torchrun line each machine runs instead of
queueing the job.
Torch-free at import, so `bertlab jobs list` starts fast.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from bertlab.formatting import format_duration
from bertlab.jobs.estimates.estimate import Estimate
from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import Job, waiting_for
from bertlab.jobs.spec import DEVICES, KINDS, TRAINING_KINDS, JobError, JobSpec, spec_device
from bertlab.training.types import BUDGET_LIMITS


def _job_row(job_id: str, kind: str, state: str, progress: str, note: str, id_width: int = 40) -> str:
    return f"{job_id:<{id_width}} {kind:<9} {state:<10} {progress:<17} {note}".rstrip()


def _job_header(id_width: int = 40) -> str:
    """The column header over `jobs list`'s lines."""
    return _job_row("JOB", "KIND", "STATE", "PROGRESS", "ETA / WAITS FOR", id_width)


def _job_line(j: Job, id_width: int = 40) -> str:
    step = f"{j.step}/{j.total_steps}" if j.total_steps else str(j.step)
    eta = f"eta {format_duration(j.eta_s)}" if j.state == "running" and j.eta_s else ""
    if j.state == "queued" and (waits := waiting_for(j)):
        eta = "waits for " + ", ".join(waits)
    if j.error and j.state != "failed":  # a run shown despite a file it cannot read: say which and why
        eta = j.error.splitlines()[0]
    return _job_row(j.id, j.kind or "?", j.state, f"step {step}", eta, id_width)


def add_args(p: argparse.ArgumentParser) -> None:
    """The arguments of `bertlab jobs` and its subcommands."""
    p.add_argument("--runs", default=None, help="runs folder (default: $BERTLAB_RUNS, else runs/ in the repository)")
    sub = p.add_subparsers(dest="jobs_command", required=True)
    json_help = "print JSON for scripts"

    def command(name: str, help_text: str, description: str = "") -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=description or help_text)

    s = command(
        "list",
        "every run in the runs folder with its state, progress and ETA",
        "Every run in the runs folder, newest first: job id (its folder's name), kind, state, step, "
        "and the ETA of a running job or the jobs a queued one waits for.",
    )
    s.add_argument("--json", action="store_true", help=json_help)
    s = command(
        "submit",
        "queue a job: bertlab jobs submit [--gpus N] pretrain|finetune|interpret ARGS...",
        "Queue `bertlab pretrain|finetune|interpret ARGS...` as a background job; it starts when its device is free "
        "(interpret probe|heads: a study saved beside its model, e.g. `bertlab jobs submit interpret probe "
        "--model M --task upos --train TRAIN --eval EVAL`). "
        "With --nodes N (N > 1) and --master HOST:PORT, print instead the torchrun line to run on each of "
        "N machines (nothing is queued or started).",
    )
    s.add_argument("--gpus", type=int, default=1, help="GPUs (processes under torchrun) for this job, per machine")
    s.add_argument("--nodes", type=int, default=1, help="machines the job spans; over 1, print each one's command")
    s.add_argument("--master", default=None, help="with --nodes: HOST:PORT of the first machine (the rendezvous)")
    s.add_argument(
        "--run-dir",
        default=None,
        help="with --nodes: the run folder, the same shared folder on every machine (default: a new one in --runs)",
    )
    s.add_argument("--device", default=None, choices=DEVICES, help="queue to wait in (default: from ARGS, else auto)")
    s.add_argument("--name", default="", help="run folder name prefix")
    s.add_argument("--json", action="store_true", help=json_help)
    s.add_argument("kind", choices=KINDS, help="which recipe the job runs")
    s.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        help="arguments of `bertlab pretrain` / `bertlab finetune` / `bertlab interpret`",
    )
    s = command(
        "estimate",
        "parameters, memory and time of a job, without running it",
        "Parameters, memory and time that `bertlab pretrain|finetune ARGS...` would take, without running it.",
    )
    s.add_argument("--gpus", type=int, default=1, help="GPUs (processes under torchrun) to estimate for")
    s.add_argument(
        "--device", default=None, choices=DEVICES, help="device to estimate for (default: from ARGS, else auto)"
    )
    s.add_argument("--json", action="store_true", help=json_help)
    s.add_argument("kind", choices=TRAINING_KINDS, help="which recipe the job would run")
    s.add_argument("args", nargs=argparse.REMAINDER, help="arguments of `bertlab pretrain` / `bertlab finetune`")
    for name, help_text in (
        ("show", "one job: state, last metrics, error, log tail"),
        ("cancel", "stop a job (a running one saves a checkpoint first)"),
        ("resume", "queue a cancelled or failed job again from its checkpoint"),
        ("delete", "remove a job's run folder (cancel a live job first)"),
    ):
        s = command(name, help_text)
        s.add_argument(
            "job_id",
            nargs="?" if name == "resume" else None,
            help="the job's id: its run folder's name, as `bertlab jobs list` shows it",
        )
        if name == "resume":
            s.add_argument(
                "--interrupted",
                action="store_true",
                help="every job stopped mid-run by a reboot, a kill or a lost process (not by its own error or a "
                "cancel), each from its last checkpoint",
            )
        s.add_argument("--json", action="store_true", help=json_help)
        if name == "show":
            s.add_argument("--log", type=int, default=20, help="log lines to show, from the end (0 = none)")
        if name == "cancel":
            s.add_argument("--wait", action="store_true", help="wait until it has stopped (SIGKILL after --timeout)")
            s.add_argument(
                "--timeout",
                type=float,
                default=None,
                help="seconds to wait before SIGKILL with --wait (default: the registry's kill timeout)",
            )
    command(
        "tick",
        "start queued jobs whose device is free",
        "Start the queued jobs whose device is free (every `jobs list` and every finished job does this too).",
    )


def _take_json_flag(args: argparse.Namespace) -> None:
    """Read a `--json` given after the recipe's name (`jobs estimate finetune ... --json`) as
    `jobs`' own: no recipe takes --json, and the recipe would refuse it as an unknown argument."""
    rest = list(args.args)
    end = rest.index("--") if "--" in rest else len(rest)  # after a `--`, every word is the recipe's
    if "--json" in rest[:end]:
        args.json = True
        args.args = [a for a in rest[:end] if a != "--json"] + rest[end:]


def _check_budget(est: Estimate) -> None:
    """Refuse an estimate of a budget no run would finish (`--epochs 1e12`): its steps or time beyond
    the limits TrainConfig puts on a budget given in steps or seconds."""
    most_steps, most_s = BUDGET_LIMITS["max_steps"], BUDGET_LIMITS["max_time_s"]
    if (est.steps or 0) > most_steps or (est.total_s or 0) > most_s:
        years = (est.total_s or 0) / (365.25 * 24 * 3600)
        raise JobError(
            f"this budget is {est.steps or 0:.3g} steps, ~{years:.3g} years of training on {est.device_name}: "
            f"beyond any run (at most {most_steps:.0e} steps or {most_s:.0e} s); give a smaller budget "
            "(train.max_steps / max_tokens / max_time_s for pretrain; --max-steps, --max-time-s or --epochs for finetune)"
        )


def _spec_from_args(args: argparse.Namespace) -> JobSpec:
    rest = tuple(a for a in args.args if a != "--")
    device = args.device or spec_device(JobSpec(args.kind, rest))
    return JobSpec(args.kind, rest, device=device, num_gpus=args.gpus, name=getattr(args, "name", ""))


def _print_node_commands(reg: JobRegistry, args: argparse.Namespace) -> int:
    """`jobs submit --nodes N --master HOST:PORT`: the line each machine runs, and how to resume."""
    if args.nodes < 2 or not args.master:
        raise JobError("--nodes, --master and --run-dir go together: give --nodes N (2 or more) and --master HOST:PORT")
    spec = _spec_from_args(args)
    run_dir, lines = reg.node_commands(spec, args.nodes, args.master, run_dir=args.run_dir)
    _, resume_lines = reg.node_commands(spec, args.nodes, args.master, run_dir=run_dir, resume=True)
    if args.json:
        nodes = [{"node": c.node, "argv": list(c.argv), "line": c.line} for c in lines]
        print(json.dumps({"run_dir": str(run_dir), "nodes": nodes, "resume_line": resume_lines[0].line}, indent=2))
        return 0
    print(
        f"# Run on each of the {args.nodes} machines, from {Path.cwd()} there, with {run_dir} the same shared\n"
        f"# folder on all of them (rank 0 writes the run there; every rank reads it on --resume)."
    )
    print(f"# {args.master} is one of the machines: it hosts the rendezvous. Nothing was queued or started.")
    for c in lines:
        print(f"# machine {c.node}\n{c.line}")
    print(f"# after a failure, resume on every machine with:\n{resume_lines[0].line}")
    return 0


def run(args: argparse.Namespace) -> int:
    """`bertlab jobs ...`: call the registry and print text or `--json`."""
    reg = JobRegistry(args.runs)
    if args.jobs_command in ("estimate", "submit"):
        _take_json_flag(args)
    return _COMMANDS[args.jobs_command](reg, args)


def _list(reg: JobRegistry, args: argparse.Namespace) -> int:
    jobs = reg.list()
    if args.json:
        print(json.dumps([j.to_dict() for j in jobs], indent=2, default=str))
    elif not jobs:
        print(f"no jobs in {reg.root}")
    else:
        id_width = max(40, *(len(j.id) for j in jobs))
        print(_job_header(id_width))
        for j in jobs:
            print(_job_line(j, id_width))
    return 0


def _tick(reg: JobRegistry, args: argparse.Namespace) -> int:
    started = reg.tick()
    print("started: " + (", ".join(started) if started else "nothing"))
    return 0


def _estimate(reg: JobRegistry, args: argparse.Namespace) -> int:
    est = estimate_spec(_spec_from_args(args), runs_dir=reg.root)
    _check_budget(est)
    if args.json:
        print(json.dumps(asdict(est) | {"fits": est.fits}, indent=2))
    else:
        print(est.summary())
        print(
            f"memory: weights {est.weights_gb:.2f} GB + gradients/AdamW {est.optimizer_gb:.2f} GB + "
            f"activations {est.activations_gb:.2f} GB + overhead {est.overhead_gb:.2f} GB on {est.device_name}"
        )
        for note in est.notes:
            print(f"note: {note}")
    return 0


def _submit(reg: JobRegistry, args: argparse.Namespace) -> int:
    if args.nodes > 1 or args.master or args.run_dir:
        return _print_node_commands(reg, args)
    job = reg.submit(_spec_from_args(args))
    print(json.dumps(job.to_dict(), default=str) if args.json else f"{job.id} {job.state}  ({job.run_dir})")
    return 0


def _show(reg: JobRegistry, args: argparse.Namespace) -> int:
    if args.log < 0:
        raise JobError(f"--log {args.log}: give the number of log lines to show, 0 (none) or more")
    job = reg.get(args.job_id)
    tail = reg.log_tail(job.id, args.log) if args.log else ""  # log_tail reads 0 lines as the whole log
    if args.json:
        print(json.dumps(job.to_dict() | {"log_tail": tail}, indent=2, default=str))
        return 0
    print(_job_line(job))
    print(f"folder   {job.run_dir}")
    print(f"command  {job.command}")
    last = job.status.get("last_train") or {}
    if last:
        print(
            "train    "
            + "  ".join(
                f"{k}={v:.4g}"
                for k, v in last.items()
                if isinstance(v, float) and k not in ("time", "progress", "eta_s")
            )
        )
    if job.status.get("last_eval"):
        print(
            "eval     "
            + "  ".join(f"{k}={v:.4g}" for k, v in job.status["last_eval"].items() if isinstance(v, (int, float)))
        )
    if job.error:
        print(f"error    {job.error}")
    if tail:
        print("--- log ---\n" + tail)
    return 0


def _cancel(reg: JobRegistry, args: argparse.Namespace) -> int:
    job = reg.cancel(args.job_id, wait=args.wait, timeout_s=args.timeout)
    # without --wait a running job is still stopping (it saves a checkpoint first): say a cancel was asked for
    if args.json:
        print(json.dumps(job.to_dict() | {"cancel_requested": True}, default=str))
    elif job.is_final:
        print(_job_line(job))
    else:
        print(
            f"{_job_line(job)}\ncancel requested: {job.id} stops (a running job saves a checkpoint first); "
            f"`bertlab jobs show {job.id}` follows it (--wait waits for it)"
        )
    return 0


def _resume(reg: JobRegistry, args: argparse.Namespace) -> int:
    if args.interrupted and not args.job_id:
        resumed = reg.resume_interrupted()
        if args.json:
            print(json.dumps([j.to_dict() for j in resumed], default=str))
        else:
            print("\n".join(_job_line(j) for j in resumed) or "no interrupted jobs to resume")
        return 0
    if args.job_id and args.interrupted:
        raise JobError("give a job's id or --interrupted, not both")
    if not args.job_id:
        raise JobError("give the job's id, or --interrupted for every job whose process went away mid-run")
    job = reg.resume(args.job_id)
    print(json.dumps(job.to_dict(), default=str) if args.json else _job_line(job))
    return 0


def _delete(reg: JobRegistry, args: argparse.Namespace) -> int:
    reg.delete(args.job_id)
    print(json.dumps({"id": args.job_id, "deleted": True}) if args.json else f"deleted {args.job_id}")
    return 0


# `bertlab jobs COMMAND` -> what runs it (each takes the registry and the parsed arguments, returns the exit code)
_COMMANDS = {
    "list": _list,
    "tick": _tick,
    "estimate": _estimate,
    "submit": _submit,
    "show": _show,
    "cancel": _cancel,
    "resume": _resume,
    "delete": _delete,
}
