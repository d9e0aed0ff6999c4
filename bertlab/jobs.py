"""Training jobs: pretraining and fine-tuning launched as background processes, queued per device.

A job is a run folder (see bertlab.training for its layout) plus the command line that fills it,
saved as `job.json`. Everything lives on disk, so the Streamlit app, the CLI and the tests all
see the same jobs, and a new `JobRegistry` (an app restart, another terminal) sees every earlier
run. Run folders that `bertlab pretrain` / `bertlab finetune` made on their own (no job.json) are
listed too, read-only.

    run_dir/job.json   {"kind": "pretrain"|"finetune", "args": [...], "device", "num_gpus", "cwd",
                        "command", "submitted", "phase": queued|launched|ended|cancelled, "resume",
                        "pid", "pid_start", "child_pid", "child_start", "gpus", "launched", "ended",
                        "returncode", "cancel_requested", "attempts"}
    run_dir/log.txt    stdout + stderr of the job (the trainer's log lines)

Processes. A launched job is a small *supervisor* (`python -m bertlab.jobs supervise RUN_DIR`,
started with `start_new_session=True`, so closing the browser tab or restarting the app never
touches it) that runs the real command (`python -m bertlab pretrain|finetune ... --run-dir RUN_DIR`,
or `torchrun --standalone --nproc_per_node N -m bertlab ...` for N > 1 GPUs) in its own process
group, waits for it, and records the outcome: if the trainer died without writing a final state
(a crash, an out-of-memory kill, a bad argument caught before training), the supervisor marks the
run failed with the tail of the log as its error. A job whose processes are all gone while its
status is not final (the supervisor itself was killed, the machine rebooted) is *reported* failed
the same way whenever the registry reads it.

Scheduling. One job per GPU, and one CPU job at a time by default ($BERTLAB_CPU_SLOTS or
`JobRegistry(cpu_slots=...)` to allow more). The choice: no long-lived queue daemon. `tick()`
starts queued jobs (first come, first served per device kind) while a slot is free, under a
file lock so two callers never start the same job; it runs on `submit()`, whenever the UI or the
CLI lists jobs, and in every supervisor right after its job ends, so the queue moves on by itself
even when no browser is open. Only jobs of this registry hold slots: a run started by hand with
`bertlab pretrain` is not counted.

Cancel sends SIGTERM to the job's process group: the trainer saves a checkpoint and stops
(state cancelled); the supervisor escalates to SIGKILL after `kill_timeout_s`. Resume relaunches
with `--resume` (from scratch when no checkpoint was saved yet). Delete removes the folder and is
refused while the job's processes are alive.

Imports the standard library and bertlab.errors / config / jobs_paths at import time; the recipes
(bertlab.pretrain, bertlab.finetune) only lazily to validate a job, so the supervisor and the
`bertlab jobs` CLI stay small. Never imports streamlit.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import ipaddress
import json
import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bertlab.config import PRESETS, BertConfig, preset
from bertlab.errors import InputError
from bertlab.jobs_paths import REPO_ROOT, runs_root

log = logging.getLogger(__name__)

KINDS = ("pretrain", "finetune")
DEVICES = ("auto", "cpu", "cuda")
FINAL_STATES = ("finished", "failed", "cancelled")
ACTIVE_STATES = ("preparing", "running")
JOB_FILE = "job.json"
LOG_FILE = "log.txt"
LOCK_FILE = ".jobs.lock"
DEFAULT_KILL_TIMEOUT_S = 120.0  # SIGTERM -> SIGKILL; a checkpoint of BERT-large takes a while to write

# Fine-tuning tasks of the `bertlab finetune` CLI and where their data lies in this workspace.
FINETUNE_TASKS = ("sst2", "cola", "mrpc", "rte", "qnli", "mnli", "stsb", "upos", "ner", "squad")
_SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
DEFAULT_TASK_DATA = {
    "sst2": "glue/SST-2", "cola": "glue/CoLA", "mrpc": "glue/MRPC", "rte": "glue/RTE", "qnli": "glue/QNLI",
    "mnli": "glue/MNLI", "stsb": "glue/STS-B", "upos": "ud_en_ewt", "ner": "wnut17", "squad": "squad",
}


class JobError(InputError):
    """A job cannot be submitted, found, cancelled, resumed or deleted; the message says why and what to do."""


# --------------------------------------------------------------------------------------
# Small file helpers (the same atomic write as bertlab.training, without importing torch)
# --------------------------------------------------------------------------------------
def _read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return default


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


def _update_json(path: Path, **fields: Any) -> dict:
    data = _read_json(path, {}) or {}
    data.update(fields)
    _write_json_atomic(path, data)
    return data


def _update_status(run_dir: Path, **fields: Any) -> dict:
    """Same semantics as bertlab.training.update_status (merge + 'updated' stamp)."""
    return _update_json(Path(run_dir) / "status.json", **fields, updated=time.time())


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created if missing), released on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _update_job(run_dir: Path, **fields: Any) -> dict:
    with _locked(Path(run_dir) / ".job.lock"):
        return _update_json(Path(run_dir) / JOB_FILE, **fields)


def tail_lines(path: str | Path, lines: int = 40, max_bytes: int = 65536) -> str:
    """The last `lines` lines of a text file ('' when missing), reading at most `max_bytes`."""
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


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------
def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def process_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (tells a reused pid apart), or None."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def pid_alive(pid: int | None, start: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when `start` is given, is the same process as then."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _proc_stat(int(pid))
    if fields is None:  # no /proc (not Linux): trust kill(0)
        return True
    if fields[0] in ("Z", "X"):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(int(pid), os.WNOHANG)  # reap our own finished child (the app launched it)
        return False
    return start is None or process_start_time(int(pid)) == start


def gpu_count() -> int:
    """GPUs this process may use, without importing torch (CUDA_VISIBLE_DEVICES, the driver, nvidia-smi)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"])
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir():
        return len(list(gpus.iterdir()))
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
            return sum(1 for line in out.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            return 0
    return 0


@dataclass(frozen=True)
class GpuStat:
    index: int
    name: str
    utilization_pct: float
    memory_used_gb: float
    memory_total_gb: float


def gpu_stats() -> list[GpuStat]:
    """Live utilisation and memory per GPU from nvidia-smi; [] when there is none."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    stats = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            continue
        try:
            stats.append(GpuStat(int(parts[0]), parts[1], float(parts[2]), float(parts[3]) / 1024, float(parts[4]) / 1024))
        except ValueError:
            continue
    return stats


# --------------------------------------------------------------------------------------
# What to run
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobSpec:
    """A job before it runs: `bertlab <kind> <args>` on a device."""

    kind: str  # pretrain | finetune
    args: tuple[str, ...] = ()  # arguments of `bertlab <kind>`, without --run-dir / --resume
    device: str = "auto"  # auto | cpu | cuda; decides which queue the job waits in
    num_gpus: int = 1  # processes (one per GPU) under torchrun when > 1
    name: str = ""  # prefix of the run folder's name (default: from the config or the task)
    after: tuple[str, ...] = ()  # ids of jobs (in the same runs folder) that must finish before this one starts


class _RaisingParser(argparse.ArgumentParser):
    """argparse that raises JobError instead of printing usage and exiting."""

    def error(self, message):
        raise JobError(f"{self.prog}: {message}")


def _recipe_parser(kind: str) -> argparse.ArgumentParser:
    if kind == "pretrain":
        from bertlab.pretrain import CLI_COMMANDS
    elif kind == "finetune":
        try:
            from bertlab.finetune import CLI_COMMANDS
        except ImportError as exc:
            raise JobError(f"fine-tuning is not available here ({exc}); install bertlab with its finetune module") from exc
    else:
        raise JobError(f"unknown job kind {kind!r}; use one of {', '.join(KINDS)}")
    help_text, add_args, _ = CLI_COMMANDS[kind]
    p = _RaisingParser(prog=f"bertlab {kind}", add_help=False)
    add_args(p)
    return p


def _parse_recipe_args(kind: str, args: tuple[str, ...]) -> argparse.Namespace:
    for a in args:
        if a.split("=", 1)[0] in ("--run-dir", "--resume"):
            raise JobError(f"leave out {a.split('=', 1)[0]}: the job registry chooses the run folder and resumes for you")
    return _recipe_parser(kind).parse_args(list(args))


def _spec_device(spec: JobSpec) -> str:
    """The device a spec asks for: its own field, or one given in its args."""
    device = spec.device
    for i, a in enumerate(spec.args):
        if spec.kind == "pretrain" and a.startswith("train.device="):
            device = a.split("=", 1)[1]
        elif a == "--device" and i + 1 < len(spec.args):
            device = spec.args[i + 1]
        elif a.startswith("--device="):
            device = a.split("=", 1)[1]
    return device


def _resolve_device(device: str, gpus: int) -> str:
    if device not in DEVICES:
        raise JobError(f"device must be auto, cpu or cuda, not {device!r}")
    if device == "auto":
        return "cuda" if gpus > 0 else "cpu"
    if device == "cuda" and gpus == 0:
        raise JobError("device cuda was asked for, but this machine has no CUDA GPU; choose cpu or auto")
    return device


def is_loopback_address(address: str | None) -> bool:
    """True when a server bound to `address` answers only this machine (127.0.0.1, ::1, localhost);
    an empty address means every interface, i.e. shared."""
    address = (address or "").strip().strip("[]")
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def data_roots() -> list[Path]:
    """The folders a shared app's Train page may read from: $BERTLAB_DATA_ROOTS (separated by
    os.pathsep), else the repository and ../shared/data."""
    env = os.environ.get("BERTLAB_DATA_ROOTS", "")
    roots = [p for p in env.split(os.pathsep) if p.strip()] if env.strip() else [REPO_ROOT, REPO_ROOT.parent / "shared" / "data"]
    return [Path(r).expanduser().resolve() for r in roots]


def check_path_allowed(path: str, roots: list[Path] | None = None, cwd: str | Path = REPO_ROOT) -> None:
    """Raise JobError unless `path` (relative to `cwd`; symlinks followed) lies under one of `roots`
    (default: data_roots()). Used when the app is shared, so that whoever reaches it cannot make a
    job read any file on the server."""
    roots = data_roots() if roots is None else [Path(r).expanduser().resolve() for r in roots]
    resolved = (Path(cwd) / Path(path).expanduser()).resolve()
    if not any(resolved.is_relative_to(r) for r in roots):
        raise JobError(f"{path} is outside the data folders this shared app may read ({', '.join(map(str, roots))}); "
                       "put the data there, or list its folder in BERTLAB_DATA_ROOTS (separated by "
                       f"{os.pathsep!r}) where the app is started")


def _check_paths(kind: str, ns: argparse.Namespace, cwd: Path, after: tuple[str, ...] = ()) -> None:
    def exists(p: str) -> bool:
        return (cwd / Path(p).expanduser()).exists()

    if kind == "pretrain":
        if ns.config and not exists(ns.config):
            raise JobError(f"config file {ns.config} not found (looked in {cwd}); pick one of configs/*.yaml")
    else:
        data = getattr(ns, "data", None)
        if data and not exists(data):
            raise JobError(f"data {data} not found (looked in {cwd}); give the folder or file of the task's data")
        model = getattr(ns, "model", None)
        looks_local = bool(model) and (model.startswith((".", "/", "~")) or model.count("/") != 1)  # else a Hub id
        if looks_local and not exists(model) and not after:  # with `after`, an earlier job writes it
            raise JobError(f"starting model {model} not found; give a checkpoint folder (config.json, model.safetensors, vocab.txt)")


def _pretrain_config(ns: argparse.Namespace, cwd: Path):
    from bertlab.pretrain import load_config_file

    with _chdir(cwd):
        cfg = load_config_file(ns.config, ns.overrides)
        if cfg.size not in PRESETS:
            raise JobError(f"unknown model size {cfg.size!r}; choose one of {', '.join(PRESETS)}")
        for source in cfg.corpus:
            if source != "default" and not str(source).startswith("hf:") and not Path(source).expanduser().exists():
                raise JobError(f"corpus {source} not found (looked in {cwd}); give a file or folder of text, or 'default'")
        try:
            cfg.model_config(cfg.vocab_size)
        except (ValueError, TypeError) as exc:
            raise JobError(f"model settings do not fit together: {exc}") from exc
    return cfg


@contextlib.contextmanager
def _chdir(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def validate(spec: JobSpec, cwd: str | Path | None = None, gpus: int | None = None) -> JobSpec:
    """Check a spec the way its recipe will (arguments, config, paths, devices) before it is queued.

    Returns the spec with `device` resolved to cpu or cuda. Raises JobError with a fix-it message.
    """
    cwd = Path(cwd or os.getcwd())
    gpus = gpu_count() if gpus is None else gpus
    if spec.kind not in KINDS:
        raise JobError(f"unknown job kind {spec.kind!r}; use one of {', '.join(KINDS)}")
    ns = _parse_recipe_args(spec.kind, spec.args)
    _check_paths(spec.kind, ns, cwd, spec.after)
    if spec.kind == "pretrain":
        _pretrain_config(ns, cwd)
    device = _resolve_device(_spec_device(spec), gpus)
    if spec.num_gpus < 1:
        raise JobError("number of GPUs must be at least 1")
    if spec.num_gpus > 1:
        if device != "cuda":
            raise JobError(f"{spec.num_gpus} GPUs asked for on {device}; several processes need device cuda (or set GPUs to 1)")
        if spec.num_gpus > gpus:
            raise JobError(f"{spec.num_gpus} GPUs asked for, but this machine has {gpus}; lower the number of GPUs")
    return JobSpec(spec.kind, tuple(spec.args), device, spec.num_gpus, spec.name, tuple(spec.after))


def build_command(spec: JobSpec, run_dir: str | Path, resume: bool = False, python: str | None = None,
                  progress_flag: bool = True) -> list[str]:
    """The command line a job runs (no shell): `python -m bertlab <kind> ...` or torchrun for several GPUs.

    The device goes last so that it wins over a config or an earlier flag.
    """
    python = python or sys.executable
    args = list(spec.args)
    if spec.device in ("cpu", "cuda"):
        args += [f"train.device={spec.device}"] if spec.kind == "pretrain" else ["--device", spec.device]
    args += ["--run-dir", str(run_dir)]
    if resume:
        args.append("--resume")
    if progress_flag:
        args.append("--no-progress")  # a progress bar in log.txt is noise; metrics.jsonl has the numbers
    if spec.num_gpus > 1:
        torchrun = Path(python).with_name("torchrun")
        launcher = [str(torchrun)] if torchrun.is_file() else [python, "-m", "torch.distributed.run"]
        return launcher + ["--standalone", "--nproc_per_node", str(spec.num_gpus), "-m", "bertlab", spec.kind, *args]
    return [python, "-m", "bertlab", spec.kind, *args]


# --- specs from form fields (the Train page and `bertlab jobs submit` share these) ----------
def pretrain_args(
    config: str | None = "configs/tiny.yaml",
    size: str | None = None,
    corpus: str | None = None,
    max_steps: int = 0,
    max_time_s: float = 0.0,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    max_seq_length: int | None = None,
    name: str | None = None,
    overrides: tuple[str, ...] = (),
    masked_lm_prob: float | None = None,
    snapshots: bool = False,
) -> tuple[str, ...]:
    """`bertlab pretrain` arguments from the Train page's fields; a budget given here replaces the config's.

    With a sequence length and a masking share, the cap on predictions per sequence follows
    them (max_seq_length x masked_lm_prob, rounded up, as Google's README says), so a 512-token
    run masks 15% of its tokens and not 20 of them."""
    args: list[str] = ["--config", config] if config else []
    if name:
        args.append(f"name={name}")
    if size:
        args.append(f"size={size}")
    if corpus:
        parts = [c.strip() for c in corpus.split(",") if c.strip()]
        args.append(f"corpus={parts[0]}" if len(parts) == 1 else "corpus=[" + ", ".join(parts) + "]")
    if max_steps or max_time_s:
        args += [f"train.max_steps={int(max_steps)}", f"train.max_time_s={float(max_time_s)}", "train.max_tokens=0"]
    if learning_rate:
        args.append(f"train.learning_rate={learning_rate}")
    if batch_size:
        args.append(f"train.batch_size={int(batch_size)}")
    if max_seq_length:
        args.append(f"data.max_seq_length={int(max_seq_length)}")
    if masked_lm_prob:
        if not 0.0 < masked_lm_prob < 1.0:
            raise JobError(f"the masked share must be between 0 and 1, got {masked_lm_prob}")
        args.append(f"data.masked_lm_prob={masked_lm_prob}")
    if max_seq_length and masked_lm_prob:
        args.append(f"data.max_predictions_per_seq={math.ceil(int(max_seq_length) * masked_lm_prob - 1e-9)}")
    if snapshots:
        args.append("train.snapshots=true")
    return tuple(args) + tuple(overrides)


def finetune_args(
    task: str,
    data: str,
    model: str | None = None,
    mode: str = "finetune",
    max_steps: int = 0,
    max_time_s: float = 0.0,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    max_seq_length: int | None = None,
    size: str | None = None,
) -> tuple[str, ...]:
    """`bertlab finetune` arguments from the Train page's fields (`size` without `model`: random init)."""
    if task not in FINETUNE_TASKS:
        raise JobError(f"unknown task {task!r}; choose one of {', '.join(FINETUNE_TASKS)}")
    if not data:
        raise JobError("give the task's data folder")
    args = ["--task", task, "--data", data, "--mode", mode]
    if model:
        args += ["--model", model]  # without one: the shipped model, or random weights of --size
    if size:
        args += ["--size", size]
    if max_steps:
        args += ["--max-steps", str(int(max_steps))]
    elif max_time_s:
        args += ["--max-time-s", str(float(max_time_s))]
    if learning_rate:
        args += ["--lr", str(learning_rate)]
    if batch_size:
        args += ["--batch-size", str(int(batch_size))]
    if max_seq_length:
        args += ["--max-seq-length", str(int(max_seq_length))]
    return tuple(args)


def default_task_data(task: str) -> str:
    """Where this workspace keeps a task's data (may not exist elsewhere)."""
    sub = DEFAULT_TASK_DATA.get(task)
    return str(_SHARED_DATA / sub) if sub else ""


# --------------------------------------------------------------------------------------
# Estimates
# --------------------------------------------------------------------------------------
# Effective training throughput in FLOP/s (what PyTorch reaches on BERT-sized matmuls, not the
# datasheet peak). CPU: measured on this project's 2-core machine (mini: ~650 tokens/s = 1.4e10
# FLOP/s), scaled per core. GPUs: ~35-40% of the bf16 dense peak, a usual model-FLOPs utilisation
# for BERT-base at sequence length 128. Per-step overhead (Python, optimizer, data) is added on top.
TABULATED_FLOPS = {"cpu_per_core": 7e9, "H100": 3.5e14, "H200": 3.8e14, "A100": 1.1e14, "L4": 4.5e13,
                   "T4": 1.5e13, "V100": 3.5e13, "cuda": 5e13}
STEP_OVERHEAD_S = {"cpu": 0.01, "cuda": 0.03}
MULTI_GPU_EFFICIENCY = 0.9  # DDP all-reduce costs ~10% at this scale


@dataclass(frozen=True)
class Estimate:
    """What a run will cost, before it starts. Rough: see `estimate` for the formulas."""

    parameters: int  # all weights of the model (embeddings included)
    trainable_parameters: int
    weights_gb: float  # fp32 weights (plus a bf16 copy under mixed precision)
    optimizer_gb: float  # gradients + AdamW's two moments, fp32
    activations_gb: float  # saved for the backward pass, one micro-batch
    overhead_gb: float  # CUDA context / framework
    total_gb: float  # per process (per GPU)
    device: str  # cpu | cuda
    device_name: str
    device_memory_gb: float | None  # what the device has, when known
    tokens_per_step: int  # all processes together
    steps: int | None  # the budget in steps (derived from the time budget when that is given)
    seconds: float | None  # training time, excluding data preparation and start-up
    tokens_per_s: float
    throughput_source: str  # "measured in run X" or "tabulated for <device>"
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool | None:
        return None if self.device_memory_gb is None else self.total_gb <= self.device_memory_gb

    def summary(self) -> str:
        time_text = format_duration(self.seconds) if self.seconds is not None else "?"
        return (f"{self.parameters / 1e6:.1f}M parameters; ~{self.total_gb:.2f} GB per process; "
                f"~{time_text} for {self.steps or '?'} steps at ~{self.tokens_per_s:,.0f} tokens/s (estimate, {self.throughput_source})")


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = max(0, int(round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h} h {m:02d} min"
    if m:
        return f"{m} min {s:02d} s"
    return f"{s} s"


def count_parameters(config: BertConfig, pretraining_heads: bool = True, num_labels: int = 2) -> int:
    """Weights of BertForPreTraining (tied decoder counted once), or of encoder + pooler + classifier."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    embeddings = (v + config.max_position_embeddings + config.type_vocab_size) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    pooler = h * h + h
    total = embeddings + config.num_layers * layer + pooler
    if pretraining_heads:
        total += (h * h + h) + 2 * h + v  # MLM transform, its LayerNorm, decoder bias (weights tied)
        if config.use_nsp_head:
            total += 2 * h + 2
    else:
        total += h * num_labels + num_labels
    return total


def _device_info(device: str) -> tuple[str, float | None, float, str]:
    """(name, memory GB or None, effective FLOP/s, table key) of the first device of this kind."""
    if device == "cpu":
        cores = os.cpu_count() or 1
        mem = None
        with contextlib.suppress(OSError, ValueError):
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        return f"CPU ({cores} cores)", mem, TABULATED_FLOPS["cpu_per_core"] * cores, "cpu"
    stats = gpu_stats()
    name = stats[0].name if stats else "CUDA GPU"
    mem = stats[0].memory_total_gb if stats else None
    key = next((k for k in TABULATED_FLOPS if k not in ("cpu_per_core", "cuda") and k in name), "cuda")
    return name, mem, TABULATED_FLOPS[key], key


def _run_seq_length(run_config: dict) -> int | None:
    """max_seq_length of a pretraining (config.data.max_seq_length) or fine-tuning (config.max_seq_length) run."""
    cfg = run_config.get("config")
    if not isinstance(cfg, dict):
        return None
    data = cfg.get("data")
    value = data.get("max_seq_length") if isinstance(data, dict) else cfg.get("max_seq_length")
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _measured_tokens_per_s(config: BertConfig, seq_length: int, device: str, root: Path | None) -> tuple[float, str] | None:
    """Median training throughput of the newest earlier run of the same model shape on the same kind of device."""
    from bertlab.training import read_metrics

    root = Path(root) if root else runs_root()
    if not root.is_dir():
        return None
    shape = (config.num_layers, config.hidden_size, config.num_heads, config.intermediate_size)
    for run in sorted((p for p in root.iterdir() if _is_run_dir(p)), key=_mtime, reverse=True)[:50]:
        try:
            rc = _read_json(run / "run_config.json") or {}
            mc = rc.get("model_config") or {}
            status = _read_json(run / "status.json") or {}
            if (mc.get("num_layers"), mc.get("hidden_size"), mc.get("num_heads"), mc.get("intermediate_size")) != shape:
                continue
            if not str(status.get("device", "")).startswith(device):
                continue
            run_seq = _run_seq_length(rc) or seq_length
            if not (seq_length / 2 <= run_seq <= seq_length * 2):
                continue
            # Sequences/s times that run's sequence length: the padded tokens the model computed on,
            # not only the real ones (tokens_per_s), which a corpus of short documents makes few.
            rates = sorted(float(r["seq_per_s"]) * run_seq for r in read_metrics(run)[1:]
                           if r.get("split") == "train" and r.get("seq_per_s"))
        except (AttributeError, TypeError, ValueError, OSError) as exc:  # a run folder from another version
            log.debug("skipping %s for throughput: %s", run, exc)
            continue
        if len(rates) >= 2:
            return rates[len(rates) // 2], f"measured in run {run.name}"
    return None


def estimate(
    config: BertConfig,
    batch_size: int = 32,
    seq_length: int = 128,
    max_steps: int = 0,
    max_time_s: float = 0.0,
    device: str = "cpu",
    num_gpus: int = 1,
    grad_accum: int = 1,
    precision: str = "auto",
    pretraining: bool = True,
    max_predictions: int = 20,
    trainable_fraction: float = 1.0,
    runs_dir: str | Path | None = None,
) -> Estimate:
    """Parameters, memory and time of a training run (a labelled estimate, not a promise).

    Memory per process, in bytes (N = parameters, B = micro-batch, S = sequence, H = hidden,
    F = feed-forward width, A = heads, L = layers, V = vocabulary):
      weights     4N fp32 (+2N for the bf16 copies autocast makes on CUDA)
      optimizer   4N gradients + 8N AdamW moments (m, v), for the trainable share of N
      activations L * (B*S*(18H + 4F) + 5*A*S^2*B) bytes at 16 bits (Korthikanti et al. 2022,
                  generalised to F != 4H), doubled for fp32 on CPU; the 5AS^2B attention-score
                  term is dropped on CUDA, where SDPA's fused kernels do not keep the scores;
                  plus the MLM logits, 3 * B * P * V * 4 bytes for P predictions per sequence
      overhead    ~0.5 GB CUDA context or ~0.4 GB for torch on CPU
    Time per step = 6 * N_matmul * tokens + 12 * L * S * H * tokens FLOPs (Kaplan et al. 2020)
    over an effective FLOP/s, plus a fixed per-step overhead. The FLOP/s comes from an earlier run
    of the same model shape on the same kind of device when there is one (measured), otherwise
    from `TABULATED_FLOPS`.
    """
    if device not in ("cpu", "cuda"):
        raise JobError(f"estimate needs device cpu or cuda, not {device!r}")
    if batch_size < 1 or seq_length < 1:
        raise JobError("batch size and sequence length must be positive")
    params = count_parameters(config, pretraining_heads=pretraining)
    trainable = int(params * trainable_fraction)
    L, H, F, A, V = config.num_layers, config.hidden_size, config.intermediate_size, config.num_heads, config.vocab_size  # noqa: N806
    micro = max(1, batch_size // max(1, grad_accum))
    amp = device == "cuda" and precision != "fp32"
    weights = 4 * params + (2 * params if amp else 0)
    optimizer = 12 * trainable  # fp32 gradients (4) + AdamW m (4) + v (4)
    score_term = 0 if device == "cuda" else 5 * A * seq_length**2 * micro
    act = L * (micro * seq_length * (18 * H + 4 * F) + score_term)
    act = act * (1 if amp else 2)
    if trainable_fraction < 1.0:
        act = act * trainable_fraction  # a frozen encoder keeps (almost) nothing for backward
    if pretraining:
        act += 3 * micro * min(max_predictions, seq_length) * V * 4
    overhead = 0.5 * 2**30 if device == "cuda" else 0.4 * 2**30
    gb = 2**30
    total = (weights + optimizer + act + overhead) / gb

    name, mem, flops_rate, key = _device_info(device)
    tokens_per_step = batch_size * seq_length * max(1, num_gpus)
    n_matmul = L * (4 * H * H + 2 * H * F) + (H * H + H * V * min(1.0, max_predictions / seq_length) if pretraining else H)
    flops_per_token = 6 * n_matmul + 12 * L * seq_length * H
    gpus = max(1, num_gpus)
    rate = flops_rate * gpus * (MULTI_GPU_EFFICIENCY if gpus > 1 else 1.0)
    step_s = flops_per_token * tokens_per_step / rate + STEP_OVERHEAD_S[device] * max(1, grad_accum)
    tokens_per_s = tokens_per_step / step_s
    source = f"tabulated for {key if key != 'cpu' else name}"
    measured = _measured_tokens_per_s(config, seq_length, device, runs_dir)
    if measured and gpus == 1:
        tokens_per_s, source = measured
        step_s = tokens_per_step / tokens_per_s
    notes = []
    steps = int(max_steps) if max_steps else None
    seconds = steps * step_s if steps else None
    if max_time_s:
        budget_steps = int(max_time_s / step_s)
        if steps is None or budget_steps < steps:
            steps, seconds = budget_steps, float(max_time_s)
            notes.append("the time budget ends training first")
    if mem is not None and total > mem:
        notes.append(f"needs ~{total:.1f} GB but the device has {mem:.1f} GB: lower the batch size or sequence length")
    notes.append("data preparation and start-up come on top (seconds for a small corpus, minutes for a large one)")
    return Estimate(
        parameters=params, trainable_parameters=trainable, weights_gb=weights / gb, optimizer_gb=optimizer / gb,
        activations_gb=act / gb, overhead_gb=overhead / gb, total_gb=total, device=device, device_name=name,
        device_memory_gb=mem, tokens_per_step=tokens_per_step, steps=steps, seconds=seconds,
        tokens_per_s=tokens_per_s, throughput_source=source, notes=tuple(notes),
    )


def estimate_spec(spec: JobSpec, cwd: str | Path | None = None, runs_dir: str | Path | None = None) -> Estimate:
    """The estimate of a job spec (validated first; raises JobError when it would not run)."""
    cwd = Path(cwd or os.getcwd())
    spec = validate(spec, cwd)
    ns = _parse_recipe_args(spec.kind, spec.args)
    if spec.kind == "pretrain":
        cfg = _pretrain_config(ns, cwd)
        t = cfg.train
        return estimate(cfg.model_config(cfg.vocab_size), batch_size=t.batch_size, seq_length=cfg.data.max_seq_length,
                        max_steps=t.max_steps, max_time_s=t.max_time_s, device=spec.device, num_gpus=spec.num_gpus,
                        grad_accum=t.grad_accum, precision=t.precision, pretraining=True,
                        max_predictions=cfg.data.max_predictions_per_seq, runs_dir=runs_dir)
    model_cfg = None
    model = getattr(ns, "model", None)
    if model:
        raw = _read_json(cwd / Path(model).expanduser() / "config.json")
        if raw:
            with contextlib.suppress(Exception):
                model_cfg = BertConfig.from_hf_dict(raw)
    if model_cfg is None:
        model_cfg = preset(getattr(ns, "size", None) or "mini")
    feature = getattr(ns, "mode", "finetune") == "feature"
    return estimate(model_cfg, batch_size=getattr(ns, "batch_size", None) or 32,
                    seq_length=getattr(ns, "max_seq_length", None) or (384 if getattr(ns, "task", "") == "squad" else 128),
                    max_steps=getattr(ns, "max_steps", None) or 0, max_time_s=getattr(ns, "max_time_s", None) or 0,
                    device=spec.device, num_gpus=spec.num_gpus, pretraining=False,
                    trainable_fraction=0.01 if feature else 1.0, runs_dir=runs_dir)


# --------------------------------------------------------------------------------------
# Jobs as read from disk
# --------------------------------------------------------------------------------------
@dataclass
class Job:
    """A snapshot of one run folder: what the registry, the page and the CLI show."""

    id: str  # the run folder's name
    run_dir: Path
    kind: str | None  # pretrain | finetune (None when unknown)
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
    def has_checkpoint(self) -> bool:
        return (self.run_dir / "checkpoint" / "trainer_state.pt").is_file()

    @property
    def has_model(self) -> bool:
        return (self.run_dir / "model" / "config.json").is_file()

    def to_dict(self) -> dict:
        return {
            "id": self.id, "run_dir": str(self.run_dir), "kind": self.kind, "state": self.state,
            "managed": self.managed, "alive": self.alive, "submitted": self.submitted, "step": self.step,
            "total_steps": self.total_steps, "progress": self.progress, "eta_s": self.eta_s, "error": self.error,
            "device": self.device, "num_gpus": self.num_gpus, "command": self.command,
            "last_train": self.status.get("last_train"), "last_eval": self.status.get("last_eval"),
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
            state = read_job(run_dir).state if _is_run_dir(run_dir) else None
        if state is None or state == "finished":
            continue
        out.append(dep if state not in ("failed", "cancelled") else f"{dep} ({state})")
    return out


def _error_from_log(run_dir: Path, lines: int = 15) -> str:
    """The one-line CLI error when there is one, else the last lines of the log."""
    tail = tail_lines(run_dir / LOG_FILE, lines=200)
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
    status = _json_object(run_dir / "status.json", problems)
    run_config = {} if job else _json_object(run_dir / "run_config.json", problems)
    managed = bool(job)
    state = status.get("state") if status.get("state") in ("queued", *ACTIVE_STATES, *FINAL_STATES) else "queued"
    error = status.get("error") if isinstance(status.get("error"), str) else None
    if managed:
        alive = pid_alive(job.get("pid"), job.get("pid_start")) or pid_alive(job.get("child_pid"), job.get("child_start"))
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
                error = error or (f"the job's process (pid {job.get('child_pid') or job.get('pid')}) is gone without "
                                  f"finishing; last lines of its log:\n{_error_from_log(run_dir)}")
        elif state not in FINAL_STATES and state not in ACTIVE_STATES:
            state = "preparing"  # launched, the recipe has not written its own state yet
    else:
        pid = _int_or_none(status.get("pid"))
        alive = pid_alive(pid, _int_or_none(status.get("pid_start")))  # the start time tells a reused pid apart
        if state in ACTIVE_STATES and pid and not alive:
            state = "failed"
            error = error or (f"the process (pid {pid}) stopped without finishing (killed?); "
                              f"last lines of its log:\n{_error_from_log(run_dir)}")
    if problems and not alive and (run_dir / "model" / "config.json").is_file():
        state, error = "finished", None  # the trainer writes the final model last: the run ended well
    elif problems and not managed and not alive and state not in FINAL_STATES:
        state = "failed"  # a run folder whose files cannot be read: show it, with why
    if problems:  # one bad file never takes the list down: the run shows what is wrong with it
        error = "; ".join(problems) + (f"\n{error}" if error else "")
    if state == "failed" and not error:
        error = _error_from_log(run_dir)
    submitted = _number(job.get("submitted")) or _number(status.get("started")) or _mtime(run_dir)
    kind = job.get("kind") or run_config.get("kind")
    return Job(
        id=run_dir.name, run_dir=run_dir, kind=kind if isinstance(kind, str) else None, state=state, managed=managed,
        alive=alive, submitted=submitted, step=int(_number(status.get("step")) or 0),
        total_steps=_int_or_none(status.get("total_steps")), progress=_number(status.get("progress")),
        eta_s=_number(status.get("eta_s")), error=error,
        device=str(job.get("device") or status.get("device") or "") or None,
        num_gpus=int(_number(job.get("num_gpus")) or _number(status.get("world_size")) or 1),
        command=str(job.get("command") or run_config.get("command") or ""), status=status, job=job,
    )


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


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith(".") and any(
        (path / n).is_file() for n in (JOB_FILE, "status.json", "run_config.json"))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "job"


# --------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------
class JobRegistry:
    """Jobs under one runs folder. Holds no state of its own: every call reads the run folders."""

    def __init__(self, root: str | Path | None = None, cpu_slots: int | None = None, gpus: int | None = None,
                 kill_timeout_s: float = DEFAULT_KILL_TIMEOUT_S):
        self.root = Path(root).expanduser() if root else runs_root()
        env_slots = os.environ.get("BERTLAB_CPU_SLOTS", "")
        self.cpu_slots = cpu_slots if cpu_slots is not None else (int(env_slots) if env_slots.isdigit() else 1)
        self.gpus = gpu_count() if gpus is None else gpus
        self.kill_timeout_s = kill_timeout_s

    # --- reading ---------------------------------------------------------------------------
    def list(self, start_queued: bool = True) -> list[Job]:
        """Every run folder, newest first; starts queued jobs whose slot is free first (see tick)."""
        if start_queued:
            self.tick()
        if not self.root.is_dir():
            return []
        jobs = [read_job(p) for p in self.root.iterdir() if _is_run_dir(p)]
        return sorted(jobs, key=lambda j: (j.submitted, j.id), reverse=True)

    def get(self, job_id: str) -> Job:
        run_dir = self._dir(job_id)
        if not _is_run_dir(run_dir):
            raise JobError(f"no job {job_id!r} in {self.root}; `bertlab jobs list` shows the jobs there")
        return read_job(run_dir)

    def _dir(self, job_id: str) -> Path:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise JobError(f"{job_id!r} is not a job id; ids are run folder names, as `bertlab jobs list` shows them")
        return self.root / job_id

    def log_tail(self, job_id: str, lines: int = 40) -> str:
        return tail_lines(self._dir(job_id) / LOG_FILE, lines=lines)

    def metrics(self, job_id: str) -> list[dict]:
        from bertlab.training import read_metrics

        return read_metrics(self._dir(job_id))

    # --- submitting -----------------------------------------------------------------------
    def submit(self, spec: JobSpec, cwd: str | Path | None = None, start: bool = True) -> Job:
        """Validate `spec`, create its run folder with job.json (state queued) and start it if a slot is free."""
        cwd = Path(cwd or os.getcwd()).resolve()
        spec = validate(spec, cwd, gpus=self.gpus)
        if spec.device == "cuda" and spec.num_gpus > self.gpus:
            raise JobError(f"{spec.num_gpus} GPUs asked for, but this machine has {self.gpus}")
        for dep in spec.after:
            if not _is_run_dir(self._dir(dep)):
                raise JobError(f"this job waits for {dep!r}, which is not a job in {self.root}")
        run_dir = self._new_run_dir(spec.name or self._default_name(spec, cwd))
        command = build_command(spec, run_dir)
        _write_json_atomic(run_dir / JOB_FILE, {
            "kind": spec.kind, "args": list(spec.args), "device": spec.device, "num_gpus": spec.num_gpus,
            "cwd": str(cwd), "command": shlex.join(["bertlab", spec.kind, *spec.args]), "argv": command,
            "submitted": time.time(), "phase": "queued", "resume": False, "attempts": 0,
            "kill_timeout_s": self.kill_timeout_s, "after": list(spec.after),
        })
        _update_status(run_dir, state="queued", step=0, error=None)
        log.info("submitted %s: %s", run_dir.name, shlex.join(command))
        if start:
            self.tick()
        return read_job(run_dir)

    def _default_name(self, spec: JobSpec, cwd: Path) -> str:
        if spec.kind == "finetune":
            ns = _parse_recipe_args(spec.kind, spec.args)
            return f"finetune-{getattr(ns, 'task', 'task')}"
        ns = _parse_recipe_args(spec.kind, spec.args)
        with contextlib.suppress(Exception):
            return _pretrain_config(ns, cwd).name
        return "pretrain"

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
        with _locked(self.root / LOCK_FILE):
            jobs = [read_job(p) for p in self.root.iterdir() if _is_run_dir(p) and (p / JOB_FILE).is_file()]
            busy_gpus: set[int] = set()
            cpu_busy = 0
            for j in jobs:
                if j.job.get("phase") == "launched" and j.alive:
                    if j.job.get("device") == "cuda":
                        busy_gpus.update(j.job.get("gpus") or [])
                    else:
                        cpu_busy += 1
            states = {j.id: j.state for j in jobs}
            blocked: set[str] = set()  # first come, first served per device kind
            for j in sorted((j for j in jobs if j.state == "queued"), key=lambda j: (j.submitted, j.id)):
                device = j.job.get("device", "cpu")
                if device in blocked or waiting_for(j, states):
                    continue
                if device == "cuda":
                    free = [g for g in range(self.gpus) if g not in busy_gpus]
                    want = int(j.job.get("num_gpus") or 1)
                    if len(free) < want:
                        blocked.add(device)
                        continue
                    gpus = free[:want]
                    busy_gpus.update(gpus)
                else:
                    if cpu_busy >= self.cpu_slots:
                        blocked.add(device)
                        continue
                    cpu_busy += 1
                    gpus = []
                self._launch(j, gpus)
                started.append(j.id)
        return started

    def _launch(self, job: Job, gpus: list[int]) -> None:
        run_dir = job.run_dir
        spec = JobSpec(job.job["kind"], tuple(job.job.get("args") or ()), job.job.get("device", "cpu"),
                       int(job.job.get("num_gpus") or 1))
        resume = bool(job.job.get("resume"))
        argv = build_command(spec, run_dir, resume=resume)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        physical = [v.strip() for v in visible.split(",")] if visible else None
        cuda_visible = ",".join(physical[g] if physical and g < len(physical) else str(g) for g in gpus) if gpus else None
        env = dict(os.environ)
        env["BERTLAB_RUNS"] = str(self.root)  # the supervisor's own tick() must look at this registry
        env["BERTLAB_CPU_SLOTS"] = str(self.cpu_slots)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env["TQDM_DISABLE"] = "1"
        _update_job(run_dir, phase="launched", argv=argv, gpus=gpus, cuda_visible_devices=cuda_visible,
                    launched=time.time(), ended=None, returncode=None, cancel_requested=None, term_sent=False,
                    child_pid=None, child_start=None, attempts=int(job.job.get("attempts") or 0) + 1,
                    kill_timeout_s=self.kill_timeout_s)
        with open(run_dir / LOG_FILE, "ab") as logf:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bertlab.jobs", "supervise", str(run_dir)],
                cwd=job.job.get("cwd") or os.getcwd(), env=env, stdin=subprocess.DEVNULL, stdout=logf,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
            )
        _update_job(run_dir, pid=proc.pid, pid_start=process_start_time(proc.pid))
        _update_status(run_dir, state="preparing", pid=proc.pid, error=None)
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
            raise JobError(f"{job_id} was started outside the job registry; stop it where it runs (Ctrl-C or kill its pid)")
        if job.state == "queued":
            _update_job(job.run_dir, phase="cancelled", ended=time.time())
            _update_status(job.run_dir, state="cancelled", ended=time.time())
            return read_job(job.run_dir)
        _update_job(job.run_dir, cancel_requested=time.time())
        sent = self._signal(job, signal.SIGTERM)
        if sent:
            _update_job(job.run_dir, term_sent=True)
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
            raise JobError(f"{job_id} is still stopping (saving its checkpoint and exiting); try Resume again in a few seconds")
        if not job.managed:
            if job.kind != "pretrain":
                raise JobError(f"{job_id} was started outside the job registry; resume it with the command that made it plus --resume")
            run_config = _read_json(job.run_dir / "run_config.json", {}) or {}
            _write_json_atomic(job.run_dir / JOB_FILE, {
                "kind": "pretrain", "args": [], "device": (job.device or "cpu").split(":")[0], "num_gpus": 1,
                "cwd": str(REPO_ROOT), "command": run_config.get("command") or "bertlab pretrain",
                "submitted": job.submitted, "phase": "queued", "attempts": 0, "adopted": True,
            })
        resume = job.has_checkpoint
        if not resume:
            metrics = job.run_dir / "metrics.jsonl"
            if metrics.is_file():  # a fresh start: keep the earlier attempt's curve aside, not mixed in
                os.replace(metrics, job.run_dir / f"metrics.attempt-{int(time.time())}.jsonl")
        _update_job(job.run_dir, phase="queued", resume=resume, cancel_requested=None, ended=None, returncode=None)
        # the ETA and speed of the stopped attempt no longer hold; the trainer writes fresh ones
        _update_status(job.run_dir, state="queued", error=None, eta_s=None)
        self.tick()
        return read_job(job.run_dir)

    def delete(self, job_id: str) -> None:
        """Remove a job's run folder; refused while its processes run."""
        job = self.get(job_id)
        if job.alive or job.state in ACTIVE_STATES:
            raise JobError(f"{job_id} is {job.state}; cancel it first, then delete it")
        if job.run_dir.resolve().parent != self.root.resolve():
            raise JobError(f"{job.run_dir} is not inside {self.root}; refusing to delete it")
        shutil.rmtree(job.run_dir)
        log.info("deleted %s", job_id)


# --------------------------------------------------------------------------------------
# The supervisor (python -m bertlab.jobs supervise RUN_DIR)
# --------------------------------------------------------------------------------------
def supervise(run_dir: str | Path) -> int:
    """Run a job's command, wait for it, record how it ended, then start the next queued job."""
    run_dir = Path(run_dir)
    job = _read_json(run_dir / JOB_FILE, {}) or {}
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
        job = _update_job(run_dir, child_pid=child.pid, child_start=process_start_time(child.pid))
        killed = False
        while returncode is None:
            try:
                returncode = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            if requested["term"] and not job.get("cancel_requested"):
                job = _update_job(run_dir, cancel_requested=time.time())
            else:
                job = _read_json(run_dir / JOB_FILE, job) or job
            asked = job.get("cancel_requested")
            if asked and not job.get("term_sent"):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM)
                job = _update_job(run_dir, term_sent=True)
            if asked and not killed and time.time() - asked > float(job.get("kill_timeout_s") or DEFAULT_KILL_TIMEOUT_S):
                log.warning("the job did not stop within %.0fs of SIGTERM; sending SIGKILL", float(job.get("kill_timeout_s")))
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                killed = True
        with contextlib.suppress(ProcessLookupError):  # leftovers of the group (torchrun workers)
            os.killpg(child.pid, signal.SIGKILL)
    job = _read_json(run_dir / JOB_FILE, job) or job
    status = _read_json(run_dir / "status.json", {}) or {}
    if status.get("state") not in FINAL_STATES:
        if job.get("cancel_requested"):
            _update_status(run_dir, state="cancelled", ended=time.time())
        else:
            _update_status(run_dir, state="failed", ended=time.time(),
                           error=f"exit status {returncode}: {_error_from_log(run_dir)}")
    _update_job(run_dir, phase="ended", ended=time.time(), returncode=returncode)
    log.info("=== %s: ended with exit status %s (%s)", time.strftime("%Y-%m-%d %H:%M:%S"), returncode,
             (_read_json(run_dir / "status.json", {}) or {}).get("state"))
    try:
        started = JobRegistry(run_dir.parent).tick()
        if started:
            log.info("=== started the next queued job: %s", ", ".join(started))
    except Exception as exc:  # the queue is retried by every list(); never fail the finished job over it
        log.warning("could not start the next queued job: %s", exc)
    return 0


# --------------------------------------------------------------------------------------
# CLI: bertlab jobs list|submit|show|cancel|resume|delete|estimate|tick
# --------------------------------------------------------------------------------------
def _job_row(job_id: str, kind: str, state: str, progress: str, note: str, id_width: int = 40) -> str:
    return f"{job_id:<{id_width}} {kind:<9} {state:<10} {progress:<17} {note}".rstrip()


def _job_header(id_width: int = 40) -> str:
    """The column header over `jobs list`'s lines."""
    return _job_row("JOB", "KIND", "STATE", "PROGRESS", "ETA / WAITS FOR", id_width)


def _job_line(j: Job, id_width: int = 40) -> str:
    step = f"{j.step}/{j.total_steps}" if j.total_steps else str(j.step)
    eta = f"eta {format_duration(j.eta_s)}" if j.state == "running" and j.eta_s else ""
    if j.state == "queued" and (waits := waiting_for(j)):
        eta = "waits for " + ", ".join(waits)
    if j.error and j.state != "failed":  # a run shown despite a file it cannot read: say which and why
        eta = j.error.splitlines()[0]
    return _job_row(j.id, j.kind or "?", j.state, f"step {step}", eta, id_width)


def _cli_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", default=None, help="runs folder (default: $BERTLAB_RUNS, else runs/ in the repository)")
    sub = p.add_subparsers(dest="jobs_command", required=True)
    json_help = "print JSON for scripts"

    def command(name: str, help_text: str, description: str = "") -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=description or help_text)

    s = command("list", "every run in the runs folder with its state, progress and ETA",
                "Every run in the runs folder, newest first: job id (its folder's name), kind, state, step, "
                "and the ETA of a running job or the jobs a queued one waits for.")
    s.add_argument("--json", action="store_true", help=json_help)
    s = command("submit", "queue a job: bertlab jobs submit [--gpus N] pretrain|finetune ARGS...",
                "Queue `bertlab pretrain|finetune ARGS...` as a background job; it starts when its device is free.")
    s.add_argument("--gpus", type=int, default=1, help="GPUs (processes under torchrun) for this job")
    s.add_argument("--device", default=None, choices=DEVICES, help="queue to wait in (default: from ARGS, else auto)")
    s.add_argument("--name", default="", help="run folder name prefix")
    s.add_argument("--json", action="store_true", help=json_help)
    s.add_argument("kind", choices=KINDS, help="which recipe the job runs")
    s.add_argument("args", nargs=argparse.REMAINDER, help="arguments of `bertlab pretrain` / `bertlab finetune`")
    s = command("estimate", "parameters, memory and time of a job, without running it",
                "Parameters, memory and time that `bertlab pretrain|finetune ARGS...` would take, without running it.")
    s.add_argument("--gpus", type=int, default=1, help="GPUs (processes under torchrun) to estimate for")
    s.add_argument("--device", default=None, choices=DEVICES, help="device to estimate for (default: from ARGS, else auto)")
    s.add_argument("--json", action="store_true", help=json_help)
    s.add_argument("kind", choices=KINDS, help="which recipe the job would run")
    s.add_argument("args", nargs=argparse.REMAINDER, help="arguments of `bertlab pretrain` / `bertlab finetune`")
    for name, help_text in (("show", "one job: state, last metrics, error, log tail"),
                            ("cancel", "stop a job (a running one saves a checkpoint first)"),
                            ("resume", "queue a cancelled or failed job again from its checkpoint"),
                            ("delete", "remove a job's run folder (cancel a live job first)")):
        s = command(name, help_text)
        s.add_argument("job_id", help="the job's id: its run folder's name, as `bertlab jobs list` shows it")
        s.add_argument("--json", action="store_true", help=json_help)
        if name == "show":
            s.add_argument("--log", type=int, default=20, help="log lines to show")
        if name == "cancel":
            s.add_argument("--wait", action="store_true", help="wait until it has stopped (SIGKILL after --timeout)")
            s.add_argument("--timeout", type=float, default=None,
                           help="seconds to wait before SIGKILL with --wait (default: the registry's kill timeout)")
    command("tick", "start queued jobs whose device is free",
            "Start the queued jobs whose device is free (every `jobs list` and every finished job does this too).")


