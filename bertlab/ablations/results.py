"""What the ablation suites found: tidy result rows, the CSV/JSON files they are kept in, and the
comparison with the paper (means over seeds, verdicts on the direction of each difference, the
size trend of Table 6).

Tidy results (one CSV per table): table, variant, task, metric, value, seed, run. Values are in the
paper's units: percent for accuracy / F1 / correlations, plain numbers for perplexity. Beside each
CSV: <table>.json (the suite's settings, commit, hardware) and, for a committed set, <table>.md (what
it shows, in words).

Torch-free: imports bertlab.ablations' suites, tables and paper, bertlab.finetune.tasks (each
task's metrics), atomic, errors, jobs, model_card (reading a run's card), runfolder.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from bertlab.ablations.paper import CITATION, PAPER, PAPER_COLUMN, our_label, parse_shape
from bertlab.ablations.suites import suite_runs
from bertlab.ablations.tables import DEFAULT_GRID, FEATURE_LR, TABLES
from bertlab.atomic import write_json_atomic
from bertlab.errors import InputError
from bertlab.finetune.tasks import get_task
from bertlab.jobs.registry import JobRegistry
from bertlab.model_card import read_card
from bertlab.runfolder import REPO_ROOT, model_dir, read_metrics

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


def _paper_units(metric: str, value: float) -> float:
    return round(100.0 * value, 3) if metric in PERCENT_METRICS else round(value, 4)


def collect(record: dict, registry: JobRegistry | None = None) -> list[dict]:
    """The tidy rows of every finished run of the suite (pretraining: held-out MLM / NSP scores)."""
    rows = []
    for r in suite_runs(record, registry):
        if r.state != "finished":
            continue
        for metric, value in sorted(r.metrics.items()):
            if not isinstance(value, (int, float)) or metric.endswith("loss") or metric in ("train_s", "time"):
                continue
            rows.append(
                {
                    "table": record["table"],
                    "variant": r.variant,
                    "task": r.column,
                    "metric": metric,
                    "value": _paper_units(metric, float(value)),
                    "seed": r.seed,
                    "run": r.job,
                }
            )
    return in_table_order(record["table"], rows)


def in_table_order(table: str, rows: list[dict]) -> list[dict]:
    """`rows` in the order the table shows them: as they ran, but a shape grid's (Table 6) from the
    smallest shape up, as the paper's table goes (shapes of equal size keep their order), so its first
    row, the one the others are compared with, is the smallest whatever order the suite ran them in."""
    spec = TABLES.get(table)
    if spec is None or not spec.shape_grid:
        return rows
    return sorted(rows, key=lambda r: _params(str(r["variant"])) or 0)


def model_records(record: dict, registry: JobRegistry | None = None) -> dict[str, dict]:
    """variant -> what its model is, from the model card its own pretraining run wrote (size, tokens,
    steps, training seconds); for a table that pretrains nothing, the probed model's card, for every row."""
    registry = registry or JobRegistry()
    spec = record.get("spec") or {}
    keep = ("name", "size", "objective", "steps", "tokens", "train_time_s", "total_tokens", "total_train_time_s")
    table = TABLES.get(str(record.get("table")))
    if table is not None and not table.pretrains:
        card = read_card(Path(spec.get("model") or REPO_ROOT / "checkpoints" / "bertlab-mini").expanduser())
        return {r["variant"]: {k: card[k] for k in keep if k in card} for r in record["runs"]} if card else {}
    out = {}
    for r in suite_runs(record, registry):
        if r.column == "pretraining" and r.state == "finished":
            card = read_card(model_dir(registry.root / r.job))
            if card:
                out[r.variant] = {k: card[k] for k in keep if k in card}
    return out


