"""The inference API used by the app, the CLI and the tests alike.

`load_model(path)` returns a `LoadedModel` with `fill_mask`, `next_sentence`, `sentence_order`
(ALBERT's), `inspect` and `layer_predictions`; each returns dataclasses and accepts batches. Imports
torch and the lower bertlab layers (config, model, tokenizer, checkpoint, quantized, batching); never streamlit.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError, is_whole_number
from bertlab.hardware import pick_device
from bertlab.model import BertForPreTraining
from bertlab.models.registry import heads_in_words
from bertlab.storage import quantized
from bertlab.storage.checkpoint import default_model_path, load_pretraining_model
from bertlab.tokenizer import BertTokenizer, Encoding, mask_any_case

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------
@dataclass
class Candidate:
    """One answer for a [MASK]: the vocabulary's `token`, its probability, the whole `word` it makes with its
    neighbours, as the tokenizer reads words (`BertTokenizer.whole_word`): WordPiece 'dog' before '##s' ->
    'dogs', '##s' at 'cat[MASK]' -> 'cats', and a ## piece proposed where a word stands on its own reads
    'is + ##s'; RoBERTa's byte-level 'Ġmat' -> 'mat'; and the token as a page draws a piece, `piece`
    (`BertTokenizer.readable_tokens`: WordPiece's '##s' as it is, RoBERTa's 'Ġmat' -> '␣mat')."""

    token: str
    token_id: int
    score: float
    word: str
    piece: str


@dataclass
class MaskAnswer:
    """Top-k answers for one [MASK], each mask predicted independently (all others left masked)."""

    position: int  # token index in `FillMaskResult.tokens`
    candidates: list[Candidate]


@dataclass
class FillMaskResult:
    """fill-mask for one text.

    Attributes:
        tokens: WordPiece input, [CLS] ... [SEP].
        masks: per-mask independent answers, in text order.
        joint: one token per mask chosen jointly, most-confident-first: the model fills the mask it
            is surest of, re-reads the sentence, and repeats.
        joint_order: the order (indices into `masks`) in which the joint fill chose them.
        joint_text: the sentence with every [MASK] replaced by its joint choice.
        truncated: True when the text was cut to fit the model; `num_dropped` tokens were cut.
        num_masks_dropped: [MASK]s in the part that was cut off; they have no answer in `masks`.
    """

    text: str
    tokens: list[str]
    masks: list[MaskAnswer]
    joint: list[Candidate]
    joint_order: list[int]
    joint_text: str
    truncated: bool = False
    num_dropped: int = 0
    num_masks_dropped: int = 0


@dataclass
class NSPResult:
    """Next sentence prediction: P(IsNext) that B follows A (paper, section 3.1, task #2).

    `truncated`: the pair was cut to fit the model; `num_dropped` tokens were cut (from the longer
    sentence first, as BERT's data pipeline does).
    """

    text_a: str
    text_b: str
    is_next_prob: float
    tokens: list[str]
    segment_ids: list[int]
    truncated: bool = False
    num_dropped: int = 0

    @property
    def is_next(self) -> bool:
        return self.is_next_prob >= 0.5


@dataclass
class SentenceOrderResult:
    """Sentence order prediction (ALBERT, Lan et al. 2019, §4.2): P(in order) that A comes before B as
    in the text (two consecutive segments, swapped half the time in training). `truncated`: the pair
    was cut to fit the model; `num_dropped` tokens were cut."""

    text_a: str
    text_b: str
    in_order_prob: float
    tokens: list[str]
    segment_ids: list[int]
    truncated: bool = False
    num_dropped: int = 0

    @property
    def in_order(self) -> bool:
        return self.in_order_prob >= 0.5


@dataclass
class Inspection:
    """Everything inside the model for one input.

    Attributes:
        tokens: WordPiece tokens, length T.
        segment_ids, position_ids: length T.
        attentions: (L, A, T, T) float32 attention probabilities; rows sum to 1 (0 for heads
            switched off by `head_mask`).
        hidden_states: (L+1, T, H) float32: embeddings output, then every layer's output.
        word_ids: index of the word each token belongs to (None for specials).
    """

    text: str
    text_b: str | None
    tokens: list[str]
    token_ids: list[int]
    segment_ids: list[int]
    position_ids: list[int]
    word_ids: list[int | None]
    attentions: np.ndarray
    hidden_states: np.ndarray
    truncated: bool = False
    mlm_top: list[list[Candidate]] = field(default_factory=list)
    nsp_is_next_prob: float | None = None


@dataclass
class LayerGuess:
    """What the MLM head reads out of one layer's hidden state at a position (layer 0 = embeddings)."""

    layer: int
    candidates: list[Candidate]


# --- helpers ---
MAX_MASKS = 32  # per text: the joint fill runs one forward pass per mask
# per text: a 512-token model reads about 2,500 characters; a pasted book would only cost tokenizing and
# drawing time that every other user of a shared app waits through. A long-input model reads 6 per token.
MAX_TEXT_CHARS = 10_000


def text_cap(max_length: int) -> int:
    return max(MAX_TEXT_CHARS, 6 * max_length)


def _check_top_k(top_k: object, minimum: int = 1) -> None:
    """top_k must be a whole number of answers, `minimum` or more (an InputError, not torch's TypeError)."""
    if not is_whole_number(top_k) or top_k < minimum:
        none = " (0 = none)" if minimum == 0 else ""
        raise InputError(f"top_k must be a whole number, {minimum} or more{none}, got {top_k!r}")


def _as_list(texts: object, what: str) -> list:
    """A list of texts from a list/tuple of them; anything else is an InputError, not a TypeError."""
    if isinstance(texts, list | tuple):
        return list(texts)
    raise InputError(f"{what} must be a string or a list of strings, got {type(texts).__name__}")


# --- the loaded model ---
def _fp32_inference(method: Callable) -> Callable:
    """Run a LoadedModel method without gradients and without autocast, whatever the caller has on:
    answers must not depend on the caller's precision. bf16 autocast changed the top answer to 1 of
    12 probe sentences on the shipped model (tests/test_inference.py), and a CPU without bf16
    instructions computes bf16 far slower than fp32; so inference stays in the model's own dtype."""

    @functools.wraps(method)
    def run(self: LoadedModel, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode(), torch.autocast(self.device.type, enabled=False):
            return method(self, *args, **kwargs)

    return run


class LoadedModel:
    """A BERT checkpoint ready for inference (eval mode, no gradients)."""

    def __init__(self, model: BertForPreTraining, tokenizer: BertTokenizer, info: dict | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.info = info or {}
        self.config = model.config
        self.device = next(model.parameters()).device
        self.max_length = min(tokenizer.model_max_length, model.config.max_position_embeddings)
        # the heads whose weights the folder held; a model built in memory has the heads it was built with
        self.heads: tuple[str, ...] = tuple(self.info.get("heads", model.heads))
        self.has_mlm = "mlm" in self.heads
        self.has_nsp = "nsp" in self.heads
        self.has_sop = "sop" in self.heads  # ALBERT's sentence order, its sentence-pair head instead of NSP
        # A pair folder (ELECTRA's run) opens as its generator, the masked LM: pages that need one
        # use this model; the others (attention, layers, replaced-token detection, fine-tuning) use
        # the discriminator, load_model(halves["discriminator"]). Empty for a folder of one model.
        self.halves: dict[str, str] = dict(self.info.get("halves", {}))
        # dynamic int8 Linears hold packed weights with no gradients (bertlab.storage.quantized): pages that
        # need gradients (integrated gradients, head importance) refuse such a model and offer its source
        self.supports_gradients = self.info.get("quantization") is None

    def _need_mlm(self, what: str) -> None:
        """InputError naming the heads the folder has (and where the app shows them) when none is a masked LM."""
        if not self.has_mlm:
            raise InputError(
                f"{what} needs a masked-LM head, and {self.path or 'this model'} has {heads_in_words(self.heads, True)}"
                "; pick a pretrained model with one, or use the pages that read only the encoder (attention, layers)"
            )

    @property
    def path(self) -> str:
        return self.info.get("path", "")

    @property
    def card(self) -> dict:
        return self.info.get("card", {})

    def num_parameters(self) -> int:
        return self.model.num_parameters() + quantized.packed_parameters(self.model)  # int8 weights are not parameters

    # --- batching ------------------------------------------------------------------------
    def _batch(self, encs: Sequence[Encoding]) -> dict[str, torch.Tensor]:
        batch = pad_batch([e.ids for e in encs], self.tokenizer.pad_id, [e.type_ids for e in encs])
        return {k: v.to(self.device) for k, v in batch.items()}

    def _candidates(
        self, probs: torch.Tensor, enc: Encoding, position: int, top_k: int, tokens: Sequence[str] | None = None
    ) -> list[Candidate]:
        """Top-k answers at `position` of `enc`; `tokens` (default `enc.tokens`) are the
        neighbours their whole words are read from (the joint fill passes its filled tokens)."""
        scores, ids = probs.float().topk(min(top_k, probs.shape[-1]))
        attached = self.tokenizer.attached_to_left(enc, position)
        out = []
        for s, i in zip(scores.tolist(), ids.tolist(), strict=True):
            tok = self.tokenizer.id_to_token.get(i, "[UNK]")
            word = self.tokenizer.whole_word(tokens or enc.tokens, position, tok, attached)
            out.append(Candidate(tok, i, s, word, self.tokenizer.readable_tokens([tok])[0]))
        return out

    def _check_text(self, text: str, what: str = "text") -> str:
        if isinstance(text, bytes | bytearray):
            raise InputError(
                f"{what} must be a string, got {type(text).__name__}; decode it first (text.decode('utf-8'))"
            )
        if not isinstance(text, str):
            raise InputError(f"{what} must be a string, got {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            # lone surrogates: what Python makes of invalid UTF-8 read with errors='surrogateescape'
            raise InputError(
                f"{what} is not valid Unicode (a lone surrogate {text[exc.start]!r} at character {exc.start}); "
                "it may come from a file that is not UTF-8: re-save it as UTF-8"
            ) from None
        if not text.strip():
            raise InputError(f"{what} is empty; type a sentence")
        if len(text) > (cap := text_cap(self.max_length)):
            raise InputError(
                f"{what} has {len(text):,} characters; at most {cap:,} are read "
                f"(this model sees at most {self.max_length:,} word pieces anyway): shorten it"
            )
        return text

    def _head_mask(self, head_mask: torch.Tensor | None) -> torch.Tensor | None:
        """Check a (L, A) head mask of numbers from 0 to 1 and move it to the model's device and dtype."""
        if head_mask is None:
            return None
        expected = (self.config.num_layers, self.config.num_heads)
        how = f"give a {expected} (layers, heads) tensor or nested list of numbers, 1 = keep, 0 = off"
        if isinstance(head_mask, str | bytes):
            raise InputError(f"head_mask is a {type(head_mask).__name__}; {how}")
        try:
            hm = torch.as_tensor(head_mask)
        except (TypeError, ValueError, RuntimeError):
            raise InputError(f"head_mask cannot be read as numbers ({type(head_mask).__name__}); {how}") from None
        if tuple(hm.shape) != expected:
            raise InputError(
                f"head_mask has shape {tuple(hm.shape)}; this model needs {expected} (layers, heads), 1 = keep, 0 = off"
            )
        if hm.is_complex():
            raise InputError(f"head_mask has dtype {hm.dtype}; {how}")
        values = hm.detach().to(device="cpu", dtype=torch.float32)
        if not bool(torch.isfinite(values).all()) or bool(((values < 0) | (values > 1)).any()):
            raise InputError(f"head_mask holds values outside 0..1 (NaN, infinite or out of range); {how}")
        return hm.to(device=self.device, dtype=next(self.model.parameters()).dtype)

    # --- fill-mask -----------------------------------------------------------------------
    @_fp32_inference
    def fill_mask(
        self,
        text: str | Sequence[str],
        top_k: int = 5,
        joint: bool = True,
        head_mask: torch.Tensor | None = None,
    ) -> FillMaskResult | list[FillMaskResult]:
        """Top-k answers for every [MASK] in `text` (or in each of a list of texts).

        Args:
            top_k: answers per mask.
            joint: also fill several masks together, most-confident-first (one extra forward
                pass per mask after the first); False takes each mask's own top answer.
            head_mask: (L, A) with 0 for heads to switch off.

        Raises:
            InputError: empty text, no [MASK], or every [MASK] cut off by truncation.
        """
        _check_top_k(top_k)
        self._need_mlm("fill-mask")
        single = isinstance(text, str)
        texts = [text] if single else _as_list(text, "text")
        if not texts:
            raise InputError("no texts given")
        for t in texts:
            self._check_text(t)
        # [mask] in any case is the mask token, as the tokenizer reads it; same length, so offsets hold
        texts = [mask_any_case(t) for t in texts]
        for t in texts:
            if "[MASK]" not in t:
                raise InputError(f"no [MASK] in {t[:60]!r}; write [MASK] where a word should be predicted")
        hm = self._head_mask(head_mask)
        encs = self.tokenizer.encode_batch(texts, max_length=self.max_length)
        for t, e in zip(texts, encs, strict=True):
            if (kept_masks := e.ids.count(self.tokenizer.mask_id)) > MAX_MASKS:  # those a cut-off text keeps
                where = "" if kept_masks == t.count("[MASK]") else " in the part of the text that fits"
                raise InputError(
                    f"{kept_masks} [MASK]s{where} in one text, and at most {MAX_MASKS} can be answered at once "
                    f"(the joint fill reads the text again for every mask): nothing was answered. Remove "
                    f"{kept_masks - MAX_MASKS} [MASK]{'s' if kept_masks - MAX_MASKS > 1 else ''} or split the text"
                )
            if self.tokenizer.mask_id not in e.ids:
                # count as the truncation note does: text tokens, [CLS] and [SEP] not included
                kept = sum(s is not None for s in e.sequence_ids)
                raise InputError(
                    f"the text is {kept + e.num_dropped} tokens long and only the first {kept} fit; "
                    "every [MASK] fell in the part that was cut off. Shorten the text."
                )
        batch = self._batch(encs)
        # Score only the [MASK] positions: the vocabulary projection is most of the cost.
        at_mask = batch["input_ids"] == self.tokenizer.mask_id  # (B, T)
        logits = self.model(**batch, mlm_positions=at_mask, head_mask=hm).mlm_logits  # (N, V), row-major
        per_text = logits.float().softmax(-1).split(at_mask.sum(1).tolist())  # B x (masks, V)
        results = []
        for t, e, probs in zip(texts, encs, per_text, strict=True):
            positions = [i for i, x in enumerate(e.ids) if x == self.tokenizer.mask_id]
            masks = [MaskAnswer(p, self._candidates(probs[n], e, p, top_k)) for n, p in enumerate(positions)]
            if joint and len(positions) > 1:
                chosen, order = self._joint_fill(e, positions, probs, hm)
            else:
                chosen = [m.candidates[0] for m in masks]
                order = list(range(len(masks)))
            results.append(
                FillMaskResult(
                    text=t,
                    tokens=e.tokens,
                    masks=masks,
                    joint=chosen,
                    joint_order=order,
                    joint_text=self.tokenizer.fill_text(t, e, positions, [c.token for c in chosen]),
                    truncated=e.truncated,
                    num_dropped=e.num_dropped,
                    # the tokenizer reads every "[MASK]" in the text as one mask token
                    num_masks_dropped=max(0, t.count("[MASK]") - len(positions)),
                )
            )
        return results[0] if single else results

    def _joint_fill(
        self, e: Encoding, positions: list[int], probs: torch.Tensor, head_mask: torch.Tensor | None
    ) -> tuple[list[Candidate], list[int]]:
        """Most-confident-first: fill the surest mask, re-read the sentence, repeat until none is left.

        Args:
            probs: (len(positions), V) the independent probabilities, reused for the first choice.
        """
        ids = list(e.ids)
        tokens = list(e.tokens)
        chosen: dict[int, Candidate] = {}
        order: list[int] = []
        remaining = list(positions)
        while True:
            best = int(probs.max(-1).values.argmax())  # index into `remaining`
            p = remaining.pop(best)
            cand = self._candidates(probs[best], e, p, 1, tokens)[0]
            ids[p], tokens[p] = cand.token_id, cand.token
            chosen[p] = cand
            order.append(positions.index(p))
            if not remaining:
                break
            batch = self._batch([Encoding(ids, tokens, e.type_ids, e.offsets, e.word_ids, e.sequence_ids)])
            select = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
            select[0, remaining] = True
            logits = self.model(**batch, mlm_positions=select, head_mask=head_mask).mlm_logits  # (len(remaining), V)
            probs = logits.float().softmax(-1)
        return [chosen[p] for p in positions], order

    # --- sentence-pair heads: next sentence (BERT), sentence order (ALBERT) -----------------
    def _read_pairs(
        self, text_a: str | Sequence[str], text_b: str | Sequence[str], head_mask: torch.Tensor | None
    ) -> tuple[bool, list[str], list[str], list[Encoding], Any]:
        """Check and encode sentence pairs (both str, or two equal-length lists) and run the model:
        (single, A list, B list, encodings, the model's output)."""
        single = isinstance(text_a, str)
        a_list = [text_a] if single else _as_list(text_a, "sentence A")
        b_list = [text_b] if single else _as_list(text_b, "sentence B")
        if len(a_list) != len(b_list):
            raise InputError(f"{len(a_list)} sentences A but {len(b_list)} sentences B")
        if not a_list:
            raise InputError("no sentence pairs given; give sentence A and sentence B, or two lists of them")
        for a, b in zip(a_list, b_list, strict=True):
            self._check_text(a, "sentence A")
            self._check_text(b, "sentence B")
        hm = self._head_mask(head_mask)
        encs = self.tokenizer.encode_batch(a_list, b_list, max_length=self.max_length)
        batch = self._batch(encs)
        out = self.model(**batch, mlm_positions=torch.zeros_like(batch["input_ids"], dtype=torch.bool), head_mask=hm)
        return single, a_list, b_list, encs, out

    @_fp32_inference
    def next_sentence(
        self,
        text_a: str | Sequence[str],
        text_b: str | Sequence[str],
        head_mask: torch.Tensor | None = None,
    ) -> NSPResult | list[NSPResult]:
        """P(IsNext) that `text_b` follows `text_a` (both str, or two equal-length lists)."""
        if not self.has_nsp:
            instead = "; it has a sentence-order head: use sentence_order(a, b)" if self.has_sop else ""
            raise InputError(
                f"this checkpoint has no next-sentence head (trained without NSP); NSP is unavailable{instead}"
            )
        single, a_list, b_list, encs, out = self._read_pairs(text_a, text_b, head_mask)
        p_is_next = out.nsp_logits.float().softmax(-1)[:, 0].tolist()  # index 0 = IsNext
        results = [
            NSPResult(a, b, p, e.tokens, e.type_ids, e.truncated, e.num_dropped)
            for a, b, p, e in zip(a_list, b_list, p_is_next, encs, strict=True)
        ]
        return results[0] if single else results

    @_fp32_inference
    def sentence_order(
        self,
        text_a: str | Sequence[str],
        text_b: str | Sequence[str],
        head_mask: torch.Tensor | None = None,
    ) -> SentenceOrderResult | list[SentenceOrderResult]:
        """P(in order) that `text_a` comes before `text_b` in their text, from ALBERT's sentence-order
        head (both str, or two equal-length lists). InputError without that head or with an empty sentence."""
        if not self.has_sop:
            instead = "; it has a next-sentence head: use next_sentence(a, b)" if self.has_nsp else ""
            raise InputError(
                f"this checkpoint has no sentence-order head (ALBERT's, trained with data.objective=mlm_sop){instead}"
            )
        single, a_list, b_list, encs, out = self._read_pairs(text_a, text_b, head_mask)
        p_in_order = out.sop_logits.float().softmax(-1)[:, 0].tolist()  # index 0 = A then B, as in the text
        results = [
            SentenceOrderResult(a, b, p, e.tokens, e.type_ids, e.truncated, e.num_dropped)
            for a, b, p, e in zip(a_list, b_list, p_in_order, encs, strict=True)
        ]
        return results[0] if single else results

    # --- inspection ----------------------------------------------------------------------
    @_fp32_inference
    def inspect(
        self,
        text: str,
        text_b: str | None = None,
        head_mask: torch.Tensor | None = None,
        top_k: int = 0,
    ) -> Inspection:
        """Tokens, segment ids, every attention map and hidden state for one input.

        Args:
            head_mask: (L, A), 0 switches a head off.
            top_k: when > 0, also the MLM head's top-k at every position (`mlm_top`); 0 = none.
        """
        _check_top_k(top_k, minimum=0)
        self._check_text(text)
        if text_b is not None:
            self._check_text(text_b, "sentence B")
        hm = self._head_mask(head_mask)
        e = self.tokenizer.encode(text, text_b, max_length=self.max_length)
        batch = self._batch([e])
        out = self.model(**batch, head_mask=hm, output_attentions=True, output_hidden_states=True)
        enc = out.encoder
        att = torch.stack(enc.attentions, 0)[:, 0].float().cpu().numpy()  # (L, A, T, T)
        hid = torch.stack(enc.hidden_states, 0)[:, 0].float().cpu().numpy()  # (L+1, T, H)
        mlm_top = []
        if top_k > 0 and self.has_mlm:
            probs = out.mlm_logits[0].float().softmax(-1)
            mlm_top = [self._candidates(probs[p], e, p, top_k) for p in range(len(e))]
        nsp = None
        if self.has_nsp and out.nsp_logits is not None:
            nsp = float(out.nsp_logits[0].float().softmax(-1)[0])
        return Inspection(
            text=text,
            text_b=text_b,
            tokens=e.tokens,
            token_ids=e.ids,
            segment_ids=e.type_ids,
            position_ids=list(range(len(e))),
            word_ids=e.word_ids,
            attentions=att,
            hidden_states=hid,
            truncated=e.truncated,
            mlm_top=mlm_top,
            nsp_is_next_prob=nsp,
        )

    @_fp32_inference
    def layer_predictions(
        self,
        text: str,
        position: int | None = None,
        top_k: int = 5,
        head_mask: torch.Tensor | None = None,
    ) -> list[LayerGuess]:
        """The MLM head applied to every layer's hidden state at `position` (default: the first
        [MASK]): what each layer would guess, so one sees where the answer forms.

        Returns:
            L+1 guesses: layer 0 is the embeddings output, layer L equals `fill_mask`'s answer.
        """
        self._check_text(text)
        _check_top_k(top_k)
        self._need_mlm("what each layer would guess")
        if position is not None and not is_whole_number(position):
            raise InputError(
                f"position must be a whole number (a token index, 0 = [CLS]) or None for the first [MASK], "
                f"got {position!r}"
            )
        hm = self._head_mask(head_mask)
        e = self.tokenizer.encode(text, max_length=self.max_length)
        if position is None:
            if self.tokenizer.mask_id not in e.ids:
                where = " (it was cut off: the text is too long)" if "[MASK]" in mask_any_case(text) else ""
                raise InputError(f"no [MASK] in the text{where}; give a position or write [MASK]")
            position = e.ids.index(self.tokenizer.mask_id)
        if not 0 <= position < len(e):
            raise InputError(
                f"position {position} is outside the {len(e)} tokens of the input; give 0 to {len(e) - 1} (0 = [CLS])"
            )
        position = int(position)  # a numpy integer indexes a tensor as a Python int does
        enc = self.model.bert(**self._batch([e]), head_mask=hm, output_hidden_states=True)
        states = torch.stack([h[0, position] for h in enc.hidden_states])  # (L+1, H)
        probs = self.model.layer_logits(states).float().softmax(-1)  # (L+1, V)
        return [LayerGuess(i, self._candidates(probs[i], e, position, top_k)) for i in range(len(states))]


def _floating_dtype(dtype: object) -> torch.dtype:
    """A floating torch dtype, from itself or its name ('float16', 'torch.bfloat16'); InputError otherwise."""
    found = getattr(torch, dtype.removeprefix("torch."), None) if isinstance(dtype, str) else dtype
    if not isinstance(found, torch.dtype) or not found.is_floating_point:
        raise InputError(
            f"dtype must be a floating-point torch dtype (torch.float32, torch.float16 or torch.bfloat16), got {dtype!r}"
        )
    return found


def load_model(
    path_or_id: str | os.PathLike | None = None,
    device: str | None = None,
    dtype: torch.dtype | str = torch.float32,
) -> LoadedModel:
    """Load a checkpoint folder (ours or one saved by `transformers`) or a Hub id.

    Args:
        path_or_id: folder (str or PathLike) or Hub id; None loads the shipped default model.
        device: 'auto' (default), 'cpu' or 'cuda'.
        dtype: a floating torch dtype or its name ('float16').

    Raises:
        InputError: a path, device or dtype of the wrong kind, or a device this machine lacks.
        CheckpointError: the folder is missing or incomplete, or no model family opens it. A folder
            without a masked-LM head (a fine-tuned classifier) loads; `fill_mask` then says it has none.
    """
    dtype = _floating_dtype(dtype)
    dev = pick_device(device)
    path = default_model_path() if path_or_id is None else path_or_id
    model, tokenizer, info = load_pretraining_model(path, dev, dtype)
    return LoadedModel(model, tokenizer, info)
