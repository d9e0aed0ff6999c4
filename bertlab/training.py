"""The training loop shared by pretraining and fine-tuning.

Owns: the optimizer (AdamW, no decay on biases and LayerNorm), the linear warm-up / linear decay
schedule driven by a budget in steps, tokens or wall-clock time, gradient accumulation and
clipping, mixed precision (bf16 autocast on CUDA, fp16 + scaler where bf16 is missing, fp32 on
CPU), periodic evaluation, metrics (JSONL + TensorBoard), atomic checkpoints with optimizer,
scheduler, RNG and data position, exact resume, graceful SIGTERM/SIGINT, and torchrun / DDP.

A run folder is the single source of truth that the CLI, the jobs page and the tests read:

    run_dir/
      run_config.json   everything needed to rerun (written by the recipe)
      status.json       {"state": queued|running|finished|failed|cancelled, "step", "total_steps", ...}
      metrics.jsonl     one JSON object a line: {"split": "train"|"eval", "step", "time", ...}
      log.txt           human-readable log
      checkpoint/       latest training state (model files + trainer_state.pt), written atomically
      model/            the final model, Hugging Face-compatible

What a task supplies (pretraining and each fine-tuning task): see `TrainTask`.
Imports torch and bertlab.checkpoint; never streamlit.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.distributed as dist

from bertlab.checkpoint import _atomic_dir, recover_dir
from bertlab.errors import InputError

log = logging.getLogger(__name__)

STATE_FILE = "trainer_state.pt"
SCHEDULES = ("linear", "cosine", "constant")
SNAPSHOT_DIR = "snapshots"
STATES = ("queued", "preparing", "running", "finished", "failed", "cancelled")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and budget (Devlin et al. 2018, appendix A.2 for the defaults)."""

    learning_rate: float = 1e-4  # peak LR after warm-up
    warmup: float = 0.01  # warm-up length: a fraction of the budget (<1) or a number of steps (>=1)
    schedule: str = "linear"  # decay after warm-up: linear (BERT) | cosine | constant
    weight_decay: float = 0.01  # not applied to biases and LayerNorm weights
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    grad_clip: float = 1.0  # max global grad norm; 0 disables
    batch_size: int = 32  # sequences per optimizer step per process (before accumulation split)
    grad_accum: int = 1  # micro-batches per optimizer step; batch_size is split across them
    max_steps: int = 0  # budget in optimizer steps (0 = none)
    max_tokens: int = 0  # budget in input tokens (0 = none)
    max_time_s: float = 0.0  # budget in wall-clock seconds of training (0 = none)
    eval_every: int = 500  # steps between evaluations (0 = only at the end)
    save_every: int = 1000  # steps between checkpoints (0 = only at the end)
    save_every_s: float = 600.0  # also checkpoint at least this often in seconds (0 = never by time)
    log_every: int = 20  # steps between train metric lines
    precision: str = "auto"  # auto | fp32 | bf16 | fp16 ; auto = bf16 on CUDA (fp16 without bf16), fp32 on CPU
    compile: bool = False  # torch.compile the model
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    num_threads: int = 0  # CPU threads for torch (0 = leave torch's default)
    snapshots: bool = False  # keep small (fp16) model snapshots at log-spaced steps (see snapshot_steps)

    def __post_init__(self):
        if not (self.max_steps or self.max_tokens or self.max_time_s):
            raise InputError("give a training budget: max_steps, max_tokens or max_time_s")
        if self.batch_size % self.grad_accum:
            raise InputError(f"batch_size {self.batch_size} must be divisible by grad_accum {self.grad_accum}")
        if self.precision not in ("auto", "fp32", "bf16", "fp16"):
            raise InputError(f"precision must be auto, fp32, bf16 or fp16, not {self.precision!r}")
        if self.learning_rate <= 0:
            raise InputError("learning_rate must be positive")
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule must be one of {SCHEDULES}, not {self.schedule!r}")


