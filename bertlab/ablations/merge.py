"""Folding a re-run column into a committed result set.

A column is often re-run after its table was committed, at a recipe that suits its task better (Table 7's
NER at more epochs, Table 5's SST-2 at a higher rate). `bertlab ablate collect SUITE --into
results/ablations/table7.csv` replaces the columns (tasks) that the later suite finished with its rows (a
column the set did not have joins it after the others), and the set's record (<table>.json) keeps how
each column was made:

- "runs": the runs behind every row of the CSV now (the replaced ones leave it);
- "merged": per merge, the suite's id, its columns, spec, commit, hardware and when it was collected;
- "replaced": per merge that replaced a column, the rows and runs it replaced, so the earlier numbers stay
  on record.

A column compares with the rest of its table only when it fine-tuned the same models, so a merge refuses a
suite of another table, or one whose models differ from the set's (Table 7: the same checkpoint; a table
that pretrains: the same pretraining jobs, which a suite reuses with `--reuse`).

`bertlab ablate pool results/ablations/table5.csv OTHER.csv` (`pool_sets`) adds a set whose models were
pretrained again with the same recipe: its rows join the cells that both sets fine-tuned alike, and the
record's "pooled" keeps which set, columns and models, and the other's rows left out.

Torch-free: imports bertlab.ablations.results, suites, tables, atomic, errors, jobs.
"""

from __future__ import annotations

import time
from pathlib import Path

from bertlab.ablations import results
from bertlab.ablations.suites import suite_runs
from bertlab.ablations.tables import FEATURE_LR, TABLES
from bertlab.atomic import write_json_atomic
from bertlab.errors import InputError
from bertlab.jobs.registry import JobRegistry

# What makes two model records the same model: a re-run of a column must fine-tune the very checkpoint
# (the same pretraining run: its name, objective and how far it trained).
_SAME_MODEL = ("name", "size", "objective", "steps", "tokens", "total_tokens")


def _model_key(model: dict) -> tuple:
    return tuple(model.get(k) for k in _SAME_MODEL)


def merge_columns(
    csv_path: str | Path, record: dict, registry: JobRegistry | None = None
) -> tuple[Path, Path, list[str]]:
    """Replace the columns of the committed set at `csv_path` that the suite `record` finished runs of with
    its rows; returns (csv, json, the columns merged). Raises InputError, changing nothing, when the set
    or its record is missing, the suite is of another table, has no finished fine-tuning run, has runs of
    those columns still to finish (or failed), or fine-tuned other models than the set's."""
    registry = registry or JobRegistry()
    csv_path = Path(csv_path)
    json_path = csv_path.with_suffix(".json")
    rows = results.read_results(csv_path)
    meta = results.results_meta(json_path)
    if not meta:
        raise InputError(f"{json_path}: no record beside {csv_path.name}; a merge keeps how each column was made there")
    table = str(record.get("table"))
    if meta.get("table") != table:
        raise InputError(f"suite {record.get('id')} ran {table}, but {csv_path} holds {meta.get('table')}")
    new_rows = [r for r in results.collect(record, registry) if r["task"] != "pretraining"]
    columns = list(dict.fromkeys(r["task"] for r in new_rows))
    if not columns:
        raise InputError(f"suite {record.get('id')} has no finished fine-tuning run to merge yet")
    states = [(r, s.state) for r, s in zip(record["runs"], suite_runs(record, registry), strict=True)]
    unfinished = [r["job"] for r, state in states if r.get("column") in columns and state != "finished"]
    if unfinished:
        raise InputError(
            f"{len(unfinished)} of suite {record.get('id')}'s runs of {', '.join(columns)} have not finished "
            f"(e.g. {unfinished[0]}); a column is replaced whole, so merge once they all have"
        )
    old_models, new_models = meta.get("models") or {}, results.model_records(record, registry)
    differ = sorted(v for v in new_models if v in old_models and _model_key(new_models[v]) != _model_key(old_models[v]))
    if differ:
        raise InputError(
            f"suite {record.get('id')} fine-tuned other models than {csv_path.name}'s for {', '.join(differ)}; "
            "a column re-run must fine-tune the set's own models (a table that pretrains: --reuse its jobs)"
        )
    new_runs = [{**r, "state": state} for r, state in states]
    old_rows = [r for r in rows if r["task"] in columns]
    old_runs = [r for r in meta.get("runs") or [] if r.get("column") in columns]
    if old_rows or old_runs:  # a column the set did not have yet replaces nothing
        gone = sorted({r["task"] for r in old_rows} | {r.get("column") for r in old_runs})
        entry = {"by": record.get("id"), "columns": gone, "rows": old_rows, "runs": old_runs}
        meta["replaced"] = [*(meta.get("replaced") or []), entry]
    meta["runs"] = [r for r in meta.get("runs") or [] if r.get("column") not in columns] + [
        r for r in new_runs if r.get("column") in columns
    ]
    for p in meta.get("pooled") or []:  # a replaced column no longer holds the other set's rows
        p["columns"] = [c for c in p.get("columns") or () if c not in columns]
    meta["merged"] = [
        *(meta.get("merged") or []),
        {
            **{k: record.get(k) for k in ("id", "spec", "created", "commit", "hardware")},
            **({"adopted": record["adopted"]} if record.get("adopted") else {}),  # plain runs (bertlab.ablations.adopt)
            "columns": columns,
            "collected": time.time(),
        },
    ]
    results.write_rows(csv_path, _in_place(rows, new_rows, columns))
    write_json_atomic(json_path, meta, indent=1)
    return csv_path, json_path, columns


