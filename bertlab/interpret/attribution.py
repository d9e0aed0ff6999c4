"""Why it answered: token attributions by gradient x input and integrated gradients.

Owns `attribute` and its result `Attribution`. Both methods come from Captum (the library that
PyTorch's own team keeps), applied at the word-embedding layer, so positions and segments stay
as they are and only the words are explained:
- gradient x input: d p / d e_t . e_t, summed over the hidden size, for every token t;
- integrated gradients (Sundararajan et al. 2017): the same along the straight path from a
  baseline (every word replaced by [PAD]; [CLS], [SEP] and [MASK] kept) to the input. Its scores
  sum to p(input) - p(baseline) ("completeness"); the gap is Captum's convergence delta. When it
  is more than `tolerance` of that difference, the steps are doubled, up to `MAX_IG_STEPS`.

Captum hooks the embedding layer while it runs, so it runs on `targets.private_copy` of the model
(weights shared, needing no gradient), never on the model itself, which the app shares between sessions and
threads: another user's fill-mask must not read Captum's interpolated embeddings, nor Captum theirs.

Imports torch, numpy, captum, bertlab.errors and bertlab.interpret.targets.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

from bertlab.errors import InputError
from bertlab.interpret.targets import (
    Prepared,
    Subject,
    Target,
    as_subject,
    default_target,
    gradients_through,
    prepare,
    private_copy,
    target_probability,
    whole_number,
)

log = logging.getLogger(__name__)

MAX_IG_STEPS = 256  # per input: every step is one forward and backward pass
IG_BATCH_TOKENS = 32_768  # tokens in one batched forward and backward (memory grows with steps x length)
MAX_TEXTS = 8  # per call from the app; the package takes more when asked (max_texts)
DEFAULT_TOLERANCE = 0.05  # |delta| as a share of |p(input) - p(baseline)|


@dataclass
class Attribution:
    """Token scores for one input and one prediction.

    Attributes:
        tokens: the T tokens the model read.
        pieces: the same T tokens as a page draws them (`readable_tokens`: RoBERTa's 'Ġmat' reads '␣mat').
        target: what is explained, e.g. "P('paris' at [MASK] #1)".
        prediction / baseline_prediction: the explained number for the input and for the baseline.
        gradient_x_input: (T,) float64, gradient x word embedding per token.
        integrated_gradients: (T,) float64; sums to prediction - baseline_prediction (+ delta).
        steps: the interpolation steps integrated gradients used.
        delta: Captum's convergence delta, sum(integrated_gradients) - (prediction - baseline_prediction).
        converged: |delta| <= tolerance x |prediction - baseline_prediction| (or below 1e-4).
    """

    text: str
    text_b: str | None
    tokens: list[str]
    pieces: list[str]
    target: str
    prediction: float
    baseline_prediction: float
    gradient_x_input: np.ndarray
    integrated_gradients: np.ndarray
    steps: int
    delta: float
    converged: bool
    truncated: bool = False

    @property
    def difference(self) -> float:
        """prediction - baseline_prediction: what integrated gradients' scores add up to."""
        return self.prediction - self.baseline_prediction

    def rows(self) -> list[dict]:
        """One dict per token (position, token as drawn, both scores), for a table."""
        return [
            {"position": i, "token": t, "integrated gradients": float(ig), "gradient × input": float(gx)}
            for i, (t, ig, gx) in enumerate(
                zip(self.pieces, self.integrated_gradients, self.gradient_x_input, strict=True)
            )
        ]


def baseline_ids(subject: Subject, input_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) the input with every word replaced by [PAD]; [CLS], [SEP], [MASK] and padding kept."""
    tok = subject.tokenizer
    keep = torch.zeros_like(input_ids, dtype=torch.bool)
    for special in (tok.cls_id, tok.sep_id, tok.mask_id, tok.pad_id):
        keep |= input_ids == special
    return torch.where(keep, input_ids, torch.full_like(input_ids, tok.pad_id))


def _converged(delta: float, difference: float, tolerance: float) -> bool:
    return abs(delta) <= max(tolerance * abs(difference), 1e-4)


def attribute(
    model,
    text: str | Sequence[str],
    text_b: str | Sequence[str | None] | None = None,
    target: Target | None = None,
    steps: int = 32,
    max_steps: int = MAX_IG_STEPS,
    tolerance: float = DEFAULT_TOLERANCE,
    max_texts: int | None = None,
) -> Attribution | list[Attribution]:
    """Attribute a prediction to the input tokens, for one text or a list of texts.

    Args:
        model: a `LoadedModel`, a `FinetunedModel` or a `Subject`.
        text_b: the second sentence (NSP, pair tasks, QA context), or a list of them.
        target: what to explain (`MaskedWord`, `IsNext`, `InOrder`, `TaskLabel`, `AnswerSpan`); None picks the
            model's main prediction (the first [MASK], NSP for a pair, the label, the answer start).
        steps: integrated-gradients steps to start with; doubled until converged, up to `max_steps`.
        tolerance: the completeness gap allowed, as a share of prediction - baseline.
        max_texts: refuse more texts than this (the app passes `MAX_TEXTS`).

    Raises:
        InputError: bad text or target (a string `text` takes a string `text_b`; a list takes a list
            of the same length), too many texts, or steps not a whole number in 1..max_steps.
    """
    subject = as_subject(model)
    single = isinstance(text, str)
    texts, texts_b = _paired_texts(text, text_b)
    max_steps = whole_number(max_steps, "max_steps", 1)
    steps = whole_number(steps, "steps", 1, max_steps)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not tolerance >= 0:
        raise InputError(f"tolerance must be a number >= 0 (a share of prediction - baseline), got {tolerance!r}")
    if max_texts is not None and len(texts) > whole_number(max_texts, "max_texts", 1):
        raise InputError(f"{len(texts)} texts; at most {max_texts} are explained at once (each needs {steps}+ passes)")
    if target is None:
        target = default_target(subject, texts_b[0] if texts_b else None)
    subject = replace(subject, module=private_copy(subject.module))  # Captum's hooks go on this copy only
    prep = prepare(subject, texts, texts_b, target)
    layer = subject.module.bert.embeddings.word_embeddings

    def forward(input_ids, token_type_ids, attention_mask, positions, classes):
        return target_probability(subject, target, input_ids, token_type_ids, attention_mask, positions, classes)

    with gradients_through(subject.module):
        with torch.no_grad():
            p_input = forward(prep.input_ids, *prep.forward_args).double().cpu().numpy()
            base = baseline_ids(subject, prep.input_ids)
            p_base = forward(base, *prep.forward_args).double().cpu().numpy()
        gxi = LayerGradientXActivation(forward, layer).attribute(
            prep.input_ids, additional_forward_args=prep.forward_args
        )  # (B, T, H)
        gxi = gxi.sum(-1).detach().double().cpu().numpy()  # (B, T)
        ig, delta, used = _integrated_gradients(
            forward, layer, prep, base, p_input - p_base, steps, max_steps, tolerance
        )
    results = []
    for i, tokens in enumerate(prep.tokens):
        T = len(tokens)
        results.append(
            Attribution(
                text=texts[i],
                text_b=texts_b[i] if texts_b else None,
                tokens=tokens,
                pieces=subject.tokenizer.readable_tokens(tokens),
                target=prep.names[i],
                prediction=float(p_input[i]),
                baseline_prediction=float(p_base[i]),
                gradient_x_input=gxi[i, :T],
                integrated_gradients=ig[i, :T],
                steps=used[i],
                delta=float(delta[i]),
                converged=_converged(float(delta[i]), float(p_input[i] - p_base[i]), tolerance),
                truncated=prep.truncated[i],
            )
        )
    return results[0] if single else results


def _paired_texts(
    text: str | Sequence[str], text_b: str | Sequence[str | None] | None
) -> tuple[list[str], list[str | None] | None]:
    """The texts and their second texts as lists: one string with one string (or None), or a list
    with a list of the same length (or None). A string is never split into characters."""
    if isinstance(text, str):
        if text_b is not None and not isinstance(text_b, str):
            raise InputError(
                f"text is one string, so text_b must be one string (or None), got {type(text_b).__name__}; "
                "to explain several pairs, give text as a list too"
            )
        return [text], [text_b]
    if not isinstance(text, Sequence):
        raise InputError(f"text must be a string or a list of strings, got {type(text).__name__}")
    texts = list(text)
    if text_b is None:
        return texts, None
    if isinstance(text_b, str) or not isinstance(text_b, Sequence):
        raise InputError(
            f"text is a list of {len(texts)}, so text_b must be a list of {len(texts)} second texts (None where a "
            f"text has none), got {type(text_b).__name__}; repeat a shared second text once per text"
        )
    if len(text_b) != len(texts):
        raise InputError(f"{len(texts)} texts but {len(text_b)} second texts; give one second text per text")
    return texts, list(text_b)


def _integrated_gradients(
    forward,
    layer: torch.nn.Module,
    prep: Prepared,
    base: torch.Tensor,
    difference: np.ndarray,
    steps: int,
    max_steps: int,
    tolerance: float,
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(B, T) scores, (B,) deltas and the steps each row used; rows not yet converged are run
    again with twice the steps."""
    B, T = prep.input_ids.shape
    ig = np.zeros((B, T))
    delta = np.zeros(B)
    used = [0] * B
    todo = list(range(B))
    method = LayerIntegratedGradients(forward, layer)
    n = steps
    while todo:
        rows = torch.tensor(todo, device=prep.input_ids.device)
        attributions, d = method.attribute(
            prep.input_ids[rows],
            baselines=base[rows],
            additional_forward_args=tuple(a[rows] for a in prep.forward_args),
            n_steps=n,
            # at most IG_BATCH_TOKENS tokens per pass (256 steps of 128 tokens): a 4,096-token input runs 8 at a time
            internal_batch_size=max(1, IG_BATCH_TOKENS // (T * len(todo))) * len(todo),
            return_convergence_delta=True,
        )
        scores = attributions.sum(-1).detach().double().cpu().numpy()  # (len(todo), T)
        d = d.detach().double().cpu().numpy()
        left = []
        for k, i in enumerate(todo):
            ig[i], delta[i], used[i] = scores[k], d[k], n
            if not _converged(d[k], difference[i], tolerance) and n * 2 <= max_steps:
                left.append(i)
        if left:
            log.info("integrated gradients: %d of %d rows not converged at %d steps; trying %d", len(left), B, n, 2 * n)
        todo, n = left, n * 2
    return ig, delta, used


def shading(scores: np.ndarray) -> np.ndarray:
    """Scores scaled to [-1, 1] by the largest magnitude (all zeros stay zeros), for colouring tokens."""
    scores = np.asarray(scores, dtype=np.float64)
    top = float(np.abs(scores).max()) if scores.size else 0.0
    return scores / top if top > 0 and math.isfinite(top) else np.zeros_like(scores)
