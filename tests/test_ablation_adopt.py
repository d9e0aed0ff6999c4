"""bertlab/ablations/adopt.py: plain `bertlab finetune` runs become a suite only when each ran the suite's own
arguments and finished; the suite then collects and merges as any other."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex

import pytest

from bertlab.ablations import adopt, describe, merge, planning, results
from bertlab.ablations.cli import add_args, run
from bertlab.ablations.suites import read_suite, suite_runs
from bertlab.cli import main
from bertlab.errors import InputError
from bertlab.jobs.registry import JobRegistry
from bertlab.storage.runfolder import REPO_ROOT

SPEC = planning.SuiteSpec(
    "table7", tasks=("upos",), seeds=2, epochs=6.0, task_recipes=(("upos", 6.0, 1e-3),), feature_lr=1e-2,
    max_train_examples=0, max_eval_examples=0, threads=1, data=str(REPO_ROOT / "tests"),
)  # fmt: skip


def _plain_run(root, name, args, state="finished", accuracy=0.9, **recorded):
    """A run folder as `bertlab finetune ... --run-dir` leaves it (no job.json: nothing queued it)."""
    d = root / name
    d.mkdir(parents=True)
    command = shlex.join(["bertlab", "finetune", *args, "--no-progress", "--run-dir", str(d)])
    (d / "run_config.json").write_text(json.dumps({"kind": "finetune", "command": command, **recorded}))
    status = {"state": state, "step": 10, "total_steps": 10, "device": "cpu", "started": 1000.0 + accuracy}
    if state == "finished":
        status["last_eval"] = {"accuracy": accuracy}
    (d / "status.json").write_text(json.dumps(status))
    return d


def _pilot(root, spec=SPEC, change=None, **recorded):
    """One plain run per planned run, as typed by hand: the model given relative to the repository, the
    numbers spelled another way ('1e-3' for '0.001', '6' for '6.0'), the flags in another order."""
    runs = {}
    for i, r in enumerate(p for p in planning.plan(spec, "x") if p.column != "pretraining"):
        args = [a.replace(str(REPO_ROOT) + "/", "") for a in r.spec.args]
        args = [{"0.001": "1e-3", "6.0": "6"}.get(a, a) for a in args]
        args = args[4:] + args[:4]  # --task upos --data ... last
        if change and (r.variant, r.seed) == change[0]:
            args = [*args, *change[1]]
        runs[(r.variant, r.column, r.seed)] = _plain_run(
            root, f"pilot-{r.variant}-s{r.seed}", args, accuracy=0.8 + i / 100, **recorded
        )
    return runs


def _parse(argv):
    p = argparse.ArgumentParser()
    add_args(p)
    return p.parse_args(argv)


def test_plain_runs_become_a_suite_that_collects_and_merges(tmp_path, capsys):
    registry = JobRegistry(tmp_path / "runs")
    agree = {"task": "upos", "mode": "finetune", "epochs": 6.0, "train": {"learning_rate": 0.001, "seed": 0}}
    runs = _pilot(registry.root, cwd=str(REPO_ROOT))
    for d in (runs[("finetune", "upos", 0)],):  # agrees with its plan; recorded as `bertlab -v finetune` once was
        config = json.loads((d / "run_config.json").read_text())
        command = config["command"].replace("bertlab finetune", "bertlab finetune finetune", 1)
        (d / "run_config.json").write_text(json.dumps({**config, "config": agree, "command": command}))
    command = shlex.split(planning.command(SPEC))[2:]  # `bertlab ablate run ...` without the program's words
    argv = ["--runs", str(registry.root), "adopt", *command[1:]]
    argv += [f"--run={v}/{c}/{s}={d.name}" for (v, c, s), d in runs.items()]
    assert main(["ablate", *argv]) == 0  # through `bertlab`, whose own `run` an option must not shadow
    suite_id = capsys.readouterr().out.split()[1].rstrip(":")
    record = read_suite(registry.root / "ablations" / suite_id)
    assert record["adopted"] and len(record["runs"]) == 14 and record["spec"] == json.loads(json.dumps(SPEC.to_dict()))
    assert {r.state for r in suite_runs(record, registry)} == {"finished"}
    rows = results.collect(record, registry)
    assert len(rows) == 14 and {r["run"] for r in rows} == {d.name for d in runs.values()}
    finetune = [r for r in rows if r["variant"] == "finetune"]
    assert [r["value"] for r in finetune] == [80.0, 81.0] and [r["seed"] for r in finetune] == [0, 1]
    # merged into a committed set as any suite: the UPOS column replaced, NER kept, the record says adopted
    csv_path = tmp_path / "table7.csv"
    old = [
        {
            "table": "table7",
            "variant": v,
            "task": t,
            "metric": "accuracy",
            "value": 50.0,
            "seed": 0,
            "run": f"o-{v}-{t}",
        }
        for t in ("upos", "ner")
        for v in ("finetune", "cat4")
    ]
    results.write_rows(csv_path, old)
    models = results.model_records(record, registry)
    csv_path.with_suffix(".json").write_text(json.dumps({"table": "table7", "spec": {}, "models": models, "runs": []}))
    merge.merge_columns(csv_path, record, registry)
    merged = results.read_results(csv_path)
    assert len([r for r in merged if r["task"] == "upos"]) == 14 and len([r for r in merged if r["task"] == "ner"]) == 2
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    assert all(r.get("adopted") for r in meta["runs"]) and meta["merged"][0]["id"] == suite_id
    assert meta["merged"][0]["adopted"] and record["created"] == 1000.8  # when the first run started
    said = describe.describe_spec({"table": "table7", "tasks": ["upos", "ner"]}, (), meta["merged"])
    assert f"upos re-run later (suite {suite_id}, runs started by hand and adopted): " in said


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("other rate", "ran otherwise than the suite would: lr: ran 0.003, planned 0.001"),
        ("other features", "features: ran 'cat4', planned 'layer:0'"),
        ("missing", "1 of the suite's 14 runs have no folder"),
        ("running", "the run is failed; adopt takes finished runs only"),  # its process is gone
        ("elsewhere", "not a run folder in the runs folder"),
        ("not in plan", "mix/upos/5 is not a run of this suite's plan"),
        ("pretrains", "table8 pretrains its rows"),
        ("resumed", "it was resumed"),
        ("recorded otherwise", "train.learning_rate: recorded 0.5, planned 0.001"),
        ("started elsewhere", "model: ran '/elsewhere/checkpoints/bertlab-mini'"),
        ("on a GPU", "ran on cuda; the suite runs on cpu"),
        ("unreadable command", "its recorded command cannot be read back"),
    ],
)
def test_adopt_refuses_runs_that_are_not_the_suites_and_writes_nothing(tmp_path, how, message):
    registry = JobRegistry(tmp_path / "runs")
    change = {
        "other rate": (("finetune", 1), ["--lr", "3e-3"]),
        "other features": (("embeddings", 0), ["--features", "cat4"]),
    }
    recorded = {
        "recorded otherwise": {"config": {"task": "upos", "train": {"learning_rate": 0.5, "seed": 0}}},
        "started elsewhere": {"cwd": "/elsewhere"},  # its relative --model was another checkout's
    }.get(how, {})
    runs = _pilot(registry.root, change=change.get(how), **recorded)
    spec = SPEC
    config = runs[("mix", "upos", 0)] / "run_config.json"
    if how == "resumed":
        config.write_text(json.dumps({"kind": "finetune", "command": "bertlab finetune --task upos --resume"}))
    elif how == "on a GPU":
        spec = dataclasses.replace(SPEC, device="cpu")
        status = json.loads((runs[("mix", "upos", 0)] / "status.json").read_text())
        (runs[("mix", "upos", 0)] / "status.json").write_text(json.dumps({**status, "device": "cuda:0"}))
    elif how == "unreadable command":
        config.write_text(json.dumps({"kind": "finetune", "command": "bertlab finetune --data it's"}))
    if how == "missing":
        runs.pop(("cat4", "upos", 1))
    elif how == "running":
        status = runs[("mix", "upos", 0)] / "status.json"
        status.write_text(json.dumps({"state": "running", "pid": 999999999}))
    elif how == "elsewhere":
        runs[("mix", "upos", 0)] = _plain_run(tmp_path / "other", "x", ["--task", "upos"])
    elif how == "not in plan":
        runs[("mix", "upos", 5)] = runs[("mix", "upos", 0)]
    elif how == "pretrains":
        spec = planning.SuiteSpec("table8", tasks=("upos",), budget_tokens=1000)
    with pytest.raises(InputError, match=message):
        adopt.adopt(spec, runs, registry)
    assert not (registry.root / "ablations").exists()


def test_a_bad_run_entry_is_said_plainly(tmp_path):
    argv = ["--runs", str(tmp_path), "adopt", "table7", "--tasks", "upos", "--seeds", "1", "--run", "cat4/upos=x"]
    with pytest.raises(InputError, match="write VARIANT/COLUMN/SEED=RUN"):
        run(_parse(argv))


def test_a_partial_suite_adopts_the_runs_given_and_says_how_many_of_its_plan(tmp_path):
    registry = JobRegistry(tmp_path / "runs")
    runs = _pilot(registry.root)
    kept = {k: v for k, v in runs.items() if k[2] == 0}  # seed 0 of every row: 7 of the plan's 14
    with pytest.raises(InputError, match="--partial adopts the runs given"):
        adopt.adopt(SPEC, kept, registry)
    record = read_suite(adopt.adopt(SPEC, kept, registry, partial=True))
    assert len(record["runs"]) == 7 and {r["seed"] for r in record["runs"]} == {0}
    assert "7 of the plan's 14" in record["adopted"]
    rows = results.collect(record, registry)
    assert len({(r["variant"], r["seed"]) for r in rows}) == 7
    # the runs given are checked as strictly as in a whole suite
    runs[("mix", "upos", 0)].joinpath("status.json").write_text(json.dumps({"state": "running", "pid": 999999999}))
    with pytest.raises(InputError, match="adopt takes finished runs only"):
        adopt.adopt(SPEC, kept, registry, partial=True)
    with pytest.raises(InputError, match="no run to adopt"):
        adopt.adopt(SPEC, {}, registry, partial=True)
