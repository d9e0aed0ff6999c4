"""Runs as read from disk: one `Job` snapshot per run folder, with dead processes detected.

A run launched by the job registry has a job.json; a run started by hand with `bertlab pretrain`
or `bertlab finetune` has only what the trainer writes, and is listed too, read-only. Reading never
writes, and one unreadable file never takes the list down: the run shows what is wrong with it.

Imports the standard library and bertlab.hardware (process probes) / runfolder; no torch.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.hardware import pid_alive
from bertlab.storage.runfolder import (
    ACTIVE_STATES,
    FINAL_STATES,
    JOB_FILE,
    LOG_FILE,
    RUN_CONFIG_FILE,
    STATES,
    STATUS_FILE,
    has_checkpoint,
    has_model,
    is_run_dir,
    log_tail,
)


@dataclass
class Job:
    """A snapshot of one run folder: what the registry, the page and the CLI show."""

    id: str  # the run folder's name
    run_dir: Path
    kind: str | None  # pretrain | finetune | interpret (None when unknown)
    state: str  # queued | preparing | running | finished | failed | cancelled
    managed: bool  # launched by the registry (has job.json); others are read-only
    alive: bool  # one of its processes is running
    submitted: float
    step: int = 0
    total_steps: int | None = None
    progress: float | None = None
    eta_s: float | None = None
    error: str | None = None
    device: str | None = None
    num_gpus: int = 1
    command: str = ""
    status: dict = field(default_factory=dict)
    job: dict = field(default_factory=dict)

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def interrupted(self) -> bool:
        """Stopped mid-run by something other than its own error or a user's cancel: its processes went
        away without a word (power cut, the session's end), or a signal stopped them (a reboot's SIGTERM,
        kill, the OOM killer: the supervisor notes `signalled`). Resume continues it."""
        if not self.managed or self.alive or self.job.get("phase") in ("queued", "cancelled"):
            return False  # not launched, cancelled while queued, or still running
        if self.job.get("signalled"):
            return self.state in ("failed", "cancelled")
        return (
            self.state == "failed"
            and self.status.get("state") in ACTIVE_STATES
            and not self.job.get("cancel_requested")
        )

    @property
    def has_checkpoint(self) -> bool:
        return has_checkpoint(self.run_dir)

    @property
    def has_model(self) -> bool:
        return has_model(self.run_dir)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "run_dir": str(self.run_dir),
            "kind": self.kind,
            "state": self.state,
            "managed": self.managed,
            "alive": self.alive,
            "submitted": self.submitted,
            "step": self.step,
            "total_steps": self.total_steps,
            "progress": self.progress,
            "eta_s": self.eta_s,
            "error": self.error,
            "device": self.device,
            "num_gpus": self.num_gpus,
            "command": self.command,
            "last_train": self.status.get("last_train"),
            "last_eval": self.status.get("last_eval"),
        }


def waiting_for(job: Job, states: dict[str, str] | None = None) -> list[str]:
    """The jobs a queued job still waits for (its `after` list less those that finished), each as
    'ID' or 'ID (failed)': a failed or cancelled one holds it until it is resumed and finishes,
    or this job is cancelled. A job whose folder is gone no longer holds anyone."""
    after = job.job.get("after") or []
    if not isinstance(after, list):
        return []
    out = []
    for dep in after:
        dep = str(dep)
        if states is not None:
            state = states.get(dep)
        else:
            run_dir = job.run_dir.parent / dep
            state = read_job(run_dir).state if is_run_dir(run_dir) else None
        if state is None or state == "finished":
            continue
        out.append(dep if state not in ("failed", "cancelled") else f"{dep} ({state})")
    return out


def error_from_log(run_dir: Path, lines: int = 15) -> str:
    """The one-line CLI error when there is one, else the last lines of the log."""
    tail = log_tail(run_dir, lines=200)
    for line in reversed(tail.splitlines()):
        if re.match(r"^bertlab \w+: error: ", line):
            return line
    kept = tail.splitlines()[-lines:]
    return "\n".join(kept) if kept else "the process ended without writing a log"


def read_job(run_dir: str | Path) -> Job:
    """A job as it stands on disk, with dead processes detected (nothing is written)."""
    run_dir = Path(run_dir)
    problems: list[str] = []
    job = _json_object(run_dir / JOB_FILE, problems)
    status = _json_object(run_dir / STATUS_FILE, problems)
    run_config = {} if job else _json_object(run_dir / RUN_CONFIG_FILE, problems)
    managed = bool(job)
    state = status.get("state") if status.get("state") in STATES else "queued"
    error = status.get("error") if isinstance(status.get("error"), str) else None
    if managed:
        alive = pid_alive(job.get("pid"), job.get("pid_start")) or pid_alive(
            job.get("child_pid"), job.get("child_start")
        )
        phase = job.get("phase", "queued")
        if phase == "queued":
            state, alive = "queued", False
        elif phase == "cancelled":
            state = "cancelled"
        elif state not in FINAL_STATES and not alive:
            if job.get("cancel_requested"):
                state = "cancelled"
            else:
                state = "failed"
                error = error or (
                    f"the job's process (pid {job.get('child_pid') or job.get('pid')}) is gone without "
                    f"finishing; last lines of its log:\n{error_from_log(run_dir)}"
                )
        elif state not in FINAL_STATES and state not in ACTIVE_STATES:
            state = "preparing"  # launched, the recipe has not written its own state yet
    else:
        pid = _int_or_none(status.get("pid"))
        # pid_start tells a reused pid apart. A final state is the trainer's last write: a process
        # that lives on after it (a notebook that called the recipe) no longer holds the run.
        alive = state not in FINAL_STATES and pid_alive(pid, _int_or_none(status.get("pid_start")))
        if state in ACTIVE_STATES and pid and not alive:
            state = "failed"
            error = error or (
                f"the process (pid {pid}) stopped without finishing (killed?); "
                f"last lines of its log:\n{error_from_log(run_dir)}"
            )
    if problems and not alive and has_model(run_dir):
        state, error = "finished", None  # the trainer writes the final model last: the run ended well
    elif problems and not managed and not alive and state not in FINAL_STATES:
        state = "failed"  # a run folder whose files cannot be read: show it, with why
    if problems:  # one bad file never takes the list down: the run shows what is wrong with it
        error = "; ".join(problems) + (f"\n{error}" if error else "")
    if state == "failed" and not error:
        error = error_from_log(run_dir)
    submitted = _number(job.get("submitted")) or _number(status.get("started")) or _mtime(run_dir)
    kind = job.get("kind") or run_config.get("kind") or _kind_from_log(run_dir)
    return Job(
        id=run_dir.name,
        run_dir=run_dir,
        kind=kind if isinstance(kind, str) else None,
        state=state,
        managed=managed,
        alive=alive,
        submitted=submitted,
        step=int(_number(status.get("step")) or 0),
        total_steps=_int_or_none(status.get("total_steps")),
        progress=_number(status.get("progress")),
        eta_s=_number(status.get("eta_s")),
        error=error,
        device=str(job.get("device") or status.get("device") or "") or None,
        num_gpus=int(_number(job.get("num_gpus")) or _number(status.get("world_size")) or 1),
        command=str(job.get("command") or run_config.get("command") or ""),
        status=status,
        job=job,
    )


_COMMAND = re.compile(r"\bbertlab (pretrain|finetune|interpret)\b")


def _kind_from_log(run_dir: Path) -> str | None:
    """pretrain | finetune | interpret from the command at the top of log.txt, for a run that stopped before
    writing run_config.json (a command-line run whose data was missing); None when not there."""
    try:
        with open(run_dir / LOG_FILE, "rb") as f:
            head = f.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return None
    found = _COMMAND.search(head)
    return found.group(1) if found else None


def _json_object(path: Path, problems: list[str]) -> dict:
    """A JSON object from `path`; {} when missing, and a note in `problems` when it is not one."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{path.name} cannot be read ({type(exc).__name__})")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path.name} holds {type(data).__name__}, not an object")
        return {}
    return data


def _number(value: Any) -> float | None:
    """A finite number from a JSON value, else None (a hand-edited file may hold anything)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _int_or_none(value: Any) -> int | None:
    n = _number(value)
    return int(n) if n is not None else None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def run_dirs(root: str | Path) -> list[Path]:
    """The run folders under `root`, most recently changed first ([] when `root` is missing)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if is_run_dir(p)), key=_mtime, reverse=True)
