"""Load a fine-tuned model and ask it one question at a time (the app's "Try it" panel, the CLI).

    from bertlab.finetune.predict import load_finetuned
    m = load_finetuned("runs/sst2/model")
    m.predict("a gripping, funny film")            # Prediction(label="1", score=0.93, probabilities=...)
    m.predict("Who wrote it?", "It was written by Ann.")   # QA: answer="Ann", answer_start=17, ...

Also owns the saved format (`save_finetuned`): a Hugging Face-compatible checkpoint whose
config.json carries id2label / label2id / num_labels (and problem_type) at the top level, so
`transformers.AutoModelFor...` opens it, and our task set-up under `bertlab.finetune`.
Checkpoints fine-tuned by `transformers` (BertForSequenceClassification, AlbertFor..., ElectraFor...,
RobertaFor...) load too; every family saves and opens through its registry entry
(bertlab.models.registry: its weight names, tokenizer and class names).

Imports torch, bertlab.storage.checkpoint (loading), bertlab.hardware (pick_device), bertlab.models.registry,
bertlab.tokenizer, bertlab.finetune.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, InputError
from bertlab.finetune.data import QAExample, SequenceExample, TaggingExample
from bertlab.finetune.encoding import encode_qa, encode_sequences, encode_tagging
from bertlab.finetune.evaluation import decode, run_model
from bertlab.finetune.models import TASK_SUFFIXES, HeadConfig, build_task_model, task_architecture
from bertlab.hardware import pick_device
from bertlab.models.registry import FAMILIES, family_for
from bertlab.storage import quantized
from bertlab.storage.checkpoint import load_config, load_state, read_weights, resolve, save_checkpoint, weights_file
from bertlab.tokenizer import BertTokenizer

log = logging.getLogger(__name__)

# the task classes of every family that fine-tunes (BertForSequenceClassification, AlbertFor..., ...); a
# sentence classifier reads as a pair task unless its config says regression or it has one label
SHAPE_OF_ARCHITECTURE = {
    family.task_prefix + suffix: "pair" if shape == "single" else shape
    for family in FAMILIES.values()
    for shape, suffix in TASK_SUFFIXES.items()
    if shape in ("single", "tagging", "qa")
}


@dataclass(frozen=True)
class TaskSetup:
    """What a fine-tuned model needs besides its weights; saved as config.json's bertlab.finetune."""

    task: str  # sst2, ..., or "custom" for a model fine-tuned elsewhere
    shape: str  # single | pair | regression | tagging | qa
    labels: tuple[str, ...]  # class names in output order; ("score",) for regression; () for QA
    head: HeadConfig
    max_seq_length: int = 128
    doc_stride: int = 128  # QA: tokens between the starts of consecutive context windows
    max_query_length: int = 64  # QA: question pieces kept
    max_answer_length: int = 30  # QA: longest answer, in pieces
    n_best: int = 20  # QA: start / end candidates considered per window

    def to_dict(self) -> dict:
        d = asdict(self)
        d["labels"] = list(self.labels)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> TaskSetup:
        data = dict(data)
        data["head"] = HeadConfig(**data["head"])
        data["labels"] = tuple(data.get("labels", ()))
        return cls(**data)


@dataclass(frozen=True)
class _HFTaskConfig:
    """A BertConfig that adds the task keys transformers reads at the top level of config.json."""

    bert: BertConfig
    top_level: dict

    @property
    def model_type(self) -> str:
        """The family the checkpoint belongs to (save_checkpoint asks it), the encoder's."""
        return self.bert.model_type

    def to_hf_dict(self, architecture: str, extra: dict | None = None) -> dict:
        data = self.bert.to_hf_dict(architecture, extra)
        data.update(self.top_level)
        return data


def hf_task_keys(setup: TaskSetup) -> dict:
    """id2label / label2id / num_labels / problem_type as transformers expects them."""
    if setup.shape == "qa":
        return {}
    keys = {
        "id2label": {str(i): name for i, name in enumerate(setup.labels)},
        "label2id": {name: i for i, name in enumerate(setup.labels)},
        "num_labels": len(setup.labels),
    }
    if setup.shape == "regression":
        keys["problem_type"] = "regression"
    elif setup.shape in ("single", "pair"):
        keys["problem_type"] = "single_label_classification"
    return keys


def save_finetuned(
    directory: str | Path, model: torch.nn.Module, tokenizer: BertTokenizer, setup: TaskSetup, card: dict | None = None
) -> Path:
    """Write the model, its tokenizer, config.json (task keys included) and model_card.json, atomically."""
    config = _HFTaskConfig(model.config, hf_task_keys(setup))
    extra_files = {"model_card.json": card} if card is not None else None
    return save_checkpoint(
        directory,
        model,
        tokenizer,
        config,
        architecture=task_architecture(model.config, setup.shape),
        extra_config={"finetune": setup.to_dict()},
        extra_files=extra_files,
    )


