"""What is being explained: a model, an input, and the one number of its output we explain.

Owns `Subject` (any loaded model, pretrained or fine-tuned, seen through one interface), the
prediction targets (`MaskedWord`, `IsNext`, ALBERT's `InOrder`, `TaskLabel`, `AnswerSpan`), `prepare` (texts and a
target -> a padded batch with the position and class each row's number is read at) and
`target_probability` (that number as a differentiable (B,) tensor). Attribution, head importance
and comparison all read predictions through here, so a new kind of prediction is one new target.
Also `whole_number`, the check of a count argument (steps, batch size, points) the interpret
modules share, so each refuses 2.5 or "4" with the same InputError, and `private_copy`, the copy
of a model's modules that attribution and head importance hook instead of the shared model, and
`gradients_through`, the autograd context they compute gradients in.

An int8 model (bertlab.storage.quantized) is refused where gradients are needed, with
`NoGradientsError` naming the float model it was made from.

Imports torch, bertlab.inference, bertlab.finetune.predict, bertlab.storage (checkpoint, quantized),
bertlab.data.batching, bertlab.errors, bertlab.models.registry (the heads' names).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError, NoGradientsError, is_whole_number
from bertlab.finetune.predict import SHAPE_OF_ARCHITECTURE, FinetunedModel, load_finetuned
from bertlab.inference import LoadedModel, load_model
from bertlab.models.registry import HEAD_TITLES, heads_in_words
from bertlab.storage import quantized
from bertlab.storage.checkpoint import load_config, read_config, resolve
from bertlab.tokenizer import BertTokenizer


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------
@dataclass
class Subject:
    """Any loaded model through one interface.

    Attributes:
        module: `BertForPreTraining` or a fine-tuned task model; `module.bert` is the encoder.
        kind: "pretraining", or the task shape of a fine-tuned model (single, pair, regression,
            tagging, qa).
        labels: class names of a fine-tuned model, in output order; () for a pretrained one.
        heads: a pretrained model's heads (bertlab.models.registry.HEAD_TITLES' names); () for a fine-tuned one.
    """

    module: nn.Module
    tokenizer: BertTokenizer
    max_length: int
    kind: str
    labels: tuple[str, ...]
    device: torch.device
    name: str
    has_nsp: bool = False
    heads: tuple[str, ...] = ()

    @property
    def num_layers(self) -> int:
        return self.module.config.num_layers

    @property
    def num_heads(self) -> int:
        return self.module.config.num_heads


def private_copy(shared: nn.Module) -> nn.Module:
    """A copy of `shared`'s module tree, in eval mode, for one computation that hooks its modules.

    The app caches one model object per process and every session and thread calls it, so a hook
    on it (Captum's on the word embeddings, the head study's gates) changes everyone's answers
    while it is on. The copy's weights are the same storage, wrapped as parameters that need no
    gradient (no extra memory; tied weights stay tied; about 40 ms for BERT-base), and its buffers
    are the same tensors: writing into them in place would change the shared model too.
    Gradients still reach inputs, activations and hooked tensors, never the weights: no `.grad`,
    no `requires_grad` change, on the copy or on `shared`. It starts without hooks: a hook someone
    else has on the shared model while we copy it is theirs, not part of the model.
    """
    memo: dict[int, object] = {id(p): nn.Parameter(p.detach(), requires_grad=False) for p in shared.parameters()}
    memo.update({id(b): b for b in shared.buffers()})
    for module in shared.modules():
        for name, value in vars(module).items():
            if "hooks" in name and isinstance(value, dict):
                memo[id(value)] = type(value)()
    return copy.deepcopy(shared, memo).eval()


def _rnn_on_cuda(module: nn.Module) -> bool:
    """Whether `module` holds a recurrent layer (an LSTM task head) and sits on a CUDA GPU."""
    return any(isinstance(m, nn.RNNBase) for m in module.modules()) and any(p.is_cuda for p in module.parameters())


@contextlib.contextmanager
def gradients_through(module: nn.Module):
    """Autograd on, for gradients through `module` in eval mode (attribution, head importance).
    cuDNN's RNN kernels run a backward pass in training mode only ("cudnn RNN backward can only be
    called in training mode"), so where `module` has an LSTM head on a GPU (Table 5's + BiLSTM
    models) cuDNN is off for the computation; its other settings are kept."""
    cudnn = torch.backends.cudnn
    off = (
        cudnn.flags(
            enabled=False, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic, allow_tf32=cudnn.allow_tf32
        )
        if _rnn_on_cuda(module)
        else contextlib.nullcontext()
    )
    with torch.enable_grad(), off:
        yield


def whole_number(value, name: str, low: int, high: int | None = None) -> int:
    """`value` as an int when it is a whole number in low..high (high None: no upper bound).

    Raises:
        InputError: a float, a string, a bool or a number out of range, naming `name` and the range.
    """
    bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
    if not is_whole_number(value):
        raise InputError(f"{name} must be a whole number {bounds}, got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        raise InputError(f"{name} must be a whole number {bounds}, got {value}")
    return int(value)


def as_subject(model: LoadedModel | FinetunedModel | Subject, gradients: bool = True) -> Subject:
    """A `LoadedModel` (`bertlab.inference.load_model`) or a `FinetunedModel`
    (`bertlab.finetune.predict.load_finetuned`) as a `Subject`.

    Args:
        gradients: the caller needs gradients through the encoder (attribution, head importance),
            so a feature-based model (frozen encoder) is refused; False for attention and hidden states.
    """
    if isinstance(model, Subject):
        return model
    if gradients and isinstance(model, LoadedModel | FinetunedModel) and quantized.is_int8(model.model):
        raise _no_gradients(str(model.path))
    if isinstance(model, LoadedModel):
        return Subject(
            model.model,
            model.tokenizer,
            model.max_length,
            "pretraining",
            (),
            model.device,
            model.path,
            model.has_nsp,
            model.heads,
        )
    if isinstance(model, FinetunedModel):
        if gradients and model.model.frozen:
            raise InputError(
                f"{model.path} is a feature-based model (frozen encoder, run without gradients); attribution and "
                "head importance need gradients through the encoder: use a fine-tuned (mode finetune) model"
            )
        max_length = min(model.setup.max_seq_length, model.model.config.max_position_embeddings)
        return Subject(
            model.model, model.tokenizer, max_length, model.task_shape, tuple(model.labels), model.device, model.path
        )
    raise InputError(
        f"expected a model from bertlab.inference.load_model or bertlab.finetune.predict.load_finetuned, "
        f"got {type(model).__name__}"
    )


def gradients_refusal(path: str | Path) -> NoGradientsError | None:
    """What a computation that needs gradients would raise for the model folder at `path` (a dynamic
    int8 copy), read from its config.json without loading it; None for a float model."""
    config = Path(path) / "config.json"
    if config.is_file() and quantized.scheme_of(read_config(path)) == quantized.INT8_DYNAMIC:
        return _no_gradients(str(path))
    return None


def _no_gradients(path: str) -> NoGradientsError:
    """The refusal of an int8 model, naming the float model it was made from where its folder says."""
    raw = read_config(path) if path and (Path(path) / "config.json").is_file() else {}
    source = (raw.get("bertlab") or {}).get("compressed_from")
    offer = f"use the model it was made from, {source}" if source else "use the float model it was made from"
    return NoGradientsError(
        f"{path or 'this model'} is a dynamic int8 copy (bertlab compress quantize): its int8 layers have no "
        f"gradients, so integrated gradients and head importance cannot run on it; {offer}",
        source,
    )


# --------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MaskedWord:
    """P(`token`) at the `mask`-th [MASK] of the text (0 = the first); None = the model's top answer."""

    token: str | None = None
    mask: int = 0

    def __post_init__(self) -> None:
        if self.token is not None and not isinstance(self.token, str):
            raise InputError(f"MaskedWord token must be a vocabulary token (a string) or None, got {self.token!r}")
        whole_number(self.mask, "MaskedWord mask (0 = the first [MASK], 1 = the second, ...)", 0)


