"""The paper's ablation tables (Devlin et al. 2019, Tables 5-8) as printed, dev-set numbers with
their citation, and how our runs are read against them: which of our task columns stands for which
paper column (`PAPER_COLUMN`), where our data differs (`DATA_NOTES`) and why results may differ
(`WHY_DIFFERENT`).

Data only: the table specs (bertlab.ablations.tables), the suites, their results, the
`bertlab ablate` CLI and the Ablations page all read it. Imports nothing from bertlab.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CITATION = (
    "Devlin, Chang, Lee and Toutanova (2019). BERT: Pre-training of Deep Bidirectional Transformers "
    "for Language Understanding. NAACL-HLT. arXiv:1810.04805, Section 5 and Appendix C; dev-set results."
)


@dataclass(frozen=True)
class PaperTable:
    """One of the paper's ablation tables, as printed (dev-set numbers)."""

    key: str
    title: str
    question: str  # what the table asks
    columns: tuple[str, ...]  # the paper's column labels
    metrics: tuple[str, ...]  # the metric of each column
    rows: tuple[tuple[str, str, tuple[float | None, ...]], ...]  # (variant key, the paper's label, values)
    baseline: str  # the variant others are compared with
    higher_is_better: tuple[bool, ...] = ()
    note: str = ""


PAPER: dict[str, PaperTable] = {
    t.key: t
    for t in (
        PaperTable(
            "table5",
            "Table 5: pre-training tasks",
            "Does each pre-training task matter?",
            ("MNLI-m", "QNLI", "MRPC", "SST-2", "SQuAD"),
            ("accuracy", "accuracy", "accuracy", "accuracy", "f1"),
            (
                ("mlm_nsp", "BERT-base (MLM + NSP)", (84.4, 88.4, 86.7, 92.7, 88.5)),
                ("no_nsp", "No NSP", (83.9, 84.9, 86.5, 92.6, 87.9)),
                ("ltr", "LTR & No NSP", (82.1, 84.3, 77.5, 92.1, 77.8)),
                ("ltr_bilstm", "+ BiLSTM", (82.1, 84.1, 75.7, 91.6, 84.9)),
            ),
            "mlm_nsp",
            note="BERT-base, 1M steps on BooksCorpus + Wikipedia; '+ BiLSTM' adds a randomly initialised "
            "BiLSTM on top of the LTR model while fine-tuning.",
        ),
        PaperTable(
            "table6",
            "Table 6: model size",
            "Do bigger models do better, even on small tasks?",
            ("LM (ppl)", "MNLI-m", "MRPC", "SST-2"),
            ("mlm_perplexity", "accuracy", "accuracy", "accuracy"),
            (
                ("L3-H768-A12", "#L=3 #H=768 #A=12", (5.84, 77.9, 79.8, 88.4)),
                ("L6-H768-A3", "#L=6 #H=768 #A=3", (5.24, 80.6, 82.2, 90.7)),
                ("L6-H768-A12", "#L=6 #H=768 #A=12", (4.68, 81.9, 84.8, 91.3)),
                ("L12-H768-A12", "#L=12 #H=768 #A=12", (3.99, 84.4, 86.7, 92.9)),
                ("L12-H1024-A16", "#L=12 #H=1024 #A=16", (3.54, 85.7, 86.9, 93.3)),
                ("L24-H1024-A16", "#L=24 #H=1024 #A=16", (3.23, 86.6, 87.8, 93.7)),
            ),
            "L3-H768-A12",
            higher_is_better=(False, True, True, True),
            note="LM (ppl) is the masked-LM perplexity of held-out training data; the MRPC and SST-2 scores are "
            "the average of 5 fine-tuning restarts.",
        ),
        PaperTable(
            "table7",
            "Table 7: feature-based vs fine-tuning",
            "Can BERT's frozen features do as well as fine-tuning?",
            ("NER (CoNLL-2003)",),
            ("f1",),
            (
                ("finetune", "Fine-tuning (BERT-base)", (96.4,)),
                ("embeddings", "Feature-based: Embeddings", (91.0,)),
                ("second_to_last", "Feature-based: Second-to-Last Hidden", (95.6,)),
                ("last", "Feature-based: Last Hidden", (94.9,)),
                ("wsum4", "Feature-based: Weighted Sum Last Four Hidden", (95.9,)),
                ("cat4", "Feature-based: Concat Last Four Hidden", (96.1,)),
                ("mix", "Feature-based: Weighted Sum All 12 Layers", (95.5,)),
            ),
            "finetune",
            note="Features feed a randomly initialised two-layer 768-dimensional BiLSTM before the "
            "classifier; BERT's weights stay frozen. CoNLL-2003 dev F1.",
        ),
        PaperTable(
            "table8",
            "Table 8: masking mix",
            "Does the 80/10/10 mix of [MASK] / same / random matter?",
            ("MNLI (fine-tune)", "NER (fine-tune)", "NER (feature-based)"),
            ("accuracy", "f1", "f1"),
            (
                ("mask80_same10_rnd10", "80% [MASK], 10% same, 10% random", (84.2, 95.4, 94.9)),
                ("mask100", "100% [MASK]", (84.3, 94.9, 94.0)),
                ("mask80_rnd20", "80% [MASK], 20% random", (84.1, 95.2, 94.6)),
                ("mask80_same20", "80% [MASK], 20% same", (84.4, 95.2, 94.7)),
                ("same20_rnd80", "20% same, 80% random", (83.7, 94.8, 94.6)),
                ("rnd100", "100% random", (83.6, 94.9, 94.6)),
            ),
            "mask80_same10_rnd10",
            note="Feature-based: the last four layers concatenated (the paper's Appendix C.2).",
        ),
    )
}