def pretraining_curves(record: dict, registry: JobRegistry | None = None) -> dict[str, list[dict]]:
    """variant -> its pretraining run's held-out scores so far, one point per evaluation:
    {"tokens", "mlm_acc" (%), and "nsp_acc" (%) where it has NSP}; running and unfinished runs too."""
    registry = registry or JobRegistry()
    out = {}
    for r in record.get("runs") or []:
        if r.get("column") != "pretraining":
            continue
        points = [
            {"tokens": int(m["tokens"]), **{k: round(100 * float(m[k]), 2) for k in ("mlm_acc", "nsp_acc") if k in m}}
            for m in read_metrics(registry.root / str(r.get("job")))
            if m.get("split") == "eval" and "tokens" in m and "mlm_acc" in m
        ]
        if points:
            out[r["variant"]] = points
    return out


def left_to_right(table: str, grid: tuple = ()) -> set[str]:
    """The table's rows whose pretraining is left-to-right: their held-out score is next-word accuracy."""
    spec = TABLES.get(table)
    if spec is None or not spec.pretrains:
        return set()
    return {v.key for v in spec.variants(grid) if "data.objective=ltr" in (v.pretrain or ())}


def compared_with_baseline(table: str, task: str, variant: str) -> bool:
    """Whether a row's cell is read as a difference from the baseline row's: not a left-to-right row's
    pretraining score, which is next-token accuracy, another task than the masked-LM rows'."""
    return not (task == "pretraining" and variant in left_to_right(table))


def what_rows_are(meta: dict) -> dict[str, str]:
    """variant -> what our model is, in a few words ('tiny, 4.0M tokens'), from the cards recorded
    beside the results (`models` in <table>.json); for an older set without them, from its suite's
    size and budget ('tiny, 8 min'). Rows that share a model (+ BiLSTM) get its words too."""
    spec = meta.get("spec") or {}
    models = meta.get("models") or {}
    table = TABLES.get(str(spec.get("table") or meta.get("table")))
    out = {}
    for key, card in models.items():
        tokens = card.get("total_tokens") or card.get("tokens")
        size = "" if table is not None and table.shape_grid else str(card.get("size", "?"))  # the shape names it
        # a test suite's 20k tokens are not '0.0M'
        amount = "" if not tokens else f"{tokens / 1e6:.1f}M" if tokens >= 100_000 else f"{tokens / 1e3:.0f}k"
        out[key] = ", ".join(x for x in (size, f"{amount} tokens" if amount else "") if x)
    if table is not None and table.pretrains:
        fallback = f"{spec.get('size', '?')}, {pretraining_budget(spec).removeprefix('for ').removeprefix('on ')}"
        for v in table.variants(tuple(tuple(g) for g in spec.get("grid") or ())):
            out.setdefault(v.key, out.get(v.shares or "", fallback))
    return out


PLATEAU_EXIT = 20.0  # held-out masked-token accuracy (%) a masked-LM variant must pass to have left the plateau
GUESS_EXIT = 8.0  # held-out accuracy (%) past which a row has left the unigram guess (~5%), though not the plateau


def still_on_plateau(rows: list[dict], meta: dict) -> dict[str, float]:
    """variant -> its held-out masked-token accuracy (%, mean over runs) where a masked-LM variant is
    under PLATEAU_EXIT: a model that has learned little beyond word frequencies, whose comparisons
    say little about the paper's. Left-to-right variants score next-token prediction and are not
    judged; neither is a table that pretrains nothing."""
    spec = meta.get("spec") or {}
    table = TABLES.get(str(spec.get("table") or meta.get("table") or (rows[0]["table"] if rows else "")))
    if table is None or not table.pretrains:
        return {}
    ltr = left_to_right(table.key, tuple(tuple(g) for g in spec.get("grid") or ()))
    scores: dict[str, list[float]] = {}
    for r in rows:
        if r["task"] == "pretraining" and r["metric"] == "mlm_acc" and r["variant"] not in ltr:
            scores.setdefault(r["variant"], []).append(float(r["value"]))
    means = {v: sum(x) / len(x) for v, x in scores.items()}
    return {v: round(m, 1) for v, m in means.items() if m < PLATEAU_EXIT}


