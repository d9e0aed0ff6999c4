"""The run folder: the one format that training writes and the CLI, the jobs page and the tests read.

    RUNS/                   runs_root(): $BERTLAB_RUNS, else runs/ in the repository
      .jobs.lock            the job registry's lock (bertlab.jobs)
      RUN/
        run_config.json     everything needed to rerun (written by the recipe)
        status.json         {"state": one of STATES, "step", "total_steps", "progress", "eta_s", ...}
        metrics.jsonl       one JSON object a line: {"split": "train"|"eval", "step", "time", ...}
        job.json            how the job registry launched it (absent for a run started by hand)
        log.txt             human-readable log
        vocab.txt           the run's WordPiece vocabulary, kept so that a resume sees the same one
        vocab.json, merges.txt   ... or its byte-level BPE (tokenizer: bpe), as RoBERTa's
        checkpoint/         latest training state: model/ + trainer_state.pt, written atomically
        model/              the final model, Hugging Face-compatible
        snapshots/step-NNNNNNN/   small fp16 models at log-spaced steps (train.snapshots)
        tensorboard/        TensorBoard mirror of the metrics
        result.json         a link to a result kept elsewhere (an interpret job's, beside its model)

Every other module names these files through this one. Reads are forgiving (a missing or
half-written file reads as empty), writes are atomic (bertlab.atomic).

Standard library only (no torch); imports bertlab.atomic, bertlab.errors, bertlab.formatting (an
error on one line), bertlab.storage.modelfolder (is the model written) and bertlab.hardware (process probes, to refuse a folder another live process
trains). `run_log` keeps a command-line run's log lines in its log.txt, as a job's are.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bertlab.atomic import locked, read_json, update_json, write_json_atomic, write_text_atomic
from bertlab.errors import InputError
from bertlab.formatting import one_line
from bertlab.hardware import ancestors, own_start_time, pid_alive
from bertlab.storage.modelfolder import has_config

REPO_ROOT = Path(__file__).resolve().parents[2]

RUN_CONFIG_FILE = "run_config.json"
STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
JOB_FILE = "job.json"
JOB_LOCK_FILE = ".job.lock"
RUNS_LOCK_FILE = ".jobs.lock"
LOG_FILE = "log.txt"
VOCAB_FILE = "vocab.txt"
BPE_VOCAB_FILE = "vocab.json"  # merges.txt beside it (bertlab.models.roberta_tokenizer writes both)
CHECKPOINT_DIR = "checkpoint"
TRAINER_STATE_FILE = "trainer_state.pt"
MODEL_DIR = "model"
SNAPSHOT_DIR = "snapshots"
EARLIER_HISTORY_FILE = "earlier_history.json"  # a continued run: the learning history of the model it started from
TENSORBOARD_DIR = "tensorboard"
RESULT_LINK = "result.json"  # a run whose result lives elsewhere (an interpret study: beside its model)

# A run's state, as status.json holds it: waiting for a slot, getting data and model ready,
# training, then one of the three final states.
STATES = ("queued", "preparing", "running", "finished", "failed", "cancelled")
ACTIVE_STATES = ("preparing", "running")
FINAL_STATES = ("finished", "failed", "cancelled")


def runs_root() -> Path:
    """Where run folders live: $BERTLAB_RUNS, else runs/ at the repository root."""
    env = os.environ.get("BERTLAB_RUNS")
    return Path(env).expanduser() if env else REPO_ROOT / "runs"


def is_run_dir(path: str | Path) -> bool:
    """A visible folder holding one of the files every run has (job.json, status.json, run_config.json)."""
    path = Path(path)
    return (
        path.is_dir()
        and not path.name.startswith(".")
        and any((path / n).is_file() for n in (JOB_FILE, STATUS_FILE, RUN_CONFIG_FILE))
    )


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def model_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / MODEL_DIR


def snapshot_root(run_dir: str | Path) -> Path:
    return Path(run_dir) / SNAPSHOT_DIR


def snapshot_dir(run_dir: str | Path, step: int) -> Path:
    return snapshot_root(run_dir) / f"step-{step:07d}"


def list_snapshots(run_dir: str | Path) -> list[Path]:
    """The complete snapshot folders of a run (a config.json written), in step order."""
    root = snapshot_root(run_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-") and has_config(p))


def has_checkpoint(run_dir: str | Path) -> bool:
    """True once the trainer has saved a training state that `--resume` can continue from."""
    return (checkpoint_dir(run_dir) / TRAINER_STATE_FILE).is_file()


def has_model(run_dir: str | Path) -> bool:
    """True once the final model is written (the trainer writes it last)."""
    return has_config(model_dir(run_dir))


# --- status.json -----------------------------------------------------------------------
def read_status(run_dir: str | Path) -> dict:
    """status.json as a dict ({} when missing or unreadable)."""
    status = read_json(Path(run_dir) / STATUS_FILE, {})
    return status if isinstance(status, dict) else {}


def update_status(run_dir: str | Path, **fields: Any) -> dict:
    """Merge `fields` into status.json with an 'updated' time stamp; returns the new status."""
    return update_json(Path(run_dir) / STATUS_FILE, **fields, updated=time.time())


def mark_preparing(run_dir: str | Path, resume: bool) -> None:
    """This process now prepares the run (corpus, tokenizer, data): status.json says so with its
    pid, so a second trainer started on the folder meanwhile is refused (`failure_recorded`). A
    fresh run starts at step 0; a resumed one keeps its step."""
    if os.environ.get("RANK", "0") != "0":  # torchrun: rank 0 speaks for the run
        return
    fields: dict[str, Any] = {} if resume else {"step": 0}
    update_status(run_dir, state="preparing", pid=os.getpid(), pid_start=own_start_time(), error=None, **fields)


def other_trainer(run_dir: str | Path) -> int | None:
    """The pid of a live process, not this one nor one above it, that trains `run_dir`: the pid in
    status.json of a run preparing or running, or a launched job's supervisor or recipe process."""
    if os.environ.get("RANK", "0") != "0":  # torchrun's other ranks: rank 0 checks
        return None

    def read(path: Path) -> Any:
        try:
            return read_json(path)
        except (OSError, ValueError):  # unreadable: nothing to go by (the run list says why)
            return None

    run_dir = Path(run_dir)
    candidates = []
    status = read(run_dir / STATUS_FILE)
    if isinstance(status, dict) and status.get("state") in ACTIVE_STATES:
        candidates.append((status.get("pid"), status.get("pid_start")))
    job = read(run_dir / JOB_FILE)
    if isinstance(job, dict) and job.get("phase") == "launched":
        candidates += [(job.get("pid"), job.get("pid_start")), (job.get("child_pid"), job.get("child_start"))]
    ours = ancestors()
    for pid, start in candidates:
        if isinstance(pid, int) and pid not in ours and pid_alive(pid, start if isinstance(start, int) else None):
            return pid
    return None