def _in_place(rows: list[dict], new_rows: list[dict], columns: list[str]) -> list[dict]:
    """`rows` with each of `columns` replaced by its `new_rows` where the column stood (a column the set did
    not have goes last), so the table keeps its order of columns."""
    out: list[dict] = []
    for r in rows:
        if r["task"] not in columns:
            out.append(r)
        elif not any(o["task"] == r["task"] for o in out):
            out += [n for n in new_rows if n["task"] == r["task"]]
    return out + [n for n in new_rows if n["task"] not in {r["task"] for r in rows}]


# What makes two pretraining runs runs of the same recipe (their suite specs), so their rows can pool; the
# overrides must match too, but for the seed and settings that only change how a run goes
_SAME_PRETRAINING = ("table", "size", "budget_tokens", "corpus", "grid")
_HOW_A_RUN_GOES = ("train.seed", "train.eval_every", "train.save_every", "train.compile", "train.num_threads")


def _recipe_overrides(spec: dict) -> list[str]:
    return sorted(o for o in spec.get("overrides") or () if not str(o).startswith(_HOW_A_RUN_GOES))


def _seed(spec: dict) -> str:
    return next((str(o).split("=", 1)[1] for o in spec.get("overrides") or () if str(o).startswith("train.seed=")), "")


def _pretraining_jobs(meta: dict) -> set[str]:
    return {str(r.get("job")) for r in meta.get("runs") or () if r.get("column") == "pretraining"}


