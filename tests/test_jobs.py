"""The job registry and its supervisor: real background jobs on a tiny model, the queue, cancel/resume, signals.

Every test uses its own runs folder ($BERTLAB_RUNS in tmp), so the project's own runs (e.g. a long
pretraining in runs/) are never listed, cancelled or counted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO, dead_pid, fake_launched_job, log_of, tiny_spec, wait_for

from bertlab.hardware import own_start_time, pid_alive, process_start_time
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.runs import read_job
from bertlab.jobs.spec import JobError, JobSpec
from bertlab.storage.runfolder import read_metrics, update_status


# --------------------------------------------------------------------------------------
# Real jobs: queue, cancel, resume, finish (one scenario: every launch costs a Python start-up)
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scenario(tmp_path_factory, job_data):
    """A (long) starts; B waits in the queue; A is cancelled; B starts and finishes; A resumes and finishes."""
    corpus, cache = job_data
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
def test_command_that_fails_is_marked_failed_with_the_error(runs, job_data):
    corpus, cache = job_data
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


def test_several_jobs_share_a_gpu_when_asked(runs, monkeypatch):
    """$BERTLAB_JOBS_PER_GPU=2: one-GPU jobs go to the least loaded GPU until each holds two; a job of
    two GPUs waits until both are idle, and the jobs behind it wait their turn."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    launched: list[tuple[str, list[int]]] = []

    def fake_launch(self, job, gpus):
        launched.append((job.id, gpus))
        data = json.loads((job.run_dir / "job.json").read_text())
        data.update(phase="launched", pid=sleeper.pid, gpus=gpus)
        (job.run_dir / "job.json").write_text(json.dumps(data))

    monkeypatch.setattr(JobRegistry, "_launch", fake_launch)
    monkeypatch.setenv("BERTLAB_JOBS_PER_GPU", "2")
    try:
        reg = JobRegistry(runs, gpus=2, cpu_slots=1)
        assert reg.jobs_per_gpu == 2
        spec = JobSpec("pretrain", ("--config", "configs/tiny.yaml"))
        one = [reg.submit(JobSpec(spec.kind, spec.args, device="cuda", name=f"j{i}")) for i in range(5)]
        assert launched == [(one[0].id, [0]), (one[1].id, [1]), (one[2].id, [0]), (one[3].id, [1])]
        assert reg.get(one[4].id).state == "queued"  # every GPU holds two
        wide = reg.submit(JobSpec(spec.kind, spec.args, device="cuda", num_gpus=2, name="wide"))
        sleeper.kill()
        sleeper.wait()
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        assert reg.tick() == [one[4].id]  # all ended: j4 goes to GPU 0, so the wide job waits for it
        assert launched[-1] == (one[4].id, [0])
        behind = reg.submit(JobSpec(spec.kind, spec.args, device="cuda", name="behind"))  # GPU 1 is free
        assert reg.get(wide.id).state == "queued" and reg.get(behind.id).state == "queued"  # behind it
        sleeper.kill()
        sleeper.wait()
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        assert reg.tick() == [wide.id]  # both GPUs idle: the wide job takes them, whole
        assert launched[-1] == (wide.id, [0, 1]) and reg.tick() == []  # nothing shares a wide job's GPUs
    finally:
        sleeper.kill()
        sleeper.wait()
    assert JobRegistry(runs, gpus=1, jobs_per_gpu=3).jobs_per_gpu == 3


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def test_signal_reaches_only_the_jobs_own_process_group(runs):
    """Cancel signals the group the supervisor made for the trainer, never a pid it did not record."""
    pid = dead_pid()
    run_dir = fake_launched_job(runs, "gone", pid)
    job = read_job(run_dir)
    assert JobRegistry._signal(job, signal.SIGTERM) is False


def test_resume_waits_for_a_cancelled_job_that_is_still_exiting(runs, monkeypatch):
    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        fake_launched_job(runs, "saving", slow.pid, state="cancelled")
        fake_launched_job(runs, "exiting", quick.pid, state="cancelled")
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


def test_trainer_records_its_pid_and_start_time(tmp_path):
    assert own_start_time() == process_start_time(os.getpid())
    status = update_status(tmp_path, state="running", pid=os.getpid(), pid_start=own_start_time())
    assert pid_alive(status["pid"], status["pid_start"])


