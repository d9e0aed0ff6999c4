"""bertlab/ablations/merge.py: a re-run column replaces its own in a committed result set."""

from __future__ import annotations

import json

import pytest

from bertlab.ablations import comparison, describe, merge, results
from bertlab.ablations.suites import SuiteRun
from bertlab.errors import InputError

MODEL = {"name": "bertlab-mini", "size": "mini", "objective": "mlm_nsp", "steps": 10, "tokens": 100}


def _row(variant, task, value, seed=0, metric="accuracy", run=""):
    return {
        "table": "table7",
        "variant": variant,
        "task": task,
        "metric": metric,
        "value": value,
        "seed": seed,
        "run": run or f"old-{variant}-{task}",
    }


def _committed(tmp_path):
    """A Table 7 set of three columns (upos, ner, pos2): the middle one is re-run later."""
    rows = [_row(v, t, x) for t, x in (("upos", 88.0), ("ner", 6.0), ("pos2", 50.0)) for v in ("finetune", "cat4")]
    csv_path = tmp_path / "table7.csv"
    results.write_rows(csv_path, rows)
    runs = [
        {"variant": r["variant"], "column": r["task"], "seed": 0, "job": r["run"], "state": "finished"} for r in rows
    ]
    meta = {"table": "table7", "spec": {"table": "table7", "epochs": 2.0}, "models": {"finetune": MODEL, "cat4": MODEL}}
    (tmp_path / "table7.json").write_text(json.dumps({**meta, "runs": runs}))
    return csv_path


def _suite(monkeypatch, new_rows, models, states=()):
    record = {
        "id": "rerun-7",
        "table": "table7",
        "spec": {"table": "table7", "tasks": ["ner"], "epochs": 6.0, "task_recipes": [["ner", 6.0, 3e-4]], "seeds": 1},
        "commit": "abc1234",
        "hardware": "a CPU",
        "runs": [{"variant": r["variant"], "column": r["task"], "seed": r["seed"], "job": r["run"]} for r in new_rows],
    }
    states = states or ["finished"] * len(new_rows)
    runs = [
        SuiteRun(r["variant"], r["task"], r["seed"], r["run"], state) for r, state in zip(new_rows, states, strict=True)
    ]
    monkeypatch.setattr(results, "collect", lambda rec, registry=None: [dict(r) for r in new_rows])
    monkeypatch.setattr(results, "model_records", lambda rec, registry=None: models)
    monkeypatch.setattr(merge, "suite_runs", lambda rec, registry=None: runs)
    return record


def test_a_rerun_column_replaces_its_own_and_the_record_keeps_what_it_replaced(tmp_path, monkeypatch):
    csv_path = _committed(tmp_path)
    new = [_row(v, "ner", x, run=f"new-{v}") for v, x in (("finetune", 20.0), ("cat4", 25.0))]
    record = _suite(monkeypatch, new, {"finetune": MODEL, "cat4": MODEL})
    _, json_path, columns = merge.merge_columns(csv_path, record, registry=object())
    assert columns == ["ner"]
    rows = results.read_results(csv_path)
    assert [r["task"] for r in rows] == ["upos", "upos", "ner", "ner", "pos2", "pos2"]  # the column kept its place
    assert {r["variant"]: r["value"] for r in rows if r["task"] == "ner"} == {"finetune": 20.0, "cat4": 25.0}
    assert [r["value"] for r in rows if r["task"] == "upos"] == [88.0, 88.0]
    meta = json.loads(json_path.read_text())
    assert {r["job"] for r in meta["runs"] if r["column"] == "ner"} == {"new-finetune", "new-cat4"}
    assert len(meta["runs"]) == 6 and meta["spec"]["epochs"] == 2.0  # the set's own spec is untouched
    assert meta["replaced"][0]["by"] == "rerun-7" and [r["value"] for r in meta["replaced"][0]["rows"]] == [6.0, 6.0]
    assert meta["merged"][0]["columns"] == ["ner"] and meta["merged"][0]["spec"]["epochs"] == 6.0
    said = describe.describe_spec(meta["spec"] | {"tasks": ["upos", "ner", "pos2"]}, (), meta["merged"])
    assert said.count("ner") == 2 and "ner re-run later (suite rerun-7)" in said
    assert "(frozen features: 6.0 epochs at 0.001); for ner 6 epochs at 0.0003" in said
    # re-run again (Table 7's NER with the taggers at 3e-3): only the suite that makes the column now is said
    again = {"id": "rerun-8", "columns": ["ner"], "spec": {**meta["merged"][0]["spec"], "feature_lr": 3e-3}}
    said = describe.describe_spec(meta["spec"] | {"tasks": ["upos", "ner", "pos2"]}, (), [*meta["merged"], again])
    assert "rerun-7" not in said and "ner re-run later (suite rerun-8)" in said and "epochs at 0.003)" in said
    # a re-run partly replaced later is said for the column it still makes
    two = {"id": "rerun-6", "columns": ["upos", "ner"], "spec": meta["merged"][0]["spec"]}
    said = describe.describe_spec(meta["spec"] | {"tasks": ["upos", "ner", "pos2"]}, (), [two, again])
    assert "upos re-run later (suite rerun-6)" in said and "ner re-run later (suite rerun-8)" in said
    assert "upos, ner re-run" not in said