def plateau_text(table: str, plateau: dict[str, float]) -> str:
    """In words: which rows are still on the plateau, and what it means for reading them."""
    listed = "; ".join(f"{our_label(table, v)}: {acc:.1f}%" for v, acc in plateau.items())
    if min(plateau.values()) >= GUESS_EXIT:
        meaning = (
            "These have learned some context (guessing each word by how common it is scores about 5%), but less "
            "than a model past the line, so their comparisons are weaker evidence about what the paper found."
        )
    else:
        meaning = (
            "These models have learned little beyond how common each word is, so their comparisons say little "
            "about what the paper found."
        )
    return (
        f"Still on the masked-LM plateau (held-out masked-token accuracy under {PLATEAU_EXIT:.0f}%): {listed}. "
        f"{meaning} Pretrain longer: the shipped mini model passed 20% after about 21M tokens."
    )


def rows_without_results(rows: list[dict], runs: list[dict]) -> dict[str, str]:
    """variant -> why a row the suite ran has no results yet, from its runs' states (dicts with variant,
    column and state, as a result set's JSON or `suites.suite_runs` hold them): a failed pretraining run
    leaves its row empty for good, which the table alone would not say."""
    have = {r["variant"] for r in rows}
    by_variant: dict[str, list[dict]] = {}
    for r in runs:
        if r.get("variant") and r["variant"] not in have:
            by_variant.setdefault(str(r["variant"]), []).append(r)
    out: dict[str, str] = {}
    for v, mine in by_variant.items():
        if any(x.get("column") == "pretraining" and x.get("state") == "failed" for x in mine):
            out[v] = "its pretraining run failed, so none of its fine-tuning runs ran"
        elif any(x.get("state") in ("failed", "cancelled", "missing") for x in mine):
            out[v] = "its runs failed, were stopped or were deleted"
        else:
            out[v] = "its runs have not finished"
    return out


def write_results(record: dict, out_dir: str | Path, registry: JobRegistry | None = None) -> tuple[Path, Path]:
    """<table>.csv (tidy rows) and <table>.json (suite spec, commit, hardware, run ids) under out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = record["table"]
    csv_path, json_path = out_dir / f"{table}.csv", out_dir / f"{table}.json"
    write_rows(csv_path, collect(record, registry))
    meta = {
        k: record.get(k)
        for k in ("id", "table", "spec", "created", "commit", "hardware", "base_recipe", "recipe_changes")
    }
    meta["citation"] = CITATION
    meta["models"] = model_records(record, registry)
    meta["curves"] = pretraining_curves(record, registry)
    meta["collected"] = time.time()
    meta["runs"] = [{**r, "state": s.state} for r, s in zip(record["runs"], suite_runs(record, registry), strict=True)]
    write_json_atomic(json_path, meta, indent=1)
    return csv_path, json_path


def write_rows(csv_path: str | Path, rows: list[dict]) -> None:
    """A results CSV of tidy `rows` (the one writer of the format; `read_results` reads it back)."""
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(rows)


def read_results(path: str | Path) -> list[dict]:
    """Tidy rows from a results CSV (values as floats, seeds as ints); a clear error for a bad file."""
    path = Path(path)
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = set(CSV_COLUMNS[:6]) - set(reader.fieldnames or ())
            if missing:
                raise InputError(f"{path}: not an ablation results file (no {', '.join(sorted(missing))} column)")
            rows = []
            for i, row in enumerate(reader, 2):
                try:
                    rows.append({**row, "value": float(row["value"]), "seed": int(row["seed"])})
                except (TypeError, ValueError):
                    raise InputError(f"{path}:{i}: value and seed must be numbers") from None
            return rows
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not a UTF-8 text file") from None


def results_root() -> Path:
    """The result sets shipped with the app: results/ablations, or $BERTLAB_ABLATION_RESULTS."""
    env = os.environ.get("BERTLAB_ABLATION_RESULTS")
    return Path(env).expanduser() if env else REPO_ROOT / "results" / "ablations"


def results_meta(json_path: str | Path) -> dict:
    """The record beside a results CSV: suite spec, commit, hardware, each row's model ({} when there
    is none or it does not parse)."""
    try:
        meta = json.loads(Path(json_path).read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def results_spec(json_path: str | Path) -> dict:
    """The suite spec recorded beside a results CSV ({} when there is none or it does not parse)."""
    spec = results_meta(json_path).get("spec")
    return spec if isinstance(spec, dict) else {}


def _model_tokens(models: dict | None) -> str:
    """' after 52.9M tokens of pretraining' for the one model a record's rows fine-tuned, '' when unknown."""
    totals = {m.get("total_tokens") or m.get("tokens") for m in (models or {}).values() if isinstance(m, dict)}
    totals.discard(None)
    return f" after {totals.pop() / 1e6:.1f}M tokens of pretraining" if len(totals) == 1 else ""


