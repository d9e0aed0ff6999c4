"""`bertlab ablate ...`: launch the paper's ablation suites as jobs, follow them, collect their tables.

    bertlab ablate run table5 --size mini --budget-tokens 40M --tasks squad,mrpc,sst2,qnli,rte --seeds 3
    bertlab ablate run table7 --committed-recipe                       # the committed set's recipe
    bertlab ablate run table7 --committed-recipe --no-estimate --device cuda  # a lent GPU (bench/device/)
    bertlab ablate list | status SUITE | collect SUITE --out results/ablations | paper table8
    bertlab ablate collect SUITE --into results/ablations/table7.csv   # a re-run column replaces its own
    bertlab ablate pool results/ablations/table5.csv OTHER.csv          # a second pretraining run's rows join
    bertlab ablate adopt table7 --tasks upos ... --run cat4/upos/0=pilot-cat4 ...  # plain runs become a suite

The work is bertlab.ablations' (planning, suites, estimate, reuse, results, merge, adopt); this module parses and prints. Torch-free.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bertlab.ablations import adopt, comparison, estimate, merge, planning, results, reuse
from bertlab.ablations import suites as ab
from bertlab.ablations.paper import CITATION, PAPER
from bertlab.ablations.tables import TABLES
from bertlab.errors import InputError
from bertlab.formatting import parse_count
from bertlab.jobs.registry import JobRegistry


def _tokens(text: str) -> int:
    """'40M', '4000000' or '2.5e6' -> tokens."""
    try:
        return parse_count(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token count; write e.g. 40M or 4000000") from None


def _suite_options(p: argparse.ArgumentParser) -> None:
    """The options that describe a suite (`ablate run`, `estimate`, `adopt`), in the order --help lists them."""
    d = planning.SuiteSpec("table5")  # the defaults of what --committed-recipe can set (spec_from_args)
    _table_options(p, d)
    _pretraining_options(p, d)
    _finetuning_options(p, d)
    _job_options(p, d)


def _table_options(p: argparse.ArgumentParser, d: planning.SuiteSpec) -> None:
    """Which table, its task columns, whose recipe, how many seeds."""
    p.add_argument("table", choices=sorted(TABLES), help="which of the paper's tables")
    p.add_argument(
        "--tasks",
        default="",
        help="comma-separated fine-tuning tasks (default depends on the table: "
        + "; ".join(f"{t}: {','.join(v)}" for t, v in ((k, spec.default_tasks) for k, spec in TABLES.items()))
        + ")",
    )
    p.add_argument(
        "--committed-recipe",
        action="store_true",
        help="start from the recipe of the table's committed set (the one the Ablations page offers: its tasks, "
        "shapes and pretraining corpus, budget and settings, train and dev examples, epochs, seeds, task recipes); "
        "the options given replace its values",
    )
    p.add_argument(
        "--seeds", type=int, help=f"fine-tuning restarts per variant and task (mean +- std; default {d.seeds})"
    )


def _pretraining_options(p: argparse.ArgumentParser, d: planning.SuiteSpec) -> None:
    """The models each row pretrains or probes: size, budget, shapes, the data they read."""
    p.add_argument("--size", help=f"model preset of every pretrained variant (default {d.size})")
    p.add_argument(
        "--budget-tokens",
        type=_tokens,
        help="pretraining input tokens per variant, e.g. 40M: every variant sees the same tokens, so its speed "
        "decides nothing (the fair comparison; replaces --budget-s)",
    )
    p.add_argument(
        "--budget-s", type=float, help=f"pretraining seconds per variant (equal wall-clock; default {d.budget_s:.0f})"
    )
    p.add_argument("--grid", default="", help="table6: layers/hidden/heads entries, e.g. '2/128/2,4/256/4'")
    p.add_argument("--model", default="", help="table7: the pretrained model to probe (default: the shipped model)")
    p.add_argument(
        "--data",
        default="",
        help="folder holding glue/, ud_en_ewt/, wnut17/, squad/ (default: ../shared/data beside the repository)",
    )
    p.add_argument("--corpus", default="", help="pretraining corpus, comma-separated (default: the base recipe's)")
    p.add_argument(
        "--row-model",
        action="append",
        default=[],
        metavar="VARIANT=FOLDER",
        help="a row's own pretrained model (successors: e.g. electra=runs/succ-electra/model; a pair folder "
        "fine-tunes its discriminator); rows without one are left out (repeatable)",
    )


def _finetuning_options(p: argparse.ArgumentParser, d: planning.SuiteSpec) -> None:
    """How each task column fine-tunes: examples, epochs, learning rates, a task's own recipe."""
    p.add_argument(
        "--max-train-examples",
        type=int,
        help=f"train examples per fine-tuning run (0 = all; default {d.max_train_examples})",
    )
    p.add_argument(
        "--max-eval-examples", type=int, help=f"dev examples scored per run (0 = all; default {d.max_eval_examples})"
    )
    p.add_argument(
        "--epochs",
        type=float,
        help=f"fine-tuning passes over the train examples, the frozen taggers' too (default {d.epochs:g})",
    )
    p.add_argument("--lr", type=float, help=f"fine-tuning learning rate (default {d.finetune_lr:g})")
    p.add_argument(
        "--feature-lr",
        type=float,
        help="the frozen-feature taggers' learning rate (Tables 7 and 8's feature-based runs; every task's, unless "
        f"--task-feature-lr gives one its own; default {d.feature_lr:g})",
    )
    p.add_argument(
        "--task-recipe",
        action="append",
        metavar="TASK=EPOCHS/LR",
        help="a task's own fine-tuning epochs and learning rate instead of --epochs/--lr (repeatable), "
        "e.g. mrpc=4/3e-4: MRPC's 3,668 pairs give only 230 steps at 2 epochs and 1e-4",
    )
    p.add_argument(
        "--task-feature-lr",
        action="append",
        metavar="TASK=LR",
        help="a task's own frozen-feature taggers' learning rate instead of --feature-lr (repeatable), e.g. upos=1e-2",
    )


