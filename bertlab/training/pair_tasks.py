"""Sentence-pair heads scored on both pair tasks: next sentence prediction and sentence order, each on
held-out instances, so that an NSP-trained head (BERT's) can be asked the sentence-order question and
an SOP-trained head (ALBERT's) the next-sentence one, as ALBERT's paper does (Lan et al. 2019, §4.6,
Table 5: the SOP-trained model solves NSP at 78.9%, the NSP-trained one solves SOP at 52.0%).

The instances are a run's own held-out instances made for the task's objective (`mlm_nsp` for NSP,
`mlm_sop` for SOP) by the pretraining recipe's own held-out path (bertlab.training.pretrain: the run's
held-out documents, its evaluation data settings, its seed, and the data cache), so that a head scored
on its own task gets the number the run's evaluation logged. They are read as that evaluation reads
them: masked (static masking, as held-out instances are made); the masked tokens change the pair
head's input a little, as they did in training and in the logged evaluation.

Labels (bertlab.data.pretraining_data): NSP 0 = IsNext, 1 = NotNext (Google's); SOP 0 = in order,
1 = swapped. Both heads put the "B belongs after A" reading at index 0, so a head answers the other
task by its index-0 reading: an NSP head's IsNext is read as "in order", an SOP head's "in order" as
IsNext (`answer_as`).

Imports torch, bertlab.data (corpus, instances, batches), bertlab.errors, bertlab.storage.runfolder (a run's
config), bertlab.tokenizer and bertlab.training (pretrain_config; pretrain: the held-out split and instances).

Owns `heldout_instances`, a run's held-out instances as its evaluation makes them, for any data settings
(bench/successors_record scores ELECTRA's discriminator on them too).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from bertlab.data.corpus import Corpus, load_corpus
from bertlab.data.data_config import DataConfig
from bertlab.data.pretraining_data import IN_ORDER, IS_NEXT, NOT_NEXT, SWAPPED, Instance, collate
from bertlab.errors import InputError
from bertlab.storage.runfolder import read_run_config
from bertlab.tokenizer import BertTokenizer
from bertlab.training.pretrain import _prepare_split, split_documents
from bertlab.training.pretrain_config import PretrainConfig

log = logging.getLogger(__name__)

# each pair task: the objective whose held-out instances pose it, and the batch key its labels come in
PAIR_TASKS = {"nsp": ("mlm_nsp", "nsp_labels"), "sop": ("mlm_sop", "sop_labels")}
# each sentence-pair head: the output field its logits come in (B, 2)
HEAD_LOGITS = {"nsp": "nsp_logits", "sop": "sop_logits"}
# what index 0 and index 1 of each head's logits mean, as the task's own labels
_HEAD_LABELS = {"nsp": (IS_NEXT, NOT_NEXT), "sop": (IN_ORDER, SWAPPED)}
# one task's label as the other's: IsNext <-> in order, NotNext <-> swapped
_SAME_READING = {
    ("nsp", "sop"): {IS_NEXT: IN_ORDER, NOT_NEXT: SWAPPED},
    ("sop", "nsp"): {IN_ORDER: IS_NEXT, SWAPPED: NOT_NEXT},
}


@dataclass(frozen=True)
class PairTaskScore:
    """A sentence-pair head's accuracy on one pair task's held-out instances."""

    head: str  # the head that answered: "nsp" or "sop" (the task it was trained on)
    task: str  # the task it was asked: "nsp" or "sop"
    accuracy: float  # share of instances answered right, its answers read as the task's labels (`answer_as`)
    instances: int
    label0_share: float  # share of instances labelled 0 (IsNext / in order): what always answering 0 scores

    @property
    def own_task(self) -> bool:
        return self.head == self.task


def _check(name: str, what: str) -> None:
    if name not in PAIR_TASKS:
        raise InputError(f"{what} must be one of {', '.join(PAIR_TASKS)} (a sentence-pair head), not {name!r}")


def answer_as(task: str, head: str, answers: torch.Tensor) -> torch.Tensor:
    """A head's answers (argmax indices, (B,) long) as `task`'s labels: its own task's labels
    unchanged, the other's through the same reading (IsNext <-> in order, NotNext <-> swapped)."""
    _check(task, "task")
    _check(head, "head")
    own = torch.tensor(_HEAD_LABELS[head], device=answers.device)[answers]  # (B,) the head's own labels
    if task == head:
        return own
    mapping = _SAME_READING[(head, task)]
    return torch.tensor([mapping[int(a)] for a in own.tolist()], dtype=torch.long, device=answers.device)


def task_data(data: DataConfig, task: str) -> DataConfig:
    """The held-out data settings `data` with the objective that poses `task` (NSP: mlm_nsp; SOP: mlm_sop)."""
    _check(task, "task")
    return dataclasses.replace(data, objective=PAIR_TASKS[task][0])