def pretraining_budget(spec: dict) -> str:
    """Each variant's pretraining budget as the suite ran it ("for 8 min", "on 4M tokens"): its budget_tokens or
    budget_s, unless an override
    (`--set train.max_time_s=0 --set train.max_tokens=4000000`, the last one wins) replaced it."""
    tokens = float(spec.get("budget_tokens") or 0)
    budget = {"max_time_s": 0.0 if tokens else float(spec.get("budget_s") or 0), "max_steps": 0.0, "max_tokens": tokens}
    for override in spec.get("overrides") or ():
        key, _, value = str(override).partition("=")
        if key.strip().removeprefix("train.") in budget:
            try:
                budget[key.strip().removeprefix("train.")] = float(value)
            except ValueError:
                continue
    parts = []
    if budget["max_time_s"]:
        parts.append(f"for {budget['max_time_s'] / 60:.0f} min")
    if budget["max_tokens"]:
        parts.append(f"on {budget['max_tokens'] / 1e6:g}M tokens")
    if budget["max_steps"]:
        parts.append(f"for {budget['max_steps']:.0f} steps")
    return " or ".join(parts) + (" (whichever came first)" if len(parts) > 1 else "")


def describe_spec(
    spec: dict,
    recipe_changes: list[str] | tuple[str, ...] = (),
    merged: list[dict] | tuple[dict, ...] = (),
    models: dict | None = None,
    pooled: list[dict] | tuple[dict, ...] = (),
) -> str:
    """One line on how a result set was made, from its suite spec, what its pretraining changed in the base
    recipe (`recipe_changes` of its suite record: KEY=VALUE overrides) and the columns re-run later by
    other suites (`merged` of its record, see bertlab.ablations.merge), each said with its own recipe, and
    only for the columns no later re-run replaced.
    `models` (the record's): a table that probes one pretrained model names it with how far it had trained,
    which stays true when the shipped model trains on. `pooled` (the record's, see bertlab.ablations.merge):
    the sets of the same recipe pretrained again whose rows joined these."""
    parts = []
    table = TABLES.get(str(spec.get("table")))
    if table is not None and not table.pretrains:
        trained = _model_tokens(models)
        parts.append(
            f"model {spec.get('model') or ('bertlab-mini' if trained else 'the shipped bertlab-mini')}{trained}"
        )
    else:
        rows = (
            f"{len(spec.get('grid') or DEFAULT_GRID)} shapes"
            if table is not None and table.shape_grid
            else f"{spec.get('size', '?')} models"
        )
        parts.append(
            f"{rows} pretrained {pretraining_budget(spec)} each with the shipped model's recipe"
            + (f" (changed: {', '.join(recipe_changes)})" if recipe_changes else "")
        )
    # column -> the re-run that makes it now (the last one merged for it); the set's own spec makes the rest
    maker = {str(c): i for i, m in enumerate(merged) for c in m.get("columns") or ()}
    both = table is not None and table.feature_columns  # a task makes two columns: TASK and TASK-feature
    tasks = [
        t
        for t in spec.get("tasks") or (table.default_tasks if table is not None else ())
        if not ({t, f"{t}-feature"} if both else {t}) <= maker.keys()
    ]
    features = table is not None and table.has_frozen_features
    if tasks or not merged:  # a set whose every column was re-run later says only how the re-runs were made
        parts.append(_finetuning_text(spec, tasks, features))
    for i, m in enumerate(merged):  # each re-run for the columns it still makes: a later one replaced the rest
        columns = list(
            dict.fromkeys(str(c).removesuffix("-feature") for c in m.get("columns") or () if maker[str(c)] == i)
        )
        if not columns:
            continue
        parts.append(
            f"{', '.join(columns)} re-run later (suite {m.get('id', '?')}"
            + (", runs started by hand and adopted" if m.get("adopted") else "")
            + "): "
            + _finetuning_text(m.get("spec") or {}, columns, features)
        )
    for p in pooled:
        columns = [str(c) for c in p.get("columns") or () if c != "pretraining"]
        how = (
            "and seed: the two differ only through the arithmetic of the hardware, which over thousands of steps "
            "makes other models"
            if p.get("same_seed")
            else "and another seed"
        )
        parts.append(
            f"every model pretrained a second time with the same recipe {how} (set {p.get('id', '?')}, on "
            f"{p.get('hardware') or 'another machine'}): the pretraining scores and {', '.join(columns)} pool both "
            "runs' seeds, so their spread includes how much the pretraining run varies"
        )
    said = "; ".join(parts) + "."
    return said[:1].upper() + said[1:]


