"""The arguments of `bertlab finetune`, torch-free: bertlab.finetune.cli parses them, and
bertlab.jobs.spec checks a queued job's arguments with them before anything heavy is imported.

Also owns the feature choices: their pattern (`FEATURES_PATTERN`, `check_features`), which
bertlab.finetune.models and the Train page's job arguments check `features` against, and their help
text (`FEATURES_HELP`). Imports argparse and bertlab.finetune.tasks; never torch.
"""

from __future__ import annotations

import argparse
import re

from bertlab.errors import InputError
from bertlab.finetune.tasks import TASKS

FEATURES_HELP = (
    "last | layer:N (0 = embeddings, 1..L, or -1 = last) | sum4 (unweighted sum of the last four) | "
    "wsum4 (learned weighted sum of the last four) | cat4 (concatenation of the last four) | "
    "mix (learned weighted sum of the embeddings and every layer)"
)
FEATURES_PATTERN = r"last|w?sum4|cat4|mix|layer:-?\d+"
# The choices a form offers, as users read them: Table 7's six and the plain sum of the last four
FEATURE_CHOICES = {
    "last": "Last layer",
    "layer:-2": "Second-to-last layer",
    "layer:0": "Embeddings only",
    "sum4": "Sum of the last four",
    "wsum4": "Learned weighted sum of the last four",
    "cat4": "Last four concatenated (the paper's best frozen choice)",
    "mix": "Learned weighted sum of every layer",
}
MAX_EPOCHS = 10_000  # passes over a train set: far past any fine-tuning run (the paper: 2-4)


def check_features(features: str) -> str:
    """`features` if it is one of the choices (FEATURES_HELP), else an InputError saying them."""
    if not re.fullmatch(FEATURES_PATTERN, features):
        raise InputError(f"features must be {FEATURES_HELP}; got {features!r}")
    return features


def add_args(p: argparse.ArgumentParser) -> None:
    """The arguments of `bertlab finetune`, in groups: task and data, model, budget and training
    settings, the run folder, the paper's grid."""
    _add_task_args(p)
    _add_model_args(p)
    _add_training_args(p)
    _add_run_args(p)
    _add_grid_args(p)


def _add_task_args(p: argparse.ArgumentParser) -> None:
    task_or_status = p.add_mutually_exclusive_group(required=True)
    task_or_status.add_argument("--task", choices=sorted(TASKS), help="which task (its shape, reader and metric)")
    task_or_status.add_argument(
        "--grid-status",
        metavar="FOLDER",
        help="print a --grid's settings, states and dev scores, the best marked, and exit",
    )
    p.add_argument("--data", help="folder with the task's train/dev files, a file, or hf:[PATH[:CONFIG]]")
    p.add_argument("--train-file", help="train file (name inside --data, or a path)")
    p.add_argument("--dev-file", help="dev file (name inside --data, or a path)")
    p.add_argument(
        "--split-dev",
        type=float,
        default=0.0,
        metavar="F",
        help="DEMO ONLY: train on a fraction F of the dev file and evaluate on the rest "
        "(e.g. SQuAD, whose train set is not here); not comparable with published scores",
    )


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        help="pretrained checkpoint folder or Hub id of any family: BERT, ALBERT, ELECTRA (a pair folder "
        "fine-tunes its discriminator), RoBERTa, DistilBERT (default: the shipped model, "
        "checkpoints/bertlab-mini, unless --size asks for random weights)",
    )
    p.add_argument(
        "--size",
        default=None,
        help="random init of this preset instead of a pretrained model (the paper's "
        "'no pretraining' baseline): tiny, mini, small, medium, base, large",
    )
    p.add_argument("--vocab", help="vocab.txt for random init (default: train one on the training text)")
    p.add_argument(
        "--mode",
        choices=("finetune", "feature"),
        default="finetune",
        help="finetune all weights, or feature-based: frozen encoder + small task model (Table 7)",
    )
    p.add_argument("--features", default="last", help=FEATURES_HELP)
    p.add_argument("--bilstm", action="store_true", help="BiLSTM between encoder and output layer (+ BiLSTM ablation)")


def _add_training_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-steps", type=int, default=0, help="budget in optimizer steps")
    p.add_argument("--max-time-s", type=float, default=0.0, help="budget in seconds of training")
    p.add_argument(
        "--epochs",
        type=float,
        default=None,
        help="budget in passes over the train set (default 3 when no other budget is given)",
    )
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default 5e-5; 1e-3 in feature mode)")
    p.add_argument(
        "--head-lr",
        type=float,
        default=None,
        help="peak learning rate of the weights the task adds to the encoder (output layer, BiLSTM, layer mix), "
        "when they need a higher one than the pretrained encoder, e.g. a fresh BiLSTM (default: --lr)",
    )
    p.add_argument("--batch-size", type=int, default=32, help="examples per optimizer step (default 32, the paper's)")
    p.add_argument(
        "--max-seq-length",
        type=int,
        default=None,
        help="tokens per input (default 128; 384 for SQuAD, as run_squad.py)",
    )
    p.add_argument(
        "--doc-stride",
        type=int,
        default=128,
        help="QA: tokens between the starts of a long context's windows (default 128, as run_squad.py; at most half the input, so windows overlap)",
    )
    p.add_argument(
        "--untrained-positions",
        action="store_true",
        help="keep --max-seq-length past the longest sequence the model was pretrained on (its model card says; "
        "by default inputs are cut to it, since later position vectors were never trained)",
    )
    p.add_argument("--max-train-examples", type=int, default=0, help="use only the first N train examples")
    p.add_argument("--max-eval-examples", type=int, default=0, help="evaluate on the first N dev examples")
    p.add_argument("--eval-every", type=int, default=0, help="steps between dev evaluations (0 = at the end)")
    p.add_argument(
        "--save-every", type=int, default=0, help="steps between checkpoints (0 = every 10 min and at the end)"
    )
    p.add_argument("--warmup", type=float, default=0.1, help="warm-up: fraction of the budget, or steps if >= 1")
    p.add_argument("--seed", type=int, default=0, help="seed of the output layer's init, shuffling and dropout")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch's default)")
    p.add_argument("--precision", default="auto", help="auto | fp32 | bf16 | fp16")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run-dir", help="run folder (default: runs/finetune-<task>-<time> in $BERTLAB_RUNS or the repository)"
    )
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its last checkpoint")
    p.add_argument("--dry-run", action="store_true", help="run the whole pipeline for one step on a few examples")
    p.add_argument("--no-progress", action="store_true", help="no terminal progress bar")


def _add_grid_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--grid",
        choices=("paper",),
        default=None,
        help="paper: the paper's fine-tuning grid as background jobs, one per setting (batch 16/32 x "
        "lr 5e-5/3e-5/2e-5 x epochs 2/3/4; they replace --batch-size, --lr, --epochs, --seed and the "
        "budgets); prints the grid folder; --grid-status FOLDER shows the best on dev",
    )
    p.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="with --grid: random restarts (seeds) per setting, the best kept on dev; the paper used "
        "several for small data sets (default 1)",
    )
