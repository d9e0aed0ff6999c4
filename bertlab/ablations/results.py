"""What the ablation suites found, as tidy result rows and the files they are kept in: collecting a suite's
rows from its finished runs, writing and reading the CSV and the JSON record beside it, the reading
(<table>.md) its authors wrote, and where the committed result sets live. The comparison with the paper is
bertlab.ablations.comparison's; a result set in words, bertlab.ablations.describe's.

Tidy results (one CSV per table): table, variant, task, metric, value, seed, run. Values are in the
paper's units: percent for accuracy / F1 / correlations, plain numbers for perplexity. Beside each
CSV: <table>.json (the suite's settings, commit, hardware) and, for a committed set, <table>.md (what
it shows, in words).

Torch-free: imports bertlab.ablations' paper (shapes, the citation), suites and tables, atomic, errors,
jobs, model_card (reading a run's card), runfolder.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

from bertlab.ablations.paper import CITATION, PAPER, encoder_weights
from bertlab.ablations.suites import suite_runs
from bertlab.ablations.tables import TABLES
from bertlab.atomic import write_json_atomic
from bertlab.errors import InputError
from bertlab.jobs.registry import JobRegistry
from bertlab.storage.model_card import read_card
from bertlab.storage.runfolder import REPO_ROOT, model_dir, read_metrics

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
    return sorted(rows, key=lambda r: encoder_weights(str(r["variant"])) or 0)


def model_records(record: dict, registry: JobRegistry | None = None) -> dict[str, dict]:
    """variant -> what its model is, from the model card its own pretraining run wrote (size, tokens,
    steps, training seconds); for a table that pretrains nothing, the probed model's card, for every row."""
    registry = registry or JobRegistry()
    spec = record.get("spec") or {}
    keep = ("name", "size", "objective", "steps", "tokens", "train_time_s", "total_tokens", "total_train_time_s")
    table = TABLES.get(str(record.get("table")))
    if table is not None and not table.pretrains:
        own = {str(v): str(folder) for v, folder in spec.get("row_models") or ()}
        shared = Path(spec.get("model") or REPO_ROOT / "checkpoints" / "bertlab-mini").expanduser()
        cards = {
            r["variant"]: read_card(Path(own[r["variant"]]) if r["variant"] in own else shared) for r in record["runs"]
        }
        return {v: {k: card[k] for k in keep if k in card} for v, card in cards.items() if card}
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
    meta["citation"] = CITATION if table in PAPER else ""  # the successors' papers: bertlab.ablations.successors
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


def results_note(csv_path: str | Path) -> str:
    """What a result set shows, in words (where it agrees with the paper, where not, and why): the
    <table>.md beside its CSV, as its authors wrote it after reading the numbers ('' when there is none)."""
    try:
        return Path(csv_path).with_suffix(".md").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


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