def _spec_from_args(args) -> JobSpec:
    rest = tuple(a for a in args.args if a != "--")
    device = args.device or _spec_device(JobSpec(args.kind, rest))
    return JobSpec(args.kind, rest, device=device, num_gpus=args.gpus, name=getattr(args, "name", ""))


def _cli_run(args) -> int:
    reg = JobRegistry(args.runs)
    cmd = args.jobs_command
    if cmd == "list":
        jobs = reg.list()
        if args.json:
            print(json.dumps([j.to_dict() for j in jobs], indent=2, default=str))
        elif not jobs:
            print(f"no jobs in {reg.root}")
        else:
            id_width = max(40, *(len(j.id) for j in jobs))
            print(_job_header(id_width))
            for j in jobs:
                print(_job_line(j, id_width))
        return 0
    if cmd == "tick":
        started = reg.tick()
        print("started: " + (", ".join(started) if started else "nothing"))
        return 0
    if cmd == "estimate":
        est = estimate_spec(_spec_from_args(args), runs_dir=reg.root)
        if args.json:
            print(json.dumps(asdict(est) | {"fits": est.fits}, indent=2))
        else:
            print(est.summary())
            print(f"memory: weights {est.weights_gb:.2f} GB + gradients/AdamW {est.optimizer_gb:.2f} GB + "
                  f"activations {est.activations_gb:.2f} GB + overhead {est.overhead_gb:.2f} GB on {est.device_name}")
            for note in est.notes:
                print(f"note: {note}")
        return 0
    if cmd == "submit":
        job = reg.submit(_spec_from_args(args))
        print(json.dumps(job.to_dict(), default=str) if args.json else f"{job.id} {job.state}  ({job.run_dir})")
        return 0
    if cmd == "show":
        job = reg.get(args.job_id)
        if args.json:
            print(json.dumps(job.to_dict() | {"log_tail": reg.log_tail(job.id, args.log)}, indent=2, default=str))
            return 0
        print(_job_line(job))
        print(f"folder   {job.run_dir}")
        print(f"command  {job.command}")
        last = job.status.get("last_train") or {}
        if last:
            print("train    " + "  ".join(f"{k}={v:.4g}" for k, v in last.items()
                                          if isinstance(v, float) and k not in ("time", "progress", "eta_s")))
        if job.status.get("last_eval"):
            print("eval     " + "  ".join(f"{k}={v:.4g}" for k, v in job.status["last_eval"].items() if isinstance(v, (int, float))))
        if job.error:
            print(f"error    {job.error}")
        tail = reg.log_tail(job.id, args.log)
        if tail:
            print("--- log ---\n" + tail)
        return 0
    if cmd == "cancel":
        job = reg.cancel(args.job_id, wait=args.wait, timeout_s=args.timeout)
    elif cmd == "resume":
        job = reg.resume(args.job_id)
    else:
        reg.delete(args.job_id)
        print(json.dumps({"id": args.job_id, "deleted": True}) if args.json else f"deleted {args.job_id}")
        return 0
    print(json.dumps(job.to_dict(), default=str) if args.json else _job_line(job))
    return 0


CLI_COMMANDS = {"jobs": ("background training jobs: list, submit, show, cancel, resume, delete, estimate, tick",
                         _cli_args, _cli_run)}


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "supervise":
        logging.basicConfig(level=logging.INFO, format="[jobs] %(message)s", stream=sys.stdout)
        return supervise(argv[1])
    print("usage: python -m bertlab.jobs supervise RUN_DIR  (internal; use `bertlab jobs ...`)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