def _finetuning_text(spec: dict, tasks: list[str], features: bool) -> str:
    """How a suite fine-tuned `tasks`: train and dev examples, epochs and rates (a task's own recipe where it
    has one; `features`: and its frozen-feature runs'), seeds."""
    n = f"up to {spec['max_train_examples']}" if spec.get("max_train_examples") else "all the"
    scored = f"up to {spec['max_eval_examples']}" if spec.get("max_eval_examples") else "all the"
    lr = spec.get("finetune_lr")
    own = [(task, epochs, rate) for task, epochs, rate in spec.get("task_recipes") or () if task in tasks]
    base_tasks = {t.removesuffix("-feature") for t in tasks}  # a frozen-feature column (Table 8) is its task's
    feature_lr = spec.get("feature_lr", FEATURE_LR)
    own_rates = [(t, r) for t, r in spec.get("task_feature_lrs") or () if t in base_tasks and r != feature_lr]
    rates = ", ".join(f"{r:g} for {t}" for t, r in own_rates)
    if len(own_rates) < len(base_tasks):
        rates += f", else {feature_lr:g}" if own_rates else f"{feature_lr:g}"
    frozen = f" (frozen features: {spec.get('epochs', '?')} epochs at {rates})" if features else ""
    if tasks and len(own) == len(tasks):  # every task its own recipe: the suite's epochs only set the features'
        general = frozen
    else:
        general = (
            f" for {spec.get('epochs', '?')} epochs"
            + (f" at learning rate {lr:g}" if isinstance(lr, (int, float)) else "")
            + frozen
        )
    return (
        f"fine-tuned on {n} train examples{general}"
        + "".join(f"; for {task} {epochs:g} epochs at {rate:g}" for task, epochs, rate in own)
        + f", {spec.get('seeds', '?')} seed{'' if spec.get('seeds') == 1 else 's'} each, scored on {scored} dev examples"
    )


def results_note(csv_path: str | Path) -> str:
    """What a result set shows, in words (where it agrees with the paper, where not, and why): the
    <table>.md beside its CSV, as its authors wrote it after reading the numbers ('' when there is none)."""
    try:
        return Path(csv_path).with_suffix(".md").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


FINDINGS = ("Where we agree", "Where we do not", "Why")  # the leads of a reading's findings paragraphs


@dataclass(frozen=True)
class Reading:
    """A reading in the three parts the page shows: `short`, what the table teaches in one paragraph (its
    "**In short:**" paragraph, else its first and a side set's "**What it shows:**"); `findings`, where it agrees with the paper, where not and why;
    `method`, the rest (budget, commands, tables, side studies), in the order written."""

    short: str
    findings: str
    method: str


