"""Jobs: pretraining, fine-tuning and interpretation studies (a probe, a head study) launched as
background processes, queued per device.

A job is a run folder (see bertlab.storage.runfolder for its layout) plus the command line that fills it,
saved as `job.json`. Everything lives on disk, so the Streamlit app, the CLI and the tests all
see the same jobs, and a new `JobRegistry` (an app restart, another terminal) sees every earlier
run. Run folders that `bertlab pretrain` / `bertlab finetune` made on their own (no job.json) are
listed too, read-only.

    run_dir/job.json   {"kind": "pretrain"|"finetune"|"interpret", "args": [...], "device", "num_gpus", "cwd",
                        "command", "submitted", "phase": queued|launched|ended|cancelled, "resume",
                        "pid", "pid_start", "child_pid", "child_start", "gpus", "launched", "ended",
                        "returncode", "cancel_requested", "signalled" (stopped by a signal, not a cancel), "attempts"}
    run_dir/log.txt    stdout + stderr of the job (the trainer's log lines)

Processes. A launched job is a small *supervisor* (`python -m bertlab.jobs supervise RUN_DIR`,
started with `start_new_session=True`, so closing the browser tab or restarting the app never
touches it) that runs the real command (`python -m bertlab pretrain|finetune|interpret ... --run-dir RUN_DIR`,
or `torchrun --standalone --nproc_per_node N -m bertlab ...` for N > 1 GPUs) in its own process
group, waits for it, and records the outcome: if the trainer died without writing a final state
(a crash, an out-of-memory kill, a bad argument caught before training), the supervisor marks the
run failed with the tail of the log as its error. A job whose processes are all gone while its
status is not final (the supervisor itself was killed, the machine rebooted) is *reported* failed
the same way whenever the registry reads it.

Scheduling. One job per GPU, and one CPU job at a time by default ($BERTLAB_CPU_SLOTS or
`JobRegistry(cpu_slots=...)` to allow more). Small models leave most of a GPU idle (a mini model's step is
launch-bound), so $BERTLAB_JOBS_PER_GPU or `JobRegistry(jobs_per_gpu=...)` lets several one-GPU jobs share
each GPU (an ablation suite's dozen pretraining runs at once); a job of several GPUs still takes only GPUs
that nothing else runs on. Like the CPU slots, the setting belongs to the process that ticks the queue
(supervisors inherit it from the process that launched them), so set it where the app or CLI starts. The choice: no long-lived queue daemon. `tick()`
starts queued jobs (first come, first served per device kind) while a slot is free, under a
file lock so two callers never start the same job; it runs on `submit()`, whenever the UI or the
CLI lists jobs, and in every supervisor right after its job ends, so the queue moves on by itself
even when no browser is open. Only jobs of this registry hold slots: a run started by hand with
`bertlab pretrain` is not counted.

A job across several machines is not launched here: `node_commands` checks it and returns the
torchrun line each machine runs (bertlab.jobs.spec.node_commands), for the user to start there.

Cancel sends SIGTERM to the job's process group: the trainer saves a checkpoint and stops
(state cancelled); the supervisor escalates to SIGKILL after `kill_timeout_s`. Resume relaunches
with `--resume` (from scratch when no checkpoint was saved yet). Delete removes the folder and is
refused while the job's processes are alive.

The pieces around the registry: bertlab.jobs.spec (what a job runs, checked), bertlab.jobs.runs (jobs
as read from disk), bertlab.jobs.estimates.estimate (cost before running), bertlab.hardware (process and GPU
probes), bertlab.jobs.cli (`bertlab jobs ...`); bertlab.storage.runfolder owns the files.

Imports the standard library and those modules; the recipes (with torch) only to validate a job,
so the supervisor and the `bertlab jobs` CLI stay small. Never imports streamlit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bertlab.atomic import locked
from bertlab.hardware import cpu_slots_setting, default_threads, gpu_count, pid_alive, process_start_time
from bertlab.jobs.runs import Job, error_from_log, read_job, waiting_for
from bertlab.jobs.spec import (
    JobError,
    JobSpec,
    NodeCommand,
    build_command,
    check_recipe_args,
    node_commands,
    parse_recipe_args,
    pretrain_config,
    recipe_command,
    validate,
)
from bertlab.storage.runfolder import (
    ACTIVE_STATES,
    FINAL_STATES,
    JOB_FILE,
    LOG_FILE,
    REPO_ROOT,
    RUNS_LOCK_FILE,
    is_run_dir,
    log_tail,
    read_job_file,
    read_metrics,
    read_run_config,
    read_status,
    runs_root,
    set_metrics_aside,
    update_job_file,
    update_status,
    write_job_file,
)

log = logging.getLogger(__name__)

DEFAULT_KILL_TIMEOUT_S = 120.0  # SIGTERM -> SIGKILL; a checkpoint of BERT-large takes a while to write


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "job"


class JobRegistry:
    """Jobs under one runs folder. Holds no state of its own: every call reads the run folders."""

    def __init__(
        self,
        root: str | Path | None = None,
        cpu_slots: int | None = None,
        gpus: int | None = None,
        kill_timeout_s: float = DEFAULT_KILL_TIMEOUT_S,
        jobs_per_gpu: int | None = None,
    ):
        self.root = Path(root).expanduser() if root else runs_root()
        self.cpu_slots = cpu_slots if cpu_slots is not None else cpu_slots_setting()
        self.gpus = gpu_count() if gpus is None else gpus
        self.kill_timeout_s = kill_timeout_s
        env_share = os.environ.get("BERTLAB_JOBS_PER_GPU", "").strip()
        share = jobs_per_gpu if jobs_per_gpu is not None else (int(env_share) if env_share.isdigit() else 1)
        self.jobs_per_gpu = max(1, share)

    # --- reading ---------------------------------------------------------------------------
    def list(self, start_queued: bool = True) -> list[Job]:
        """Every run folder, newest first; starts queued jobs whose slot is free first (see tick)."""
        if start_queued:
            self.tick()
        if not self.root.is_dir():
            return []
        jobs = [read_job(p) for p in self.root.iterdir() if is_run_dir(p)]
        return sorted(jobs, key=lambda j: (j.submitted, j.id), reverse=True)

    def get(self, job_id: str) -> Job:
        run_dir = self._dir(job_id)
        if not is_run_dir(run_dir):
            raise JobError(f"no job {job_id!r} in {self.root}; `bertlab jobs list` shows the jobs there")
        return read_job(run_dir)

    def _dir(self, job_id: str) -> Path:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise JobError(f"{job_id!r} is not a job id; ids are run folder names, as `bertlab jobs list` shows them")
        return self.root / job_id

    def log_tail(self, job_id: str, lines: int = 40) -> str:
        return log_tail(self._dir(job_id), lines=lines)

    def metrics(self, job_id: str) -> list[dict]:
        return read_metrics(self._dir(job_id))

    def same_jobs(self, spec: JobSpec, cwd: str | Path | None = None) -> list[Job]:
        """Jobs not ended yet that run exactly `spec` (kind, arguments, device, GPUs; any name), as
        `submit` would write it: a second Launch click would run the same seed on the same data again."""
        try:
            spec = validate(spec, Path(cwd or os.getcwd()).resolve(), gpus=self.gpus)  # device 'auto' -> cpu
        except JobError:
            return []
        if not self.root.is_dir():
            return []
        same = []
        for run_dir in self.root.iterdir():  # job.json first (one small file), the whole record only on a match
            job = read_job_file(run_dir) if (run_dir / JOB_FILE).is_file() else None
            if (
                isinstance(job, dict)
                and job.get("kind") == spec.kind
                and list(job.get("args", ())) == list(spec.args)
                and job.get("device") == spec.device
                and job.get("num_gpus", 1) == spec.num_gpus
            ):
                same.append(read_job(run_dir))
        return sorted((j for j in same if not j.is_final), key=lambda j: (j.submitted, j.id), reverse=True)

    # --- submitting -----------------------------------------------------------------------
    def submit(self, spec: JobSpec, cwd: str | Path | None = None, start: bool = True) -> Job:
        """Validate `spec`, create its run folder with job.json (state queued) and start it if a slot is free."""
        cwd = Path(cwd or os.getcwd()).resolve()
        spec = validate(spec, cwd, gpus=self.gpus)
        if spec.device == "cuda" and spec.num_gpus > self.gpus:
            raise JobError(f"{spec.num_gpus} GPUs asked for, but this machine has {self.gpus}")
        for dep in spec.after:
            if not is_run_dir(self._dir(dep)):
                raise JobError(f"this job waits for {dep!r}, which is not a job in {self.root}")
        run_dir = self._new_run_dir(spec.name or self._default_name(spec, cwd))
        command = build_command(spec, run_dir)
        write_job_file(
            run_dir,
            {
                "kind": spec.kind,
                "args": list(spec.args),
                "device": spec.device,
                "num_gpus": spec.num_gpus,
                "cwd": str(cwd),
                "command": shlex.join(["bertlab", *recipe_command(spec.kind), *spec.args]),
                "argv": command,
                "submitted": time.time(),
                "phase": "queued",
                "resume": False,
                "attempts": 0,
                "kill_timeout_s": self.kill_timeout_s,
                "after": list(spec.after),
            },
        )
        update_status(run_dir, state="queued", step=0, error=None)
        log.info("submitted %s: %s", run_dir.name, shlex.join(command))
        if start:
            self.tick()
        return read_job(run_dir)

    def node_commands(
        self,
        spec: JobSpec,
        nodes: int,
        master: str,
        cwd: str | Path | None = None,
        run_dir: str | Path | None = None,
        resume: bool = False,
    ) -> tuple[Path, list[NodeCommand]]:
        """(run folder, the torchrun line each of `nodes` machines runs) for a job across machines,
        checked as `submit` checks a job (arguments, paths from `cwd`, config) but neither queued
        nor started, and no folder is made. The run folder is `run_dir`, else a new name in this
        runs folder; either must be the same shared folder on every machine (see
        bertlab.jobs.spec.node_commands). `spec.num_gpus` is the number of processes per machine."""
        cwd = Path(cwd or os.getcwd()).resolve()
        check_recipe_args(spec, cwd)
        if run_dir is None:
            name = _slug(spec.name or self._default_name(spec, cwd))
            run_dir = self.root / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        run_dir = (cwd / Path(run_dir).expanduser()).resolve()
        return run_dir, node_commands(spec, run_dir, nodes, master, resume=resume)

    def _default_name(self, spec: JobSpec, cwd: Path) -> str:
        """The run's name: the fine-tuning task, the study and its task (interpret-probe-upos), or the
        pretraining config's name (a validated spec reads)."""
        ns = parse_recipe_args(spec.kind, spec.args)
        if spec.kind == "finetune":
            return f"finetune-{getattr(ns, 'task', 'task')}"
        if spec.kind == "interpret":
            return f"interpret-{ns.study}-{ns.task}"
        if spec.kind == "distill":
            return f"distill-{Path(ns.teacher).name}-L{ns.layers}"
        return pretrain_config(ns, cwd).name

    def _new_run_dir(self, name: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        base = f"{_slug(name)}-{time.strftime('%Y%m%d-%H%M%S')}"
        for n in range(1, 1000):
            run_dir = self.root / (base if n == 1 else f"{base}-{n}")
            try:
                run_dir.mkdir()
                return run_dir
            except FileExistsError:
                continue
        raise JobError(f"could not create a run folder for {name!r} in {self.root}")

    # --- scheduling ------------------------------------------------------------------------
    def tick(self) -> list[str]:
        """Start queued jobs, oldest first, while their device has a free slot. Returns the ids started."""
        if not self.root.is_dir():
            return []
        started = []
        with locked(self.root / RUNS_LOCK_FILE):
            jobs = [read_job(p) for p in self.root.iterdir() if is_run_dir(p) and (p / JOB_FILE).is_file()]
            gpu_load = [0] * self.gpus  # jobs running on each GPU
            cpu_busy = 0
            for j in jobs:
                if j.job.get("phase") == "launched" and j.alive:
                    if j.job.get("device") == "cuda":
                        self._take(gpu_load, [g for g in j.job.get("gpus") or [] if 0 <= g < self.gpus])
                    else:
                        cpu_busy += 1
            states = {j.id: j.state for j in jobs}
            blocked: set[str] = set()  # first come, first served per device kind
            for j in sorted((j for j in jobs if j.state == "queued"), key=lambda j: (j.submitted, j.id)):
                device = j.job.get("device", "cpu")
                if device in blocked or waiting_for(j, states):
                    continue
                if device == "cuda":
                    gpus = self._free_gpus(gpu_load, int(j.job.get("num_gpus") or 1))
                    if gpus is None:
                        blocked.add(device)
                        continue
                    self._take(gpu_load, gpus)
                else:
                    if cpu_busy >= self.cpu_slots:
                        blocked.add(device)
                        continue
                    cpu_busy += 1
                    gpus = []
                self._launch(j, gpus)
                started.append(j.id)
        return started

    def _take(self, load: list[int], gpus: list[int]) -> None:
        """Count a job on `gpus` in `load`: one share of its GPU, or the whole of each for a job of several."""
        for g in gpus:
            load[g] += self.jobs_per_gpu if len(gpus) > 1 else 1

    def _free_gpus(self, load: list[int], want: int) -> list[int] | None:
        """GPUs for a job of `want` GPUs, or None while it must wait: one GPU job goes to the least
        loaded GPU with a share free; a job of several GPUs takes GPUs nothing else runs on."""
        if want == 1:
            open_ = [g for g in range(self.gpus) if load[g] < self.jobs_per_gpu]
            return [min(open_, key=lambda g: (load[g], g))] if open_ else None
        idle = [g for g in range(self.gpus) if load[g] == 0]
        return idle[:want] if len(idle) >= want else None

    def _job_env(self, device: str) -> dict[str, str]:
        """The environment a job's supervisor (and so its trainer) runs in. A CPU job beside others (several
        CPU slots) gets its share of the cores as OMP_NUM_THREADS unless one is set already: on torch's
        default every job takes every core, and two such jobs on 2 cores ran 4-80x slower each
        (`hardware.default_threads`); a job's own --threads still wins."""
        env = dict(os.environ)
        env["BERTLAB_RUNS"] = str(self.root)  # the supervisor's own tick() must look at this registry
        env["BERTLAB_CPU_SLOTS"] = str(self.cpu_slots)
        env["BERTLAB_JOBS_PER_GPU"] = str(self.jobs_per_gpu)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env["TQDM_DISABLE"] = "1"
        if device != "cuda" and self.cpu_slots > 1 and not env.get("OMP_NUM_THREADS"):
            env["OMP_NUM_THREADS"] = str(default_threads(self.cpu_slots))
        return env

    def _launch(self, job: Job, gpus: list[int]) -> None:
        run_dir = job.run_dir
        spec = JobSpec(
            job.job["kind"],
            tuple(job.job.get("args") or ()),
            job.job.get("device", "cpu"),
            int(job.job.get("num_gpus") or 1),
        )
        resume = bool(job.job.get("resume"))
        argv = build_command(spec, run_dir, resume=resume)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        physical = [v.strip() for v in visible.split(",")] if visible else None
        cuda_visible = (
            ",".join(physical[g] if physical and g < len(physical) else str(g) for g in gpus) if gpus else None
        )
        env = self._job_env(spec.device)
        update_job_file(
            run_dir,
            phase="launched",
            argv=argv,
            gpus=gpus,
            cuda_visible_devices=cuda_visible,
            launched=time.time(),
            ended=None,
            returncode=None,
            cancel_requested=None,
            term_sent=False,
            child_pid=None,
            child_start=None,
            attempts=int(job.job.get("attempts") or 0) + 1,
            kill_timeout_s=self.kill_timeout_s,
        )
        with open(run_dir / LOG_FILE, "ab") as logf:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bertlab.jobs", "supervise", str(run_dir)],
                cwd=job.job.get("cwd") or os.getcwd(),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        update_job_file(run_dir, pid=proc.pid, pid_start=process_start_time(proc.pid))
        update_status(run_dir, state="preparing", pid=proc.pid, error=None)
        log.info("started %s (pid %d%s)", run_dir.name, proc.pid, f", GPUs {cuda_visible}" if gpus else "")

    # --- controlling -----------------------------------------------------------------------
    def cancel(self, job_id: str, wait: bool = False, timeout_s: float | None = None) -> Job:
        """Stop a job: a queued one at once; a running one by SIGTERM to its process group (the trainer
        saves a checkpoint and stops). With `wait`, block until it has ended, sending SIGKILL after
        `timeout_s` (default: the registry's kill timeout)."""
        job = self.get(job_id)
        if job.is_final:  # a run started by hand that ended (or failed early) too: nothing runs to stop
            raise JobError(f"{job_id} has already {job.state}; nothing to cancel")
        if not job.managed:
            raise JobError(
                f"{job_id} was started outside the job registry; stop it where it runs (Ctrl-C or kill its pid)"
            )
        if job.state == "queued":
            update_job_file(job.run_dir, phase="cancelled", ended=time.time())
            update_status(job.run_dir, state="cancelled", ended=time.time())
            return read_job(job.run_dir)
        update_job_file(job.run_dir, cancel_requested=time.time())
        sent = self._signal(job, signal.SIGTERM)
        if sent:
            update_job_file(job.run_dir, term_sent=True)
        log.info("cancel %s: SIGTERM %s", job_id, "sent" if sent else "pending (the supervisor sends it)")
        if wait:
            timeout_s = self.kill_timeout_s if timeout_s is None else timeout_s
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and read_job(job.run_dir).alive:
                time.sleep(0.2)
            job = read_job(job.run_dir)
            if job.alive:
                log.warning("cancel %s: still running after %.0fs; sending SIGKILL", job_id, timeout_s)
                self._signal(job, signal.SIGKILL)
                if pid_alive(job.job.get("pid"), job.job.get("pid_start")):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(job.job["pid"], signal.SIGKILL)
                end = time.monotonic() + 10
                while time.monotonic() < end and read_job(job.run_dir).alive:
                    time.sleep(0.1)
        return read_job(job.run_dir)

    @staticmethod
    def _signal(job: Job, sig: int) -> bool:
        """Send `sig` to the job's trainer process group (never to anything we did not start)."""
        child, start = job.job.get("child_pid"), job.job.get("child_start")
        if not child or not pid_alive(child, start):
            return False
        try:
            os.killpg(int(child), sig)  # the supervisor started the trainer as the leader of its own group
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def resume_interrupted(self) -> list[Job]:
        """Queue again every job whose process went away mid-run (`Job.interrupted`), oldest first so
        the queue keeps their order; each continues from its last checkpoint."""
        stopped = sorted((j for j in self.list(start_queued=False) if j.interrupted), key=lambda j: (j.submitted, j.id))
        return [self.resume(j.id) for j in stopped]

    def resume(self, job_id: str, wait_s: float = 15.0) -> Job:
        """Queue a cancelled or failed job again: `--resume` from its checkpoint, or from scratch without one.

        A job that has just been cancelled may still be writing its checkpoint and exiting; resume
        waits up to `wait_s` seconds for its processes to end.
        """
        job = self.get(job_id)
        if job.state in ("queued", *ACTIVE_STATES):
            raise JobError(f"{job_id} is {job.state}; resume works on cancelled or failed jobs")
        if job.state == "finished":
            raise JobError(f"{job_id} has finished; to train further, submit a new job")
        deadline = time.monotonic() + wait_s
        while job.alive and time.monotonic() < deadline:
            time.sleep(0.2)
            job = read_job(job.run_dir)
        if job.alive:
            raise JobError(
                f"{job_id} is still stopping (saving its checkpoint and exiting); try Resume again in a few seconds"
            )
        if not job.managed:
            if job.kind != "pretrain":
                raise JobError(
                    f"{job_id} was started outside the job registry; resume it with the command that made it plus --resume"
                )
            run_config = read_run_config(job.run_dir) or {}
            write_job_file(
                job.run_dir,
                {
                    "kind": "pretrain",
                    "args": [],
                    "device": (job.device or "cpu").split(":")[0],
                    "num_gpus": 1,
                    "cwd": str(REPO_ROOT),
                    "command": run_config.get("command") or "bertlab pretrain",
                    "submitted": job.submitted,
                    "phase": "queued",
                    "attempts": 0,
                    "adopted": True,
                },
            )
        resume = job.has_checkpoint
        if not resume:
            set_metrics_aside(job.run_dir)  # a fresh start: keep the earlier attempt's curve aside, not mixed in
        update_job_file(
            job.run_dir,
            phase="queued",
            resume=resume,
            cancel_requested=None,
            signalled=None,
            ended=None,
            returncode=None,
        )
        # the ETA and speed of the stopped attempt no longer hold; the trainer writes fresh ones
        update_status(job.run_dir, state="queued", error=None, eta_s=None)
        self.tick()
        return read_job(job.run_dir)

    def delete(self, job_id: str) -> None:
        """Remove a job's run folder; refused while its processes run or a queued job waits for it."""
        job = self.get(job_id)
        if job.alive or job.state in ACTIVE_STATES:
            raise JobError(f"{job_id} is {job.state}; cancel it first, then delete it")
        if job.run_dir.resolve().parent != self.root.resolve():
            raise JobError(f"{job.run_dir} is not inside {self.root}; refusing to delete it")
        waiting = [
            j.id for j in self.list(start_queued=False) if j.state == "queued" and job_id in (j.job.get("after") or [])
        ]
        if waiting:  # they would start without the model they wait for, and fail
            shown = ", ".join(waiting[:3]) + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else "")
            raise JobError(f"{job_id} is waited for by {len(waiting)} queued job(s) ({shown}); cancel them first")
        shutil.rmtree(job.run_dir)
        log.info("deleted %s", job_id)