@contextlib.contextmanager
def failure_recorded(run_dir: str | Path) -> Iterator[None]:
    """Around a recipe: an error before training starts (bad corpus, missing data, not a
    checkpoint) marks a run still 'preparing' (or 'running' by this process) as failed with its
    message, so it never stays so for good. (The trainer records failures in its loop itself.)

    First, a run folder that another live process is training (a job, or a `--resume` typed while
    it runs) is refused, before anything in it is touched: two trainers would interleave their
    checkpoints and metrics."""
    other = other_trainer(run_dir)
    if other:
        raise InputError(
            f"{run_dir} is being trained by another process (pid {other}); wait for it to end, "
            "or cancel it first (`bertlab jobs cancel` for a job)"
        )
    try:
        yield
    except BaseException as exc:
        status = read_json(Path(run_dir) / STATUS_FILE)
        # 'running' too when this process set it: the trainer marks it running before its first
        # batch is drawn, and an error in between (no batch at all) must not leave it running for good
        ours = (
            status.get("state") == "running" and status.get("pid") == os.getpid() if isinstance(status, dict) else False
        )
        if isinstance(status, dict) and (status.get("state") == "preparing" or ours):
            update_status(run_dir, state="failed", error=f"{type(exc).__name__}: {exc}", ended=time.time())
        raise


def link_result(run_dir: str | Path, target: str | Path) -> Path:
    """Point `run_dir/result.json` at `target`, a result kept elsewhere (an interpret study's,
    beside its model, where the app reads it), replacing an earlier link; returns the link."""
    link = Path(run_dir) / RESULT_LINK
    fresh = link.with_name(f".{RESULT_LINK}.{os.getpid()}")
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(Path(target).resolve())
    os.replace(fresh, link)  # atomic: a reader sees the old link or the new one
    return link


def result_link(run_dir: str | Path) -> Path | None:
    """Where `run_dir/result.json` points, when it is a link to a file that is there; else None."""
    link = Path(run_dir) / RESULT_LINK
    return link.resolve() if link.is_symlink() and link.is_file() else None