def _job_options(p: argparse.ArgumentParser, d: planning.SuiteSpec) -> None:
    """How the suite's jobs run: threads, device, name, overrides, pretraining jobs reused."""
    p.add_argument("--threads", type=int, help=f"CPU threads per job (0 = torch's default; default {d.threads})")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--name", default="", help="prefix of the suite's id (default: the table)")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="extra `bertlab pretrain` override for every variant (repeatable), e.g. train.batch_size=64",
    )
    p.add_argument(
        "--reuse",
        action="append",
        default=[],
        metavar="VARIANT=JOB",
        help="use a pretraining job already submitted (running, finished or resumable) for a row instead of "
        "pretraining it again; it must pretrain exactly what the suite would, but for its name (repeatable)",
    )
    p.add_argument(
        "--reuse-matching",
        action="store_true",
        help="reuse, for every row that pretrains, a job in the runs folder that pretrains exactly its recipe",
    )


def add_args(p: argparse.ArgumentParser) -> None:
    """The arguments of `bertlab ablate` and its subcommands."""
    p.add_argument("--runs", default=None, help="runs folder (default: $BERTLAB_RUNS or runs/ in the repository)")
    sub = p.add_subparsers(dest="ablate_command", required=True)
    run = sub.add_parser("run", help="submit every job of a suite (pretraining, then fine-tuning)")
    _suite_options(run)
    run.add_argument(
        "--wait",
        action="store_true",
        help="stay until every run has ended, printing progress as runs change (the jobs run on if you stop it); "
        "exit status 1 unless every run finished",
    )
    run.add_argument(
        "--collect", default="", metavar="DIR", help="wait (as --wait), then write <table>.csv/.json to DIR"
    )
    run.add_argument("--wait-max-s", type=float, default=0.0, help="with --wait: stop waiting after this many seconds")
    run.add_argument(
        "--no-estimate",
        action="store_true",
        help="queue the suite without its time estimate, which first times a training step of every distinct job "
        "on this machine (minutes on a GPU lent for minutes; bench/device/); every job is still checked first",
    )
    _suite_options(sub.add_parser("estimate", help="how many runs a suite makes and about how long it takes"))
    a = sub.add_parser(
        "adopt",
        help="make a suite of finished plain `bertlab finetune` runs (a pilot run by hand), each checked to have "
        "run exactly what the suite would (table7: a table that pretrains nothing)",
    )
    _suite_options(a)
    a.add_argument(
        "--run",
        action="append",
        dest="adopted_runs",  # `run` is the command's own function (bertlab.cli)
        default=[],
        metavar="VARIANT/COLUMN/SEED=RUN",
        help="the run folder (in the runs folder) of one of the suite's runs, e.g. cat4/upos/0=pilot-cat4 (repeatable; "
        "every run of the suite needs one, unless --partial)",
    )
    a.add_argument(
        "--partial",
        action="store_true",
        help="adopt the runs given and leave the plan's other runs out (a suite still under way); the record says "
        "how many of the plan it holds",
    )
    sub.add_parser("list", help="the suites in the runs folder")
    s = sub.add_parser("status", help="a suite's progress: variant x task, runs finished of all")
    s.add_argument("suite", help="suite id, as `bertlab ablate list` shows it")
    c = sub.add_parser("collect", help="write a suite's tidy results table (CSV) and its record (JSON)")
    c.add_argument("suite", help="suite id")
    c.add_argument(
        "--out",
        default="",
        help="folder for <table>.csv and <table>.json (default: the suite's own folder in the runs folder)",
    )
    c.add_argument(
        "--replace",
        action="store_true",
        help="write over a <table>.csv already in --out (e.g. a committed set in results/ablations)",
    )
    c.add_argument(
        "--into",
        default="",
        metavar="CSV",
        help="instead of a new set: replace the columns this suite ran in a committed <table>.csv with its rows "
        "(the record beside it keeps the runs replaced and how each column was made)",
    )
    pl = sub.add_parser(
        "pool",
        help="add a set whose models were pretrained again with the same recipe to a committed set: its cells "
        "then hold both pretraining runs' seeds (columns fine-tuned another way stay on record, out of the CSV)",
    )
    pl.add_argument("csv", help="the committed <table>.csv that grows")
    pl.add_argument("other", help="the other set's <table>.csv (its .json beside it)")
    r = sub.add_parser("report", help="our rows beside the paper's, with a verdict per row, from a results CSV")
    r.add_argument("csv", help="a <table>.csv written by `collect`")
    pp = sub.add_parser("paper", help="the paper's numbers for a table")
    pp.add_argument("table", choices=sorted(PAPER), help="which of the paper's tables")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")