def split_reading(note: str) -> Reading:
    """A reading (results_note) cut into its parts by the bold lead of each paragraph."""
    paragraphs = [p.strip() for p in note.split("\n\n") if p.strip()]

    def lead(paragraph: str) -> str:  # "**Where we agree with the paper** (6 of 12): ..." -> "Where we agree ..."
        return paragraph[2:].split("**")[0].split(":")[0].strip() if paragraph.startswith("**") else ""

    # its "In short" paragraph; a reading written before those: its first, and what a side set shows
    found = [i for i, p in enumerate(paragraphs) if lead(p) == "In short"]
    shown = found[:1] or [0, *(i for i, p in enumerate(paragraphs) if i and lead(p) == "What it shows")]
    rest = [p for i, p in enumerate(paragraphs) if i not in shown]
    return Reading(
        short="\n\n".join(paragraphs[i] for i in shown) if paragraphs else "",
        findings="\n\n".join(p for p in rest if lead(p).startswith(FINDINGS)),
        method="\n\n".join(p for p in rest if not lead(p).startswith(FINDINGS)),
    )


def results_files(root: str | Path) -> dict[str, Path]:
    """table -> CSV path of the result sets in a folder (e.g. results/ablations)."""
    root = Path(root)
    return {t: root / f"{t}.csv" for t in PAPER if (root / f"{t}.csv").is_file()}


def other_result_sets(root: str | Path, table: str) -> list[Path]:
    """A table's further result sets in a folder, beside its main one: `<table>-<what differs>.csv`
    (e.g. table6-lr5e-4.csv, the same suite at another pretraining learning rate), sorted by name."""
    return sorted(p for p in Path(root).glob(f"{table}-*.csv") if p.is_file())


def result_set_label(csv_path: str | Path) -> str:
    """How a committed result set is offered: the `label` of the record beside it (what differs from the
    table's main set), else its file name."""
    label = results_meta(Path(csv_path).with_suffix(".json")).get("label")
    return f"{label} ({Path(csv_path).name})" if isinstance(label, str) and label else Path(csv_path).name


@dataclass(frozen=True)
class Cell:
    """Our mean +- std over seeds for one variant, task column and metric."""

    variant: str
    task: str
    metric: str
    mean: float
    std: float
    n: int


def summarize(rows: list[dict]) -> list[Cell]:
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["variant"], r["task"], r["metric"]), []).append(float(r["value"]))
    return [
        Cell(v, t, m, statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0, len(xs))
        for (v, t, m), xs in groups.items()
    ]


def main_metric(table: str, task: str) -> str:
    """The metric a column is compared on: the paper's for its column, else the task's official one."""
    paper = PAPER[table]
    col = PAPER_COLUMN.get(table, {}).get(task)
    if task == "pretraining":
        return paper.metrics[paper.columns.index(col)] if col in paper.columns else "mlm_acc"
    spec = get_task(task.removesuffix("-feature"))
    if col in paper.columns and paper.metrics[paper.columns.index(col)] in spec.metrics:
        return paper.metrics[paper.columns.index(col)]
    return spec.main_metric  # a task that stands in for the paper's column (UPOS for NER) keeps its own metric


NO_CLEAR = "no clear difference"  # a difference within its noise (the larger std over seeds)


@dataclass(frozen=True)
class Verdict:
    """One variant on one column: the paper's difference from its baseline row, and ours."""

    variant: str
    task: str
    metric: str
    ours: float | None
    ours_std: float | None
    ours_delta: float | None  # variant - baseline, our means
    paper: float | None
    paper_delta: float | None
    agrees: bool | None  # same sign of the difference (None: no paper column, or the baseline row)
    text: str
    clear: bool | None = None  # our difference is beyond its noise (None: no difference computed)


