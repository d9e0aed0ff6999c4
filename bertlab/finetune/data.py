"""Readers for the standard fine-tuning formats, from a local path or Hugging Face `datasets`.

GLUE TSV (SST-2, CoLA, MRPC, RTE, QNLI, MNLI, STS-B), SQuAD v1.1 JSON, CoNLL (token + BIO tag,
e.g. WNUT-17 or CoNLL-2003) and CoNLL-U (UPOS, e.g. UD English-EWT). A malformed record raises
DataError naming the file and line (or the JSON path for SQuAD), so it can be fixed by hand.

Imports the standard library, bertlab.errors and bertlab.finetune.tasks; `datasets` lazily.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from bertlab.errors import DataError, InputError
from bertlab.finetune.tasks import TaskSpec

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# Examples
# --------------------------------------------------------------------------------------
@dataclass
class SequenceExample:
    """A sentence (or a pair) and its label: a class name, or a float for regression."""

    text_a: str
    text_b: str | None
    label: str | float | None
    source: str = ""  # "file:line", for messages


@dataclass
class TaggingExample:
    """A sentence as words, with one tag per word."""

    words: list[str]
    tags: list[str]
    source: str = ""


@dataclass
class QAExample:
    """A SQuAD question on a context; `answers` are (text, character start) pairs."""

    qid: str
    question: str
    context: str
    answers: list[tuple[str, int]] = field(default_factory=list)
    title: str = ""  # the article; the demo split keeps each article on one side

    @property
    def answer_texts(self) -> list[str]:
        return [a for a, _ in self.answers]


Example = SequenceExample | TaggingExample | QAExample


def _open_lines(path: Path):
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        # utf-8-sig drops the byte-order mark MRPC's files start with
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc}); re-save the file as UTF-8") from exc


# --------------------------------------------------------------------------------------
# GLUE TSV
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _GlueColumns:
    text_a: str | int
    text_b: str | int | None
    label: str | int
    header: bool = True
    num_columns: int = 0  # checked when there is no header


GLUE_COLUMNS = {
    "sst2": _GlueColumns("sentence", None, "label"),
    "cola": _GlueColumns(3, None, 1, header=False, num_columns=4),
    "mrpc": _GlueColumns("#1 String", "#2 String", "Quality"),
    "rte": _GlueColumns("sentence1", "sentence2", "label"),
    "qnli": _GlueColumns("question", "sentence", "label"),
    "mnli": _GlueColumns("sentence1", "sentence2", "gold_label"),
    "stsb": _GlueColumns("sentence1", "sentence2", "score"),
}


def read_glue(spec: TaskSpec, path: str | Path) -> list[SequenceExample]:
    """Read a GLUE train/dev TSV as the GLUE download script gives it (tab-separated, no quoting)."""
    path = Path(path)
    if spec.name not in GLUE_COLUMNS:
        raise InputError(f"{spec.name} is not a GLUE task")
    cols = GLUE_COLUMNS[spec.name]
    lines = _open_lines(path)
    start = 0
    index: dict[str | int, int] = {}
    width = cols.num_columns
    if cols.header:
        if not lines:
            raise DataError(f"{path}: empty file; expected a header line")
        header = lines[0].split("\t")
        want = [c for c in (cols.text_a, cols.text_b, cols.label) if c is not None]
        missing = [c for c in want if c not in header]
        if missing:
            raise DataError(
                f"{path}:1: header {header[:6]} lacks the column(s) {missing} of a {spec.name} file; "
                "is this the right task, or a test file without labels?"
            )
        index = {name: header.index(name) for name in want}
        width = len(header)
        start = 1
    else:
        index = {c: c for c in (cols.text_a, cols.text_b, cols.label) if c is not None}

    examples = []
    for lineno, line in enumerate(lines[start:], start + 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        where = f"{path}:{lineno}"
        if len(fields) != width:
            raise DataError(f"{where}: {len(fields)} tab-separated fields, expected {width} as in a {spec.name} file")
        text_a = fields[index[cols.text_a]].strip()
        text_b = fields[index[cols.text_b]].strip() if cols.text_b is not None else None
        if not text_a or (cols.text_b is not None and not text_b):
            raise DataError(f"{where}: empty sentence")
        raw = fields[index[cols.label]].strip()
        if spec.shape == "regression":
            try:
                label: str | float = float(raw)
            except ValueError:
                raise DataError(f"{where}: score {raw!r} is not a number") from None
        else:
            if raw not in spec.labels:
                raise DataError(f"{where}: label {raw!r} is not one of {list(spec.labels)}")
            label = raw
        examples.append(SequenceExample(text_a, text_b, label, where))
    if not examples:
        raise DataError(f"{path}: no examples")
    return examples


# --------------------------------------------------------------------------------------
# CoNLL (BIO) and CoNLL-U (UPOS)
# --------------------------------------------------------------------------------------
def _valid_bio(tag: str) -> bool:
    if tag == "O":
        return True
    prefix, dash, kind = tag.partition("-")
    return prefix in ("B", "I") and bool(dash) and bool(kind)


def read_conll(path: str | Path) -> list[TaggingExample]:
    """Read a CoNLL NER file: one `token<TAB>tag` (or `token ... tag`) line per word, a blank line
    between sentences; the first field is the word and the last the BIO tag. `-DOCSTART-` lines
    are skipped."""
    path = Path(path)
    examples: list[TaggingExample] = []
    words: list[str] = []
    tags: list[str] = []
    first_line = 0

    def flush():
        if words:
            examples.append(TaggingExample(list(words), list(tags), f"{path}:{first_line}"))
            words.clear()
            tags.clear()

    for lineno, line in enumerate(_open_lines(path), 1):
        if not line.strip():
            flush()
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if fields[0] == "-DOCSTART-":
            flush()
            continue
        if len(fields) < 2 or not fields[0].strip():
            raise DataError(f"{path}:{lineno}: expected `word<TAB>tag`, got {line[:60]!r}")
        tag = fields[-1].strip()
        if not _valid_bio(tag):
            raise DataError(f"{path}:{lineno}: tag {tag!r} is not BIO (O, B-TYPE or I-TYPE)")
        if not words:
            first_line = lineno
        words.append(fields[0].strip())
        tags.append(tag)
    flush()
    if not examples:
        raise DataError(f"{path}: no sentences")
    return examples


def read_conllu(path: str | Path, upos_tags: tuple[str, ...] | None = None) -> list[TaggingExample]:
    """Read a CoNLL-U file's words and UPOS tags (column 4), skipping comments, multiword-token
    lines (`3-4`) and empty nodes (`5.1`)."""
    path = Path(path)
    examples: list[TaggingExample] = []
    words: list[str] = []
    tags: list[str] = []
    first_line = 0
    for lineno, line in enumerate(_open_lines(path) + [""], 1):
        if not line.strip():
            if words:
                examples.append(TaggingExample(words, tags, f"{path}:{first_line}"))
                words, tags = [], []
            continue
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise DataError(f"{path}:{lineno}: {len(fields)} tab-separated fields, a CoNLL-U word line has 10")
        word_id, form, upos = fields[0], fields[1], fields[3]
        if "-" in word_id or "." in word_id:
            continue
        if not word_id.isdigit():
            raise DataError(f"{path}:{lineno}: ID {word_id!r} is not a word index")
        if upos_tags is not None and upos not in upos_tags:
            raise DataError(f"{path}:{lineno}: UPOS {upos!r} is not one of the 17 universal tags")
        if not words:
            first_line = lineno
        words.append(form)
        tags.append(upos)
    if not examples:
        raise DataError(f"{path}: no sentences")
    return examples


# --------------------------------------------------------------------------------------
# SQuAD v1.1 JSON
# --------------------------------------------------------------------------------------
def read_squad(path: str | Path) -> list[QAExample]:
    """Read SQuAD v1.1 JSON: data[].paragraphs[].{context, qas[].{id, question, answers[]}}."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 ({exc})") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), list):
        raise DataError(f'{path}: expected a SQuAD object {{"data": [...], "version": ...}} at the top level')
    examples = []
    misaligned = 0
    for a, article in enumerate(raw["data"]):
        where = f"{path}: data[{a}]"
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise DataError(f'{where}: an article needs a list of "paragraphs"')
        title = str(article.get("title", a))
        for p, para in enumerate(article["paragraphs"]):
            pwhere = f"{where}.paragraphs[{p}]"
            if (
                not isinstance(para, dict)
                or not isinstance(para.get("context"), str)
                or not isinstance(para.get("qas"), list)
            ):
                raise DataError(f'{pwhere}: a paragraph needs a "context" string and a "qas" list')
            context = para["context"]
            for q, qa in enumerate(para["qas"]):
                qwhere = f"{pwhere}.qas[{q}]"
                if not isinstance(qa, dict) or not isinstance(qa.get("question"), str) or "id" not in qa:
                    raise DataError(f'{qwhere}: a question needs "id" and "question"')
                answers = []
                for n, ans in enumerate(qa.get("answers", [])):
                    if (
                        not isinstance(ans, dict)
                        or not isinstance(ans.get("text"), str)
                        or not isinstance(ans.get("answer_start"), int)
                    ):
                        raise DataError(
                            f'{qwhere}.answers[{n}] (id {qa["id"]}): needs "text" and an integer "answer_start"'
                        )
                    start = ans["answer_start"]
                    if not 0 <= start <= len(context):
                        raise DataError(
                            f"{qwhere}.answers[{n}] (id {qa['id']}): answer_start {start} is outside the context"
                        )
                    misaligned += context[start : start + len(ans["text"])] != ans["text"]
                    answers.append((ans["text"], start))
                examples.append(QAExample(str(qa["id"]), qa["question"], context, answers, title))
    if misaligned:
        log.warning("%s: %d answers do not match the context at answer_start", path, misaligned)
    if not examples:
        raise DataError(f"{path}: no questions")
    return examples