def spec_from_args(args: argparse.Namespace) -> planning.SuiteSpec:
    """The suite `bertlab ablate run|estimate` arguments describe: what they leave out comes from
    SuiteSpec's defaults, or with --committed-recipe from the table's committed set (planning.suggested_spec)."""
    base = planning.suggested_spec(args.table) if args.committed_recipe else planning.SuiteSpec(args.table)

    def given(field: str, value):
        return getattr(base, field) if value is None else value

    budget_tokens = given("budget_tokens", args.budget_tokens)
    if args.budget_s is not None and args.budget_tokens is None:
        budget_tokens = 0  # a wall-clock budget asked for replaces the recipe's tokens
    recipes = None if args.task_recipe is None else tuple(planning.parse_task_recipe(t) for t in args.task_recipe)
    if args.task_feature_lr is not None:
        task_feature_lrs = planning.parse_task_feature_lrs(",".join(args.task_feature_lr))
    else:  # a --feature-lr typed alone is every task's taggers' rate, not only the tasks the recipe leaves to it
        task_feature_lrs = () if args.feature_lr is not None else base.task_feature_lrs
    return planning.SuiteSpec(
        table=args.table,
        tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()) or base.tasks,
        seeds=given("seeds", args.seeds),
        size=given("size", args.size),
        budget_s=given("budget_s", args.budget_s),
        budget_tokens=budget_tokens,
        grid=planning.parse_grid(args.grid) if args.grid else base.grid,
        model=args.model,
        data=args.data,
        corpus=args.corpus or base.corpus,
        max_train_examples=given("max_train_examples", args.max_train_examples),
        max_eval_examples=given("max_eval_examples", args.max_eval_examples),
        epochs=given("epochs", args.epochs),
        finetune_lr=given("finetune_lr", args.lr),
        feature_lr=given("feature_lr", args.feature_lr),
        task_recipes=given("task_recipes", recipes),
        task_feature_lrs=task_feature_lrs,
        threads=given("threads", args.threads),
        device=args.device,
        name=args.name,
        overrides=given("overrides", None if args.set is None else tuple(args.set)),
        reuse=tuple(_reuse_entry(r) for r in args.reuse),
        row_models=tuple(_row_model_entry(r) for r in args.row_model),
    )


