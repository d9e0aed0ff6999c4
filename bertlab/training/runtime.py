"""What the trainer runs on besides the model and the optimizer: the torchrun process group (and
the plain error when another of its processes is gone),
SIGTERM/SIGINT handling, batches prefetched in a thread, the metrics writer, the training state
(optimizer, scaler, progress, RNG) that every checkpoint saves beside the model, and the clean-up
of saves a kill interrupted.

Imports torch, numpy, bertlab.atomic (atomic directories), bertlab.storage.runfolder (file names),
bertlab.storage.checkpoint and bertlab.storage.modelfolder (what a complete checkpoint is) and bertlab.training.types; never streamlit.
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist

from bertlab.atomic import atomic_dir, recover_dir
from bertlab.errors import DistributedError, InputError
from bertlab.storage.checkpoint import is_checkpoint_dir
from bertlab.storage.modelfolder import has_config
from bertlab.storage.runfolder import (
    MODEL_DIR,
    TENSORBOARD_DIR,
    TRAINER_STATE_FILE,
    append_metrics,
    checkpoint_dir,
    model_dir,
    snapshot_root,
)
from bertlab.training.types import Progress, TrainTask

if TYPE_CHECKING:
    from tqdm import tqdm


log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# Distributed
# --------------------------------------------------------------------------------------
@dataclass
class DistInfo:
    """This process's place in a torchrun group (rank 0 of 1 without one)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def process_rank() -> int:
    """This process's rank under torchrun (0 without it), known before the process group starts."""
    return int(os.environ.get("RANK", "0")) if int(os.environ.get("WORLD_SIZE", "1")) > 1 else 0


def init_distributed(device: torch.device) -> DistInfo:
    """Join the torchrun process group when WORLD_SIZE > 1 (gloo on CPU, NCCL on CUDA)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


# What a failed collective says when the process at the other end is gone (killed, out of memory,
# its machine down): gloo's and NCCL's RuntimeErrors name themselves or the broken connection.
_LOST_PEER = ("gloo", "nccl", "connection reset", "connection closed", "broken pipe", "connection refused")


def lost_peer(exc: BaseException, info: DistInfo) -> DistributedError | None:
    """The plain error for `exc` when it is a collective that failed because another process of
    this torchrun job is gone; None for any other error, and always without a group."""
    if info.world <= 1 or isinstance(exc, DistributedError):
        return None
    text = str(exc)
    if not isinstance(exc, dist.DistError) and not (
        isinstance(exc, RuntimeError) and any(k in text.lower() for k in _LOST_PEER)
    ):
        return None
    # gloo's first sentence without its source location: "Read error [10.0.0.2]:4312: Connection reset by peer"
    cause = re.sub(r"^\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", text.strip()).split(". ")[0].splitlines()[0]
    return DistributedError(
        f"rank {info.rank} lost contact with another process of this {info.world}-process torchrun job "
        f"(a process or its machine stopped, or the network between them failed: {cause}); "
        "run every machine's command again with --resume to continue from the last checkpoint"
    )


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
    with atomic_dir(directory) as tmp:
        task.save_model(tmp / MODEL_DIR, model, extra)
        state = {
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "progress": asdict(progress),
            "rng": rng_state(),
        }
        torch.save(state, tmp / TRAINER_STATE_FILE)


def load_training_state(directory: Path) -> dict:
    """trainer_state.pt of a checkpoint folder; InputError when it is missing or unreadable."""
    path = Path(directory) / TRAINER_STATE_FILE
    if not path.is_file():
        raise InputError(f"{path}: no saved training state to resume from")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise InputError(
            f"{path}: cannot be read ({type(exc).__name__}: {exc}); the checkpoint may be corrupt"
        ) from exc


def complete_checkpoint(path: Path) -> bool:
    """True when `path` holds a training state that loads and a model (a finished save)."""
    try:
        torch.load(path / TRAINER_STATE_FILE, map_location="cpu", weights_only=True)
    except Exception:
        return False
    return has_config(path / MODEL_DIR)


def recover_saves(run_dir: Path) -> None:
    """Leftovers of saves killed between their two renames: the checkpoint, the final model and
    the snapshots are put back from a complete hidden copy where the folder itself is missing, and
    half-written copies go (at base size each is hundreds of MB)."""
    found = recover_dir(checkpoint_dir(run_dir), complete_checkpoint)
    if found is not None:
        log.warning("recovered the checkpoint from %s (a save had been interrupted)", found.name)
    recover_dir(model_dir(run_dir), is_checkpoint_dir)
    snapshots = snapshot_root(run_dir)
    if snapshots.is_dir():
        for name in {
            p.name.split(".tmp-")[0].split(".old-")[0][1:]
            for p in snapshots.glob(".*")
            if p.is_dir() and (".tmp-" in p.name or ".old-" in p.name)
        }:
            recover_dir(snapshots / name, is_checkpoint_dir)


# --------------------------------------------------------------------------------------
# Metrics, signals, prefetching
# --------------------------------------------------------------------------------------
class MetricsWriter:
    """Appends metric lines to metrics.jsonl and mirrors scalars to TensorBoard when available."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.run_dir = Path(run_dir)
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.run_dir / TENSORBOARD_DIR))
            except Exception as exc:  # tensorboard is optional
                log.info("TensorBoard disabled (%s)", exc)

    def write(self, record: dict) -> None:
        append_metrics(self.run_dir, record)
        if self.tb is not None:
            split = record.get("split", "train")
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("step", "time", "epoch"):
                    self.tb.add_scalar(f"{split}/{k}", v, record.get("step", 0))

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


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


def logging_above(bar: tqdm) -> AbstractContextManager:
    """While `bar` is drawn, the root logger's terminal handlers write through tqdm.write, which
    clears the bar, prints the line and draws the bar again below it."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm(tqdm_class=type(bar))
