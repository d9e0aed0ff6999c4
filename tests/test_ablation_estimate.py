"""bertlab/ablations/estimate.py: a suite run's time is the Train page's estimate of its job plus the job's
start-up and end, measured defaults per kind or read from earlier finished jobs; the CLI says what it times."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import fake_launched_job
from test_finetune_recipe import write_sst2

from bertlab.ablations import estimate, planning
from bertlab.ablations.cli import add_args, run
from bertlab.estimates import estimate_spec
from bertlab.jobs.registry import JobRegistry

MRPC = ("mrpc", 64, 64)  # a fine-tuning job's data: task, train examples, dev examples
_EXAMPLES = ("max_train_examples", "max_eval_examples")


def _task_folders(root: Path) -> str:
    """Empty task folders: a suite estimated with measure=False only needs them to exist."""
    for sub in ("glue/SST-2", "glue/MRPC"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return str(root)


def _finished_job(
    root: Path,
    name: str,
    start_s: float,
    end_s: float,
    kind: str = "finetune",
    data: tuple = MRPC,
    device: str = "cpu",
    state: str = "finished",
    attempts: int = 1,
) -> Path:
    """A run folder as the registry and the trainer leave it: launched at t=1000, its first step `start_s`
    later, 5 s of steps, and the job's end `end_s` after its last train metric line."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    launched, started = 1000.0, 1000.0 + start_s
    last_step = started + 5.0
    config = {"corpus": list(data)} if kind == "pretrain" else dict(zip(("task", *_EXAMPLES), data, strict=True))
    files = {
        "job.json": {"kind": kind, "attempts": attempts, "launched": launched, "ended": last_step + end_s},
        "status.json": {"state": state, "device": device, "started": started},
        "run_config.json": {"kind": kind, "config": config},
    }
    for file, content in files.items():
        (run_dir / file).write_text(json.dumps(content))
    lines = [{"split": "train", "step": 5, "time": last_step}, {"split": "eval", "step": 5, "time": last_step + 1}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


def test_each_run_is_the_train_pages_estimate_plus_the_start_up_and_end_of_its_kind(tmp_path):
    """A pretraining job starts slower than a fine-tuning one (its corpus; measured 5.4 s against 2.4-3.4 s
    here), so each kind adds its own, where one 15 s for every job made a tiny suite's estimate 2-3x too long."""
    spec = planning.SuiteSpec("table5", tasks=("sst2",), seeds=1, budget_tokens=20_000, data=_task_folders(tmp_path))
    est = estimate.estimate_suite(spec, gpus=0, measure=False)
    pre = next(r for r in est.runs if r.variant == "mlm_nsp" and r.column == "pretraining")
    job = next(r.spec for r in planning.plan(spec, "s") if r.variant == "mlm_nsp" and r.column == "pretraining")
    train_page = estimate_spec(replace(job, device="cpu"), planning.REPO_ROOT, measure=False, gpus=0)
    default = estimate.DEFAULT_OVERHEAD
    assert (pre.start_s, pre.end_s, pre.overhead_source) == (*_times(default["pretrain"]), "measured default")
    assert pre.seconds == pytest.approx(train_page.total_s + pre.start_s + pre.end_s)
    tune = next(r for r in est.runs if r.column == "sst2")
    assert (tune.start_s, tune.end_s) == _times(default["finetune"]) and tune.start_s < pre.start_s
    assert est.total_s == pytest.approx(sum(r.seconds for r in est.runs))
    assert est.rows()[0]["start + end"] == "7 s"  # 5.5 s + 1.5 s


def _times(overhead: estimate.JobOverhead) -> tuple[float, float]:
    return overhead.start_s, overhead.end_s


def test_start_up_and_end_are_read_from_earlier_finished_jobs_of_the_same_kind_device_and_data(tmp_path):
    root = tmp_path / "runs"
    for i, (start_s, end_s) in enumerate(((2.0, 1.0), (4.0, 3.0), (3.0, 2.0))):
        _finished_job(root, f"mrpc-{i}", start_s, end_s)
    _finished_job(root, "other-task", 60.0, 60.0, data=("sst2", 64, 64))
    _finished_job(root, "more-dev-examples", 60.0, 60.0, data=("mrpc", 64, 1000))  # a longer final evaluation
    _finished_job(root, "on-a-gpu", 60.0, 60.0, device="cuda:0")
    _finished_job(root, "failed", 60.0, 60.0, state="failed")
    _finished_job(root, "resumed", 60.0, 60.0, attempts=2)  # launched is its last attempt's
    _finished_job(root, "pretraining", 9.0, 4.0, kind="pretrain", data=("other-corpus",))
    assert estimate.job_overhead("finetune", "cpu", MRPC, root) == estimate.JobOverhead(
        3.0, 2.0, "median of 3 earlier finetune job(s) here"
    )
    assert estimate.job_overhead("finetune", "cuda", MRPC, root).start_s == 60.0
    assert estimate.job_overhead("pretrain", "cpu", ("default",), root) == estimate.DEFAULT_OVERHEAD["pretrain"]
    assert estimate.job_overhead("pretrain", "cpu", ("other-corpus",), root).start_s == 9.0
    assert estimate.job_overhead("finetune", "cpu", MRPC, None) == estimate.DEFAULT_OVERHEAD["finetune"]

    # a suite reads them from its registry's folder: its MRPC runs learn, its pretraining runs keep the default
    spec = planning.SuiteSpec(
        "table5",
        tasks=("mrpc",),
        seeds=1,
        budget_tokens=20_000,
        data=_task_folders(tmp_path / "data"),
        max_train_examples=64,
        max_eval_examples=64,
    )
    est = estimate.estimate_suite(spec, gpus=0, measure=False, registry=JobRegistry(root, cpu_slots=1, gpus=0))
    tunes = [r for r in est.runs if r.column == "mrpc"]
    assert len(tunes) == 4 and {(r.start_s, r.end_s) for r in tunes} == {(3.0, 2.0)}
    assert {(r.start_s, r.end_s) for r in est.runs if r.column == "pretraining"} == {
        _times(estimate.DEFAULT_OVERHEAD["pretrain"])
    }


def test_a_reused_job_still_running_has_started_already(tmp_path):
    """What is left of a reused pretraining job: the rest of its steps and its end; a queued one starts too."""
    registry = JobRegistry(tmp_path / "runs", cpu_slots=1, gpus=0)
    running = fake_launched_job(registry.root, "earlier-mlm_nsp", os.getpid())
    status = json.loads((running / "status.json").read_text())
    (running / "status.json").write_text(json.dumps({**status, "progress": 0.5}))
    spec = planning.SuiteSpec("table5", tasks=("sst2",), seeds=1, budget_tokens=20_000, data=_task_folders(tmp_path))
    fresh = estimate.estimate_suite(spec, gpus=0, measure=False)
    est = estimate.estimate_suite(
        replace(spec, reuse=(("mlm_nsp", running.name),)), gpus=0, measure=False, registry=registry
    )
    mine, whole = (
        next(r for r in e.runs if r.variant == "mlm_nsp" and r.column == "pretraining") for e in (est, fresh)
    )
    assert mine.source.startswith(f"reuses job {running.name}, 50% done") and mine.start_s == 0.0
    assert mine.seconds == pytest.approx((whole.seconds - whole.start_s - whole.end_s) / 2 + whole.end_s)


def test_the_cli_says_which_job_it_estimates_on_stderr_and_keeps_json_on_stdout(tmp_path, monkeypatch, capsys):
    """Timing each job's step took ~70 s for a CPU table7 estimate and the terminal stayed silent."""
    estimated = []

    def fake_estimate(job, cwd, **kwargs):
        estimated.append(job.name)
        return SimpleNamespace(steps=10, total_s=1.0, throughput_source="timed here now (a test)")

    monkeypatch.setattr(estimate, "estimate_spec", fake_estimate)
    data = tmp_path / "data"
    write_sst2(data / "glue" / "SST-2", n=8)
    p = argparse.ArgumentParser()
    add_args(p)
    argv = ["--runs", str(tmp_path / "runs"), "--json", "estimate", "table5", "--tasks", "sst2", "--seeds", "2"]
    assert run(p.parse_args([*argv, "--budget-tokens", "20k", "--data", str(data)])) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["pretraining_runs"] == 3  # stdout holds the JSON alone
    said = [line for line in err.splitlines() if line.startswith("estimating ")]
    assert len(said) == len(estimated) == 3 + 4  # each job once: the second seed's job is the first's estimate
    assert said[0].startswith(f"estimating {estimated[0]}: ") and "timing a training step" in said[0]


@pytest.mark.parametrize(
    "file, text",
    [
        ("run_config.json", '["x"]'),
        ("run_config.json", '{"config": ["default"]}'),
        ("metrics.jsonl", '{"split": "train", "time": 2}\n7\n'),
    ],
)
def test_a_malformed_run_folder_is_skipped_not_a_crash(tmp_path, file, text):
    """A run folder from another version or a hand edit took down the Ablations page's estimate
    (AttributeError on a list or a bare number): it is skipped, and the defaults stand."""
    run = tmp_path / "runs" / "odd"
    run.mkdir(parents=True)
    (run / "job.json").write_text(json.dumps({"kind": "pretrain", "attempts": 1, "launched": 0.0, "ended": 10.0}))
    (run / "status.json").write_text(json.dumps({"state": "finished", "device": "cpu", "started": 1.0}))
    (run / "run_config.json").write_text(json.dumps({"config": {"corpus": ["default"]}}))
    (run / "metrics.jsonl").write_text('{"split": "train", "time": 2}\n')
    (run / file).write_text(text)
    got = estimate.job_overhead("pretrain", "cpu", ("default",), tmp_path / "runs")
    assert got.source in ("measured default", "median of 1 earlier pretrain job(s) here")