def is_finetuned_config(raw: dict) -> bool:
    """Whether a checkpoint's config.json (read as a dict) is a fine-tuned model's: ours (a
    bertlab.finetune section) or one of the task classes transformers fine-tunes."""
    ours = raw.get("bertlab")
    architectures = raw.get("architectures")
    arch = architectures[0] if isinstance(architectures, list) and architectures else ""
    return bool(isinstance(ours, dict) and ours.get("finetune")) or arch in SHAPE_OF_ARCHITECTURE


def _setup_from_raw(raw: dict, path: Path) -> TaskSetup:
    ours = (raw.get("bertlab") or {}).get("finetune")
    if ours:
        try:
            return TaskSetup.from_dict(ours)
        except (TypeError, KeyError, InputError) as exc:
            raise CheckpointError(f"{path}/config.json: bertlab.finetune is malformed ({exc})") from exc
    arch = (raw.get("architectures") or [""])[0]
    if arch not in SHAPE_OF_ARCHITECTURE:
        raise CheckpointError(
            f"{path}: not a fine-tuned model (architecture {arch or 'unknown'!r}); fine-tune one with "
            "`bertlab finetune`, or load a pretrained model with bertlab.inference.load_model"
        )
    shape = SHAPE_OF_ARCHITECTURE[arch]
    id2label = raw.get("id2label") or {}
    labels = tuple(id2label[k] for k in sorted(id2label, key=int)) if id2label else ()
    if shape != "qa" and not labels:
        labels = tuple(f"LABEL_{i}" for i in range(int(raw.get("num_labels", 2))))
    if shape == "pair" and (raw.get("problem_type") == "regression" or len(labels) == 1):
        shape = "regression"
    head = HeadConfig(shape=shape, num_labels=2 if shape == "qa" else len(labels))
    return TaskSetup("custom", shape, labels, head, max_seq_length=int(raw.get("max_position_embeddings", 512)))