def test_a_table8_set_whose_fine_tuned_column_was_re_run_still_says_how_its_frozen_column_was_made():
    """In Table 8 a task makes two columns (upos, upos-feature): re-running one leaves the set's own
    recipe making the other."""
    spec = {"table": "table8", "tasks": ["upos"], "size": "mini", "epochs": 2.0, "finetune_lr": 1e-4, "seeds": 3}
    rerun = {"id": "ft-only", "columns": ["upos"], "spec": {**spec, "task_recipes": [["upos", 4.0, 3e-4]]}}
    said = describe.describe_spec(spec, (), [rerun])
    assert said.count("fine-tuned on") == 2 and "upos re-run later (suite ft-only)" in said
    both = {"id": "both", "columns": ["upos", "upos-feature"], "spec": spec}
    assert describe.describe_spec(spec, (), [both]).count("fine-tuned on") == 1


def test_a_new_column_is_added_at_the_end_and_replaces_nothing(tmp_path, monkeypatch):
    """A column the set did not have (Table 7's NER run after its UPOS column) joins it after the others;
    the record lists it as merged and keeps no empty 'replaced' entry."""
    csv_path = _committed(tmp_path)
    new = [_row(v, "chunk", x, run=f"new-{v}") for v, x in (("finetune", 70.0), ("cat4", 71.0))]
    record = _suite(monkeypatch, new, {"finetune": MODEL, "cat4": MODEL})
    _, json_path, columns = merge.merge_columns(csv_path, record, registry=object())
    assert columns == ["chunk"]
    assert [r["task"] for r in results.read_results(csv_path)][-2:] == ["chunk", "chunk"]
    meta = json.loads(json_path.read_text())
    assert "replaced" not in meta and meta["merged"][0]["columns"] == ["chunk"]
    assert len(meta["runs"]) == 8


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"table": "table5"}, "ran table5"),
        ({"models": {"finetune": {**MODEL, "steps": 11}}}, "other models"),
        ({"rows": []}, "no finished fine-tuning run"),
        ({"states": ["finished", "running"]}, "1 of suite rerun-7's runs of ner have not finished"),
    ],
)
def test_a_merge_that_would_mix_models_or_tables_changes_nothing(tmp_path, monkeypatch, change, message):
    csv_path = _committed(tmp_path)
    before = (csv_path.read_text(), csv_path.with_suffix(".json").read_text())
    new = change.get("rows", [_row("finetune", "ner", 20.0, run="new"), _row("cat4", "ner", 21.0, run="new2")])
    record = _suite(monkeypatch, new, change.get("models", {"finetune": MODEL}), change.get("states", ()))
    record["table"] = change.get("table", "table7")
    with pytest.raises(InputError, match=message):
        merge.merge_columns(csv_path, record, registry=object())
    assert (csv_path.read_text(), csv_path.with_suffix(".json").read_text()) == before
    alone = tmp_path / "alone" / "table7.csv"  # a CSV without its record beside it
    alone.parent.mkdir()
    alone.write_text(before[0])
    with pytest.raises(InputError, match="no record"):
        merge.merge_columns(alone, record, registry=object())


# --- pooling a second pretraining run ----------------------------------------------------------------
T5_SPEC = {
    "table": "table5",
    "size": "mini",
    "budget_tokens": 1000,
    "overrides": ["train.batch_size=128"],
    "epochs": 2.0,
    "finetune_lr": 1e-4,
    "max_train_examples": 80,
    "task_recipes": [["mrpc", 4.0, 3e-4]],
}