# --------------------------------------------------------------------------------------
# The supervisor (python -m bertlab.jobs supervise RUN_DIR)
# --------------------------------------------------------------------------------------
def supervise(run_dir: str | Path) -> int:
    """Run a job's command, wait for it, record how it ended, then start the next queued job."""
    run_dir = Path(run_dir)
    job = read_job_file(run_dir)
    argv = job.get("argv")
    if not argv:
        log.error("%s has no command to run", run_dir / JOB_FILE)
        return 2
    requested = {"term": False}

    def on_term(signum, frame):  # someone signalled the supervisor itself: treat it as a cancel
        requested["term"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    env = dict(os.environ)
    if job.get("cuda_visible_devices") is not None:
        env["CUDA_VISIBLE_DEVICES"] = job["cuda_visible_devices"]
    log.info("=== %s: attempt %s, %s", time.strftime("%Y-%m-%d %H:%M:%S"), job.get("attempts"), shlex.join(argv))
    returncode: int | None = None
    if not job.get("cancel_requested"):
        child = subprocess.Popen(argv, cwd=job.get("cwd") or None, env=env, stdin=subprocess.DEVNULL, process_group=0)
        job = update_job_file(run_dir, child_pid=child.pid, child_start=process_start_time(child.pid))
        killed = False
        while returncode is None:
            try:
                returncode = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            if requested["term"] and not job.get("cancel_requested"):  # not a user's cancel: a reboot, a kill
                job = update_job_file(run_dir, cancel_requested=time.time(), signalled=True)
            else:
                job = read_job_file(run_dir) or job
            asked = job.get("cancel_requested")
            if asked and not job.get("term_sent"):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM)
                job = update_job_file(run_dir, term_sent=True)
            if (
                asked
                and not killed
                and time.time() - asked > float(job.get("kill_timeout_s") or DEFAULT_KILL_TIMEOUT_S)
            ):
                log.warning(
                    "the job did not stop within %.0fs of SIGTERM; sending SIGKILL", float(job.get("kill_timeout_s"))
                )
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                killed = True
        with contextlib.suppress(ProcessLookupError):  # leftovers of the group (torchrun workers)
            os.killpg(child.pid, signal.SIGKILL)
    job = read_job_file(run_dir) or job
    if returncode is not None and returncode < 0 and not job.get("cancel_requested"):
        job = update_job_file(run_dir, signalled=True)  # the trainer alone was killed (kill -9, the OOM killer)
    status = read_status(run_dir)
    if status.get("state") not in FINAL_STATES:
        if job.get("cancel_requested"):
            update_status(run_dir, state="cancelled", ended=time.time())
        else:
            update_status(
                run_dir, state="failed", ended=time.time(), error=f"exit status {returncode}: {error_from_log(run_dir)}"
            )
    update_job_file(run_dir, phase="ended", ended=time.time(), returncode=returncode)
    log.info(
        "=== %s: ended with exit status %s (%s)",
        time.strftime("%Y-%m-%d %H:%M:%S"),
        returncode,
        read_status(run_dir).get("state"),
    )
    try:
        started = JobRegistry(run_dir.parent).tick()
        if started:
            log.info("=== started the next queued job: %s", ", ".join(started))
    except Exception as exc:  # the queue is retried by every list(); never fail the finished job over it
        log.warning("could not start the next queued job: %s", exc)
    return 0


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "supervise":
        logging.basicConfig(level=logging.INFO, format="[jobs] %(message)s", stream=sys.stdout)
        return supervise(argv[1])
    print("usage: python -m bertlab.jobs supervise RUN_DIR  (internal; use `bertlab jobs ...`)", file=sys.stderr)
    return 2