@dataclass(frozen=True)
class IsNext:
    """P(IsNext): that `text_b` follows `text` (a pretrained model with an NSP head)."""


@dataclass(frozen=True)
class InOrder:
    """P(in order): that `text` comes before `text_b` in their text (ALBERT's sentence-order head)."""


@dataclass(frozen=True)
class TaskLabel:
    """A fine-tuned model's P(`label`) (None = its predicted label); its score for regression.

    `position`: the token whose tag is explained, for a tagging model (default 1, the first word)."""

    label: str | None = None
    position: int | None = None

    def __post_init__(self) -> None:
        if self.label is not None and not isinstance(self.label, str):
            raise InputError(
                f"TaskLabel label must be one of the model's label names (a string) or None, got {self.label!r}"
            )
        if self.position is not None:
            whole_number(self.position, "TaskLabel position (1 = the first token after [CLS])", 1)


@dataclass(frozen=True)
class AnswerSpan:
    """A question-answering model's P(its answer starts here) (`end=False`) or ends here (`end=True`)."""

    end: bool = False


Target = MaskedWord | IsNext | InOrder | TaskLabel | AnswerSpan
PAIR_HEADS = {IsNext: "nsp", InOrder: "sop"}  # the sentence-pair targets and the head each reads


def default_target(subject: Subject, text_b: str | None) -> Target:
    """The prediction a model is best known for: the [MASK] (or its sentence-pair head's for a pair: NSP,
    ALBERT's sentence order), its label, its answer."""
    if subject.kind == "pretraining":
        if text_b is None:
            return MaskedWord()
        return InOrder() if "sop" in subject.heads and not subject.has_nsp else IsNext()
    if subject.kind == "qa":
        return AnswerSpan()
    return TaskLabel()