def _t5_set(folder, name, values, spec=None, model_steps=10, merged=()):
    """A Table 5 set: pretraining scores and mrpc/rte cells, 2 seeds each, with its record."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {**_row(v, "pretraining", values[v] - 40, metric="mlm_acc", run=f"{name}-{v}"), "table": "table5"}
        for v in ("mlm_nsp", "no_nsp")
    ]
    rows += [
        {**_row(v, t, values[v] + s + (t == "rte"), seed=s, run=f"{name}-{v}-{t}-{s}"), "table": "table5"}
        for t in ("mrpc", "rte")
        for v in ("mlm_nsp", "no_nsp")
        for s in (0, 1)
    ]
    csv_path = folder / "table5.csv"
    results.write_rows(csv_path, rows)
    models = {v: {**MODEL, "name": f"{name}-{v}", "objective": v, "steps": model_steps} for v in ("mlm_nsp", "no_nsp")}
    runs = [{"variant": r["variant"], "column": r["task"], "seed": r["seed"], "job": r["run"]} for r in rows]
    meta = {
        "id": name,
        "table": "table5",
        "spec": spec or T5_SPEC,
        "base_recipe": "configs/default-model.yaml",
        "models": models,
        "runs": runs,
        "hardware": f"{name}'s GPU",
        "merged": list(merged),
    }
    (folder / "table5.json").write_text(json.dumps(meta))
    return csv_path


def test_a_second_pretraining_run_pools_the_columns_fine_tuned_alike(tmp_path):
    """mrpc ran the same recipe in both sets and pools (four seeds a cell); rte was re-run in the first set at
    another recipe (merged), so the second set's rte stays out of the CSV but on record."""
    rte_rerun = {"id": "rte-rerun", "columns": ["rte"], "spec": {**T5_SPEC, "task_recipes": [["rte", 4.0, 3e-4]]}}
    first = _t5_set(tmp_path / "a", "run2", {"mlm_nsp": 70.0, "no_nsp": 66.0}, merged=[rte_rerun])
    second = _t5_set(tmp_path / "b", "run1", {"mlm_nsp": 72.0, "no_nsp": 68.0}, model_steps=11)
    _, json_path, columns = merge.pool_sets(first, second)
    assert columns == ["pretraining", "mrpc"]
    rows = results.read_results(first)
    mrpc = [r for r in rows if r["task"] == "mrpc" and r["variant"] == "mlm_nsp"]
    assert sorted(r["seed"] for r in mrpc) == [0, 1, 2, 3] and sorted(r["value"] for r in mrpc) == [70, 71, 72, 73]
    assert len([r for r in rows if r["task"] == "rte"]) == 4  # the first set's own rte only
    assert [r["task"] for r in rows][:4] == ["pretraining"] * 4  # columns keep their places
    cell = {(c.variant, c.task): c for c in comparison.summarize(rows)}[("mlm_nsp", "mrpc")]
    assert cell.mean == pytest.approx(71.5) and cell.std > 1.0  # the spread spans both pretraining runs
    meta = json.loads(json_path.read_text())
    (pooled,) = meta["pooled"]
    assert pooled["id"] == "run1" and pooled["columns"] == ["pretraining", "mrpc"] and pooled["seed_offset"] == 2
    assert {r["task"] for r in pooled["left_out"]} == {"rte"} and pooled["models"]["mlm_nsp"]["steps"] == 11
    assert sum(r.get("from") == "run1" for r in meta["runs"]) == 2 + 4
    said = describe.describe_spec(meta["spec"] | {"tasks": ["mrpc", "rte"]}, (), meta["merged"], None, meta["pooled"])
    assert "pretrained a second time with the same recipe and seed: the two differ only through" in said
    assert "(set run1, on run1's GPU)" in said and pooled["same_seed"] is True
    assert "the pretraining scores and mrpc pool both runs' seeds" in said


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ({"spec": {**T5_SPEC, "budget_tokens": 2000}}, "another recipe than table5.csv \\(budget_tokens\\)"),
        ({"spec": {**T5_SPEC, "overrides": []}}, "another recipe .*overrides"),
        ({"name": "run2"}, "the same models"),  # the very pretraining jobs
        ({"spec": {**T5_SPEC, "task_recipes": [], "max_train_examples": 9}}, "no column .* with the same recipe"),
    ],
)
def test_pooling_refuses_another_recipe_or_the_same_models(tmp_path, second, message):
    first = _t5_set(tmp_path / "a", "run2", {"mlm_nsp": 70.0, "no_nsp": 66.0})
    before = (first.read_text(), first.with_suffix(".json").read_text())
    kw = {"model_steps": 11, **second}
    other = _t5_set(tmp_path / "b", kw.pop("name", "run1"), {"mlm_nsp": 72.0, "no_nsp": 68.0}, **kw)
    with pytest.raises(InputError, match=message):
        merge.pool_sets(first, other)
    assert (first.read_text(), first.with_suffix(".json").read_text()) == before


