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
from bertlab.jobs.estimates.spec import estimate_spec
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
        return SimpleNamespace(steps=10, total_s=1.0, throughput_source="timed here now (a test)", notes=())

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


def test_cpu_slots_run_jobs_side_by_side_each_slowed_as_measured(tmp_path, monkeypatch):
    """With BERTLAB_CPU_SLOTS=2 a tiny Table 8 suite took 73 s on 1-thread jobs (140 s one at a time) and 255 s on
    torch's default 2 threads a job (150 s one at a time): the estimate said 'one after another' either way."""

    def fake_estimate(job, cwd, **kwargs):
        pretraining = job.kind == "pretrain"
        notes = (estimate.TIME_BUDGET_NOTE,) if pretraining else ()
        return SimpleNamespace(steps=100 if pretraining else 10, total_s=10.0, throughput_source="x", notes=notes)

    monkeypatch.setattr(estimate, "estimate_spec", fake_estimate)
    spec = planning.SuiteSpec("table8", tasks=("sst2",), seeds=1, budget_s=10, data=_task_folders(tmp_path))
    one = estimate.estimate_suite(spec, gpus=0, registry=JobRegistry(tmp_path / "runs", cpu_slots=1, gpus=0))
    assert one.slots == 1 and one.sharing == "" and one.side_by_side_s == one.total_s
    assert one.one_at_a_time_s == pytest.approx(one.total_s)
    assert "one after another" in one.text

    fit = estimate.estimate_suite(replace(spec, threads=1), gpus=0, registry=JobRegistry(tmp_path / "r", 2, 0))
    pre = [r for r in fit.runs if r.column == "pretraining"]
    tune = [r for r in fit.runs if r.column != "pretraining"]
    assert fit.slots == 2 and len(pre) == 6 and len(tune) == 12  # each task both ways (frozen features too)
    # a time budget keeps its 10 s beside another job and fits fewer steps; a step budget takes longer
    assert {(r.steps, r.seconds - r.start_s - r.end_s) for r in pre} == {(round(100 / 1.05), 10.0)}
    assert [r.seconds - r.start_s - r.end_s for r in tune] == pytest.approx([10.0 * estimate.CPU_SIDE_BY_SIDE] * 12)
    assert fit.one_at_a_time_s == pytest.approx(one.one_at_a_time_s)
    assert fit.side_by_side_s == pytest.approx(3 * pre[0].seconds + sum(r.seconds for r in tune) / 2)
    assert fit.side_by_side_s < 0.6 * fit.one_at_a_time_s and "2 CPU jobs at a time" in fit.text

    monkeypatch.setattr(estimate, "default_threads", lambda *slots: 2)  # e.g. OMP_NUM_THREADS=2 exported
    monkeypatch.setattr(estimate.os, "cpu_count", lambda: 2)
    over = estimate.estimate_suite(spec, gpus=0, registry=JobRegistry(tmp_path / "r", 2, 0))
    assert {r.slowdown for r in over.runs if r.column != "pretraining"} == {estimate.CPU_OVERSUBSCRIBED}
    assert over.side_by_side_s > over.one_at_a_time_s  # slower in all than one job at a time, as measured
    assert "oversubscribe this machine's 2 cores" in over.text and "--threads 1" in over.text
    assert over.to_dict()["cpu_slots"] == 2


def test_cpu_slots_come_from_the_registry_else_the_environment(monkeypatch):
    assert estimate.cpu_slots(None) == 1
    monkeypatch.setenv("BERTLAB_CPU_SLOTS", "3")
    assert estimate.cpu_slots(None) == 3 and estimate.cpu_slots(JobRegistry("/nonexistent", 2, 0)) == 2
    assert estimate.cpu_sharing(1, 8, 2) == (1.0, "")
    assert estimate.cpu_sharing(2, 1, 2)[0] == estimate.CPU_SIDE_BY_SIDE
    assert estimate.cpu_sharing(3, 1, 2)[0] == estimate.CPU_OVERSUBSCRIBED
