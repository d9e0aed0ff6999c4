"""The arguments of `bertlab interpret probe|heads`, torch-free: bertlab.interpret.cli parses them,
and bertlab.jobs.spec checks a queued job's arguments (and its data paths, `DATA_ARGS`) with them
before anything heavy is imported. Also builds a job's arguments from a page's fields
(`probe_args`, `heads_args`).

Imports argparse and pathlib only; never torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path

STUDIES = ("probe", "heads")
PROBE_TASKS = ("upos", "ner")  # upos reads CoNLL-U, ner reads CoNLL BIO
# The arguments that name input files, checked before a job is queued: (dest, what it should be).
DATA_ARGS = {
    "train": "the probes' training sentences (CoNLL-U for upos, CoNLL for ner)",
    "eval": "the probes' evaluation sentences",
    "data": "a labelled GLUE file (e.g. SST-2/dev.tsv)",
    "sentences": "a text file with one sentence a line",
}


def _at_least(low: int):
    """An argparse type: a whole number >= `low`, so a bad count is refused before a job is queued."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is too small; give a whole number >= {low}")
        return value

    parse.__name__ = f"whole number >= {low}"  # argparse names the type in its message
    return parse


def add_args(p: argparse.ArgumentParser) -> None:
    """`bertlab interpret`'s two studies, each with its model, task, data and run-folder arguments."""
    sub = p.add_subparsers(dest="study", required=True)  # not `command`: bertlab's own parser uses that
    probe = sub.add_parser("probe", help="a linear probe per layer (UPOS from CoNLL-U, NER from CoNLL)")
    probe.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    probe.add_argument(
        "--task", required=True, choices=PROBE_TASKS, help="upos (reads CoNLL-U) or ner (reads CoNLL BIO)"
    )
    probe.add_argument("--train", required=True, type=Path, help="training sentences for the probes")
    probe.add_argument("--eval", required=True, type=Path, help="evaluation sentences")
    probe.add_argument(
        "--max-train-sentences",
        type=_at_least(1),
        default=2000,
        help="sentences sampled to train the probes (default 2000)",
    )
    probe.add_argument(
        "--max-eval-sentences", type=_at_least(1), default=500, help="sentences sampled to score them (default 500)"
    )
    probe.add_argument("--seed", type=int, default=0, help="seed of the sampling (default 0)")
    heads = sub.add_parser("heads", help="head importance (Michel et al. 2019) and the pruning curve")
    heads.add_argument("--model", required=True, help="a fine-tuned classifier, or a pretrained model with --sentences")
    heads.add_argument(
        "--task", required=True, help="a GLUE task name for --data (sst2, ...), or a name for --sentences"
    )
    source = heads.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="labelled GLUE file (e.g. SST-2/dev.tsv) for a classifier")
    source.add_argument("--sentences", type=Path, help="one sentence a line, masked LM on a pretrained model")
    heads.add_argument(
        "--max-examples", type=_at_least(1), default=1000, help="examples read from the data (default 1000)"
    )
    heads.add_argument(
        "--points", type=_at_least(2), default=9, help="points on the pruning curve, at least 2 (0 .. all heads)"
    )
    heads.add_argument(
        "--random-orders",
        type=_at_least(1),
        default=3,
        help="random pruning orders to compare with, at least 1 (default 3)",
    )
    heads.add_argument("--seed", type=int, default=0, help="seed of the masking and the random orders (default 0)")
    for s in (probe, heads):
        s.add_argument("--copy-to", type=Path, help="also write the result JSON into this folder")
        s.add_argument(
            "--threads", type=_at_least(1), default=1, help="torch threads (the default suits a shared machine)"
        )
        s.add_argument("--device", default="cpu", help="auto, cpu or cuda (default cpu)")
        s.add_argument(
            "--run-dir",
            type=Path,
            default=None,
            help="record it as a run: status, log and a link to the result in this folder (a job's is chosen for it)",
        )
        s.add_argument(
            "--no-progress", action="store_true", help="accepted as every job kind takes it; this command draws no bar"
        )


def probe_args(model: str, task: str, train: str, evaluate: str) -> tuple[str, ...]:
    """`bertlab interpret` arguments of a probing job (the What each layer knows page's button)."""
    return ("probe", "--model", model, "--task", task, "--train", train, "--eval", evaluate)


def heads_args(model: str, task: str, data: str | None = None, sentences: str | None = None) -> tuple[str, ...]:
    """`bertlab interpret` arguments of a head study: a labelled GLUE file or plain sentences."""
    source = ("--data", data) if data else ("--sentences", sentences or "")
    return ("heads", "--model", model, "--task", task, *source)