def pool_sets(csv_path: str | Path, other_csv: str | Path) -> tuple[Path, Path, list[str]]:
    """Add to the committed set at `csv_path` the rows of `other_csv`, a set whose models were pretrained
    again with the same recipe: a cell then holds both pretraining runs' fine-tuning seeds, so its std spans
    how much the pretraining run varies (with the same seed: only through the hardware's arithmetic), which
    seeds of one run do not show. Pooled are the pretraining scores and every column both sets fine-tuned
    with the same recipe (epochs, rate, examples: `column_recipe`); the other's columns of another recipe
    stay out of the CSV but on record. Returns (csv, json, the columns pooled); raises InputError, changing
    nothing, when a record is missing, the tables or pretraining recipes differ, the other set has the same
    pretraining jobs (that is a merge, not a second pretraining), or either set was pooled with the other."""
    csv_path, other_csv = Path(csv_path), Path(other_csv)
    meta, other = (results.results_meta(p.with_suffix(".json")) for p in (csv_path, other_csv))
    if not meta or not other:
        raise InputError(f"{csv_path.name} and {other_csv.name} both need their record (.json) beside them")
    if not TABLES.get(str(meta.get("table"))) or not TABLES[str(meta["table"])].pretrains:
        raise InputError(f"{csv_path.name}: only a table that pretrains its rows has pretraining runs to pool")
    if other.get("pooled"):
        raise InputError(f"{other_csv.name} already pools another set: pool each set into one, one at a time")
    if other.get("id") in {p.get("id") for p in meta.get("pooled") or ()}:
        raise InputError(f"{other_csv.name} (set {other.get('id')}) is already pooled into {csv_path.name}")
    spec, ospec = meta.get("spec") or {}, other.get("spec") or {}
    differ = [k for k in _SAME_PRETRAINING if spec.get(k) != ospec.get(k)]
    if not spec.get("budget_tokens") and spec.get("budget_s") != ospec.get("budget_s"):
        differ.append("budget_s")
    if _recipe_overrides(spec) != _recipe_overrides(ospec):
        differ.append("overrides")
    if meta.get("base_recipe") != other.get("base_recipe"):
        differ.append("base_recipe")
    if differ:
        raise InputError(f"{other_csv.name} pretrained with another recipe than {csv_path.name} ({', '.join(differ)})")
    jobs, ojobs = _pretraining_jobs(meta), _pretraining_jobs(other)
    models, omodels = meta.get("models") or {}, other.get("models") or {}
    same = (
        bool(jobs & ojobs)
        if jobs and ojobs
        else any(v in models and _model_key(m) == _model_key(models[v]) for v, m in omodels.items())
    )
    if same:
        raise InputError(f"{other_csv.name} fine-tuned the same models as {csv_path.name}: merge a column instead")
    rows, orows = results.read_results(csv_path), results.read_results(other_csv)
    tasks = set(r["task"] for r in rows)
    columns = [
        t
        for t in dict.fromkeys(r["task"] for r in orows)
        if t in tasks and (t == "pretraining" or column_recipe(meta, t) == column_recipe(other, t))
    ]
    if columns == ["pretraining"] or not columns:
        raise InputError(f"{other_csv.name} fine-tuned no column of {csv_path.name} with the same recipe")
    offset = 1 + max(int(r["seed"]) for r in rows)
    added = [{**r, "seed": int(r["seed"]) + offset} for r in orows if r["task"] in columns]
    meta["pooled"] = [
        *(meta.get("pooled") or []),
        {
            **{k: other.get(k) for k in ("id", "spec", "created", "commit", "hardware", "models", "note")},
            "columns": columns,
            "same_seed": _seed(spec) == _seed(ospec),
            "seed_offset": offset,
            "left_out": [r for r in orows if r["task"] not in columns],
            "pooled_at": time.time(),
        },
    ]
    meta["runs"] = [
        *(meta.get("runs") or []),
        *(
            {**r, "seed": int(r.get("seed", 0)) + offset, "from": other.get("id")}
            for r in other.get("runs") or []
            if r.get("column") in columns
        ),
    ]
    results.write_rows(csv_path, _in_place(rows, [*rows, *added], columns))
    write_json_atomic(csv_path.with_suffix(".json"), meta, indent=1)
    return csv_path, csv_path.with_suffix(".json"), columns


def column_spec(meta: dict, task: str) -> dict:
    """The spec of the suite that made a set's column `task`: the last one merged into it for that column,
    else the set's own."""
    spec = next(
        (m.get("spec") or {} for m in reversed(meta.get("merged") or []) if task in (m.get("columns") or ())), None
    )
    return spec if spec is not None else meta.get("spec") or {}


def column_recipe(meta: dict, task: str) -> tuple[float, float, int | None, int | None]:
    """How a set fine-tuned `task`: (epochs, learning rate, train examples, dev examples), from the spec that
    made the column (`column_spec`). Not in it: the input length each run used
    (a run's own run_config.json says), which a change of the fine-tuning code can move at the same spec."""
    spec = column_spec(meta, task)
    if task.endswith("-feature"):  # a frozen-feature column (Table 8): the suite's epochs at the taggers' rate
        own_rate = dict(spec.get("task_feature_lrs") or ()).get(task.removesuffix("-feature"))
        epochs, lr = float(spec.get("epochs", 0)), float(own_rate or spec.get("feature_lr", FEATURE_LR))
    else:
        own = {t: (float(e), float(lr)) for t, e, lr in spec.get("task_recipes") or ()}
        epochs, lr = own.get(task, (float(spec.get("epochs", 0)), float(spec.get("finetune_lr", 0))))
    return epochs, lr, spec.get("max_train_examples"), spec.get("max_eval_examples")