def verdicts(table: str, rows: list[dict]) -> list[Verdict]:
    """Per variant and task column: does our difference from the baseline row go the paper's way?

    A difference smaller than both its noise (the baseline's and the variant's std over seeds) and
    0.5 points in the paper is 'no clear difference', which agrees with a paper difference under 0.5.
    A shape grid (Table 6), whose rows are our own, is read against the paper's size trend instead
    (`_shape_verdicts`)."""
    if table in TABLES and TABLES[table].shape_grid:
        return _shape_verdicts(table, rows)
    paper = PAPER[table]
    cells = {(c.variant, c.task, c.metric): c for c in summarize(rows)}
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    variants_ = list(dict.fromkeys([k for k, _, _ in paper.rows] + [r["variant"] for r in rows]))
    paper_rows = {k: vals for k, _, vals in paper.rows}
    out = []
    for task in tasks:
        metric = main_metric(table, task)
        col = PAPER_COLUMN.get(table, {}).get(task)
        ci = paper.columns.index(col) if col in paper.columns else None
        base = cells.get((paper.baseline, task, metric))
        for v in variants_:
            c = cells.get((v, task, metric))
            if c is None:
                continue
            p = paper_rows.get(v, (None,) * len(paper.columns))[ci] if ci is not None else None
            pb = paper_rows.get(paper.baseline, (None,) * len(paper.columns))[ci] if ci is not None else None
            p_delta = None if p is None or pb is None else round(p - pb, 2)
            o_delta, agrees, text, ours_flat = None, None, "", False
            if v == paper.baseline:
                text = "baseline row"
            elif base is None:
                text = "no baseline row in our results"
            elif not compared_with_baseline(table, task, v):
                text = "next-token accuracy, another task: not compared"
            else:
                o_delta, noise, how = _difference(c, base, metric)
                ours_flat = how == NO_CLEAR
                if p_delta is None:
                    text = f"ours {o_delta:+.1f}" + (" (within the noise)" if ours_flat else "")
                else:
                    paper_flat = abs(p_delta) < 0.5
                    if ours_flat or paper_flat:
                        agrees = ours_flat and paper_flat
                    else:
                        agrees = math.copysign(1, o_delta) == math.copysign(1, p_delta)
                    text = f"paper {p_delta:+.1f}, ours {o_delta:+.1f}{_spread(c, base, noise)}: {how}" + (
                        "; direction reproduced" if agrees else "; direction not reproduced"
                    )
            clear = None if o_delta is None else not ours_flat
            out.append(Verdict(v, task, metric, c.mean, c.std, o_delta, p, p_delta, agrees, text, clear))
    return out


def _spread(c: Cell, base: Cell, noise: float) -> str:
    """How a verdict writes the noise of a difference: ± the larger std over seeds, or that both rows are
    one run each (no spread is measured, so any difference counts as clear)."""
    return " (one run each)" if c.n == 1 and base.n == 1 else f" ± {noise:.1f}"


def _difference(c: Cell, base: Cell, metric: str) -> tuple[float, float, str]:
    """Our row's difference from the baseline row, its noise (the larger std over seeds), and what it
    says: 'no clear difference' (within the noise), else 'better' or 'worse' (perplexity: lower is better)."""
    delta = c.mean - base.mean
    noise = max(c.std, base.std)
    better = (delta < 0) if metric == "mlm_perplexity" else (delta > 0)
    return delta, noise, NO_CLEAR if abs(delta) <= noise else ("better" if better else "worse")