def _adopted_entry(text: str, root: Path) -> tuple[tuple[str, str, int], Path]:
    key, sep, run = text.partition("=")
    parts = key.strip().split("/")
    if not sep or not run.strip() or len(parts) != 3 or not parts[2].strip().isdigit():
        raise InputError(f"--run {text!r}: write VARIANT/COLUMN/SEED=RUN, e.g. cat4/upos/0=pilot-cat4")
    path = Path(run.strip()).expanduser()
    return (parts[0].strip(), parts[1].strip(), int(parts[2])), path if path.is_absolute() else root / path


def _reuse_entry(text: str) -> tuple[str, str]:
    variant, sep, job = text.partition("=")
    if not sep or not variant.strip() or not job.strip():
        raise InputError(f"--reuse {text!r}: write VARIANT=JOB_ID, e.g. mlm_nsp=t5-mlm_nsp-20261125-195231")
    return variant.strip(), job.strip()


def _row_model_entry(text: str) -> tuple[str, str]:
    variant, sep, folder = text.partition("=")
    if not sep or not variant.strip() or not folder.strip():
        raise InputError(f"--row-model {text!r}: write VARIANT=FOLDER, e.g. bert=runs/succ-bert/model")
    return variant.strip(), str(Path(folder.strip()).expanduser().resolve())


def _find(registry: JobRegistry, suite: str) -> dict:
    if not suite or "/" in suite or suite.startswith("."):
        raise InputError(f"{suite!r} is not a suite id; `bertlab ablate list` shows them")
    record = ab.read_suite(ab.suites_root(registry) / suite)
    if record is None:
        raise InputError(f"no suite {suite!r} in {ab.suites_root(registry)}; `bertlab ablate list` shows them")
    return record


def _print_table(rows: list[dict]) -> None:
    if not rows:
        return
    keys = list(rows[0])
    widths = {k: max(len(str(k)), *(len(str(r.get(k, ""))) for r in rows)) for k in keys}
    print("  ".join(f"{k:<{widths[k]}}" for k in keys))
    for r in rows:
        print("  ".join(f"{str(r.get(k, '')):<{widths[k]}}" for k in keys))


def run(args: argparse.Namespace) -> int:
    """`bertlab ablate ...`: call bertlab.ablations (suites, estimate, reuse, results) and print text or `--json`."""
    commands = {
        "run": _run_or_estimate,
        "estimate": _run_or_estimate,
        "list": _list,
        "status": _status,
        "collect": _collect,
        "report": _report,
        "pool": _pool,
        "adopt": _adopt,
    }
    return commands.get(args.ablate_command, _paper)(args, JobRegistry(args.runs))


def _run_or_estimate(args: argparse.Namespace, registry: JobRegistry) -> int:
    spec = spec_from_args(args)
    existing = Path(args.collect) / f"{spec.table}.csv" if getattr(args, "collect", "") else None
    if existing is not None and existing.is_file():  # said before anything is queued, not hours later
        raise InputError(
            f"--collect {args.collect}: {existing} already holds a result set (a committed one is the page's); "
            "give another folder, then `bertlab ablate collect SUITE --into` merges columns deliberately"
        )
    if args.reuse_matching:
        spec = reuse.with_matching_reuse(spec, registry)
    for variant, job in spec.reuse:
        print(f"{variant}: reuses pretraining job {job}", file=sys.stderr)
    if getattr(args, "no_estimate", False):
        return _launch(args, spec, registry, None)
    est = estimate.estimate_suite(spec, registry=registry, progress=_say_estimating)
    if args.ablate_command == "estimate":
        if args.json:
            print(json.dumps(est.to_dict()))
        else:
            _print_table(est.rows())
            print(est.text)
        return 0
    return _launch(args, spec, registry, est)


