"""`bertlab interpret probe|heads` (also `python -m bertlab.interpret`): the long interpretation
runs, as commands and as jobs (`bertlab jobs submit interpret probe ...`).

    bertlab interpret probe --model checkpoints/bertlab-mini --task upos \
        --train DATA/ud_en_ewt/en_ewt-ud-train.conllu --eval DATA/ud_en_ewt/en_ewt-ud-dev.conllu
    bertlab interpret heads --model runs/sst2/model --task sst2 --data DATA/glue/SST-2/dev.tsv

Each writes its result beside the model (`<model>/interpret/<kind>-<task>.json`, where the app
reads it) and, with --copy-to, a copy elsewhere (e.g. results/interpret/). The data path is always
an argument. With --run-dir (a job's is chosen for it) the run is also recorded there, as a
training run is: status.json goes preparing -> running (progress per layer probed, or per point
of the pruning curves) -> finished or failed with the error, log.txt keeps the log, and
result.json links to the result beside the model.

Imports the interpret modules, bertlab.finetune's readers and bertlab.storage.runfolder (the run folder).
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from bertlab.errors import BertLabError
from bertlab.finetune.data import read_conll, read_conllu, read_glue
from bertlab.finetune.tasks import UPOS_TAGS, get_task
from bertlab.formatting import one_line
from bertlab.interpret.args import add_args
from bertlab.interpret.heads import LabelledSentences, MaskedSentences, study_heads
from bertlab.interpret.probing import ProbeConfig, probe_layers
from bertlab.interpret.saved import write_result
from bertlab.interpret.targets import load_subject
from bertlab.storage.runfolder import (
    failure_recorded,
    link_result,
    mark_preparing,
    read_status,
    run_log,
    update_status,
    write_run_config,
)

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]  # (steps done, steps in all)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bertlab.interpret", description=__doc__.split("\n")[0])
    add_args(p)
    return p


def _probe(args, started: Callable[[], None], progress: Progress | None) -> tuple[str, dict]:
    reader = read_conllu if args.task == "upos" else read_conll
    labels = UPOS_TAGS if args.task == "upos" else None
    config = ProbeConfig(args.task, args.max_train_sentences, args.max_eval_sentences, seed=args.seed)
    subject = load_subject(args.model, args.device)
    train, evaluate = reader(args.train), reader(args.eval)
    started()
    result = probe_layers(subject, train, evaluate, config, labels=labels, on_layer=progress)
    result.model = str(args.model)
    result.data = {"train": args.train.name, "eval": args.eval.name}
    return subject.name, result.to_dict()


def _heads(args, started: Callable[[], None], progress: Progress | None) -> tuple[str, dict]:
    subject = load_subject(args.model, args.device)
    if args.data is not None:
        examples = read_glue(get_task(args.task), args.data)[: args.max_examples]
        data = LabelledSentences(examples, args.task)
        source = args.data.name
    else:
        lines = [s.strip() for s in args.sentences.read_text(encoding="utf-8").splitlines() if s.strip()]
        data = MaskedSentences(lines[: args.max_examples], seed=args.seed)
        source = args.sentences.name
    started()
    study = study_heads(subject, data, args.task, args.points, args.random_orders, args.seed, on_step=progress)
    study.model = str(args.model)
    study.data = {"file": source, "examples": study.examples}
    return subject.name, study.to_dict()


def _study(args, started: Callable[[], None] = lambda: None, progress: Progress | None = None) -> Path:
    """Run the study `args` asks for and write its result beside the model; returns the result's path."""
    where, data = (_probe if args.study == "probe" else _heads)(args, started, progress)
    path = write_result(where, args.study, args.task, data)
    print(f"saved {path}")
    if args.copy_to is not None:
        args.copy_to.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, args.copy_to / path.name)
        print(f"copied to {args.copy_to / path.name}")
    print(json.dumps({k: data[k] for k in data if k in ("accuracy", "centre_of_gravity", "curve")}, indent=1)[:2000])
    return path


def _recorded_study(args, command: str) -> Path:
    """`_study` with its run folder kept: the state, progress, error and a link to the result."""
    run_dir = args.run_dir
    write_run_config(
        run_dir,
        {"kind": "interpret", "study": args.study, "task": args.task, "model": str(args.model), "command": command},
    )
    mark_preparing(run_dir, resume=False)

    def started() -> None:  # the model is loaded and the data read
        update_status(run_dir, state="running", started=time.time(), step=0, total_steps=None, progress=0.0)

    def progress(done: int, total: int) -> None:
        update_status(run_dir, step=done, total_steps=total, progress=done / total)

    try:
        path = _study(args, started, progress)
    except BaseException as exc:  # failure_recorded marks a run still preparing; this one, once running
        if read_status(run_dir).get("state") == "running":
            update_status(run_dir, state="failed", error=f"{type(exc).__name__}: {one_line(exc)}", ended=time.time())
        raise
    link_result(run_dir, path)
    update_status(run_dir, state="finished", progress=1.0, eta_s=0, result=str(path), ended=time.time())
    return path


def run(args: argparse.Namespace) -> int:
    """`bertlab interpret probe|heads`: run the study, save it beside the model, and with
    --run-dir record it there. Errors the user can fix raise BertLabError (bertlab's CLI prints
    them on one line and exits 2)."""
    logging.getLogger("bertlab").setLevel(logging.INFO)
    torch.set_num_threads(max(1, args.threads))
    if args.run_dir is None:
        _study(args)
        return 0
    command = shlex.join(["bertlab", "interpret", *sys.argv[2:]]) if len(sys.argv) > 2 else "bertlab interpret"
    with run_log(args.run_dir, first_line=command), failure_recorded(args.run_dir):
        _recorded_study(args, command)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bertlab.interpret ...`: as `bertlab interpret ...`."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return run(args)
    except BertLabError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
