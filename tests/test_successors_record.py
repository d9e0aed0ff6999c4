"""bertlab.ablations.successors_record: the successors suite's pretraining record, from fake run folders."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from bertlab.ablations.successors import suite_variants
from bertlab.ablations.successors_record import (
    CURVE_COLUMNS,
    PRETRAINING_COLUMNS,
    model_size,
    own_task_metric,
    read_record,
    read_suite_runs,
    write_record,
)
from bertlab.errors import InputError


def _model(folder: Path, model_type: str, shapes: dict[str, tuple[int, ...]]) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    save_file({k: np.zeros(s, dtype=np.float32) for k, s in shapes.items()}, str(folder / "model.safetensors"))


def fake_run(
    runs: Path, name: str, model_type: str, objective: str, evals: list[dict], state: str = "finished", model=True
) -> Path:
    """A run folder as `bertlab pretrain` leaves it: run_config, status, eval lines (a train line too), model/."""
    run = runs / name
    run.mkdir(parents=True)
    config = {"name": name, "model_type": model_type, "data": {"objective": objective}}
    (run / "run_config.json").write_text(json.dumps({"kind": "pretrain", "config": config}))
    status = {"state": state, "step": evals[-1]["step"], "progress": 1.0 if state == "finished" else 0.5}
    (run / "status.json").write_text(json.dumps(status))
    lines = [{"split": "train", "step": 1, "loss": 9.0, "tokens": 100}]
    lines += [{"split": "eval", "time": 1.0, **m} for m in evals]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines) + '{"split": "ev')  # half a line
    if model and model_type == "electra":
        pair = run / "model"
        pair.mkdir()
        (pair / "config.json").write_text(
            json.dumps({"model_type": "electra", "bertlab": {"halves": ["generator", "discriminator"]}})
        )
        _model(pair / "generator", "electra", {"embeddings": (10, 4), "layer": (4, 2)})  # 48 parameters
        _model(pair / "discriminator", "electra", {"embeddings": (10, 4), "layer": (4, 4), "rtd": (4,)})  # 60
    elif model:
        _model(run / "model", model_type, {"embeddings": (10, 4), "layer": (4, 4), "nsp": (4, 2)})  # 64
    return run


@pytest.fixture()
def runs(tmp_path) -> Path:
    root = tmp_path / "runs"
    fake_run(
        root,
        "succ-bert",
        "bert",
        "mlm_nsp",
        [
            {"step": 10, "tokens": 1000, "train_s": 2.0, "mlm_acc": 0.1, "mlm_loss": 7.0, "nsp_acc": 0.5},
            {"step": 20, "tokens": 2000, "train_s": 4.5, "mlm_acc": 0.2, "mlm_loss": 6.0, "nsp_acc": 0.8},
        ],
    )
    fake_run(
        root,
        "succ-electra",
        "electra",
        "electra",
        [{"step": 20, "tokens": 2000, "train_s": 9.0, "mlm_acc": 0.15, "rtd_acc": 0.86, "rtd_loss": 0.4}],
    )
    fake_run(root, "succ-span", "bert", "span", [{"step": 20, "tokens": 2000, "train_s": 4.0, "mlm_acc": 0.17}])
    fake_run(root, "succ-albert", "albert", "mlm_sop", [{"step": 5, "mlm_acc": 0.05, "sop_acc": 0.6}], state="running")
    fake_run(root, "succ-bert-lr1.5e-3", "bert", "mlm_nsp", [{"step": 5, "mlm_acc": 0.01}])  # another run's folder
    return root


def test_finished_runs_become_rows_and_the_others_are_skipped_with_a_note(runs):
    found = read_suite_runs(runs, suite_variants())
    rows = {r.variant: r for r in found.rows}
    assert list(rows) == ["bert", "electra", "span"]
    bert = rows["bert"]
    assert (bert.run, bert.family, bert.objective, bert.steps, bert.tokens, bert.train_s) == (
        "succ-bert",
        "BERT",
        "mlm_nsp",
        20,
        2000,
        4.5,
    )
    assert (bert.mlm_acc, bert.task_metric, bert.task_acc, bert.task_name, bert.pair_head) == (
        0.2,
        "nsp_acc",
        0.8,
        "NSP",
        "nsp",
    )
    assert bert.parameters == 64 and bert.generator_parameters is None and bert.generator_size_mb is None
    weights = runs / "succ-bert" / "model" / "model.safetensors"
    assert bert.size_mb == round(weights.stat().st_size / 1e6, 3)
    assert bert.nsp_acc is None and bert.latency_p50_ms is None  # measured by the bench script, with torch
    electra = rows["electra"]
    assert (electra.family, electra.parameters, electra.generator_parameters) == ("ELECTRA", 60, 48)
    assert (electra.task_metric, electra.task_acc, electra.task_name, electra.pair_head) == (
        "rtd_acc",
        0.86,
        "replaced-token detection",
        "",
    )
    halves = [runs / "succ-electra" / "model" / h / "model.safetensors" for h in ("discriminator", "generator")]
    assert electra.discriminator_size_mb == round(halves[0].stat().st_size / 1e6, 3)
    assert electra.generator_size_mb == round(halves[1].stat().st_size / 1e6, 3)
    assert electra.size_mb == pytest.approx(electra.discriminator_size_mb + electra.generator_size_mb, abs=0.002)
    span = rows["span"]
    assert (span.task_metric, span.task_acc, span.pair_head, span.task_name) == ("mlm_acc", 0.17, "", "masked LM")
    notes = "\n".join(found.skipped)
    assert "albert: " in notes and "not finished" in notes
    assert "roberta: no run folder succ-roberta" in notes
    assert found.run_dirs == {v: runs / f"succ-{v}" for v in ("bert", "electra", "span")}


def test_a_finished_run_without_its_model_is_skipped(tmp_path):
    fake_run(tmp_path, "succ-span", "bert", "span", [{"step": 20, "mlm_acc": 0.17}], model=False)
    found = read_suite_runs(tmp_path, [v for v in suite_variants() if v.key == "span"])
    assert found.rows == () and "no model/ folder" in found.skipped[0]


def test_curves_hold_every_eval_metric(runs):
    found = read_suite_runs(runs, suite_variants())
    bert = [p for p in found.curves if p.variant == "bert"]
    assert {(p.step, p.metric) for p in bert} == {
        (s, m) for s in (10, 20) for m in ("mlm_acc", "mlm_loss", "nsp_acc")
    }  # the train line and "time" are no metrics
    first = next(p for p in bert if p.step == 10 and p.metric == "nsp_acc")
    assert (first.tokens, first.train_s, first.value) == (1000, 2.0, 0.5)


def test_the_record_reads_back_as_written(runs, tmp_path):
    found = read_suite_runs(runs, suite_variants())
    bert = dataclasses.replace(
        found.rows[0], nsp_acc=0.84, nsp_instances=739, sop_acc=0.54, sop_instances=578, latency_p50_ms=3.5
    )
    rows = (bert, *found.rows[1:])
    pretraining, curves = write_record(tmp_path / "out", rows, found.curves)
    assert pretraining.read_text().splitlines()[0] == ",".join(PRETRAINING_COLUMNS)
    assert curves.read_text().splitlines()[0] == ",".join(CURVE_COLUMNS)
    record = read_record(tmp_path / "out")
    assert record.rows == rows and record.curves == found.curves
    assert record.row("bert").sop_acc == 0.54 and record.row("albert") is None
    assert record.curve("bert", "nsp_acc") == [(1000, 0.5), (2000, 0.8)]
    assert record.curve("bert", "mlm_acc", x="train_s") == [(2.0, 0.1), (4.5, 0.2)]
    with pytest.raises(InputError, match="x must be"):
        record.curve("bert", x="time")


def test_a_missing_record_is_empty_and_a_broken_one_says_where(tmp_path):
    empty = read_record(tmp_path / "nothing")
    assert empty.rows == () and empty.curves == () and empty.curve("bert") == []
    (tmp_path / "pretraining.csv").write_text("variant,run\nbert,succ-bert\n")
    with pytest.raises(InputError, match="no column family"):
        read_record(tmp_path)
    (tmp_path / "pretraining.csv").unlink()
    (tmp_path / "curves.csv").write_text(",".join(CURVE_COLUMNS) + "\nbert,ten,1000,2.0,mlm_acc,0.1\n")
    with pytest.raises(InputError, match="curves.csv line 2: column step holds 'ten'"):
        read_record(tmp_path)


def test_own_task_and_a_pair_without_the_half_that_fine_tunes(tmp_path):
    assert own_task_metric({"mlm_acc": 0.2, "sop_acc": 0.7}) == "sop_acc"
    assert own_task_metric({"mlm_acc": 0.2, "nsp_acc": float("nan")}) == "mlm_acc"
    (tmp_path / "config.json").write_text(json.dumps({"bertlab": {"halves": ["generator", "encoder"]}}))
    for half in ("generator", "encoder"):
        _model(tmp_path / half, "electra", {"w": (2, 2)})
    assert model_size(tmp_path / "generator") == {"parameters": 4, "size_mb": 0.0}
    with pytest.raises(InputError, match="none of them the half that fine-tunes"):
        model_size(tmp_path, "discriminator")


def test_imports_no_torch():
    code = "import sys, bertlab.ablations.successors_record; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