@dataclass
class Prepared:
    """A batch to explain and where each row's number is read.

    Attributes:
        input_ids, token_type_ids, attention_mask: (B, T) long.
        positions: (B,) long, the token the number is read at (0 for sentence-level targets).
        classes: (B,) long, the vocabulary id or class index whose probability is read.
        tokens: B lists of tokens (unpadded).
        names: B descriptions of what is explained, e.g. "P('paris' at [MASK] #1)".
    """

    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    attention_mask: torch.Tensor
    positions: torch.Tensor
    classes: torch.Tensor
    tokens: list[list[str]]
    names: list[str]
    truncated: list[bool]

    @property
    def forward_args(self) -> tuple[torch.Tensor, ...]:
        """What `target_probability` takes after the ids, in order."""
        return self.token_type_ids, self.attention_mask, self.positions, self.classes


TARGETS = (MaskedWord, IsNext, InOrder, TaskLabel, AnswerSpan)


def _lacks_pair_head(subject: Subject, head: str) -> str:
    """What a model without the sentence-pair head `head` ("nsp" or "sop") has instead, in words."""
    other, other_target = ("sop", "InOrder()") if head == "nsp" else ("nsp", "IsNext()")
    if other in subject.heads:
        instead = f"it has {HEAD_TITLES[other]}: explain that ({other_target}) instead"
    elif "mlm" in subject.heads:
        instead = "explain a [MASK] instead"
    else:  # an ELECTRA discriminator: replaced-token detection only
        instead = f"it has {heads_in_words(subject.heads, offer=True)}, which attribution here does not explain"
    return f"this checkpoint has no {HEAD_TITLES[head]} head; {instead}"