def heldout_instances(
    cfg: PretrainConfig,
    corpus: Corpus,
    tokenizer: BertTokenizer,
    data: DataConfig | None = None,
    limit: int | None = None,
) -> list[Instance]:
    """A run's held-out instances, the first `limit` (default: the run's `eval_instances`, the fixed set its
    evaluation scores): the recipe's held-out split of `corpus` made with `data` (default: its evaluation
    data settings, `cfg.heldout_data()`), or read from the data cache, as the recipe makes them."""
    store, _ = _prepare_split(cfg, data or cfg.heldout_data(), split_documents(cfg, corpus), tokenizer, "heldout")
    return [store[i] for i in range(min(len(store), cfg.eval_instances if limit is None else limit))]


def heldout_pair_instances(
    cfg: PretrainConfig, corpus: Corpus, tokenizer: BertTokenizer, task: str, limit: int | None = None
) -> list[Instance]:
    """A run's held-out instances made for `task`, the first `limit` (default: the run's `eval_instances`,
    the fixed set its evaluation scores): the recipe's held-out split of `corpus` and its evaluation data
    settings (`cfg.heldout_data()`) with the task's objective, made (or read from the data cache) as the
    recipe makes held-out instances."""
    return heldout_instances(cfg, corpus, tokenizer, task_data(cfg.heldout_data(), task), limit)


def score_pair_head(
    model: torch.nn.Module,
    head: str,
    task: str,
    instances: Sequence[Instance],
    data: DataConfig,
    pad_id: int,
    batch_size: int = 64,
) -> PairTaskScore:
    """Accuracy of `model`'s `head` on `task`'s instances (made with `task_data(data, task)`'s objective).

    Args:
        model: a pretraining model whose output has the head's logits (`HEAD_LOGITS`), in eval mode.
        head: the sentence-pair head that answers ("nsp": BERT's; "sop": ALBERT's).
        task: the task the instances pose ("nsp" or "sop"); its labels are collated from the instances.
        instances: held-out instances of that task (`heldout_pair_instances`).
        data: the data settings they were made with (their objective is set to the task's here).
        pad_id: the tokenizer's [PAD] id.

    Raises:
        InputError: an unknown head or task, no instances, or a model without that head.
    """
    _check(head, "head")
    _check(task, "task")
    if not instances:
        raise InputError(f"no {task} instances to score; give a run whose held-out split makes some")
    data = task_data(data, task)
    label_key = PAIR_TASKS[task][1]
    device = next(model.parameters()).device
    correct = label0 = 0
    with torch.inference_mode():
        for start in range(0, len(instances), batch_size):
            batch = collate(instances[start : start + batch_size], data, pad_id)
            labels = batch[label_key]  # (B,) long
            inputs = {k: batch[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask") if k in batch}
            no_predictions = torch.zeros_like(inputs["input_ids"], dtype=torch.bool)  # the pair head only
            logits = getattr(model(**inputs, mlm_positions=no_predictions), HEAD_LOGITS[head], None)
            if logits is None:
                raise InputError(f"this model has no {head} head (its output has no {HEAD_LOGITS[head]})")
            answers = answer_as(task, head, logits.float().argmax(-1).cpu())  # (B,)
            correct += int((answers == labels).sum())
            label0 += int((labels == 0).sum())
    n = len(instances)
    return PairTaskScore(head, task, correct / n, n, label0 / n)


def run_corpus(cfg: PretrainConfig, data_dir: str | Path | None = None) -> Corpus:
    """The corpus a run read, its files where its config names them or, when not there, under `data_dir`
    by the same folder or file name (a run made on another machine; the data cache keys on the text, not
    the paths).

    Raises:
        InputError: a source is neither where the config says nor under `data_dir`.
    """
    sources = []
    for source in cfg.corpus:
        path = Path(source).expanduser()
        if "/" in source and not path.exists():
            moved = Path(data_dir).expanduser() / path.name if data_dir else None
            if moved is None or not moved.exists():
                raise InputError(
                    f"the run's corpus source {source} is not there{f' nor at {moved}' if moved else ''}; "
                    "give --data-dir, the folder that holds it"
                )
            source = str(moved)
        sources.append(source)
    return load_corpus(sources, cfg.corpus_format)


def run_settings(run_dir: str | Path) -> PretrainConfig:
    """The pretraining settings a run saved (run_config.json).

    Raises:
        InputError: the folder has no run_config.json of a pretraining run.
    """
    saved = read_run_config(run_dir)
    if not saved or saved.get("kind", "pretrain") != "pretrain" or "config" not in saved:
        raise InputError(f"{run_dir}: no run_config.json of a pretraining run; give a run folder of `bertlab pretrain`")
    return PretrainConfig.from_dict(saved["config"])


def score_both_ways(
    model: torch.nn.Module,
    head: str,
    cfg: PretrainConfig,
    corpus: Corpus,
    tokenizer: BertTokenizer,
    limit: int | None = None,
) -> dict[str, PairTaskScore]:
    """task -> the head's score on the run's held-out instances of each pair task (NSP and SOP)."""
    out = {}
    for task in PAIR_TASKS:
        instances = heldout_pair_instances(cfg, corpus, tokenizer, task, limit)
        out[task] = score_pair_head(model, head, task, instances, cfg.heldout_data(), tokenizer.pad_id)
        log.info("%s head on %s: %.1f%% of %d held-out instances", head, task, 100 * out[task].accuracy, len(instances))
    return out