# Which of our task columns stands for which paper column (same metric; the data may differ: say so).
PAPER_COLUMN = {
    "table5": {"qnli": "QNLI", "mrpc": "MRPC", "sst2": "SST-2", "squad": "SQuAD", "mnli": "MNLI-m"},
    "table6": {"pretraining": "LM (ppl)", "mnli": "MNLI-m", "mrpc": "MRPC", "sst2": "SST-2"},
    "table7": {"ner": "NER (CoNLL-2003)", "upos": "NER (CoNLL-2003)"},  # UPOS: token tagging like NER (see table8)
    "table8": {
        "mnli": "MNLI (fine-tune)",
        "ner": "NER (fine-tune)",
        "ner-feature": "NER (feature-based)",
        # token tagging like NER: where a suite ran UPOS instead, it is read against the paper's NER column
        "upos": "NER (fine-tune)",
        "upos-feature": "NER (feature-based)",
    },
}
DATA_NOTES = {
    "qnli": "QNLI has no public train set here: trained on 80% of its dev set, scored on the other 20% "
    "(split by question, so no question is on both sides)",
    "squad": "SQuAD v1.1: trained on 80% of the dev set's articles, scored on the other 20%",
    "ner": "NER is WNUT-17 (emerging entities in social media), not the paper's CoNLL-2003 news",
    "upos": "UPOS tagging (UD English-EWT) is read against the paper's NER column: both tag every token, "
    "but the task and data differ, so compare directions only",
}