def _check_kind(subject: Subject, target: Target) -> None:
    if not isinstance(target, TARGETS):
        raise InputError(
            f"target must be a MaskedWord(), IsNext(), InOrder(), TaskLabel() or AnswerSpan() from bertlab.interpret "
            f"(or None for the model's main prediction), got {target!r} ({type(target).__name__})"
        )
    if isinstance(target, MaskedWord | IsNext | InOrder) and subject.kind != "pretraining":
        raise InputError(f"{type(target).__name__} needs a pretrained model; this one is fine-tuned for {subject.kind}")
    head = PAIR_HEADS.get(type(target))
    if head is not None and head not in subject.heads and not (head == "nsp" and subject.has_nsp):
        raise InputError(_lacks_pair_head(subject, head))
    if isinstance(target, TaskLabel) and subject.kind in ("pretraining", "qa"):
        raise InputError(f"TaskLabel needs a fine-tuned classifier or tagger, not a {subject.kind} model")
    if isinstance(target, AnswerSpan) and subject.kind != "qa":
        raise InputError("AnswerSpan needs a question-answering model")


def _checked_texts(
    subject: Subject, texts: Sequence[str], texts_b: Sequence[str | None] | None, target: Target
) -> Sequence[str | None]:
    """The second texts, one per text (None where there is none), once the inputs fit the target."""
    _check_kind(subject, target)
    if not texts:
        raise InputError("no texts given")
    if texts_b is None:
        texts_b = [None] * len(texts)
    if len(texts_b) != len(texts):
        raise InputError(f"{len(texts)} texts but {len(texts_b)} second texts")
    for t in [*texts, *[b for b in texts_b if b is not None]]:
        if not isinstance(t, str) or not t.strip():
            raise InputError("every text must be a non-empty string; type a sentence")
    if isinstance(target, IsNext | InOrder | AnswerSpan) and any(b is None for b in texts_b):
        raise InputError(f"{type(target).__name__} reads a pair: give the second text (text_b)")
    return texts_b


def prepare(subject: Subject, texts: Sequence[str], texts_b: Sequence[str | None] | None, target: Target) -> Prepared:
    """Encode `texts` (and `texts_b`) and find, with one forward pass, the position and class of `target`.

    Raises:
        InputError: empty text, no [MASK] for a MaskedWord, a token not in the vocabulary, a target
            that does not fit the model.
    """
    texts_b = _checked_texts(subject, texts, texts_b, target)
    tok = subject.tokenizer
    encs = [tok.encode(a, b, max_length=subject.max_length) for a, b in zip(texts, texts_b, strict=True)]
    batch = pad_batch([e.ids for e in encs], tok.pad_id, [e.type_ids for e in encs])
    batch = {k: v.to(subject.device) for k, v in batch.items()}
    B = len(encs)
    positions = torch.zeros(B, dtype=torch.long, device=subject.device)
    classes = torch.zeros(B, dtype=torch.long, device=subject.device)
    names = []
    for i, e in enumerate(encs):
        if isinstance(target, MaskedWord):
            where = [p for p, x in enumerate(e.ids) if x == tok.mask_id]
            if len(where) <= target.mask:
                raise InputError(
                    f"{texts[i][:60]!r} has {len(where)} [MASK] token(s) the model reads; write [MASK] where a word "
                    f"should be predicted (mask #{target.mask + 1} was asked for)"
                )
            positions[i] = where[target.mask]
        elif isinstance(target, TaskLabel) and subject.kind == "tagging":
            p = 1 if target.position is None else target.position
            if not 0 < p < len(e) - 1:
                raise InputError(f"position {p} is not a token of the {len(e)}-token input (1..{len(e) - 2})")
            positions[i] = p
    with torch.no_grad():
        probs = _output_probabilities(subject, target, batch, positions)  # (B, C) or (B, T)
    for i, e in enumerate(encs):
        if isinstance(target, MaskedWord):
            if target.token is None:
                classes[i] = int(probs[i].argmax())
            else:
                ids = tok.convert_tokens_to_ids([target.token])
                if ids[0] == tok.unk_id and target.token != "[UNK]":
                    raise InputError(f"{target.token!r} is not in the vocabulary; pick one of the model's answers")
                classes[i] = ids[0]
            word = tok.readable_tokens([tok.id_to_token.get(int(classes[i]), "[UNK]")])[0]  # 'Ġmat' reads '␣mat'
            names.append(f"P({word!r} at [MASK] #{target.mask + 1})")
        elif isinstance(target, IsNext):
            names.append("P(IsNext)")
        elif isinstance(target, InOrder):
            names.append("P(in order)")
        elif isinstance(target, TaskLabel):
            if subject.kind == "regression":
                names.append("the predicted score")
                continue
            if target.label is None:
                classes[i] = int(probs[i].argmax())
            elif target.label in subject.labels:
                classes[i] = subject.labels.index(target.label)
            else:
                raise InputError(f"label {target.label!r} is not one of this model's labels {list(subject.labels)}")
            at = f" at {tok.readable_tokens([e.tokens[int(positions[i])]])[0]!r}" if subject.kind == "tagging" else ""
            names.append(f"P(label {subject.labels[int(classes[i])]!r}{at})")
        else:
            context = torch.tensor([s == 1 for s in e.sequence_ids] + [False] * (probs.shape[1] - len(e)))
            scores = probs[i].cpu().masked_fill(~context, -1.0)
            positions[i] = int(scores.argmax())
            piece = tok.readable_tokens([e.tokens[int(positions[i])]])[0]
            names.append(f"P(answer {'ends' if target.end else 'starts'} at {piece!r})")
    return Prepared(
        batch["input_ids"],
        batch["token_type_ids"],
        batch["attention_mask"],
        positions,
        classes,
        [e.tokens for e in encs],
        names,
        [e.truncated for e in encs],
    )