class TrainTask(Protocol):
    """What the trainer needs from a recipe (pretraining, a fine-tuning task)."""

    def batches(self, epoch: int, start: int, rank: int, world: int) -> Iterator[dict[str, torch.Tensor]]:
        """Training batches of epoch `epoch`, skipping the first `start` batches (for exact resume).
        Each batch is a dict of tensors for the model, with `num_tokens` (int) allowed."""

    def batches_per_epoch(self, world: int) -> int:
        ...

    def forward(self, model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss and per-batch metric sums for logging (e.g. {"mlm_correct": 3, "mlm_count": 20})."""

    def evaluate(self, model: torch.nn.Module, device: torch.device, autocast) -> dict[str, float]:
        """Held-out metrics; called on rank 0 only, model in eval mode."""

    def save_model(self, directory: Path, model: torch.nn.Module, extra: dict) -> None:
        """Write the model in its Hugging Face-compatible format (atomically); for the final model,
        `extra["card_updates"]` holds steps, tokens, epochs, time and metrics for its model card."""

    def summarize(self, sums: dict[str, float]) -> dict[str, float]:
        """Turn summed batch metrics into rates (accuracy, ...) for a log line."""


# --------------------------------------------------------------------------------------
# Run folder
# --------------------------------------------------------------------------------------
def hardware_description(num_threads: int = 0) -> str:
    """What a run trained on, for model cards: GPU name and count, or CPU and threads."""
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    import platform

    threads = num_threads or torch.get_num_threads()
    return f"CPU ({platform.processor() or platform.machine()}, {threads} thread{'' if threads == 1 else 's'})"


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def read_metrics(run_dir: str | Path) -> list[dict]:
    """All metric lines of a run (skips a half-written last line)."""
    out = []
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _own_start_time() -> int | None:
    """This process's start time in clock ticks since boot (field 22 of /proc/self/stat, as
    jobs.process_start_time reads it), so the run list can tell a reused pid from this run."""
    try:
        raw = Path("/proc/self/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rfind(")") + 2:].split()[19])


def _ancestors() -> set[int]:
    """This process and those above it (the job supervisor, torchrun), from /proc."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
            pid = int(raw[raw.rfind(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _other_trainer(run_dir: Path) -> int | None:
    """The pid of a live process, not this one nor one above it, that trains `run_dir`: the pid in
    status.json of a run preparing or running, or a launched job's supervisor or recipe process."""
    if os.environ.get("RANK", "0") != "0":  # torchrun's other ranks: rank 0 checks
        return None
    from bertlab.jobs import pid_alive

    def read(path: Path) -> Any:
        try:
            return read_json(path)
        except (OSError, ValueError):  # unreadable: nothing to go by (the run list says why)
            return None

    candidates = []
    status = read(run_dir / "status.json")
    if isinstance(status, dict) and status.get("state") in ("preparing", "running"):
        candidates.append((status.get("pid"), status.get("pid_start")))
    job = read(run_dir / "job.json")
    if isinstance(job, dict) and job.get("phase") == "launched":
        candidates += [(job.get("pid"), job.get("pid_start")), (job.get("child_pid"), job.get("child_start"))]
    ours = _ancestors()
    for pid, start in candidates:
        if (isinstance(pid, int) and pid not in ours
                and pid_alive(pid, start if isinstance(start, int) else None)):
            return pid
    return None


def update_status(run_dir: Path, **fields: Any) -> dict:
    path = Path(run_dir) / "status.json"
    status = read_json(path, {}) or {}
    status.update(fields)
    status["updated"] = time.time()
    write_json_atomic(path, status)
    return status


@contextlib.contextmanager
def failure_recorded(run_dir: str | Path):
    """Around a recipe: an error before training starts (bad corpus, missing data, not a
    checkpoint) marks a run still 'preparing' as failed with its message, so it never stays
    'preparing' for good. (The trainer records failures during training itself.)

    First, a run folder that another live process is training (a job, or a `--resume` typed while
    it runs) is refused, before anything in it is touched: two trainers would interleave their
    checkpoints and metrics."""
    other = _other_trainer(Path(run_dir))
    if other:
        raise InputError(f"{run_dir} is being trained by another process (pid {other}); wait for it to end, "
                         "or cancel it first (`bertlab jobs cancel` for a job)")
    try:
        yield
    except BaseException as exc:
        status = read_json(Path(run_dir) / "status.json")
        if isinstance(status, dict) and status.get("state") == "preparing":
            update_status(Path(run_dir), state="failed", error=f"{type(exc).__name__}: {exc}", ended=time.time())
        raise


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop metric lines past `step` (a resumed run writes them again)."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return
    kept = [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
            if line.strip() and _line_step(line) <= step]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    os.replace(tmp, path)


def _line_step(line: str) -> float:
    try:
        return float(json.loads(line).get("step", 0))
    except (ValueError, AttributeError):
        return float("inf")  # an unreadable (half-written) line goes


def _complete_checkpoint(path: Path) -> bool:
    try:
        torch.load(path / STATE_FILE, map_location="cpu", weights_only=True)
    except Exception:
        return False
    return (path / "model" / "config.json").is_file()


class MetricsWriter:
    """Appends metric lines to metrics.jsonl and mirrors scalars to TensorBoard when available."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(Path(run_dir) / "tensorboard"))
            except Exception as exc:  # tensorboard is optional
                log.info("TensorBoard disabled (%s)", exc)

    def write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            split = record.get("split", "train")
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("step", "time", "epoch"):
                    self.tb.add_scalar(f"{split}/{k}", v, record.get("step", 0))

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


# --------------------------------------------------------------------------------------
# Optimisation pieces
# --------------------------------------------------------------------------------------
def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW with weight decay on weight matrices only (not biases, not LayerNorm)."""
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if name.endswith("bias") or "LayerNorm" in name or p.ndim < 2 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=cfg.adam_betas, eps=cfg.adam_eps)


def lr_factor(progress: float, warmup_fraction: float, schedule: str = "linear") -> float:
    """Linear warm-up to 1 over `warmup_fraction` of the budget, then `schedule` down to 0:
    linear (BERT's), cosine (half a cosine wave) or constant (no decay)."""
    progress = min(max(progress, 0.0), 1.0)
    if warmup_fraction > 0 and progress < warmup_fraction:
        return progress / warmup_fraction
    rest = (progress - warmup_fraction) / max(1e-12, 1.0 - warmup_fraction)  # 0 -> 1 after warm-up
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, rest)))
    return max(0.0, 1.0 - rest)