# --------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------
def read_task_file(spec: TaskSpec, path: str | Path) -> list[Example]:
    """Read one file in the format of `spec`'s task."""
    path = Path(path)
    if spec.shape == "qa":
        return read_squad(path)
    if spec.name == "upos" or (spec.shape == "tagging" and path.suffix == ".conllu"):
        return read_conllu(path, spec.labels or None)
    if spec.shape == "tagging":
        return read_conll(path)
    return read_glue(spec, path)


@dataclass
class TaskData:
    """Train and dev examples and where they came from."""

    train: list[Example]
    dev: list[Example]
    train_source: str
    dev_source: str


def split_key(example: Example, index: int) -> str | int:
    """What must stay on one side of a split: a SQuAD article, a pair's first sentence, else the example."""
    if isinstance(example, QAExample):
        return example.title
    if isinstance(example, SequenceExample) and example.text_b is not None:
        return example.text_a
    return index


def split_examples(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Split into (first part, rest) by `fraction`, keeping every SQuAD article on one side so
    that no paragraph is trained and evaluated on, and every first sentence of a pair (a QNLI
    question, an RTE premise) on one side so that no question is trained and evaluated on. (QNLI's
    files carry no article ids, so QNLI can only be split by question.)"""
    if not 0 < fraction < 1:
        raise InputError(f"--split-dev must be between 0 and 1 (e.g. 0.8), not {fraction}")
    keys = [split_key(e, i) for i, e in enumerate(examples)]
    groups = sorted(set(keys), key=str)
    random.Random(seed).shuffle(groups)
    n_first = max(1, min(len(groups) - 1, round(fraction * len(groups))))
    first = set(groups[:n_first])
    a = [e for e, k in zip(examples, keys, strict=False) if k in first]
    b = [e for e, k in zip(examples, keys, strict=False) if k not in first]
    if not a or not b:
        raise InputError("too few examples (or articles) to split the dev file; give a train file instead")
    return a, b


def load_task_data(
    spec: TaskSpec,
    data: str | Path,
    train_file: str | Path | None = None,
    dev_file: str | Path | None = None,
    split_dev: float = 0.0,
    seed: int = 0,
) -> TaskData:
    """Train and dev examples from a folder (default file names), a single file, explicit files,
    or `hf:` / `hf:PATH[:CONFIG]` for Hugging Face `datasets`.

    `split_dev` (0 < f < 1) trains on a fraction f of the dev file and evaluates on the rest; it is
    meant for demos where no train file exists (SQuAD's train set, QNLI's), and its scores are not
    comparable with published dev results.
    """
    text = str(data)
    if text.startswith("hf:"):
        return load_hf(spec, text[3:], split_dev, seed)
    root = Path(data).expanduser()
    if not root.exists():
        raise DataError(f"{root}: no such file or folder")

    def pick(explicit, default) -> Path:
        if explicit:
            p = Path(explicit).expanduser()
            return p if p.is_absolute() or p.exists() or not root.is_dir() else root / p
        return root / default if root.is_dir() else root

    dev_path = pick(dev_file, spec.dev_file)
    if split_dev:
        examples = read_task_file(spec, dev_path)
        train, dev = split_examples(examples, split_dev, seed)
        note = f"{dev_path} (first {split_dev:.0%} of a seeded split)"
        return TaskData(train, dev, note, f"{dev_path} (rest of the split)")
    train_path = pick(train_file, spec.train_file)
    if root.is_file() and not train_file and not dev_file:
        raise InputError(
            f"{root} is one file; give the folder holding {spec.train_file} and {spec.dev_file}, "
            "or --train-file/--dev-file, or --split-dev 0.8 to split this file into train and dev"
        )
    if not train_path.is_file():
        raise DataError(
            f"{train_path}: train file not found; pass --train-file, or --split-dev 0.8 to train on part "
            f"of {dev_path.name} (for demos only)"
        )
    return TaskData(read_task_file(spec, train_path), read_task_file(spec, dev_path), str(train_path), str(dev_path))


# --------------------------------------------------------------------------------------
# Hugging Face datasets (optional)
# --------------------------------------------------------------------------------------
def load_hf(spec: TaskSpec, name: str = "", split_dev: float = 0.0, seed: int = 0) -> TaskData:
    """Load the task from the Hugging Face Hub with `datasets` (needs it installed and online,
    or the dataset in the local cache). `name` is "PATH" or "PATH:CONFIG"; empty = the task's default."""
    try:
        import datasets
    except ImportError as exc:
        raise DataError(
            "hf: data needs the `datasets` package (pip install datasets); or give a local folder with the task's files"
        ) from exc
    if name:
        path, _, config = name.partition(":")
        config = config or None
    elif spec.hf_dataset:
        path, config = spec.hf_dataset
    else:
        raise InputError(f"{spec.name} has no default Hugging Face dataset; write hf:PATH[:CONFIG]")
    try:
        ds = datasets.load_dataset(path, config)
    except Exception as exc:  # network errors, unknown names, offline mode: all mean "not available"
        raise DataError(
            f"hf:{path}{':' + config if config else ''}: could not be loaded ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else 'no detail'}). Are you offline? "
            "Give a local folder with the task's files instead."
        ) from exc
    dev_split = spec.hf_dev_split if spec.hf_dev_split in ds else "validation"
    converted = {
        split: _from_hf(spec, ds[split], f"hf:{path}/{split}") for split in ("train", dev_split) if split in ds
    }
    if dev_split not in converted:
        raise DataError(f"hf:{path}: has no {dev_split} split (splits: {list(ds)})")
    if split_dev:
        train, dev = split_examples(converted[dev_split], split_dev, seed)
        return TaskData(train, dev, f"hf:{path}/{dev_split} (split)", f"hf:{path}/{dev_split} (rest)")
    if "train" not in converted:
        raise DataError(f"hf:{path}: has no train split (splits: {list(ds)}); use --split-dev")
    return TaskData(converted["train"], converted[dev_split], f"hf:{path}/train", f"hf:{path}/{dev_split}")


def _label_names(dataset, column: str) -> list[str] | None:
    feature = dataset.features.get(column)
    names = getattr(feature, "names", None) or getattr(getattr(feature, "feature", None), "names", None)
    return list(names) if names else None


def _from_hf(spec: TaskSpec, dataset, source: str) -> list[Example]:
    out: list[Example] = []
    if spec.shape == "qa":
        for row in dataset:
            ans = row["answers"]
            out.append(
                QAExample(
                    str(row["id"]),
                    row["question"],
                    row["context"],
                    list(zip(ans["text"], ans["answer_start"], strict=False)),
                    row.get("title", ""),
                )
            )
        return out
    if spec.shape == "tagging":
        column = "upos" if "upos" in dataset.column_names else "ner_tags"
        names = _label_names(dataset, column)
        for i, row in enumerate(dataset):
            tags = [names[t] if names and isinstance(t, int) else str(t) for t in row[column]]
            out.append(TaggingExample(list(row["tokens"]), tags, f"{source}[{i}]"))
        return out
    columns = dataset.column_names
    pairs = [
        ("sentence1", "sentence2"),
        ("question", "sentence"),
        ("question1", "question2"),
        ("premise", "hypothesis"),
        ("sentence", None),
    ]
    a_col, b_col = next(((a, b) for a, b in pairs if a in columns and (b is None or b in columns)), (None, None))
    if a_col is None:
        raise DataError(f"{source}: no sentence columns among {columns}")
    names = _label_names(dataset, "label")
    for i, row in enumerate(dataset):
        raw = row["label"]
        if spec.shape == "regression":
            label: str | float = float(raw)
        else:
            if raw is None or raw < 0:  # unlabelled test rows
                continue
            name = names[raw] if names else str(raw)
            label = name if name in spec.labels else str(raw)
            if label not in spec.labels:
                raise DataError(f"{source}[{i}]: label {name!r} does not map onto {list(spec.labels)}")
        out.append(SequenceExample(row[a_col], row[b_col] if b_col else None, label, f"{source}[{i}]"))
    return out
