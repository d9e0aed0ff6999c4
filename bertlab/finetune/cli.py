"""The `bertlab finetune` command line: its arguments, the run config they make, and one run (its
log.txt kept in the run folder, the result printed as one JSON line).

`add_args` (defined in bertlab.finetune.args, torch-free, which bertlab.jobs.spec uses to check a
job's arguments) and `run` (one run); the grid flags are bertlab.jobs.finetune_grid's, a client of the
job queue above this package. Imports bertlab.finetune.recipe (torch) and bertlab.storage.runfolder
(the run's log.txt); never streamlit.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
from pathlib import Path

from bertlab.errors import InputError
from bertlab.finetune.args import MAX_EPOCHS
from bertlab.finetune.recipe import FinetuneConfig, run_finetuning
from bertlab.finetune.tasks import get_task
from bertlab.storage.checkpoint import default_model_path
from bertlab.storage.runfolder import run_log, runs_root
from bertlab.training.types import TrainConfig


def _recipe_argv(argv: list[str]) -> list[str]:
    """The words after `finetune` in a `bertlab [-v] finetune ...` command line (options before it are bertlab's)."""
    return argv[argv[1:].index("finetune") + 2 :] if "finetune" in argv[1:] else argv[1:]


def config_from_args(args: argparse.Namespace) -> FinetuneConfig:
    """The run's config from `bertlab finetune` arguments (defaults as the paper's, 384 tokens for SQuAD)."""
    if not args.data:
        raise InputError("--data is required: a folder with the task's files, a file, or hf:")
    if args.epochs is not None and not 0 < args.epochs <= MAX_EPOCHS:
        raise InputError(f"--epochs must be more than 0 and at most {MAX_EPOCHS:g}, not {args.epochs:g}")
    for flag in ("max_train_examples", "max_eval_examples", "max_seq_length"):
        if (getattr(args, flag) or 0) < 0:
            raise InputError(f"--{flag.replace('_', '-')} must be 0 (all) or more, not {getattr(args, flag)}")
    epochs = args.epochs or 0.0
    if not (args.max_steps or args.max_time_s or epochs):
        epochs = 3.0
    lr = args.lr if args.lr is not None else (1e-3 if args.mode == "feature" else 5e-5)
    train_cfg = TrainConfig(
        learning_rate=lr,
        head_lr=args.head_lr or 0.0,
        warmup=args.warmup,
        batch_size=args.batch_size,
        max_steps=args.max_steps or (1 if epochs else 0),
        max_time_s=args.max_time_s,
        eval_every=args.eval_every,
        save_every=args.save_every,
        log_every=20,
        precision=args.precision,
        seed=args.seed,
        device=args.device,
        num_threads=args.threads,
    )
    if args.model and args.size:
        raise InputError("give --model (a pretrained checkpoint) or --size (random weights), not both")
    model = args.model or (None if args.size else str(default_model_path()))
    seq = args.max_seq_length or get_task(args.task).max_seq_length  # 384 for SQuAD, as run_squad.py
    return FinetuneConfig(
        task=args.task,
        data=args.data,
        model=model,
        size=args.size or "tiny",
        vocab=args.vocab,
        train_file=args.train_file,
        dev_file=args.dev_file,
        split_dev=args.split_dev,
        max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples,
        max_seq_length=seq,
        doc_stride=args.doc_stride,
        untrained_positions=args.untrained_positions,
        mode=args.mode,
        features=args.features,
        bilstm=args.bilstm,
        epochs=epochs if not args.max_steps else 0.0,
        train=train_cfg,
    )


def run(args: argparse.Namespace) -> int:
    """One fine-tuning run (or its resume), the result printed as one JSON line. `bertlab finetune`
    itself goes through bertlab.jobs.finetune_grid.run_cli, which takes --grid / --grid-status first."""
    if args.restarts != 1:
        raise InputError("--restarts goes with --grid paper (restarts of every setting of the grid)")
    logging.getLogger("bertlab").setLevel(logging.INFO)
    if args.resume and not args.run_dir:
        raise InputError("--resume needs --run-dir")
    if args.resume:
        cfg = FinetuneConfig(task=args.task, data=args.data or ".")  # replaced by the saved config
    else:
        cfg = config_from_args(args)
    run_dir = (
        Path(args.run_dir) if args.run_dir else runs_root() / f"finetune-{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    command = shlex.join(["bertlab", "finetune", *_recipe_argv(sys.argv)])
    if not args.resume:
        print(
            f"starting from {cfg.model}"
            if cfg.model
            else f"starting from random weights (size {cfg.size}: no pretraining)",
            flush=True,
        )
    with run_log(run_dir, first_line=command, create=not args.resume):
        result = run_finetuning(
            cfg, run_dir, resume=args.resume, dry_run=args.dry_run, progress_bar=not args.no_progress, command=command
        )
    print(
        json.dumps(
            {
                "state": result.state,
                "run_dir": str(run_dir),
                "step": result.progress.step,
                "train_time_s": round(result.progress.train_time_s, 1),
                "eval": result.last_eval,
            }
        )
    )
    return 0 if result.state == "finished" else 3