# --- run_config.json and job.json ------------------------------------------------------
def read_run_config(run_dir: str | Path) -> dict | None:
    """run_config.json, or None when the run has none (yet) or it is not a JSON object."""
    config = read_json(Path(run_dir) / RUN_CONFIG_FILE)
    return config if isinstance(config, dict) else None


def write_run_config(run_dir: str | Path, data: dict) -> None:
    write_json_atomic(Path(run_dir) / RUN_CONFIG_FILE, data)


def read_job_file(run_dir: str | Path) -> dict:
    """job.json as a dict ({} when missing or unreadable)."""
    job = read_json(Path(run_dir) / JOB_FILE, {})
    return job if isinstance(job, dict) else {}


def write_job_file(run_dir: str | Path, data: dict) -> None:
    write_json_atomic(Path(run_dir) / JOB_FILE, data)


def update_job_file(run_dir: str | Path, **fields: Any) -> dict:
    """Merge `fields` into job.json under the run's own lock (the supervisor and the registry both write it)."""
    with locked(Path(run_dir) / JOB_LOCK_FILE):
        return update_json(Path(run_dir) / JOB_FILE, **fields)


# --- metrics.jsonl ---------------------------------------------------------------------
def append_metrics(run_dir: str | Path, record: dict) -> None:
    """Add one metric line."""
    with open(Path(run_dir) / METRICS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def read_metrics(run_dir: str | Path) -> list[dict]:
    """All metric lines of a run (skips a half-written last line, and a line that is not a JSON object)."""
    out = []
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append(record)
    return out


def truncate_metrics(run_dir: str | Path, step: int) -> None:
    """Drop metric lines past `step` (a resumed run writes them again)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if line.strip() and _line_step(line) <= step
    ]
    write_text_atomic(path, "".join(kept))


def set_metrics_aside(run_dir: str | Path) -> None:
    """Move metrics.jsonl to metrics.attempt-TIME.jsonl: a fresh start keeps the earlier curve apart."""
    path = Path(run_dir) / METRICS_FILE
    if path.is_file():
        os.replace(path, path.with_name(f"metrics.attempt-{int(time.time())}.jsonl"))


def _line_step(line: str) -> float:
    try:
        return float(json.loads(line).get("step", 0))
    except (ValueError, AttributeError):
        return float("inf")  # an unreadable (half-written) line goes


# --- log.txt ---------------------------------------------------------------------------
def tail_lines(path: str | Path, lines: int = 40, max_bytes: int = 65536) -> str:
    """The last `lines` non-blank lines of a text file ('' when missing), reading at most `max_bytes`."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    kept = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])


def log_tail(run_dir: str | Path, lines: int = 40) -> str:
    """The last `lines` lines of the run's log.txt."""
    return tail_lines(Path(run_dir) / LOG_FILE, lines=lines)


@contextlib.contextmanager
def run_log(run_dir: str | Path, first_line: str = "", create: bool = True) -> Iterator[None]:
    """Around a run started from the command line: its log lines also go to `run_dir/log.txt`
    (appended; progress bars are not log lines), as a job's do, so `bertlab jobs show` has a log.

    Nothing is added where stderr already is that file (a job: the registry sends the run's output
    there), in torchrun ranks other than 0, or when `run_dir` is missing and `create` is False (a
    resume of a folder that is not there fails without leaving one behind). An error that ends the
    run is written there too."""
    run_dir = Path(run_dir)
    path = run_dir / LOG_FILE
    if os.environ.get("RANK", "0") != "0" or _same_file(sys.stderr, path) or not (create or run_dir.is_dir()):
        yield
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()

    def file_only(level: int, message: str) -> None:
        handler.handle(
            logging.makeLogRecord(
                {"name": __name__, "levelno": level, "levelname": logging.getLevelName(level), "msg": message}
            )
        )

    if first_line:
        file_only(logging.INFO, first_line)
    root.addHandler(handler)
    try:
        yield
    except BaseException as exc:
        file_only(logging.ERROR, f"stopped: {type(exc).__name__}: {one_line(exc)}")
        raise
    finally:
        root.removeHandler(handler)
        handler.close()


def _same_file(stream: object, path: Path) -> bool:
    try:
        return path.exists() and os.path.samestat(os.fstat(stream.fileno()), path.stat())
    except (OSError, ValueError, AttributeError):  # no file behind the stream (pytest's capture, a closed pipe)
        return False