def snapshot_steps(upto: int) -> list[int]:
    """Log-spaced steps for snapshots: 1, 2, 3, 5, 7 times each power of ten (10, 20, 30, 50, 70,
    100, ...), so early training, where most changes happen, is seen in detail."""
    out, base = [], 10
    while base <= upto:
        out += [m * base for m in (1, 2, 3, 5, 7) if m * base <= upto]
        base *= 10
    return out


def is_snapshot_step(step: int) -> bool:
    if step < 10:
        return False
    base = 10 ** int(math.floor(math.log10(step)))
    return step % base == 0 and step // base in (1, 2, 3, 5, 7)


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0  # optimizer steps done
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of `epoch` consumed
    tokens: int = 0  # input tokens seen (all processes)
    train_time_s: float = 0.0  # wall-clock seconds spent training (excludes eval/saving)
    phase: int = 0  # data phase (e.g. short sequences first, then long); epoch counts restart per phase

    def fraction(self, cfg: TrainConfig) -> float:
        parts = []
        if cfg.max_steps:
            parts.append(self.step / cfg.max_steps)
        if cfg.max_tokens:
            parts.append(self.tokens / cfg.max_tokens)
        if cfg.max_time_s:
            parts.append(self.train_time_s / cfg.max_time_s)
        return max(parts)

    def done(self, cfg: TrainConfig) -> bool:
        return self.fraction(cfg) >= 1.0