def _launch(
    args: argparse.Namespace, spec: planning.SuiteSpec, registry: JobRegistry, est: estimate.SuiteEstimate | None
) -> int:
    """`run`: queue the suite (estimated as `est`, or not at all with --no-estimate), then --wait/--collect."""
    suite_dir = ab.launch(spec, registry, estimate=est is not None)
    record = ab.read_suite(suite_dir)
    if args.json:
        print(json.dumps({"suite": record["id"], "dir": str(suite_dir), "jobs": len(record["runs"])}))
    else:
        how_long = est.text if est is not None else "not estimated: --no-estimate"
        print(f"suite {record['id']}: {len(record['runs'])} jobs queued in {registry.root} ({how_long})")
        print(f"follow it with `bertlab ablate status {record['id']}` or on the Ablations page")
    if args.wait or args.collect:
        return _wait_and_collect(args, record, registry)
    return 0


def _say_estimating(job: str) -> None:
    """On stderr (stdout stays clean for --json): which job the estimate is busy with, since counting its
    tokens and timing its training step take seconds to a minute each on a CPU."""
    print(
        f"estimating {job}: counting its tokens and timing a training step on this machine "
        "(unless an earlier run measured one)...",
        file=sys.stderr,
        flush=True,
    )


def _wait_and_collect(args: argparse.Namespace, record: dict, registry: JobRegistry) -> int:
    """`run --wait [--collect DIR]`: block until the suite's runs have ended, then write its results."""
    t0 = time.monotonic()

    def report(runs: list[ab.SuiteRun]) -> None:
        done = sum(r.state == "finished" for r in runs)
        active = sum(r.state in ("preparing", "running") for r in runs)
        print(f"[{time.monotonic() - t0:6.0f} s] {done}/{len(runs)} runs finished, {active} running", flush=True)

    runs = ab.wait(record, registry, max_s=args.wait_max_s, report=None if args.json else report)
    left = [r for r in runs if r.state not in ab.ENDED]
    if left:
        print(
            f"{len(left)} runs not ended (still running, queued, or waiting for a failed job); they go on",
            file=sys.stderr,
        )
    _print_failed(runs, file=sys.stderr)
    if args.collect:
        _write_results(record, args.collect, registry, as_json=args.json)
    return 0 if not left and all(r.state == "finished" for r in runs) else 1


def _print_failed(runs: list[ab.SuiteRun], file=None) -> None:
    for r in runs:
        if r.state in ("failed", "missing"):
            print(f"{r.job}: {r.state}" + (f" ({r.error})" if r.error else ""), file=file)


def _list(args: argparse.Namespace, registry: JobRegistry) -> int:
    suites = ab.list_suites(registry)
    if args.json:
        print(json.dumps([{k: s.get(k) for k in ("id", "table", "created", "dir")} for s in suites]))
        return 0
    for s in suites:
        runs = ab.suite_runs(s, registry)
        done = sum(r.state == "finished" for r in runs)
        print(f"{s['id']:<36} {s['table']:<7} {done}/{len(runs)} runs finished")
    if not suites:
        print(f"no suites in {ab.suites_root(registry)}; start one with `bertlab ablate run table5`")
    return 0


def _status(args: argparse.Namespace, registry: JobRegistry) -> int:
    record = _find(registry, args.suite)
    runs = ab.suite_runs(record, registry)
    matrix = ab.progress_matrix(record, runs)
    if args.json:
        print(json.dumps({"suite": record["id"], "matrix": matrix, "runs": [r.__dict__ for r in runs]}, default=str))
        return 0
    _print_table(matrix)
    _print_failed(runs)
    return 0