def _shape_verdicts(table: str, rows: list[dict]) -> list[Verdict]:
    """Table 6: each shape against our smallest (the baseline row, first in table order), read against
    the paper's finding that bigger is better: a bigger shape reproduces it when it is clearly better
    (beyond its noise); the paper's difference shown is from its smallest model to its largest. A shape
    of the baseline's size (other heads) is not judged: the paper has no size trend for it."""
    paper = PAPER[table]
    cells = {(c.variant, c.task, c.metric): c for c in summarize(rows)}
    shapes = list(dict.fromkeys(r["variant"] for r in in_table_order(table, rows)))
    out: list[Verdict] = []
    for task in dict.fromkeys(r["task"] for r in rows):
        metric = main_metric(table, task)
        col = PAPER_COLUMN.get(table, {}).get(task)
        ci = paper.columns.index(col) if col in paper.columns else None
        trend = None if ci is None else round(paper.rows[-1][2][ci] - paper.rows[0][2][ci], 2)
        base = cells.get((shapes[0], task, metric))
        for v in shapes:
            c = cells.get((v, task, metric))
            if c is None:
                continue
            if v == shapes[0] or base is None:
                text = "baseline row" if v == shapes[0] else "no baseline row in our results"
                out.append(Verdict(v, task, metric, c.mean, c.std, None, None, None, None, text))
                continue
            o_delta, noise, how = _difference(c, base, metric)
            ours = f"ours {o_delta:+.1f}{_spread(c, base, noise)}: {how}"
            if (_params(v) or 0) <= (_params(shapes[0]) or 0) or trend is None:
                text = ours + ("; the baseline's size, not judged" if trend is not None else "")
                out.append(Verdict(v, task, metric, c.mean, c.std, o_delta, None, None, None, text))
                continue
            agrees = how == "better"
            text = f"bigger: the paper {trend:+.1f} from its smallest model to its largest, {ours}; " + (
                "direction reproduced" if agrees else "direction not reproduced"
            )
            out.append(Verdict(v, task, metric, c.mean, c.std, o_delta, None, trend, agrees, text, how != NO_CLEAR))
    return out


def _size_columns(rows: list[dict]) -> dict[str, tuple[str, list[tuple[int, Cell]]]]:
    """Table 6's columns as "task (metric)" -> (the metric compared: held-out perplexity for pretraining,
    the task's main metric otherwise; each shape's cell with its encoder weights, smallest first)."""
    cells = summarize(rows)
    out = {}
    for task in dict.fromkeys(c.task for c in cells):
        metric = main_metric("table6", task) if task != "pretraining" else "mlm_perplexity"
        pts = [(p, c) for c in cells if c.task == task and c.metric == metric and (p := _params(c.variant))]
        out[f"{task} ({metric})"] = (metric, sorted(pts, key=lambda pc: pc[0]))
    return out


def size_trend(rows: list[dict]) -> dict[str, float]:
    """Table 6: Spearman's rank correlation between parameter count and each column's score."""
    return {
        col: _spearman([p for p, _ in pts], [c.mean for _, c in pts])
        for col, (_, pts) in _size_columns(rows).items()
        if len(pts) >= 3
    }


@dataclass(frozen=True)
class SizeBreak:
    """Where a column stops improving with size: a shape clearly worse (beyond both stds over seeds)
    than the best strictly smaller one."""

    column: str  # "task (metric)", as size_trend names it
    variant: str
    value: float
    smaller: str
    smaller_value: float


def size_breaks(rows: list[dict]) -> dict[str, list[SizeBreak]]:
    """Table 6: per column (held-out perplexity and each task's compared metric), every shape clearly
    worse than the best shape of fewer encoder weights; an empty list says the column gets better (or
    stays level) with every step in size. Shapes of one size (other heads) are not held against each
    other; a single run (perplexity) has no spread, so any rise counts."""
    out: dict[str, list[SizeBreak]] = {}
    for col, (metric, pts) in _size_columns(rows).items():
        lower = metric == "mlm_perplexity"
        breaks = []
        for p, c in pts:
            smaller = [d for q, d in pts if q < p]
            if not smaller:
                continue
            best = (min if lower else max)(smaller, key=lambda d: d.mean)
            delta = c.mean - best.mean
            if (delta > 0 if lower else delta < 0) and abs(delta) > max(c.std, best.std):
                breaks.append(SizeBreak(col, c.variant, c.mean, best.variant, best.mean))
        if len(pts) >= 2:
            out[col] = breaks
    return out


def _params(variant: str) -> int | None:
    shape = parse_shape(variant)
    return None if shape is None else shape[0] * 12 * shape[1] * shape[1]  # encoder weights; enough to rank shapes


def _spearman(x: list[float], y: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for rank, i in enumerate(order):
            r[i] = float(rank)
        return r

    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return round(num / den, 3) if den else 0.0
