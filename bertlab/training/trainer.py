"""The training loop shared by pretraining and fine-tuning.

Owns: the budget in steps, tokens or wall-clock time that drives the LR schedule (`Progress`,
with `TrainConfig` and `TrainTask` defined in bertlab.training.types and re-exported here), gradient
accumulation and clipping, the fp16 grad scaler, steps whose gradients are not finite,
periodic evaluation, log-spaced snapshots, atomic checkpoints with exact resume, graceful
SIGTERM/SIGINT, and torchrun / DDP. `Trainer` runs these as named steps: set-up, resume,
accumulate + optimizer step, log, evaluate, save or stop, and the final model with its card. The
optimizer, the LR schedule and the choice of mixed precision (bf16 autocast on CUDA, fp16 where
bf16 is missing, fp32 on CPU) are bertlab.training.optimization's; whether and when to compile
(compile='auto') bertlab.training.auto_compile's; what a train line adds up and its ETA
bertlab.training.train_log's.

Everything a run writes goes into its run folder (bertlab.storage.runfolder owns the layout). What a task
supplies (pretraining and each fine-tuning task): see `TrainTask`. The trainer never seeds the
global RNGs: the recipes do, before they build the model.

Imports torch and bertlab.storage.checkpoint / errors / formatting / hardware / storage.runfolder /
training.auto_compile / optimization / runtime / train_log / types; never streamlit.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from bertlab.errors import InputError, TrainingDiverged
from bertlab.formatting import format_duration
from bertlab.hardware import own_start_time, pick_device
from bertlab.storage.checkpoint import load_state, normalize_keys, read_weights
from bertlab.storage.runfolder import (
    TRAINER_STATE_FILE,
    checkpoint_dir,
    model_dir,
    snapshot_dir,
    truncate_metrics,
    update_status,
)
from bertlab.training.auto_compile import CompileTracker
from bertlab.training.optimization import (
    autocast_context,
    build_optimizer,
    compile_plan,
    group_lr,
    lr_factor,
    precision_label,
    resolve_precision,
    warmup_fraction,
)
from bertlab.training.runtime import (
    DistInfo,
    GracefulStop,
    MetricsWriter,
    all_reduce_sum,
    init_distributed,
    load_training_state,
    logging_above,
    lost_peer,
    prefetch,
    recover_saves,
    save_training_state,
    set_rng_state,
)
from bertlab.training.train_log import LogWindow
from bertlab.training.types import Progress, TrainConfig, TrainTask

log = logging.getLogger(__name__)

NONFINITE_STEPS_LIMIT = 10  # steps in a row with inf/NaN gradients before a run is stopped as diverged


# --------------------------------------------------------------------------------------
# Snapshots and the budget
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    state: str  # finished | cancelled
    progress: Progress
    last_eval: dict
    run_dir: Path


class Trainer:
    """One training run of `model` on `task` under `cfg`'s budget, written into `run_dir`.

    `run()` is the whole story; each step it takes is a method below, in the order they happen.
    """

    def __init__(
        self,
        task: TrainTask,
        model: torch.nn.Module,
        cfg: TrainConfig,
        run_dir: str | Path,
        extra_state: dict | None = None,
        progress_bar: bool = True,
        stop_after_steps: int | None = None,
    ):
        self.task, self.model, self.cfg = task, model, cfg
        self.run_dir = Path(run_dir)
        self.ckpt_dir = checkpoint_dir(self.run_dir)
        self.extra_state = extra_state or {}
        self.progress_bar = progress_bar
        self.stop_after_steps = stop_after_steps
        self.progress = Progress()
        self.nonfinite_run = 0  # steps in a row whose gradients were not finite
        self.last_eval: dict = {}
        self.bar = None
        self.writer: MetricsWriter | None = None
        self.stopper: GracefulStop | None = None

    def run(self, resume: bool = False) -> TrainResult:
        self.setup()
        if resume:
            self.resume()
        self.start()
        # log lines (eval, checkpoint saved) go above the progress bar instead of into its line
        with (
            GracefulStop() as self.stopper,
            logging_above(self.bar) if self.bar is not None else contextlib.nullcontext(),
        ):
            self.model.train()
            try:
                return self.loop()
            except BaseException as exc:
                lost = lost_peer(exc, self.info)
                if self.info.is_main or lost is not None:  # the process that is gone may be rank 0
                    error = str(lost) if lost is not None else f"{type(exc).__name__}: {exc}"
                    update_status(self.run_dir, state="failed", error=error, ended=time.time())
                if lost is not None:
                    raise lost from exc
                raise
            finally:
                if self.bar is not None:
                    self.bar.close()
                if self.writer is not None:
                    self.writer.close()

    # --- set-up ----------------------------------------------------------------------------
    def setup(self) -> None:
        """Device and process group, precision, optimizer; put back a checkpoint a killed save left hidden."""
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        device = pick_device(cfg.device)
        self.info: DistInfo = init_distributed(device)
        if device.type == "cuda" and self.info.world > 1:
            device = torch.device("cuda", self.info.local_rank)
            torch.cuda.set_device(device)
        if cfg.num_threads and device.type == "cpu":
            torch.set_num_threads(cfg.num_threads)
        self.device = device
        self.amp_dtype = resolve_precision(cfg, device)
        self.precision = precision_label(self.amp_dtype, device)
        if self.info.is_main:
            log.info("precision: %s", self.precision)
        self.model.to(device)
        self.optimizer = build_optimizer(self.model, cfg)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        if self.info.is_main:  # a save killed between its two renames leaves a folder only as a hidden copy
            recover_saves(self.run_dir)

    def autocast(self) -> AbstractContextManager:
        """Mixed precision for a forward pass (a no-op in fp32)."""
        return autocast_context(self.device, self.amp_dtype)

    def resume(self) -> None:
        """Model, optimizer, scaler, progress and RNG exactly as the last checkpoint saved them."""
        ckpt_dir = self.ckpt_dir
        if not (ckpt_dir / TRAINER_STATE_FILE).is_file():
            raise InputError(f"--resume: {ckpt_dir} holds no checkpoint; start without --resume")
        weights = model_dir(ckpt_dir)
        load_state(self.model, normalize_keys(read_weights(weights)), str(weights), required_prefixes=())
        state = load_training_state(ckpt_dir)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.progress = p = Progress(**state["progress"])
        set_rng_state(state["rng"])
        if self.info.is_main:
            truncate_metrics(self.run_dir, p.step)  # lines written after the checkpoint are written again
        log.info("resumed from step %d (epoch %d, batch %d)", p.step, p.epoch, p.batch_in_epoch)

    def start(self) -> None:
        """Wrap the model (compile, DDP), mark the run running, open the metrics and the progress bar."""
        cfg, info = self.cfg, self.info
        plan = compile_plan(
            cfg, self.task.static_shapes, info.world, self.progress.train_time_s, self.device.type, self.num_layers()
        )
        self.compiling = CompileTracker(plan, self.device.type, self.num_layers(), self.progress, cfg)
        self.wrap_model(compiled=plan == "now")
        self.warmup = warmup_fraction(cfg)
        self.writer = MetricsWriter(self.run_dir) if info.is_main else None
        if info.is_main:
            update_status(
                self.run_dir,
                state="running",
                pid=os.getpid(),
                pid_start=own_start_time(),
                step=self.progress.step,
                total_steps=cfg.max_steps or None,
                started=time.time(),
                device=str(self.device),
                world_size=info.world,
                precision=self.precision,
                compile=plan,
                error=None,
            )
        self.per_epoch = self.task.batches_per_epoch(info.world)
        if self.per_epoch <= 0:
            raise InputError("the training data gives no batch; add data or lower the batch size")
        if self.progress_bar and info.is_main:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=cfg.max_steps or None,
                initial=self.progress.step,
                unit="step",
                dynamic_ncols=True,
                mininterval=1.0,
            )
        self.window = LogWindow(self.progress.fraction(cfg), time.time())
        self.last_save_time = time.time()

    def wrap_model(self, compiled: bool) -> None:
        """The module the steps run: the model, compiled or not, inside DDP when there are several processes."""
        self.train_model = torch.compile(self.model) if compiled else self.model
        if self.info.world > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.train_model = DDP(self.train_model, device_ids=device_ids, find_unused_parameters=False)

    def num_layers(self) -> int:
        """The encoder's depth, which the compile time grows with (4, mini's, for a model without a BertConfig)."""
        config = getattr(self.model, "config", None)  # BertForPreTraining and the task models carry one
        return getattr(config, "num_layers", 4)

    def track_compile(self, step_s: float) -> None:
        """Hand the step's time to the compile tracker (bertlab.training.auto_compile); wrap the model again
        and say so in the status when it decides or measures something."""
        change = self.compiling.observe(step_s, self.progress)
        if change is None:
            return
        if change.compiled is not None:
            self.wrap_model(compiled=change.compiled)
        if self.info.is_main:
            update_status(self.run_dir, **change.status)

    # --- the loop --------------------------------------------------------------------------
    def loop(self) -> TrainResult:
        """Epochs of optimizer steps until the budget is spent or a stop is asked for."""
        cfg, p, task = self.cfg, self.progress, self.task
        while not p.done(cfg):
            task.set_phase(p.phase)
            batches = task.batches(p.epoch, p.batch_in_epoch, self.info.rank, self.info.world)
            if self.device.type == "cuda":
                batches = prefetch(batches)
            exhausted = False
            while not p.done(cfg):
                if task.phase_at(p.fraction(cfg)) != p.phase:
                    p.phase = task.phase_at(p.fraction(cfg))
                    p.epoch, p.batch_in_epoch = 0, 0
                    log.info("step %d: data phase %d starts (same optimizer and schedule)", p.step, p.phase)
                    break
                t0 = time.time()
                group = self.next_group(batches)
                if group is None:
                    exhausted = True
                    break
                grad_norm = self.step(group, t0)
                self.track_compile(time.time() - t0)
                if p.step % cfg.log_every == 0 or p.done(cfg):
                    self.log_train(grad_norm)
                self.evaluate_on_schedule()
                if self.save_or_stop():
                    return TrainResult("cancelled", p, self.last_eval, self.run_dir)
            if exhausted:
                p.epoch += 1
                p.batch_in_epoch = 0
        return self.finish()

    def next_group(self, batches: Iterator[dict]) -> list[dict] | None:
        """The micro-batches of one optimizer step, or None when the epoch ends first."""
        group = []
        for _ in range(self.cfg.grad_accum):
            b = next(batches, None)
            if b is None:
                return None
            group.append(b)
        return group

    def step(self, group: list[dict], t0: float) -> float:
        """Forward and backward over the micro-batches (gradients summed), then one clipped optimizer
        step; advances the progress. Returns the gradient norm before clipping. A step whose gradients are
        not finite makes no update (note_nonfinite_step)."""
        cfg, info = self.cfg, self.info
        factor = lr_factor(self.progress.fraction(cfg), self.warmup, cfg.schedule)
        for g in self.optimizer.param_groups:
            g["lr"] = group_lr(g, cfg.learning_rate, factor)
        step_tokens = 0
        for i, b in enumerate(group):
            step_tokens += int(b.pop("num_tokens", 0))
            b = {k: (v.to(self.device, non_blocking=True) if torch.is_tensor(v) else v) for k, v in b.items()}
            last = i == len(group) - 1
            sync = self.train_model.no_sync() if info.world > 1 and not last else contextlib.nullcontext()
            with sync:
                self.accumulate(b, len(group))
            self.window.seqs += int(b["input_ids"].shape[0]) if "input_ids" in b else 0
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        # the global norm (the same on every rank); max_norm=inf measures it without clipping
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else math.inf
        ).item()
        finite = math.isfinite(grad_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # fp16: the scaler skips overflowing steps and lowers its scale
            self.scaler.update()
        elif finite:
            self.optimizer.step()
        if finite:
            self.nonfinite_run = 0
        else:  # under fp16, overflows while the scale settles are normal; below a scale of 1 the loss is broken
            self.note_nonfinite_step(counts=self.scaler is None or self.scaler.get_scale() < 1.0)
        self.optimizer.zero_grad(set_to_none=True)
        if info.world > 1:
            step_tokens = int(all_reduce_sum({"t": step_tokens}, info, self.device)["t"])
        p = self.progress
        p.step += 1
        p.batch_in_epoch += len(group)
        p.tokens += step_tokens
        p.train_time_s += time.time() - t0
        self.window.tokens += step_tokens
        if self.bar is not None:
            self.bar.update(1)
        return grad_norm

    def note_nonfinite_step(self, counts: bool) -> None:
        """A step whose gradients were inf or NaN (the loss blew up) made no update, so the weights stay as
        they were and training goes on with the next batch; NONFINITE_STEPS_LIMIT such steps in a row
        (`counts`: under fp16, only once the loss scale is below 1) stop the run."""
        p = self.progress
        p.skipped_steps += 1
        self.nonfinite_run += 1 if counts else 0
        if not counts:
            return
        lr = self.optimizer.param_groups[0]["lr"]
        log.warning("step %d: gradients are not finite; no update made (%d in a row)", p.step + 1, self.nonfinite_run)
        if self.nonfinite_run >= NONFINITE_STEPS_LIMIT:
            where = f"at a learning rate of {lr:.2g}"
            advice = (
                "a lower learning rate (pretraining: train.learning_rate; fine-tuning: --lr) or a longer warm-up "
                "(train.warmup; --warmup)"
            )
            # Table 8's 100%-random mix diverged at 14.9M tokens under bf16 autocast and trained through 70M in
            # fp32 at the same rate, so under reduced precision full precision is the first thing to try
            if self.amp_dtype in (torch.bfloat16, torch.float16):
                where += f" under {self.precision}"
                advice = (
                    "full precision, which keeps the recipe (pretraining: train.precision=fp32; fine-tuning: "
                    f"--precision fp32), {advice}"
                )
            raise TrainingDiverged(
                f"training diverged at step {p.step + 1} ({p.tokens / 1e6:.1f}M tokens): the gradients were not finite "
                f"for {self.nonfinite_run} steps in a row, {where}. Start a new run with {advice}; resuming this one "
                "would repeat it"
            )

    def accumulate(self, batch: dict, group_size: int) -> None:
        """Backward of one micro-batch's share of the step's loss; its statistics go into the log window."""
        with self.autocast():
            loss, stats = self.task.forward(self.train_model, batch)
        loss = loss / group_size
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        self.window.add_batch(stats, float(loss.detach()), group_size)

    def log_train(self, grad_norm: float) -> None:
        """One train line (loss, LR, speed, ETA and the task's rates) over the steps since the last one."""
        p, info = self.progress, self.info
        total = all_reduce_sum(self.window.sums, info, self.device)
        elapsed = max(1e-9, time.time() - self.window.start)
        frac = p.fraction(self.cfg)
        eta = self.window.eta_s(frac, p.train_time_s, time.time())
        record = {
            "split": "train",
            "step": p.step,
            "epoch": p.epoch,
            "time": time.time(),
            "loss": total.get("loss_sum", 0.0) / max(1.0, total.get("batches", 1.0)),
            "lr": self.optimizer.param_groups[0]["lr"],
            "grad_norm": grad_norm,
            "skipped_steps": p.skipped_steps,
            "tokens": p.tokens,
            "tokens_per_s": self.window.tokens / elapsed,
            "seq_per_s": self.window.seqs * info.world / elapsed,
            "progress": frac,
            "eta_s": eta,
            **self.task.summarize(total),
        }
        for g in self.optimizer.param_groups:
            if "lr_scale" in g:  # the added layers' own rate (--head-lr; build_optimizer marks their groups)
                record["head_lr"] = g["lr"]
        if self.device.type == "cuda":
            record["gpu_mem_gb"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        if info.is_main:
            self.writer.write(record)
            update_status(self.run_dir, step=p.step, progress=frac, eta_s=eta, last_train=record)
            if self.bar is not None:
                self.bar.set_postfix(loss=f"{record['loss']:.3f}", eta=format_duration(eta))
        self.window.reset(time.time())

    def evaluate_on_schedule(self) -> None:
        """Evaluate every `eval_every` steps, and at snapshot steps (keeping a snapshot of the model)."""
        cfg, p = self.cfg, self.progress
        if p.done(cfg):
            return
        eval_step = bool(cfg.eval_every) and p.step % cfg.eval_every == 0
        if eval_step:
            self.last_eval = self.evaluate()
        if cfg.snapshots and is_snapshot_step(p.step):
            if not eval_step:
                self.last_eval = self.evaluate()
            if self.info.is_main:
                self.save_snapshot()

    def evaluate(self) -> dict:
        """Held-out metrics (rank 0 evaluates, the others wait); written as an eval line and to the status."""
        metrics: dict = {}
        p = self.progress
        if self.info.is_main:
            self.model.eval()
            with torch.no_grad():
                metrics = self.task.evaluate(self.model, self.device, self.autocast)
            self.model.train()
            self.writer.write(
                {
                    "split": "eval",
                    "step": p.step,
                    "time": time.time(),
                    "tokens": p.tokens,
                    "train_s": round(p.train_time_s, 1),
                    **metrics,
                }
            )
            # the step too: a run that evaluates between its train lines (eval_every 10, log_every 20) said
            # 'Step 0' on the Jobs page beside the accuracy and curves of step 10
            update_status(self.run_dir, step=p.step, progress=p.fraction(self.cfg), last_eval=metrics)
            log.info("eval step %d: %s", p.step, " ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
        if self.info.world > 1:
            dist.barrier()
        return metrics

    def save_or_stop(self) -> bool:
        """Checkpoint when one is due; on a stop request (a signal, or `stop_after_steps`) checkpoint
        and mark the run cancelled. Returns True when training must stop."""
        cfg, p, info = self.cfg, self.progress, self.info
        want_save = (cfg.save_every and p.step % cfg.save_every == 0) or (
            cfg.save_every_s and time.time() - self.last_save_time > cfg.save_every_s
        )
        stop_now = self.stopper.requested or (self.stop_after_steps is not None and p.step >= self.stop_after_steps)
        if info.world > 1:  # every rank stops at the same step
            stop_now = all_reduce_sum({"stop": float(stop_now)}, info, self.device)["stop"] > 0
        if want_save and not p.done(cfg) and not stop_now:
            self.save("periodic")
        if stop_now:
            self.save("stop requested")
            if info.is_main:
                update_status(self.run_dir, state="cancelled", step=p.step, ended=time.time())
        return stop_now

    def save(self, tag: str) -> None:
        """The training state into run_dir/checkpoint (atomically, rank 0); the other ranks wait."""
        if self.info.is_main:
            save_training_state(
                self.ckpt_dir, self.task, self.model, self.optimizer, self.scaler, self.progress, self.extra_state
            )
            update_status(self.run_dir, checkpoint_step=self.progress.step)
            log.info("checkpoint saved at step %d (%s)", self.progress.step, tag)
        self.last_save_time = time.time()
        if self.info.world > 1:
            dist.barrier()

    def save_snapshot(self) -> None:
        """A small (fp16) copy of the model at this step, with the last evaluation in its card."""
        p = self.progress
        card = {
            "steps": p.step,
            "tokens": p.tokens,
            "train_time_s": round(p.train_time_s, 1),
            "metrics": {k: round(v, 4) for k, v in self.last_eval.items()},
            "snapshot": True,
        }
        self.task.save_model(
            snapshot_dir(self.run_dir, p.step), self.model, {**self.extra_state, "card_updates": card, "snapshot": True}
        )

    # --- the end ---------------------------------------------------------------------------
    def finish(self) -> TrainResult:
        """Last evaluation and checkpoint, then the final model with what its card records about the run."""
        p = self.progress
        self.last_eval = self.evaluate()
        self.save("final")
        if self.cfg.snapshots and self.info.is_main:
            self.save_snapshot()
        if self.info.is_main:
            final = {
                "steps": p.step,
                "tokens": p.tokens,
                "epochs": round(p.epoch + p.batch_in_epoch / max(1, self.per_epoch), 2),
                "train_time_s": round(p.train_time_s, 1),
                "metrics": {k: round(v, 4) for k, v in self.last_eval.items()},
                "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                "precision": self.precision,
                **self.compiling.state,
            }
            self.task.save_model(model_dir(self.run_dir), self.model, {**self.extra_state, "card_updates": final})
            update_status(self.run_dir, state="finished", step=p.step, progress=1.0, eta_s=0, ended=time.time())
        return TrainResult("finished", p, self.last_eval, self.run_dir)


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
    trainer = Trainer(
        task, model, cfg, run_dir, extra_state=extra_state, progress_bar=progress_bar, stop_after_steps=stop_after_steps
    )
    return trainer.run(resume=resume)
