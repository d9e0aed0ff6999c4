"""Every answer of a fine-tuned classifier on a labelled file, to browse where it goes wrong (as LIT's
data table does): per example the gold label, the predicted one, how sure the model was, and the
confusion matrix over the file.

Owns `answer_file` and its result `FileAnswers` (rows of `ExampleAnswer`). Sentence and pair
classifiers only (SST-2, CoLA, MRPC, RTE, QNLI, a custom classifier): a tagger's or a reader's
answers are not one label an example. The file is read in its task's format
(`bertlab.finetune.data.read_task_file`), the examples encoded and run in batches as the dev
evaluation does, in full precision: where training evaluated under bf16 autocast, an answer near
50% can fall the other way, so the accuracy here can differ from the training run's by an example
or two (`training_accuracy` gives that one).

Imports torch (through bertlab.finetune) only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bertlab.errors import InputError
from bertlab.finetune.data import SequenceExample, read_task_file
from bertlab.finetune.encoding import encode_sequences
from bertlab.finetune.evaluation import run_model, score
from bertlab.finetune.predict import FinetunedModel
from bertlab.finetune.tasks import get_task

MAX_EXAMPLES = 10_000  # answered at once: SST-2's dev set is 872, QNLI's 5,463
BATCH = 64
CLASSIFIERS = ("single", "pair")


@dataclass(frozen=True)
class ExampleAnswer:
    """One example of the file (`index`, 0-based, in file order) and the model's answer to it."""

    index: int
    text_a: str
    text_b: str | None
    gold: str
    predicted: str
    confidence: float  # the predicted label's probability
    gold_probability: float  # the probability the model gave the right label
    truncated: bool  # cut to the length the model reads

    @property
    def correct(self) -> bool:
        return self.gold == self.predicted


@dataclass(frozen=True)
class FileAnswers:
    """A fine-tuned classifier's answers to every example of a labelled file."""

    task: str
    labels: tuple[str, ...]
    source: str
    answers: tuple[ExampleAnswer, ...]

    @property
    def accuracy(self) -> float:
        return sum(a.correct for a in self.answers) / len(self.answers)

    @property
    def mistakes(self) -> int:
        return sum(not a.correct for a in self.answers)

    def confusion(self) -> list[list[int]]:
        """counts[gold][predicted], rows and columns in `labels` order."""
        at = {label: i for i, label in enumerate(self.labels)}
        counts = [[0] * len(self.labels) for _ in self.labels]
        for a in self.answers:
            counts[at[a.gold]][at[a.predicted]] += 1
        return counts

    def majority(self) -> tuple[str, float]:
        """The commonest gold label and the accuracy of always answering it (the floor to beat)."""
        gold = [a.gold for a in self.answers]
        top = max(self.labels, key=gold.count)
        return top, gold.count(top) / len(gold)

    def scores(self) -> dict[str, float]:
        """The task's own metrics on the file, as the dev evaluation computes them (fractions; the main
        one first: MRPC's F1, CoLA's Matthews correlation, else accuracy)."""
        examples = [SequenceExample(a.text_a, a.text_b, a.gold) for a in self.answers]
        return score(get_task(self.task), examples, [a.predicted for a in self.answers])

    def pick(
        self, which: str = "mistakes", gold: str = "", search: str = "", answered: str = ""
    ) -> list[ExampleAnswer]:
        """The answers to look at: `which` is "mistakes" (surest first: the model's worst errors),
        "unsure" (every answer, least sure first) or "all" (file order); `gold` keeps one gold label and
        `answered` one answer (both: a cell of the confusion matrix); `search` keeps the examples whose
        text holds it (case-insensitive)."""
        if which not in ("mistakes", "unsure", "all"):
            raise InputError(f"which must be mistakes, unsure or all, not {which!r}")
        rows = [a for a in self.answers if (not gold or a.gold == gold) and (not answered or a.predicted == answered)]
        if search.strip():
            needle = search.strip().casefold()
            rows = [a for a in rows if needle in a.text_a.casefold() or needle in (a.text_b or "").casefold()]
        if which == "mistakes":
            return sorted((a for a in rows if not a.correct), key=lambda a: -a.confidence)
        if which == "unsure":
            return sorted(rows, key=lambda a: a.confidence)
        return rows


def answer_file(
    model: FinetunedModel, path: str | Path, progress: Callable[[int, int], None] | None = None
) -> FileAnswers:
    """The model's answer to every example of the labelled file at `path` (its task's format).

    InputError: not a classifier, a file it cannot read, no labelled example, more than
    `MAX_EXAMPLES`, or gold labels the model does not know (a file of another task)."""
    if model.task_shape not in CLASSIFIERS:
        raise InputError(
            f"{model.task} is a {model.task_shape} model: browsing a file's answers needs a sentence or pair "
            "classifier (one label an example)"
        )
    path = Path(path).expanduser()
    spec = get_task(model.task)
    if path.is_dir():
        raise InputError(f"{path} is a folder: give a file in it (its dev set is {spec.dev_file})")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    examples = [e for e in read_task_file(spec, path) if isinstance(e, SequenceExample)]
    labelled = [e for e in examples if e.label is not None and str(e.label) != ""]
    if not labelled:
        raise InputError(f"{path}: no labelled example (a test file without labels?)")
    if len(labelled) > MAX_EXAMPLES:
        raise InputError(f"{path}: {len(labelled):,} examples; at most {MAX_EXAMPLES:,} are answered at once")
    labels = tuple(model.labels)
    unknown = sorted({str(e.label) for e in labelled} - set(labels))
    if unknown:
        raise InputError(
            f"{path}: labels {', '.join(unknown[:5])} are not among this model's ({', '.join(labels)}): "
            f"a file of another task? The model was fine-tuned on {model.task}"
        )
    if model.task_shape == "single" and any(e.text_b for e in labelled):
        raise InputError(f"{path}: pairs of sentences, but {model.task} reads one sentence")
    s = model.setup
    answers: list[ExampleAnswer] = []
    for start in range(0, len(labelled), BATCH):
        part = labelled[start : start + BATCH]
        feats = encode_sequences(part, model.tokenizer, s.max_seq_length, {label: i for i, label in enumerate(labels)})
        outs = run_model(model.model, feats, model.task_shape, model.tokenizer.pad_id, model.device, batch_size=BATCH)
        for offset, (e, f, out) in enumerate(zip(part, feats, outs, strict=True)):
            probs = out.softmax(-1).tolist()
            best = max(range(len(probs)), key=probs.__getitem__)
            gold = str(e.label)
            answers.append(
                ExampleAnswer(
                    index=start + offset,
                    text_a=e.text_a,
                    text_b=e.text_b,
                    gold=gold,
                    predicted=labels[best],
                    confidence=probs[best],
                    gold_probability=probs[labels.index(gold)],
                    truncated=f.truncated,
                )
            )
        if progress is not None:
            progress(len(answers), len(labelled))
    return FileAnswers(model.task, labels, str(path), tuple(answers))


def training_accuracy(model: FinetunedModel, path: str | Path) -> float | None:
    """The dev accuracy the training run reported, where it was scored on this very file (its model
    card's `dev_data` and `metrics`); None otherwise."""
    card = model.card or {}
    dev, score = card.get("dev_data"), (card.get("metrics") or {}).get("accuracy")
    if not dev or not isinstance(score, (int, float)):
        return None
    try:
        same = Path(str(dev)).expanduser().resolve() == Path(path).expanduser().resolve()
    except OSError:
        return None
    return float(score) if same else None
