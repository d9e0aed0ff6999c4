"""The fine-tuning tasks: their shape (paper, Figure 4), files, labels and official metric.

Shapes: "single" (one sentence -> class: SST-2, CoLA), "pair" (two sentences -> class: MRPC, RTE,
QNLI, MNLI), "regression" (two sentences -> a score: STS-B), "tagging" (a label per word: UPOS,
BIO entities) and "qa" (a span of the context: SQuAD v1.1).

Imports the standard library and bertlab.errors only.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertlab.errors import InputError

SHAPES = ("single", "pair", "regression", "tagging", "qa")
SMALL_MODEL_WIDTH = 512  # hidden size up to which `suggested_learning_rate` treats a model as small


def suggested_learning_rate(hidden_size: int | None, mode: str = "finetune") -> float:
    """A starting learning rate for fine-tuning a model `hidden_size` wide (None: unknown). Feature
    mode (a frozen encoder) trains only a small task model: 1e-3, the CLI's default. Fine-tuning a
    small model (this project's mini: 256 wide) 3e-4: on Table 5's mini models it did best on SST-2,
    QNLI, MRPC and SQuAD, where 1e-4 left them under-fitted and the paper's 5e-5 less still
    (bertlab.ablations.tables). Wider models: the paper's 5e-5 (its grid: 5e-5, 3e-5, 2e-5)."""
    if mode == "feature":
        return 1e-3
    return 3e-4 if hidden_size is not None and hidden_size <= SMALL_MODEL_WIDTH else 5e-5


# The 17 universal POS tags of Universal Dependencies v2.
UPOS_TAGS = (
    "ADJ",
    "ADP",
    "ADV",
    "AUX",
    "CCONJ",
    "DET",
    "INTJ",
    "NOUN",
    "NUM",
    "PART",
    "PRON",
    "PROPN",
    "PUNCT",
    "SCONJ",
    "SYM",
    "VERB",
    "X",
)


@dataclass(frozen=True)
class TaskSpec:
    """One task: how to read it, what the output layer predicts, how it is scored."""

    name: str
    shape: str  # one of SHAPES
    description: str
    train_file: str  # default file names inside a --data folder
    dev_file: str
    labels: tuple[str, ...] = ()  # fixed label set; () = taken from the data (NER) or none (regression, QA)
    metrics: tuple[str, ...] = ("accuracy",)  # what evaluate() reports, the main one first
    hf_dataset: tuple[str, str | None] | None = None  # (path, config) for Hugging Face `datasets`
    hf_dev_split: str = "validation"

    @property
    def main_metric(self) -> str:
        return self.metrics[0]

    @property
    def is_sequence_task(self) -> bool:
        return self.shape in ("single", "pair", "regression")

    @property
    def max_seq_length(self) -> int:
        """The default input length: 384 for question answering, as google-research/bert's
        run_squad.py (doc stride 128, query 64 tokens), else run_classifier.py's 128."""
        return 384 if self.shape == "qa" else 128


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            "sst2",
            "single",
            "SST-2 sentiment of movie-review sentences (positive = 1)",
            "train.tsv",
            "dev.tsv",
            ("0", "1"),
            ("accuracy",),
            ("nyu-mll/glue", "sst2"),
        ),
        TaskSpec(
            "cola",
            "single",
            "CoLA grammatical acceptability (acceptable = 1)",
            "train.tsv",
            "dev.tsv",
            ("0", "1"),
            ("matthews", "accuracy"),
            ("nyu-mll/glue", "cola"),
        ),
        TaskSpec(
            "mrpc",
            "pair",
            "MRPC paraphrase detection (paraphrase = 1)",
            "train.tsv",
            "dev.tsv",
            ("0", "1"),
            ("f1", "accuracy"),
            ("nyu-mll/glue", "mrpc"),
        ),
        TaskSpec(
            "rte",
            "pair",
            "RTE textual entailment",
            "train.tsv",
            "dev.tsv",
            ("entailment", "not_entailment"),
            ("accuracy",),
            ("nyu-mll/glue", "rte"),
        ),
        TaskSpec(
            "qnli",
            "pair",
            "QNLI: does the sentence answer the question",
            "train.tsv",
            "dev.tsv",
            ("entailment", "not_entailment"),
            ("accuracy",),
            ("nyu-mll/glue", "qnli"),
        ),
        TaskSpec(
            "mnli",
            "pair",
            "MNLI natural language inference (matched dev set)",
            "train.tsv",
            "dev_matched.tsv",
            ("contradiction", "entailment", "neutral"),
            ("accuracy",),
            ("nyu-mll/glue", "mnli"),
            "validation_matched",
        ),
        TaskSpec(
            "stsb",
            "regression",
            "STS-B semantic similarity, a score from 0 to 5",
            "train.tsv",
            "dev.tsv",
            (),
            ("pearson", "spearman"),
            ("nyu-mll/glue", "stsb"),
        ),
        TaskSpec(
            "upos",
            "tagging",
            "Universal POS tags from CoNLL-U files (e.g. UD English-EWT)",
            "en_ewt-ud-train.conllu",
            "en_ewt-ud-dev.conllu",
            UPOS_TAGS,
            ("accuracy",),
            ("universal_dependencies", "en_ewt"),
        ),
        TaskSpec(
            "ner",
            "tagging",
            "BIO named entities from CoNLL files (e.g. WNUT-17)",
            "wnut17train.conll",
            "emerging.dev.conll",
            (),
            ("f1", "precision", "recall"),
            ("wnut_17", None),
        ),
        TaskSpec(
            "squad",
            "qa",
            "SQuAD v1.1 extractive question answering",
            "train-v1.1.json",
            "dev-v1.1.json",
            (),
            ("f1", "exact_match"),
            ("rajpurkar/squad", None),
        ),
    )
}


def get_task(name: str) -> TaskSpec:
    key = name.lower().replace("-", "").replace("_", "")
    if key not in TASKS:
        raise InputError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[key]


# What the numeric labels of some GLUE tasks mean (the data files only say 0 / 1).
LABEL_NAMES = {
    "sst2": {"0": "negative", "1": "positive"},
    "cola": {"0": "unacceptable", "1": "acceptable"},
    "mrpc": {"0": "not a paraphrase", "1": "paraphrase"},
}


def label_text(task: str | None, label: object) -> str:
    """'1 (positive)' for SST-2's label 1; the label itself where it says what it means already."""
    name = LABEL_NAMES.get(task or "", {}).get(str(label))
    return f"{label} ({name})" if name else str(label)
