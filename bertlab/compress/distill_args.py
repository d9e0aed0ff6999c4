"""The arguments of `bertlab compress distill` (torch-free, so that bertlab.jobs.spec checks a queued
distillation with them before anything heavy is imported).

    bertlab compress distill --teacher checkpoints/bertlab-mini --layers 2 --out /tmp/mini-l2 \
        --config configs/compress/distill-mini.yaml [section.key=value ...] [--run-dir DIR] [--resume]

`--config` and the overrides are a pretraining config (bertlab.training.pretrain_config): the corpus, the
data, the budget and the optimiser; the vocabulary is the teacher's and the objective follows its heads.
With `--task T --data D` the teacher is a fine-tuned classifier, and the overrides are the fine-tuning
config's (max_train_examples=8000 epochs=2 train.learning_rate=2e-4 ...).

Imports argparse and bertlab.training.pretrain_config (its help), both torch-free.
"""

from __future__ import annotations

import argparse

from bertlab.training.pretrain_config import override_keys


def add_args(p: argparse.ArgumentParser) -> None:
    """`bertlab compress distill`'s arguments."""
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "the pretraining config's " + override_keys()
    p.add_argument("--teacher", help="the model to distil: a checkpoint folder or Hub id with a masked-LM head")
    p.add_argument("--layers", type=int, help="the student's layers N, fewer than the teacher's (evenly spaced)")
    p.add_argument("--out", help="new folder for the student (default: the run's model folder)")
    p.add_argument("--config", help="pretraining YAML config for the corpus, data and budget (configs/compress/)")
    p.add_argument(
        "overrides", nargs="*", help="section.key=value, as for bertlab pretrain (e.g. train.max_time_s=600)"
    )
    p.add_argument("--temperature", type=float, default=2.0, help="T of the soft targets (DistilBERT: 2.0)")
    p.add_argument("--alpha-ce", type=float, default=5.0, help="weight of the soft cross-entropy (DistilBERT: 5.0)")
    p.add_argument("--alpha-mlm", type=float, default=2.0, help="weight of the masked-LM loss (DistilBERT: 2.0)")
    p.add_argument("--alpha-cos", type=float, default=1.0, help="weight of the hidden-state cosine loss (1.0)")
    p.add_argument("--alpha-nsp", type=float, default=1.0, help="weight of the NSP loss (ours; 0 leaves it out)")
    p.add_argument(
        "--cosine-layers",
        choices=("all", "last"),
        default="all",
        help="all: each student layer against the teacher layer it was copied from; last: the last only (DistilBERT)",
    )
    p.add_argument("--task", help="distil a fine-tuned classifier (the teacher) on this task's data, e.g. sst2")
    p.add_argument("--data", help="with --task: the task's data folder or file, as for bertlab finetune")
    p.add_argument("--held-out", help="text file (a sentence a line) for the record (default: the held-out documents)")
    p.add_argument("--repeats", type=int, default=30, help="timed fill-mask runs per thread count in the record")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), help="where to train (default: the config's)")
    p.add_argument("--run-dir", help="run folder (default: runs/<teacher>-L<N>-distill-<time>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its last checkpoint")
    p.add_argument("--dry-run", action="store_true", help="run the whole pipeline for one step")
    p.add_argument("--no-progress", action="store_true", help="no terminal progress bar")
    p.add_argument("--json", action="store_true", help="print the record as JSON")