def _collect(args: argparse.Namespace, registry: JobRegistry) -> int:
    record = _find(registry, args.suite)
    if not args.into:
        out = args.out or record["dir"]
        existing = Path(out) / f"{record['table']}.csv"
        if args.out and existing.is_file() and not args.replace:  # it wrote over the committed set unasked
            raise InputError(
                f"{existing} already holds a result set; add --replace to write over it, --into {existing} to "
                "merge this suite's columns into it, or give another --out"
            )
        _write_results(record, out, registry, as_json=args.json)
        return 0
    csv_path, json_path, columns = merge.merge_columns(args.into, record, registry)
    print(
        json.dumps({"csv": str(csv_path), "json": str(json_path), "columns": columns})
        if args.json
        else f"{', '.join(columns)} merged into {csv_path} from suite {record['id']} (record: {json_path})"
    )
    return 0


def _adopt(args: argparse.Namespace, registry: JobRegistry) -> int:
    entries = [_adopted_entry(t, registry.root) for t in args.adopted_runs]
    keys = [k for k, _ in entries]
    if len(set(keys)) < len(keys):
        twice = next(k for k in keys if keys.count(k) > 1)
        raise InputError(f"--run names {'/'.join(map(str, twice))} twice")
    suite_dir = adopt.adopt(spec_from_args(args), dict(entries), registry, partial=args.partial)
    record = ab.read_suite(suite_dir)
    print(
        json.dumps({"suite": record["id"], "dir": str(suite_dir), "runs": len(record["runs"])})
        if args.json
        else f"suite {record['id']}: {len(record['runs'])} runs adopted; `bertlab ablate collect {record['id']}` "
        "writes its results (--into CSV merges its columns into a committed set)"
    )
    return 0


def _pool(args: argparse.Namespace, registry: JobRegistry) -> int:
    csv_path, json_path, columns = merge.pool_sets(args.csv, args.other)
    print(
        json.dumps({"csv": str(csv_path), "json": str(json_path), "columns": columns})
        if args.json
        else f"{', '.join(columns)} of {args.other} pooled into {csv_path} (record: {json_path})"
    )
    return 0


def _write_results(record: dict, out: str, registry: JobRegistry, as_json: bool) -> None:
    """`collect` (and `run --collect`): write the suite's CSV and record, warn of rows still on the plateau."""
    csv_path, json_path = results.write_results(record, out, registry)
    rows = results.read_results(csv_path)
    n = len(rows)
    if plateau := comparison.still_on_plateau(rows, results.results_meta(json_path)):
        print(comparison.plateau_text(record["table"], plateau), file=sys.stderr)
    print(
        json.dumps({"csv": str(csv_path), "json": str(json_path), "rows": n})
        if as_json
        else f"{n} rows -> {csv_path} (record: {json_path})"
    )


def _report(args: argparse.Namespace, registry: JobRegistry) -> int:
    rows = results.read_results(args.csv)
    table = rows[0]["table"] if rows else ""
    if table not in PAPER:
        raise InputError(f"{args.csv}: no rows of a known table")
    vs = comparison.verdicts(table, rows)
    if args.json:
        print(json.dumps([v.__dict__ for v in vs]))
        return 0
    _print_table(
        [
            {
                "variant": v.variant,
                "task": v.task,
                "metric": v.metric,
                "ours": f"{v.ours:.1f} +- {v.ours_std:.1f}",
                "paper": "" if v.paper is None else v.paper,
                "verdict": v.text,
            }
            for v in vs
        ]
    )
    return 0


def _paper(args: argparse.Namespace, registry: JobRegistry) -> int:
    """`bertlab ablate paper TABLE`: the paper's numbers, with the citation."""
    table = PAPER[args.table]
    if args.json:
        print(json.dumps({"citation": CITATION, **table.__dict__}))
        return 0
    print(f"{table.title} ({CITATION})")
    _print_table([{"variant": label, **dict(zip(table.columns, vals, strict=True))} for _, label, vals in table.rows])
    return 0
