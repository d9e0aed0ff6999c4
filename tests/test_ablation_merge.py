"""bertlab/ablations/merge.py: a re-run column replaces its own in a committed result set."""

from __future__ import annotations

import json

import pytest

from bertlab.ablations import merge, results
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
    said = results.describe_spec(meta["spec"] | {"tasks": ["upos", "ner", "pos2"]}, (), meta["merged"])
    assert said.count("ner") == 2 and "ner re-run later (suite rerun-7)" in said
    assert "(frozen features: 6.0 epochs at 1e-3); for ner 6 epochs at 0.0003" in said


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