def warmup_fraction(cfg: TrainConfig) -> float:
    if cfg.warmup >= 1:
        if not cfg.max_steps:
            raise InputError("warmup given in steps needs a max_steps budget; give warmup as a fraction (< 1) instead")
        return min(1.0, cfg.warmup / cfg.max_steps)
    return cfg.warmup


def resolve_precision(cfg: TrainConfig, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for fp32."""
    if device.type != "cuda":
        if cfg.precision in ("bf16", "fp16"):
            log.warning("precision %s asked for on CPU; training in fp32", cfg.precision)
        return None
    if cfg.precision == "fp32":
        return None
    if cfg.precision == "fp16":
        return torch.float16
    if cfg.precision == "bf16" or torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


def autocast_context(device: torch.device, dtype: torch.dtype | None):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


# --------------------------------------------------------------------------------------
# Distributed
# --------------------------------------------------------------------------------------
@dataclass
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device) -> DistInfo:
    """Join the torchrun process group when WORLD_SIZE > 1 (gloo on CPU, NCCL on CUDA)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def all_reduce_sum(values: dict[str, float], info: DistInfo, device: torch.device) -> dict[str, float]:
    if info.world <= 1 or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return dict(zip(keys, t.tolist(), strict=True))


# --------------------------------------------------------------------------------------
# Checkpoint state
# --------------------------------------------------------------------------------------
def rng_state() -> dict:
    state = {
        "python": random.getstate(),
        "numpy": _numpy_state_to_plain(np.random.get_state()),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(_tuplify(state["python"]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _numpy_state_to_plain(state: tuple) -> tuple:
    """numpy's RNG state with its key array as a list, so weights_only loading accepts it."""
    kind, keys, pos, has_gauss, gauss = state
    return (kind, keys.tolist(), int(pos), int(has_gauss), float(gauss))


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if isinstance(x, (list, tuple)) else x


def save_training_state(
    directory: Path,
    task: TrainTask,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    progress: Progress,
    extra: dict,
) -> None:
    """Model files + trainer_state.pt, written into a temp dir and renamed (atomic)."""
    with _atomic_dir(directory) as tmp:
        task.save_model(tmp / "model", model, extra)
        state = {
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "progress": asdict(progress),
            "rng": rng_state(),
        }
        torch.save(state, tmp / STATE_FILE)


def load_training_state(directory: Path) -> dict:
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        raise InputError(f"{path}: no saved training state to resume from")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise InputError(f"{path}: cannot be read ({type(exc).__name__}: {exc}); the checkpoint may be corrupt") from exc


# --------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------
class GracefulStop:
    """SIGTERM / SIGINT set a flag; the loop checkpoints and exits at the next step boundary."""

    def __init__(self):
        self.requested = False
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not in the main thread (e.g. inside a test runner thread)
                pass
        return self

    def _handle(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        log.warning("signal %s received: saving a checkpoint and stopping", signum)
        self.requested = True

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


def prefetch(iterator: Iterator, depth: int = 4) -> Iterator:
    """Build the next batches in a background thread while the GPU works on this one, so data
    preparation (masking, padding) is never what the accelerator waits for. Order is kept."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def work():
        try:
            for item in iterator:
                q.put(item)
        except BaseException as exc:  # hand errors to the consumer
            q.put(exc)
        q.put(done)

    threading.Thread(target=work, daemon=True, name="bertlab-prefetch").start()
    while True:
        item = q.get()
        if item is done:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


@dataclass
class TrainResult:
    state: str  # finished | cancelled
    progress: Progress
    last_eval: dict
    run_dir: Path


def _logging_above(bar):
    """While `bar` is drawn, the root logger's terminal handlers write through tqdm.write, which
    clears the bar, prints the line and draws the bar again below it."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm(tqdm_class=type(bar))


def _format_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def train(
    task: TrainTask,
    model: torch.nn.Module,
    cfg: TrainConfig,
    run_dir: str | Path,
    resume: bool = False,
    extra_state: dict | None = None,
    progress_bar: bool = True,
    stop_after_steps: int | None = None,
) -> TrainResult:
    """Train `model` on `task` under `cfg`'s budget, writing everything into `run_dir`.

    Args:
        resume: continue exactly from `run_dir/checkpoint` (model, optimizer, RNG, data position).
        extra_state: JSON-able info saved beside every checkpoint (e.g. the data config).
        stop_after_steps: stop (as if cancelled, after saving) once this many steps are done;
            used by tests to simulate a kill at a known point.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    from bertlab.inference import pick_device

    device = pick_device(cfg.device)
    info = init_distributed(device)
    if device.type == "cuda" and info.world > 1:
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    if cfg.num_threads and device.type == "cpu":
        torch.set_num_threads(cfg.num_threads)
    amp_dtype = resolve_precision(cfg, device)
    autocast = lambda: autocast_context(device, amp_dtype)  # noqa: E731

    torch.manual_seed(cfg.seed + info.rank)
    random.seed(cfg.seed + info.rank)
    model.to(device)
    optimizer = build_optimizer(model, cfg)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    progress = Progress()
    ckpt_dir = run_dir / "checkpoint"
    if info.is_main:  # a save killed between its two renames leaves the checkpoint only as a hidden copy
        found = recover_dir(ckpt_dir, _complete_checkpoint)
        if found is not None:
            log.warning("recovered the checkpoint from %s (a save had been interrupted)", found.name)
        # the same for the final model and the snapshots: half-written copies of a killed save go
        # (at base size each is hundreds of MB); a complete one stands in for a missing folder
        from bertlab.checkpoint import is_checkpoint_dir

        recover_dir(run_dir / "model", is_checkpoint_dir)
        snapshots = run_dir / SNAPSHOT_DIR
        if snapshots.is_dir():
            for name in {p.name.split(".tmp-")[0].split(".old-")[0][1:] for p in snapshots.glob(".*")
                         if p.is_dir() and (".tmp-" in p.name or ".old-" in p.name)}:
                recover_dir(snapshots / name, is_checkpoint_dir)
    if resume:
        if not (ckpt_dir / STATE_FILE).is_file():
            raise InputError(f"--resume: {ckpt_dir} holds no checkpoint; start without --resume")
        from bertlab.checkpoint import load_state, normalize_keys, read_weights

        load_state(model, normalize_keys(read_weights(ckpt_dir / "model")), str(ckpt_dir / "model"), required_prefixes=())
        state = load_training_state(ckpt_dir)
        optimizer.load_state_dict(state["optimizer"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        progress = Progress(**state["progress"])
        set_rng_state(state["rng"])
        if info.is_main:
            truncate_metrics(run_dir, progress.step)  # lines written after the checkpoint are written again
        log.info("resumed from step %d (epoch %d, batch %d)", progress.step, progress.epoch, progress.batch_in_epoch)

    train_model = model
    if cfg.compile:
        train_model = torch.compile(model)
    if info.world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP

        train_model = DDP(train_model, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=False)

    wf = warmup_fraction(cfg)
    writer = MetricsWriter(run_dir) if info.is_main else None
    if info.is_main:
        update_status(run_dir, state="running", pid=os.getpid(), pid_start=_own_start_time(), step=progress.step, total_steps=cfg.max_steps or None,
                      started=time.time(), device=str(device), world_size=info.world, error=None)
    per_epoch = task.batches_per_epoch(info.world)
    if per_epoch <= 0:
        raise InputError("the training data gives no batch; add data or lower the batch size")

    bar = None
    if progress_bar and info.is_main:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.max_steps or None, initial=progress.step, unit="step", dynamic_ncols=True, mininterval=1.0)

    sums: dict[str, float] = {}
    window_start, window_tokens, window_seqs = time.time(), 0, 0
    last_eval: dict = {}
    last_save_time = time.time()
    state = "finished"

    def save(tag: str) -> None:
        nonlocal last_save_time
        if info.is_main:
            save_training_state(ckpt_dir, task, model, optimizer, scaler, progress, extra_state or {})
            update_status(run_dir, checkpoint_step=progress.step)
            log.info("checkpoint saved at step %d (%s)", progress.step, tag)
        last_save_time = time.time()
        if info.world > 1:
            dist.barrier()

    def evaluate() -> dict:
        metrics = {}
        if info.is_main:
            model.eval()
            with torch.no_grad():
                metrics = task.evaluate(model, device, autocast)
            model.train()
            record = {"split": "eval", "step": progress.step, "time": time.time(), "tokens": progress.tokens,
                      "train_s": round(progress.train_time_s, 1), **metrics}
            writer.write(record)
            update_status(run_dir, last_eval=metrics)
            log.info("eval step %d: %s", progress.step, " ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
        if info.world > 1:
            dist.barrier()
        return metrics

    phase_at = getattr(task, "phase_at", None)  # optional: data phases (short sequences first, then long)

    def save_snapshot(metrics: dict) -> None:
        card = {"steps": progress.step, "tokens": progress.tokens, "train_time_s": round(progress.train_time_s, 1),
                "metrics": {k: round(v, 4) for k, v in metrics.items()}, "snapshot": True}
        task.save_model(run_dir / SNAPSHOT_DIR / f"step-{progress.step:07d}", model,
                        {**(extra_state or {}), "card_updates": card, "snapshot": True})

    # log lines (eval, checkpoint saved) go above the progress bar instead of into its line
    with GracefulStop() as stopper, (_logging_above(bar) if bar is not None else contextlib.nullcontext()):
        model.train()
        try:
            while not progress.done(cfg):
                if phase_at is not None:
                    task.set_phase(progress.phase)
                batches = task.batches(progress.epoch, progress.batch_in_epoch, info.rank, info.world)
                if device.type == "cuda":
                    batches = prefetch(batches)
                exhausted = False
                while not progress.done(cfg):
                    if phase_at is not None and phase_at(progress.fraction(cfg)) != progress.phase:
                        progress.phase = phase_at(progress.fraction(cfg))
                        progress.epoch, progress.batch_in_epoch = 0, 0
                        log.info("step %d: data phase %d starts (same optimizer and schedule)", progress.step,
                                 progress.phase)
                        break
                    t0 = time.time()
                    group = []
                    for _ in range(cfg.grad_accum):
                        b = next(batches, None)
                        if b is None:
                            exhausted = True
                            break
                        group.append(b)
                    if exhausted:
                        break
                    for g in optimizer.param_groups:
                        g["lr"] = cfg.learning_rate * lr_factor(progress.fraction(cfg), wf, cfg.schedule)
                    step_tokens = 0
                    for i, b in enumerate(group):
                        step_tokens += int(b.pop("num_tokens", 0))
                        b = {k: (v.to(device, non_blocking=True) if torch.is_tensor(v) else v) for k, v in b.items()}
                        sync = contextlib.nullcontext()
                        if info.world > 1 and i < len(group) - 1:
                            sync = train_model.no_sync()
                        with sync:
                            with autocast():
                                loss, stats = task.forward(train_model, b)
                            loss = loss / len(group)
                            if scaler is not None:
                                scaler.scale(loss).backward()
                            else:
                                loss.backward()
                        for k, v in stats.items():
                            sums[k] = sums.get(k, 0.0) + float(v)
                        sums["loss_sum"] = sums.get("loss_sum", 0.0) + float(loss.detach()) * len(group)
                        sums["batches"] = sums.get("batches", 0.0) + 1
                        window_seqs += int(b["input_ids"].shape[0]) if "input_ids" in b else 0
                    if scaler is not None:
                        scaler.unscale_(optimizer)
                    grad_norm = (
                        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip).item() if cfg.grad_clip > 0 else 0.0
                    )
                    if scaler is not None:
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                    step_tokens_all = int(all_reduce_sum({"t": step_tokens}, info, device)["t"]) if info.world > 1 else step_tokens
                    progress.step += 1
                    progress.batch_in_epoch += len(group)
                    progress.tokens += step_tokens_all
                    progress.train_time_s += time.time() - t0
                    window_tokens += step_tokens_all
                    if bar is not None:
                        bar.update(1)

                    if progress.step % cfg.log_every == 0 or progress.done(cfg):
                        total = all_reduce_sum(sums, info, device)
                        elapsed = max(1e-9, time.time() - window_start)
                        frac = progress.fraction(cfg)
                        eta = max(0.0, progress.train_time_s / frac * (1 - frac)) if frac > 0 else float("nan")
                        record = {
                            "split": "train",
                            "step": progress.step,
                            "epoch": progress.epoch,
                            "time": time.time(),
                            "loss": total.get("loss_sum", 0.0) / max(1.0, total.get("batches", 1.0)),
                            "lr": optimizer.param_groups[0]["lr"],
                            "grad_norm": grad_norm,
                            "tokens": progress.tokens,
                            "tokens_per_s": window_tokens / elapsed,
                            "seq_per_s": window_seqs * info.world / elapsed,
                            "progress": frac,
                            "eta_s": eta,
                            **task.summarize(total),
                        }
                        if device.type == "cuda":
                            record["gpu_mem_gb"] = torch.cuda.max_memory_allocated(device) / 2**30
                        if info.is_main:
                            writer.write(record)
                            update_status(run_dir, step=progress.step, progress=frac, eta_s=eta, last_train=record)
                            if bar is not None:
                                bar.set_postfix(loss=f"{record['loss']:.3f}", eta=_format_eta(eta))
                        sums = {}
                        window_start, window_tokens, window_seqs = time.time(), 0, 0

                    if cfg.eval_every and progress.step % cfg.eval_every == 0 and not progress.done(cfg):
                        last_eval = evaluate()
                    if cfg.snapshots and is_snapshot_step(progress.step) and not progress.done(cfg):
                        if not (cfg.eval_every and progress.step % cfg.eval_every == 0):
                            last_eval = evaluate()
                        if info.is_main:
                            save_snapshot(last_eval)
                    want_save = (cfg.save_every and progress.step % cfg.save_every == 0) or (
                        cfg.save_every_s and time.time() - last_save_time > cfg.save_every_s
                    )
                    stop_now = stopper.requested or (stop_after_steps is not None and progress.step >= stop_after_steps)
                    if info.world > 1:
                        flag = all_reduce_sum({"stop": float(stop_now)}, info, device)["stop"]
                        stop_now = flag > 0
                    if want_save and not progress.done(cfg) and not stop_now:
                        save("periodic")
                    if stop_now:
                        state = "cancelled"
                        save("stop requested")
                        if info.is_main:
                            update_status(run_dir, state="cancelled", step=progress.step, ended=time.time())
                        return TrainResult(state, progress, last_eval, run_dir)
                if exhausted:
                    progress.epoch += 1
                    progress.batch_in_epoch = 0
            last_eval = evaluate()
            save("final")
            if cfg.snapshots and info.is_main:
                save_snapshot(last_eval)
            if info.is_main:
                final = {  # what the model card records about the finished run
                    "steps": progress.step,
                    "tokens": progress.tokens,
                    "epochs": round(progress.epoch + progress.batch_in_epoch / max(1, per_epoch), 2),
                    "train_time_s": round(progress.train_time_s, 1),
                    "metrics": {k: round(v, 4) for k, v in last_eval.items()},
                    "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                }
                task.save_model(run_dir / "model", model, {**(extra_state or {}), "card_updates": final})
                update_status(run_dir, state="finished", step=progress.step, progress=1.0, eta_s=0, ended=time.time())
            return TrainResult(state, progress, last_eval, run_dir)
        except BaseException as exc:
            if info.is_main:
                update_status(run_dir, state="failed", error=f"{type(exc).__name__}: {exc}", ended=time.time())
            raise
        finally:
            if bar is not None:
                bar.close()
            if writer is not None:
                writer.close()