def load_task_model(path_or_id: str | Path) -> tuple[torch.nn.Module, BertTokenizer, TaskSetup, dict]:
    """Model (CPU, eval mode), tokenizer, task set-up and model card of a fine-tuned checkpoint."""
    directory = resolve(path_or_id)
    config, raw = load_config(directory)
    setup = _setup_from_raw(raw, directory)
    family = family_for(raw, str(directory / "config.json")).load()
    model = build_task_model(config, setup.head)
    state = family.normalize_keys(read_weights(directory))
    # a compressed copy (bertlab compress quantize) keeps int8 weights and their scales: dequantized to
    # load, then quantized again with the stored int8 values, as load_pretraining_model does
    int8 = quantized.scheme_of(raw) == quantized.INT8_DYNAMIC
    state, packed = quantized.split_int8(state) if int8 else (state, {})
    required = (*family.ENCODER_PREFIXES, "qa_outputs." if setup.shape == "qa" else "classifier.")
    load_state(model, state, str(weights_file(directory)), required, family.OPTIONAL_PREFIXES)
    if int8:
        model = quantized.restore_int8(model.float().eval(), packed)
    tokenizer = family.load_tokenizer(directory, config)
    if setup.max_seq_length > tokenizer.model_max_length:  # a transformers RoBERTa's 514 rows hold 512 tokens
        setup = dataclasses.replace(setup, max_seq_length=tokenizer.model_max_length)
    card = {}
    if (directory / "model_card.json").is_file():
        try:
            card = json.loads((directory / "model_card.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            log.warning("%s/model_card.json is not valid JSON; ignoring it", directory)
    return model.eval(), tokenizer, setup, card


@dataclass
class Prediction:
    """One answer of a fine-tuned model.

    Attributes:
        label: the predicted class (classification), None otherwise.
        score: the top class probability, the regression value, or the QA span probability.
        probabilities: class -> probability (classification), else empty.
        tokens / tags: the words of the text and one tag per word (tagging), else None.
        answer / answer_start / answer_end: the QA answer, context[answer_start:answer_end].
        truncated: part of the input was cut because it was longer than the model reads (a long
            sentence or pair, or a QA question over `max_query_length` pieces).
        windows: how many model inputs the text needed; a long QA context or tagged text is read in
            several windows and nothing is lost.
    """

    label: str | None = None
    score: float | None = None
    probabilities: dict[str, float] = field(default_factory=dict)
    tokens: list[str] | None = None
    tags: list[str] | None = None
    answer: str | None = None
    answer_start: int | None = None
    answer_end: int | None = None
    truncated: bool = False
    windows: int = 1


class FinetunedModel:
    """A fine-tuned model ready to predict; load with `load_finetuned`. Never trained further."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: BertTokenizer,
        setup: TaskSetup,
        card: dict,
        path: str,
        device: torch.device,
    ):
        self.model, self.tokenizer, self.setup, self.card = model, tokenizer, setup, card
        self.path, self.device = path, device

    @property
    def task(self) -> str:
        return self.setup.task

    @property
    def task_shape(self) -> str:
        return self.setup.shape

    @property
    def labels(self) -> list[str]:
        return list(self.setup.labels)

    def _check(self, text, name: str) -> str:
        if not isinstance(text, str):
            raise InputError(f"{name} must be a string, got {type(text).__name__}")
        if not text.strip():
            raise InputError(f"{name} is empty; type some text")
        return text

    def predict(self, text: str, text_b: str | None = None) -> Prediction:
        """Classify / score / tag `text` (and `text_b` for pair tasks); for QA, `text` is the
        question and `text_b` the context."""
        shape = self.task_shape
        s = self.setup
        if shape == "qa":
            if text_b is None:
                raise InputError("question answering needs a question and a context: predict(question, context)")
            question, context = self._check(text, "question"), self._check(text_b, "context")
            ex = QAExample("q", question, context)
            feats = encode_qa([ex], self.tokenizer, s.max_seq_length, s.doc_stride, s.max_query_length, False)
            out = run_model(self.model, feats, shape, self.tokenizer.pad_id, self.device)
            ans = decode(shape, [ex], feats, out, s.labels, s.n_best, s.max_answer_length)[0]
            question_cut = len(self.tokenizer.tokenize(question)) > s.max_query_length
            return Prediction(
                score=ans.score,
                answer=ans.text,
                answer_start=ans.start,
                answer_end=ans.end,
                truncated=question_cut,
                windows=len(feats),
            )
        text = self._check(text, "text")
        if shape == "tagging":
            if text_b is not None:
                raise InputError("a tagging model reads one text; leave text_b empty")
            words = self.words(text)
            ex = TaggingExample(words, [])
            feats = encode_tagging([ex], self.tokenizer, s.max_seq_length, None)
            out = run_model(self.model, feats, shape, self.tokenizer.pad_id, self.device)
            tags = decode(shape, [ex], feats, out, s.labels)[0]
            return Prediction(tokens=words, tags=tags, windows=len(feats))
        if shape in ("pair", "regression") and text_b is None and self.task != "custom":
            raise InputError(f"{self.task} compares two sentences; give the second one as text_b")
        if shape == "single" and text_b is not None:
            raise InputError(f"{self.task} reads one sentence; leave text_b empty")
        if text_b is not None:
            self._check(text_b, "text_b")
        ex = SequenceExample(text, text_b, None)
        feats = encode_sequences([ex], self.tokenizer, s.max_seq_length, None)
        out = run_model(self.model, feats, shape, self.tokenizer.pad_id, self.device)[0]
        if shape == "regression":
            return Prediction(score=float(out[0]), truncated=feats[0].truncated)
        probs = out.softmax(-1).tolist()
        best = max(range(len(probs)), key=probs.__getitem__)
        return Prediction(
            label=s.labels[best],
            score=probs[best],
            probabilities=dict(zip(s.labels, probs, strict=False)),
            truncated=feats[0].truncated,
        )

    def words(self, text: str) -> list[str]:
        """Split text into words as BERT's basic tokenizer does (whitespace and punctuation)."""
        enc = self.tokenizer.encode(text, max_length=sys.maxsize, truncate=False)
        spans: dict[int, list[int]] = {}
        for wid, (a, b) in zip(enc.word_ids, enc.offsets, strict=False):
            if wid is not None:
                span = spans.setdefault(wid, [a, b])
                span[0], span[1] = min(span[0], a), max(span[1], b)
        words = [text[a:b] for a, b in (spans[k] for k in sorted(spans))]
        return words or text.split()


def load_finetuned(path: str | Path, device: str = "auto") -> FinetunedModel:
    """Load a fine-tuned checkpoint folder (ours, or one fine-tuned with transformers) for prediction.

    Raises:
        InputError: a path or device of the wrong kind, or a device this machine lacks.
        CheckpointError: the folder is missing, incomplete or not a fine-tuned model.
    """
    dev = pick_device(device)
    model, tokenizer, setup, card = load_task_model(path)
    if quantized.is_int8(model):
        dev = torch.device("cpu")  # fbgemm's int8 kernels are CPU-only, whatever device was asked
    model.to(dev)
    return FinetunedModel(model, tokenizer, setup, card, str(path), dev)
