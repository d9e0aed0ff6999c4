"""What a run's metric lines say, for the Jobs page's curves and numbers: its train and eval lines one per
step (`split_metrics`), which of their keys are scores (`score_keys`) and how each is named and written,
and what guessing scores on them (`chance_levels`).

Imports bertlab.jobs.runs (the `Job`) and bertlab.storage.runfolder (a run's task labels, for chance
levels); never plotly or streamlit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from bertlab.jobs.runs import Job
from bertlab.storage.runfolder import read_run_config

# Eval metrics worth a line on the accuracy panel (fine-tuning tasks report theirs by name).
_SCORE = re.compile(r"(acc|accuracy|f1|mcc|matthews|pearson|spearman|exact|^em$)", re.I)


def split_metrics(metrics: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """(train, eval) lines, one per step (a resumed run logs some steps twice: the later line wins)."""
    by_split: dict[str, dict[int, dict]] = {"train": {}, "eval": {}}
    for m in metrics:
        split = m.get("split", "train")
        if split in by_split and isinstance(m.get("step"), int):
            by_split[split][m["step"]] = m
    return [by_split["train"][s] for s in sorted(by_split["train"])], [
        by_split["eval"][s] for s in sorted(by_split["eval"])
    ]


def finite(v) -> bool:
    """A real number (not a bool, NaN or inf): a value worth drawing or writing."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# Train lines name a score more briefly than eval lines do: a fine-tuned classifier's train "acc" is
# the accuracy its eval lines call "accuracy" (the same name on the page, and the same chance level).
_SAME_AS = {"acc": "accuracy"}


def score_name(key: str) -> str:
    """'accuracy' for a train line's 'acc'; 'mlm acc' for 'mlm_acc'."""
    return _SAME_AS.get(key, key).replace("_", " ")


def score_keys(train: Sequence[dict], evals: Sequence[dict]) -> tuple[list[str], list[str]]:
    """Accuracy-like keys of train lines (acc, x_acc: what the trainer's tasks log) and of eval lines
    (accuracy, f1, mcc, ...)."""
    tk = sorted(
        {k for m in train for k, v in m.items() if finite(v) and (k in ("acc", "accuracy") or k.endswith("_acc"))}
    )
    ek = sorted({k for m in evals for k, v in m.items() if finite(v) and _SCORE.search(k) and "loss" not in k})
    return tk, ek


def chance_levels(job: Job) -> dict[str, float]:
    """What guessing scores, per accuracy key of a run: 50% for next-sentence prediction; for a
    fine-tuned classifier (sentence or pair: accuracy), always answering the dev set's most frequent
    label (recorded by the run), else one over its number of labels."""
    levels = {"nsp_acc": 0.5}
    config = read_run_config(job.run_dir) or {}
    setup = config.get("task_setup") or {}
    labels = setup.get("labels") or []
    if setup.get("shape") in ("single", "pair") and len(labels) > 1:
        majority = config.get("dev_majority")
        levels["accuracy"] = majority if isinstance(majority, int | float) and majority > 0 else 1 / len(labels)
    return levels


def chance_of(key: str, chance: dict[str, float]) -> float | None:
    """What guessing scores on `key` (see `chance_levels`); a train 'acc' as its eval 'accuracy'."""
    return chance.get(key, chance.get(_SAME_AS.get(key, key)))


def score_text(key: str, value: float) -> str:
    """Accuracies and F1 as percentages; correlations (mcc, pearson, spearman) as numbers."""
    return f"{value:.3f}" if re.search(r"mcc|matthews|pearson|spearman", key) else f"{value:.1%}"