# What each table found, in a sentence, from its numbers above (the page shows it under the paper's table)
PAPER_FINDINGS = {
    "table5": "Bidirectionality matters most: a left-to-right model loses 10.7 F1 on SQuAD and 9.2 points on "
    "MRPC, and a BiLSTM on top wins back SQuAD (+7.1) but not the GLUE tasks; dropping NSP costs 3.5 on QNLI "
    "and little elsewhere.",
    "table6": "Bigger is better on every task, even MRPC with its 3,600 training examples: from 3 to 24 layers "
    "the held-out perplexity falls from 5.84 to 3.23 and MRPC rises from 79.8 to 87.8.",
    "table7": "Frozen features nearly match fine-tuning: concatenating the last four layers is 0.3 F1 behind "
    "(96.1 vs 96.4), the last layer alone 1.5 behind, and the embeddings alone 5.4 behind.",
    "table8": "The mix hardly matters for fine-tuning (all within 0.8 points), but 100% [MASK] costs 0.9 F1 "
    "feature-based: a model that always sees [MASK] in pretraining never sees it in use.",
}

WHY_DIFFERENT = (
    "Where we differ from the paper, scale is the first suspect: our models have a few million encoder weights "
    "against BERT-base's 85M, were pretrained on a thousandth of its text or less (it saw ~128 billion tokens: "
    "40 epochs of 3.3 billion words), and are fine-tuned on a few thousand examples with a few seeds, so many "
    "differences are within the seed noise. Some tasks also "
    "differ from the paper's (WNUT-17 for CoNLL-2003 NER, QNLI from its dev set)."
)


# Row labels short enough to stand under a bar of a figure, where the paper's are too long to read
SHORT_LABELS = {
    "table7": {
        "finetune": "fine-tuning",
        "embeddings": "embeddings",
        "second_to_last": "2nd-to-last",
        "last": "last",
        "wsum4": "w. sum last 4",
        "cat4": "concat last 4",
        "mix": "w. sum all",
    },
    "table8": {  # [MASK] / same / random, in percent
        "mask80_same10_rnd10": "80/10/10",
        "mask100": "100/0/0",
        "mask80_rnd20": "80/0/20",
        "mask80_same20": "80/20/0",
        "same20_rnd80": "0/20/80",
        "rnd100": "0/0/100",
    },
}
AXIS_TITLES = {"table8": "[MASK] / same / random (%)"}

# Our rows are not BERT-base: where the paper's label names its model, ours names only the variant (and the
# page adds what our model is, from its card: "MLM + NSP (tiny, 4M tokens)")
OUR_NAMES = {
    "table5": {"mlm_nsp": "MLM + NSP"},
    # our models have 2-8 layers, not BERT-base's 12
    "table7": {"finetune": "Fine-tuning", "mix": "Feature-based: Weighted Sum All Layers"},
}


def parse_shape(key: str) -> tuple[int, int, int] | None:
    """(layers, hidden, heads) of a model-shape row key ('L2-H128-A4', as Table 6's suites name them), else None."""
    shape = re.fullmatch(r"L(\d+)-H(\d+)-A(\d+)", key)
    return (int(shape[1]), int(shape[2]), int(shape[3])) if shape else None


def encoder_weights(key: str) -> int | None:
    """The encoder weights of a model-shape row ('L2-H128-A4': layers x 12 x hidden^2), enough to rank shapes
    by size; None for a row that is not a shape."""
    shape = parse_shape(key)
    return None if shape is None else shape[0] * 12 * shape[1] * shape[1]


def variant_label(table: str, key: str) -> str:
    """The paper's label for a row; a model shape of our own ('L2-H128-A4') in the paper's Table 6 style."""
    shape = parse_shape(key)
    default = f"#L={shape[0]} #H={shape[1]} #A={shape[2]}" if shape else key
    return next((label for k, label, _ in PAPER[table].rows if k == key), default)


def short_label(table: str, key: str) -> str:
    """A row's label for a figure's axis: SHORT_LABELS where the paper's is long, else the paper's."""
    return SHORT_LABELS.get(table, {}).get(key) or variant_label(table, key)


def our_label(table: str, key: str, what: str = "") -> str:
    """Our row's label: the paper's without its model's name (OUR_NAMES), and what our model is, when known."""
    name = OUR_NAMES.get(table, {}).get(key) or variant_label(table, key)
    return f"{name} ({what})" if what else name
