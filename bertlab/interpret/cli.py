"""`python -m bertlab.interpret`: the long interpretation runs, as commands (and jobs).

    python -m bertlab.interpret probe --model checkpoints/bertlab-mini --task upos \
        --train DATA/ud_en_ewt/en_ewt-ud-train.conllu --eval DATA/ud_en_ewt/en_ewt-ud-dev.conllu
    python -m bertlab.interpret heads --model runs/sst2/model --task sst2 --data DATA/glue/SST-2/dev.tsv

Each writes its result beside the model (`<model>/interpret/<kind>-<task>.json`, where the app
reads it) and, with --copy-to, a copy elsewhere (e.g. results/interpret/). The data path is always
an argument. Imports the interpret modules and bertlab.finetune's readers.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from bertlab.errors import BertLabError
from bertlab.finetune.data import read_conll, read_conllu, read_glue
from bertlab.finetune.tasks import UPOS_TAGS, get_task
from bertlab.interpret.heads import LabelledSentences, MaskedSentences, study_heads
from bertlab.interpret.probing import ProbeConfig, probe_layers
from bertlab.interpret.saved import write_result
from bertlab.interpret.targets import load_subject

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bertlab.interpret", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe", help="a linear probe per layer (UPOS from CoNLL-U, NER from CoNLL)")
    probe.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    probe.add_argument("--task", required=True, help="upos (reads CoNLL-U) or ner (reads CoNLL BIO)")
    probe.add_argument("--train", required=True, type=Path, help="training sentences for the probes")
    probe.add_argument("--eval", required=True, type=Path, help="evaluation sentences")
    probe.add_argument("--max-train-sentences", type=int, default=2000)
    probe.add_argument("--max-eval-sentences", type=int, default=500)
    probe.add_argument("--seed", type=int, default=0)
    heads = sub.add_parser("heads", help="head importance (Michel et al. 2019) and the pruning curve")
    heads.add_argument("--model", required=True, help="a fine-tuned classifier, or a pretrained model with --sentences")
    heads.add_argument(
        "--task", required=True, help="a GLUE task name for --data (sst2, ...), or a name for --sentences"
    )
    source = heads.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="labelled GLUE file (e.g. SST-2/dev.tsv) for a classifier")
    source.add_argument("--sentences", type=Path, help="one sentence a line, masked LM on a pretrained model")
    heads.add_argument("--max-examples", type=int, default=1000)
    heads.add_argument("--points", type=int, default=9, help="points on the pruning curve (0 .. all heads)")
    heads.add_argument("--random-orders", type=int, default=3)
    heads.add_argument("--seed", type=int, default=0)
    for s in (probe, heads):
        s.add_argument("--copy-to", type=Path, help="also write the result JSON into this folder")
        s.add_argument("--threads", type=int, default=1, help="torch threads (the default suits a shared machine)")
    return p


def _probe(args) -> tuple[str, dict]:
    reader = read_conllu if args.task == "upos" else read_conll
    labels = UPOS_TAGS if args.task == "upos" else None
    config = ProbeConfig(args.task, args.max_train_sentences, args.max_eval_sentences, seed=args.seed)
    subject = load_subject(args.model, "cpu")
    result = probe_layers(subject, reader(args.train), reader(args.eval), config, labels=labels)
    result.model = str(args.model)
    result.data = {"train": args.train.name, "eval": args.eval.name}
    return subject.name, result.to_dict()


def _heads(args) -> tuple[str, dict]:
    subject = load_subject(args.model, "cpu")
    if args.data is not None:
        examples = read_glue(get_task(args.task), args.data)[: args.max_examples]
        data = LabelledSentences(examples, args.task)
        source = args.data.name
    else:
        lines = [s.strip() for s in args.sentences.read_text(encoding="utf-8").splitlines() if s.strip()]
        data = MaskedSentences(lines[: args.max_examples], seed=args.seed)
        source = args.sentences.name
    study = study_heads(subject, data, args.task, args.points, args.random_orders, args.seed)
    study.model = str(args.model)
    study.data = {"file": source, "examples": study.examples}
    return subject.name, study.to_dict()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(max(1, args.threads))
    try:
        where, data = _probe(args) if args.command == "probe" else _heads(args)
    except BertLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    kind = "probe" if args.command == "probe" else "heads"
    path = write_result(where, kind, args.task, data)
    print(f"saved {path}")
    if args.copy_to is not None:
        args.copy_to.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, args.copy_to / path.name)
        print(f"copied to {args.copy_to / path.name}")
    print(json.dumps({k: data[k] for k in data if k in ("accuracy", "centre_of_gravity", "curve")}, indent=1)[:2000])
    return 0