def _output_probabilities(
    subject: Subject,
    target: Target,
    batch: dict[str, torch.Tensor],
    positions: torch.Tensor,
) -> torch.Tensor:
    """(B, C) probabilities over classes / vocabulary at `positions`, (B, T) over positions for QA,
    (B, 1) the score for regression."""
    m = subject.module
    ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    rows = torch.arange(ids.shape[0], device=ids.device)
    if subject.kind == "pretraining":
        enc = m.bert(ids, types, mask)
        if isinstance(target, IsNext):  # `_check_kind` refused a model without an NSP head
            return m.next_sentence_logits(enc.pooled_output).float().softmax(-1)  # (B, 2), 0 = IsNext
        if isinstance(target, InOrder):  # ALBERT's; `_check_kind` refused a model without it
            return m.sop_classifier(enc.pooled_output).float().softmax(-1)  # (B, 2), 0 = A then B, in order
        hidden = enc.last_hidden_state[rows, positions]  # (B, H)
        return m.layer_logits(hidden).float().softmax(-1)  # (B, V): every family's masked-LM head
    out = m(ids, types, mask)
    if subject.kind == "regression":
        return out.logits.float()  # (B, 1)
    if subject.kind == "tagging":
        return out.logits[rows, positions].float().softmax(-1)  # (B, C)
    if subject.kind == "qa":
        logits = out.end_logits if target.end else out.start_logits  # (B, T)
        return logits.float().masked_fill(mask == 0, torch.finfo(torch.float32).min).softmax(-1)
    return out.logits.float().softmax(-1)  # (B, C)


def target_probability(
    subject: Subject,
    target: Target,
    input_ids: torch.Tensor,
    token_type_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    classes: torch.Tensor,
) -> torch.Tensor:
    """(B,) float: the explained number of each row, differentiable (gradients are on).

    Args:
        positions, classes: from `prepare` (repeated along the batch when the batch was expanded,
            as Captum does for its interpolation steps).
    """
    batch = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
    probs = _output_probabilities(subject, target, batch, positions)
    if subject.kind == "regression":
        return probs[:, 0]
    if subject.kind == "qa":
        return probs.gather(1, positions[:, None])[:, 0]
    return probs.gather(1, classes[:, None])[:, 0]


def load_subject(path_or_id: str | Path, device: str = "auto") -> Subject:
    """Load any checkpoint folder or Hub id: a fine-tuned model (its config names a task
    architecture) through `load_finetuned`, anything else through `load_model`."""
    directory = resolve(path_or_id)
    _, raw = load_config(directory)
    if (raw.get("architectures") or [""])[0] in SHAPE_OF_ARCHITECTURE:
        return as_subject(load_finetuned(directory, device))
    return as_subject(load_model(directory, device))