def _patch_job(run_dir, **fields) -> None:
    data = json.loads((run_dir / "job.json").read_text())
    (run_dir / "job.json").write_text(json.dumps({**data, **fields}))


def test_resume_interrupted_queues_every_job_whose_process_went_away(runs, monkeypatch, capsys):
    """After a reboot every running job shows failed; `jobs resume --interrupted` queues those again
    (oldest first) and leaves alone a job that failed with its own error or was cancelled."""
    from bertlab.cli import main

    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])
    gone = dead_pid()
    fake_launched_job(runs, "first", gone)
    fake_launched_job(runs, "second", gone, state="preparing")
    fake_launched_job(runs, "broken", gone, state="failed")  # the trainer said why it failed
    stopped = fake_launched_job(runs, "stopped", gone, state="cancelled")  # a user's cancel
    _patch_job(stopped, cancel_requested=1.0)
    rebooted = fake_launched_job(runs, "rebooted", gone, state="cancelled")  # the supervisor got SIGTERM
    _patch_job(rebooted, cancel_requested=1.0, signalled=True)
    oom = fake_launched_job(runs, "oom", gone, state="failed")  # the trainer alone was SIGKILLed
    _patch_job(oom, signalled=True)
    names = ("first", "second", "broken", "stopped", "rebooted", "oom")
    reg = JobRegistry(runs)
    assert [reg.get(n).interrupted for n in names] == [True, True, False, False, True, True]
    assert main(["jobs", "--runs", str(runs), "resume", "--interrupted"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["first", "second", "rebooted", "oom"]
    states = [read_job(runs / n).state for n in names]
    assert states == ["queued", "queued", "failed", "cancelled", "queued", "queued"]
    assert not read_job(rebooted).job.get("signalled")  # a later cancel by a user is a user's cancel
    assert main(["jobs", "--runs", str(runs), "resume", "--interrupted"]) == 0
    assert "no interrupted jobs" in capsys.readouterr().out
    assert main(["jobs", "--runs", str(runs), "resume"]) != 0  # neither an id nor --interrupted
    assert "--interrupted" in capsys.readouterr().err


@pytest.mark.parametrize("who", ["supervisor", "trainer"])
def test_a_signal_from_outside_marks_the_job_interrupted(runs, monkeypatch, who):
    """A reboot's SIGTERM to the supervisor, or SIGKILL to the trainer alone: the supervisor notes
    `signalled`, so the run reads as interrupted (resumable in bulk), not as a user's cancel."""
    import time

    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])
    run_dir = fake_launched_job(runs, f"cut-{who}", dead_pid())
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    _patch_job(run_dir, argv=sleeper, kill_timeout_s=5, child_pid=None)
    sup = subprocess.Popen([sys.executable, "-m", "bertlab.jobs", "supervise", str(run_dir)], cwd=REPO)
    try:
        child = wait_for(lambda: json.loads((run_dir / "job.json").read_text()).get("child_pid"), what="child")
        time.sleep(0.5)
        os.kill(sup.pid if who == "supervisor" else child, signal.SIGTERM if who == "supervisor" else signal.SIGKILL)
        sup.wait(timeout=30)
    finally:
        sup.kill()
    job = read_job(run_dir)
    assert job.job.get("signalled") is True and job.state in ("cancelled", "failed") and job.interrupted


def test_a_cpu_job_beside_others_gets_its_share_of_the_cores(tmp_path, monkeypatch):
    """With several CPU slots the queue gives each CPU job OMP_NUM_THREADS = its share of the cores (on
    torch's default, two jobs each took every core of a 2-core CPU and ran 4-80x slower); one slot, a GPU
    job or the user's own OMP_NUM_THREADS are left as they are."""
    from bertlab.hardware import default_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    two = JobRegistry(tmp_path / "two", cpu_slots=2)
    assert (
        two._job_env("cpu")["OMP_NUM_THREADS"] == str(default_threads(2))
        and two._job_env("cpu")["BERTLAB_CPU_SLOTS"] == "2"
    )
    assert "OMP_NUM_THREADS" not in two._job_env("cuda")
    assert "OMP_NUM_THREADS" not in JobRegistry(tmp_path / "one", cpu_slots=1)._job_env("cpu")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert two._job_env("cpu")["OMP_NUM_THREADS"] == "4"