def test_pooling_takes_another_seed_and_refuses_to_pool_twice(tmp_path):
    """A second run pretrained with another seed (and other bookkeeping settings) pools and says so; pooling
    the same set again, or pooling a pooled set, is refused; a column merged later leaves the pooled list."""
    first = _t5_set(tmp_path / "a", "run2", {"mlm_nsp": 70.0, "no_nsp": 66.0})
    reseeded = {**T5_SPEC, "overrides": [*T5_SPEC["overrides"], "train.seed=1", "train.eval_every=100"]}
    other = _t5_set(tmp_path / "b", "run1", {"mlm_nsp": 72.0, "no_nsp": 68.0}, spec=reseeded)
    _, json_path, _ = merge.pool_sets(first, other)
    meta = json.loads(json_path.read_text())
    assert meta["pooled"][0]["same_seed"] is False
    assert "with the same recipe and another seed (set run1" in describe.describe_spec(
        meta["spec"], (), (), None, meta["pooled"]
    )
    with pytest.raises(InputError, match="already pooled into"):
        merge.pool_sets(first, other)
    with pytest.raises(InputError, match="already pools another set"):
        merge.pool_sets(other, first)
    # a column re-run later replaces both runs' rows: it no longer pools
    assert meta["pooled"][0]["columns"] == ["pretraining", "mrpc", "rte"]  # the same recipe everywhere here
    record = {"id": "mrpc-rerun", "table": "table5", "spec": T5_SPEC, "runs": []}
    mp = pytest.MonkeyPatch()
    mp.setattr(results, "collect", lambda rec, registry=None: [{**_row("mlm_nsp", "mrpc", 75.0), "table": "table5"}])
    mp.setattr(results, "model_records", lambda rec, registry=None: meta["models"])
    mp.setattr(merge, "suite_runs", lambda rec, registry=None: [])
    try:
        merge.merge_columns(first, record, registry=object())
    finally:
        mp.undo()
    assert json.loads(json_path.read_text())["pooled"][0]["columns"] == ["pretraining", "rte"]


def test_a_columns_recipe_is_the_one_that_made_it():
    """Fine-tuning columns take their task recipe (else the suite's epochs and --lr); a frozen-feature column
    (Table 8's) the suite's epochs at the taggers' rate, 1e-3 in records from before --feature-lr; a merged
    column its own suite's, so two sets whose taggers ran at other rates do not pool that column."""
    old = {"spec": {"epochs": 2.0, "finetune_lr": 1e-4, "task_recipes": [["upos", 4.0, 3e-4]], "max_train_examples": 9}}
    assert merge.column_recipe(old, "upos") == (4.0, 3e-4, 9, None)
    assert merge.column_recipe(old, "upos-feature") == (2.0, 1e-3, 9, None)
    assert merge.column_recipe(old, "ner") == (2.0, 1e-4, 9, None)
    rerun = {"id": "later", "columns": ["upos-feature"], "spec": {**old["spec"], "feature_lr": 3e-3}}
    merged = {**old, "merged": [rerun]}
    assert merge.column_spec(merged, "upos-feature")["feature_lr"] == 3e-3
    assert merge.column_recipe(merged, "upos-feature") == (2.0, 3e-3, 9, None)
    assert merge.column_recipe(merged, "upos") == merge.column_recipe(old, "upos")
    # a task's own taggers' rate (--task-feature-lr) makes that task's frozen-feature column only
    own = {"spec": {**old["spec"], "feature_lr": 3e-3, "task_feature_lrs": [["upos", 1e-2]]}}
    assert merge.column_recipe(own, "upos-feature")[:2] == (2.0, 1e-2)
    assert merge.column_recipe(own, "ner-feature")[:2] == (2.0, 3e-3)
    assert merge.column_recipe(own, "upos") == merge.column_recipe(old, "upos")
