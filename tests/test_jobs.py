"""The job registry: real background jobs on a tiny model, the queue, cancel/resume, dead processes, estimates.

Every test uses its own runs folder ($BERTLAB_RUNS in tmp), so the project's own runs (e.g. a long
pretraining in runs/) are never listed, cancelled or counted.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bertlab.config import preset
from bertlab.estimates import count_parameters, estimate, estimate_spec
from bertlab.hardware import own_start_time, pid_alive, process_start_time
from bertlab.jobs import JobRegistry
from bertlab.jobspec import JobError, JobSpec, build_command, finetune_args, pretrain_args
from bertlab.runfolder import read_metrics, update_status
from bertlab.runs import Job, read_job

REPO = Path(__file__).resolve().parent.parent
WORDS = ("the a cat dog sat on mat ran to park house in big small red blue quick brown fox jumps over lazy "
         "river tree bird sang sky sun day night").split()


def write_corpus(path: Path, documents: int = 30) -> Path:
    """A Google-format corpus: one sentence a line, a blank line between documents."""
    rng = random.Random(0)
    docs = []
    for _ in range(documents):
        docs.append("\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))).capitalize() + "."
                              for _ in range(8)))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def tiny_spec(corpus: Path, cache: Path, steps: int, name: str = "") -> JobSpec:
    """A one-layer H=32 pretraining: a few seconds of training on 2 cores, most of a job is start-up."""
    overrides = (
        f"corpus={corpus}", "model_overrides={num_layers: 1, hidden_size: 32, num_heads: 2, intermediate_size: 64}",
        "vocab_size=200", "data.dupe_factor=1", "train.eval_every=0", "train.log_every=1", "train.save_every=0",
        "eval_instances=16", f"cache_dir={cache}", "train.num_threads=1",
    )
    args = pretrain_args("configs/tiny.yaml", max_steps=steps, batch_size=8, max_seq_length=32, overrides=overrides)
    return JobSpec("pretrain", args, device="cpu", name=name)


def wait_for(predicate, timeout: float = 120.0, every: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def log_of(job: Job) -> str:
    return (job.run_dir / "log.txt").read_text(errors="replace") if (job.run_dir / "log.txt").is_file() else ""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("jobs-data")
    return write_corpus(d / "corpus.txt"), d / "cache"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("BERTLAB_RUNS", str(root))
    monkeypatch.chdir(REPO)
    return root


# --------------------------------------------------------------------------------------
# Real jobs: queue, cancel, resume, finish (one scenario: every launch costs a Python start-up)
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scenario(tmp_path_factory, data):
    """A (long) starts; B waits in the queue; A is cancelled; B starts and finishes; A resumes and finishes."""
    corpus, cache = data
    root = tmp_path_factory.mktemp("scenario") / "runs"
    old_env, old_cwd = os.environ.get("BERTLAB_RUNS"), os.getcwd()
    os.environ["BERTLAB_RUNS"] = str(root)
    os.chdir(REPO)
    reg = JobRegistry(root, cpu_slots=1, kill_timeout_s=60)
    seen: dict = {}
    try:
        a = reg.submit(tiny_spec(corpus, cache, steps=150, name="a"))
        b = reg.submit(tiny_spec(corpus, cache, steps=6, name="b"))
        seen["a_after_submit"], seen["b_after_submit"] = a.state, b.state
        wait_for(lambda: read_job(a.run_dir).step >= 3, what="A running")
        seen["b_while_a_runs"] = read_job(b.run_dir).state
        seen["a_cancelled"] = reg.cancel(a.id, wait=True, timeout_s=60)
        b_done = wait_for(lambda: (j := read_job(b.run_dir)).is_final and not j.alive and j, what="B finished")
        seen["b_done"] = b_done
        seen["a_resumed"] = reg.resume(a.id)
        seen["a_done"] = wait_for(lambda: (j := read_job(a.run_dir)).is_final and not j.alive and j, what="A finished")
        seen["a"], seen["b"], seen["root"] = a, b, root
        yield seen
    finally:
        for j in JobRegistry(root).list(start_queued=False):  # never leave a process behind
            if j.alive:
                JobRegistry(root).cancel(j.id, wait=True, timeout_s=10)
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("BERTLAB_RUNS", None)
        else:
            os.environ["BERTLAB_RUNS"] = old_env


def test_second_job_waits_in_the_queue_until_the_slot_frees(scenario):
    assert scenario["a_after_submit"] == "preparing"  # started at once: the CPU slot was free
    assert scenario["b_after_submit"] == "queued"
    assert scenario["b_while_a_runs"] == "queued"
    a_first_end = scenario["a_cancelled"].job["ended"]
    b = scenario["b_done"]
    assert b.job["launched"] >= a_first_end - 0.5, "B started before A had stopped"


def test_job_runs_to_completion(scenario):
    b = scenario["b_done"]
    assert b.state == "finished", (b.error, log_of(b))
    assert b.step == 6 and b.has_model
    steps = [m["step"] for m in read_metrics(b.run_dir) if m["split"] == "train"]
    assert steps == list(range(1, 7))
    assert "bertlab pretrain" in b.command and (b.run_dir / "job.json").is_file()


def test_cancelled_job_saves_a_checkpoint_and_resumes_to_the_end(scenario):
    a = scenario["a_cancelled"]
    assert a.state == "cancelled" and not a.alive, log_of(a)
    stopped_at = a.status["checkpoint_step"]
    assert 3 <= stopped_at < 150 and a.has_checkpoint
    assert scenario["a_resumed"].state in ("queued", "preparing")
    done = scenario["a_done"]
    assert done.state == "finished", (done.error, log_of(done))
    assert done.step == 150 and done.job["attempts"] == 2
    assert "--resume" in done.job["argv"]
    assert f"resumed from step {stopped_at}" in log_of(done)
    steps = {m["step"] for m in read_metrics(done.run_dir) if m["split"] == "train"}
    assert steps == set(range(1, 151))  # no gap: the resumed run continued where the checkpoint was


def test_new_registry_sees_every_earlier_run(scenario):
    fresh = JobRegistry(scenario["root"])  # what an app restart does
    jobs = {j.id: j for j in fresh.list()}
    assert set(jobs) == {scenario["a"].id, scenario["b"].id}
    assert all(j.state == "finished" and j.managed and j.kind == "pretrain" for j in jobs.values())
    assert fresh.list()[0].id == scenario["b"].id  # newest first


def test_finished_job_can_be_deleted_but_not_resumed(scenario):
    reg = JobRegistry(scenario["root"])
    with pytest.raises(JobError, match="finished"):
        reg.resume(scenario["b"].id)
    with pytest.raises(JobError, match="already finished"):
        reg.cancel(scenario["b"].id)
    reg.delete(scenario["b"].id)
    assert not scenario["b"].run_dir.exists()
    with pytest.raises(JobError, match="no job"):
        reg.get(scenario["b"].id)


# --------------------------------------------------------------------------------------
# Failures
# --------------------------------------------------------------------------------------
def _fake_launched_job(root: Path, name: str, pid: int, state: str = "running", log: str = "") -> Path:
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "job.json").write_text(json.dumps({
        "kind": "pretrain", "args": [], "device": "cpu", "num_gpus": 1, "cwd": str(REPO), "command": "bertlab pretrain",
        "submitted": time.time(), "phase": "launched", "pid": pid, "child_pid": pid, "attempts": 1,
    }))
    (run_dir / "status.json").write_text(json.dumps({"state": state, "step": 7, "pid": pid}))
    (run_dir / "log.txt").write_text(log)
    return run_dir


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_dead_process_is_reported_failed_with_its_log(runs):
    run_dir = _fake_launched_job(runs, "crashed", _dead_pid(), log="step 7\nRuntimeError: CUDA out of memory\n")
    job = JobRegistry(runs).get("crashed")
    assert job.state == "failed" and not job.alive
    assert "is gone without finishing" in job.error and "CUDA out of memory" in job.error
    # read-only detection: status.json is left as the trainer wrote it
    assert json.loads((run_dir / "status.json").read_text())["state"] == "running"
    # a cancel that was asked for before the process died reads as cancelled, not failed
    job_json = json.loads((run_dir / "job.json").read_text())
    (run_dir / "job.json").write_text(json.dumps(job_json | {"cancel_requested": time.time()}))
    assert JobRegistry(runs).get("crashed").state == "cancelled"


def test_run_started_outside_the_registry_is_listed_read_only(runs):
    run_dir = runs / "by-hand"
    run_dir.mkdir(parents=True)
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 3, "pid": _dead_pid()}))
    (run_dir / "run_config.json").write_text(json.dumps({"kind": "pretrain", "command": "bertlab pretrain ..."}))
    live = runs / "live-by-hand"
    live.mkdir()
    (live / "status.json").write_text(json.dumps({"state": "running", "step": 3, "pid": os.getpid()}))
    reg = JobRegistry(runs)
    jobs = {j.id: j for j in reg.list()}
    assert jobs["by-hand"].state == "failed" and not jobs["by-hand"].managed
    assert jobs["live-by-hand"].state == "running" and jobs["live-by-hand"].alive
    with pytest.raises(JobError, match="outside the job registry"):
        reg.cancel("live-by-hand")
    with pytest.raises(JobError, match="cancel it first"):
        reg.delete("live-by-hand")
    # (#13) a run by hand that is not alive is not 'started outside the registry' to cancel: it ended; delete it
    with pytest.raises(JobError, match="has already failed; nothing to cancel"):
        reg.cancel("by-hand")
    reg.delete("by-hand")
    assert not run_dir.exists()


def test_command_that_fails_is_marked_failed_with_the_error(runs, data):
    corpus, cache = data
    empty = runs.parent / "empty.txt"
    empty.write_text("\n")
    reg = JobRegistry(runs, cpu_slots=1)
    job = reg.submit(tiny_spec(empty, cache, steps=5))
    done = wait_for(lambda: (j := reg.get(job.id)).is_final and not j.alive and j, what="the failing job to end")
    assert done.state == "failed"
    assert done.job["returncode"] == 2
    assert "fewer than two documents" in done.error, done.error  # the recipe records its own error


# --------------------------------------------------------------------------------------
# Scheduling without real processes
# --------------------------------------------------------------------------------------
def test_queue_gives_one_job_per_gpu_first_come_first_served(runs, monkeypatch):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    launched: list[tuple[str, list[int]]] = []

    def fake_launch(self, job, gpus):  # record the decision; pretend a live process took the slot
        launched.append((job.id, gpus))
        data = json.loads((job.run_dir / "job.json").read_text())
        data.update(phase="launched", pid=sleeper.pid, gpus=gpus)
        (job.run_dir / "job.json").write_text(json.dumps(data))

    monkeypatch.setattr(JobRegistry, "_launch", fake_launch)
    try:
        reg = JobRegistry(runs, gpus=2, cpu_slots=1)
        spec = JobSpec("pretrain", ("--config", "configs/tiny.yaml"))
        a = reg.submit(JobSpec(spec.kind, spec.args, device="cuda", name="a"))
        b = reg.submit(JobSpec(spec.kind, spec.args, device="cuda", num_gpus=2, name="b"))
        c = reg.submit(JobSpec(spec.kind, spec.args, device="cuda", name="c"))
        d = reg.submit(JobSpec(spec.kind, spec.args, device="cpu", name="d"))
        e = reg.submit(JobSpec(spec.kind, spec.args, device="cpu", name="e"))
        # a takes GPU 0; b needs both GPUs and waits; c waits behind b (first come, first served);
        # d takes the CPU slot; e waits for it
        assert launched == [(a.id, [0]), (d.id, [])]
        assert [reg.get(x.id).state for x in (b, c, e)] == ["queued"] * 3
        assert reg.tick() == []
        sleeper.kill()
        sleeper.wait()
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a and d ended
        assert reg.tick() == [b.id, e.id]
        assert launched[-2:] == [(b.id, [0, 1]), (e.id, [])]
        assert reg.get(c.id).state == "queued"
        assert reg.cancel(c.id).state == "cancelled"  # a queued job is cancelled without a process
    finally:
        sleeper.kill()
        sleeper.wait()


# --------------------------------------------------------------------------------------
# Validation, command lines, estimates
# --------------------------------------------------------------------------------------
def test_bad_specs_are_refused_with_a_plain_reason(runs, data):
    corpus, cache = data
    reg = JobRegistry(runs, gpus=0)
    with pytest.raises(JobError, match="corpus /nope.txt not found"):
        reg.submit(JobSpec("pretrain", pretrain_args("configs/tiny.yaml", corpus="/nope.txt")))
    with pytest.raises(JobError, match="config file configs/none.yaml not found"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/none.yaml")))
    with pytest.raises(JobError, match="no CUDA GPU"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/tiny.yaml"), device="cuda"))
    with pytest.raises(JobError, match="leave out --run-dir"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/tiny.yaml", "--run-dir", "x")))
    with pytest.raises(JobError, match="unknown model size"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/tiny.yaml", "size=huge")))
    with pytest.raises(JobError, match="unknown job kind"):
        reg.submit(JobSpec("distill", ()))
    with pytest.raises(JobError, match="data /nope not found"):
        reg.submit(JobSpec("finetune", finetune_args("sst2", "/nope", None)))
    assert not runs.exists() or not any(runs.iterdir())  # nothing was queued


def test_multi_gpu_command_uses_torchrun():
    spec = JobSpec("pretrain", ("--config", "configs/base.yaml", "train.max_steps=10"), device="cuda", num_gpus=4)
    cmd = build_command(spec, "/runs/x", resume=True, python="/venv/bin/python")
    launcher = cmd[: cmd.index("--standalone")]
    assert launcher in (["/venv/bin/torchrun"], ["/venv/bin/python", "-m", "torch.distributed.run"])
    assert cmd[cmd.index("--standalone"):cmd.index("pretrain") + 1] == ["--standalone", "--nproc_per_node", "4", "-m", "bertlab", "pretrain"]
    assert cmd[-5:] == ["train.device=cuda", "--run-dir", "/runs/x", "--resume", "--no-progress"]
    single = build_command(JobSpec("finetune", ("--task", "sst2"), device="cpu"), "/r", python="py")
    assert single == ["py", "-m", "bertlab", "finetune", "--task", "sst2", "--device", "cpu", "--run-dir", "/r", "--no-progress"]


def test_form_fields_become_recipe_arguments():
    args = pretrain_args("configs/tiny.yaml", size="mini", corpus="default, /data/a.txt", max_time_s=600,
                         learning_rate=1e-4, batch_size=16, max_seq_length=64)
    assert args[:2] == ("--config", "configs/tiny.yaml")
    assert "corpus=[default, /data/a.txt]" in args
    assert {"train.max_steps=0", "train.max_time_s=600.0", "train.max_tokens=0", "train.batch_size=16"} <= set(args)
    long = pretrain_args("configs/tiny.yaml", max_steps=10, max_seq_length=512, masked_lm_prob=0.15, snapshots=True)
    assert {"data.max_predictions_per_seq=77", "data.masked_lm_prob=0.15", "train.snapshots=true"} <= set(long)
    assert "data.max_predictions_per_seq=26" in pretrain_args(None, max_steps=1, max_seq_length=128, masked_lm_prob=0.2)
    with pytest.raises(JobError, match="masked share"):
        pretrain_args(None, max_steps=1, masked_lm_prob=1.5)
    ft = finetune_args("mrpc", "/d", "/m", mode="feature", max_steps=100, learning_rate=2e-5)
    assert ft == ("--task", "mrpc", "--data", "/d", "--mode", "feature", "--model", "/m", "--max-steps", "100", "--lr", "2e-05")
    with pytest.raises(JobError, match="unknown task"):
        finetune_args("imdb", "/d")


def test_parameter_count_matches_the_model():
    from bertlab.model import BertForPreTraining

    for cfg in (preset("tiny", vocab_size=500), preset("mini", vocab_size=300, use_nsp_head=False)):
        assert count_parameters(cfg) == BertForPreTraining(cfg).num_parameters()
    assert abs(count_parameters(preset("base")) - 110e6) < 1e6  # the paper's BERT-base: 110M


def test_estimate_is_sane(runs):
    base = preset("base")
    small = estimate(base, batch_size=32, seq_length=128, max_steps=1000, device="cpu")
    big = estimate(base, batch_size=64, seq_length=128, max_steps=1000, device="cpu")
    longer = estimate(base, batch_size=32, seq_length=128, max_steps=2000, device="cpu")
    assert small.parameters == count_parameters(base)
    assert small.weights_gb == pytest.approx(small.parameters * 4 / 2**30)
    assert small.optimizer_gb == pytest.approx(small.parameters * 12 / 2**30)  # grads + Adam m, v
    assert big.activations_gb > 1.9 * small.activations_gb - 0.1 and big.weights_gb == small.weights_gb
    assert longer.seconds == pytest.approx(2 * small.seconds)
    assert 1 < small.total_gb < 20  # BERT-base, batch 32 x 128: a few GB
    assert small.throughput_source.startswith("tabulated")
    gpu = estimate(base, batch_size=32, seq_length=128, max_steps=1000, device="cuda")
    assert gpu.seconds < small.seconds / 100  # a GPU is orders of magnitude faster
    assert gpu.activations_gb < small.activations_gb  # bf16 and fused attention
    two = estimate(base, batch_size=32, seq_length=128, max_steps=1000, device="cuda", num_gpus=2)
    assert two.tokens_per_step == 2 * gpu.tokens_per_step and two.total_gb == pytest.approx(gpu.total_gb)
    timed = estimate(base, batch_size=32, seq_length=128, max_time_s=600, device="cpu")
    assert timed.seconds == 600 and timed.steps == int(600 / (small.seconds / 1000))
    frozen = estimate(base, pretraining=False, trainable_fraction=0.01, device="cpu")
    assert frozen.optimizer_gb < small.optimizer_gb / 50
    with pytest.raises(JobError):
        estimate(base, device="tpu")


def test_estimate_uses_measured_throughput_of_an_earlier_run(runs):
    cfg = preset("tiny", vocab_size=1000)
    run = runs / "earlier"
    run.mkdir(parents=True)
    (run / "run_config.json").write_text(json.dumps({"kind": "pretrain", "model_config": {
        "num_layers": 2, "hidden_size": 128, "num_heads": 2, "intermediate_size": 512}, "config": {"data": {"max_seq_length": 128}}}))
    (run / "status.json").write_text(json.dumps({"state": "finished", "device": "cpu"}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"split": "train", "step": s, "seq_per_s": 10.0}) + "\n" for s in range(5)))
    est = estimate(cfg, batch_size=32, seq_length=128, max_steps=100, device="cpu", runs_dir=runs)
    assert est.throughput_source == "measured in run earlier" and est.tokens_per_s == 1280.0
    assert est.seconds == pytest.approx(100 * 32 / 10.0)  # 3.2 s a step at 10 sequences/s


def test_estimate_reads_finetuning_runs_too(runs):
    """A fine-tuning run_config has `data` as a path and max_seq_length at the top."""
    run = runs / "finetuned"
    run.mkdir(parents=True)
    (run / "run_config.json").write_text(json.dumps({"kind": "finetune", "config": {"data": "/d", "max_seq_length": 64},
                                                     "model_config": {"num_layers": 2, "hidden_size": 128, "num_heads": 2,
                                                                      "intermediate_size": 512}}))
    (run / "status.json").write_text(json.dumps({"state": "finished", "device": "cpu"}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"split": "train", "step": s, "seq_per_s": 20.0}) + "\n" for s in range(4)))
    est = estimate(preset("tiny"), batch_size=32, seq_length=64, max_steps=10, device="cpu", runs_dir=runs)
    assert est.throughput_source == "measured in run finetuned" and est.tokens_per_s == 20.0 * 64


def test_estimate_of_a_spec(runs, data):
    corpus, cache = data
    est = estimate_spec(tiny_spec(corpus, cache, steps=40), cwd=REPO, runs_dir=runs)
    assert est.steps == 40 and est.tokens_per_step == 8 * 32 and est.device == "cpu"
    assert est.parameters == count_parameters(preset("tiny", vocab_size=200, num_layers=1, hidden_size=32, num_heads=2,
                                                     intermediate_size=64, max_position_embeddings=512))


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def test_cli_submit_list_show_and_cancel_a_queued_job(runs, capsys, monkeypatch):
    from bertlab.cli import main

    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])  # keep the job queued: no process in this test
    assert main(["jobs", "submit", "--json", "--name", "cli", "pretrain", "--config", "configs/tiny.yaml", "train.max_steps=5"]) == 0
    submitted = json.loads(capsys.readouterr().out)
    assert submitted["state"] == "queued" and submitted["id"].startswith("cli-")
    assert main(["jobs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [j["id"] for j in listed] == [submitted["id"]]
    assert main(["jobs", "show", submitted["id"]]) == 0
    assert "train.max_steps=5" in capsys.readouterr().out
    assert main(["jobs", "cancel", "--json", submitted["id"]]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "cancelled"
    assert main(["jobs", "cancel", submitted["id"]]) == 2
    assert "nothing to cancel" in capsys.readouterr().err
    assert main(["jobs", "estimate", "--json", "pretrain", "--config", "configs/tiny.yaml", "train.max_steps=5"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 5
    assert main(["jobs", "delete", submitted["id"]]) == 0
    assert main(["jobs", "list"]) == 0 and "no jobs" in capsys.readouterr().out


def test_signal_reaches_only_the_jobs_own_process_group(runs):
    """Cancel signals the group the supervisor made for the trainer, never a pid it did not record."""
    pid = _dead_pid()
    run_dir = _fake_launched_job(runs, "gone", pid)
    job = read_job(run_dir)
    assert JobRegistry._signal(job, signal.SIGTERM) is False


def test_resume_waits_for_a_cancelled_job_that_is_still_exiting(runs, monkeypatch):
    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        _fake_launched_job(runs, "saving", slow.pid, state="cancelled")
        _fake_launched_job(runs, "exiting", quick.pid, state="cancelled")
        reg = JobRegistry(runs)
        assert reg.get("saving").alive and reg.get("saving").state == "cancelled"
        with pytest.raises(JobError, match="still stopping"):
            reg.resume("saving", wait_s=0.3)
        resumed = reg.resume("exiting", wait_s=30)
        assert resumed.state == "queued" and resumed.job["resume"] is False  # no checkpoint: from scratch
    finally:
        for proc in (slow, quick):
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("status, job_extra", [
    ("[1, 2]", {}),
    ('"hello"', {}),
    ('{"state": "running", "step": "abc", "progress": "x", "eta_s": [1]}', {}),
    ('{"state": "finished", "step": 3', {}),  # truncated
    ('{"state": ["odd"]}', {"submitted": "yesterday", "num_gpus": "two"}),
])
def test_one_bad_run_folder_never_takes_the_list_down(runs, status, job_extra, capsys, monkeypatch):
    good = _fake_launched_job(runs, "good", _dead_pid())
    bad = _fake_launched_job(runs, "bad", _dead_pid())
    (bad / "status.json").write_text(status)
    if job_extra:
        job = json.loads((bad / "job.json").read_text())
        (bad / "job.json").write_text(json.dumps(job | job_extra))
    reg = JobRegistry(runs)
    jobs = {j.id: j for j in reg.list(start_queued=False)}
    assert set(jobs) == {"good", "bad"} and jobs["good"].state == "failed"
    b = jobs["bad"]
    assert isinstance(b.step, int) and isinstance(b.submitted, float) and b.num_gpus >= 1
    assert b.state in ("failed", "cancelled", "finished") and b.error
    from bertlab.jobs_view import jobs_table

    assert jobs_table(list(jobs.values()))  # the Jobs page's table is drawn
    assert good.exists()
    if not status.startswith('{"state": "running"') and not job_extra:  # status.json unreadable or not an object
        (bad / "model").mkdir()
        (bad / "model" / "config.json").write_text("{}")
        finished = JobRegistry(runs).get("bad")
        assert finished.state == "finished"  # its final model is there: it ended well
        # what cannot be read, and nothing about a process gone without finishing
        assert len(finished.error.splitlines()) == 1 and "status.json" in finished.error
        from bertlab.jobs import _job_line

        assert finished.error in _job_line(finished)  # `jobs list` says why beside the run
    # the queue goes on: another job is submitted and listed beside the bad folder
    from bertlab.cli import main

    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])  # queued only: no process in this test
    capsys.readouterr()
    assert main(["jobs", "submit", "--json", "--name", "next", "pretrain", "--config", "configs/tiny.yaml",
                 "train.max_steps=5"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "queued"
    assert main(["jobs", "list"]) == 0
    listed = capsys.readouterr().out
    assert "bad " in listed and "good " in listed and "next-" in listed


def test_plain_run_whose_pid_was_reused_reads_as_failed(runs):
    # (#14) a 'bertlab pretrain' killed with kill -9 stayed 'running' while another process
    # held its pid: the trainer now records pid_start and the run list compares it
    run_dir = runs / "killed-by-hand"
    run_dir.mkdir(parents=True)
    start = process_start_time(os.getpid())
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 3, "pid": os.getpid(), "pid_start": start - 1}))
    job = JobRegistry(runs).get("killed-by-hand")
    assert job.state == "failed" and not job.alive
    assert "stopped without finishing (killed?)" in job.error
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 3, "pid": os.getpid(), "pid_start": start}))
    assert JobRegistry(runs).get("killed-by-hand").state == "running"


def test_trainer_records_its_pid_and_start_time(tmp_path):
    assert own_start_time() == process_start_time(os.getpid())
    status = update_status(tmp_path, state="running", pid=os.getpid(), pid_start=own_start_time())
    assert pid_alive(status["pid"], status["pid_start"])


def test_check_path_allowed_keeps_a_shared_app_inside_the_data_roots(tmp_path, monkeypatch):
    # (#14) a shared app's Train page handed any server path to training
    from bertlab.jobspec import check_path_allowed, data_roots, is_loopback_address

    root = tmp_path / "data"
    (root / "books").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("x")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    check_path_allowed(str(root / "books"), [root])
    check_path_allowed("books", [root], cwd=root)
    for outside in (str(tmp_path / "secret.txt"), str(root / ".." / "secret.txt"), "../secret.txt", "/etc/passwd",
                    str(root / "link")):
        with pytest.raises(JobError, match="outside the data folders"):
            check_path_allowed(outside, [root], cwd=root)
    monkeypatch.setenv("BERTLAB_DATA_ROOTS", os.pathsep.join([str(root), str(tmp_path / "more")]))
    assert data_roots() == [root.resolve(), (tmp_path / "more").resolve()]
    monkeypatch.delenv("BERTLAB_DATA_ROOTS")
    assert data_roots() == [REPO.resolve(), (REPO.parent / "shared" / "data").resolve()]
    assert all(is_loopback_address(a) for a in ("127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback_address(a) for a in ("", None, "0.0.0.0", "::", "192.168.1.5", "example.org"))
