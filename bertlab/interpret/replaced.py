"""Replaced-token detection: which tokens an ELECTRA discriminator thinks were replaced (Clark et al. 2020).

Owns: P(replaced) for every token of a sentence as the discriminator reads it (`detect_replaced`), and
the corruption it was trained to see through (`corrupt_and_detect`): a random 15% of the tokens are
masked, the generator fills each with a token sampled from its softmax, as in training (not its top
answer), and the discriminator judges the result. A sampled token equal to the original is not a
replacement, as in ELECTRA's labels.

A discriminator is a `LoadedModel` with the "rtd" head: a discriminator folder, or a pair folder's
`halves["discriminator"]`; the generator, one with the "mlm" head from the same pair (the same
vocabulary). Imports numpy, torch, bertlab.errors, bertlab.inference and bertlab.tokenizer; never streamlit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from bertlab.errors import InputError, is_whole_number
from bertlab.inference import MAX_TEXT_CHARS, LoadedModel
from bertlab.tokenizer import Encoding

MASK_PROB = 0.15  # ELECTRA masks 15% of the tokens for its generator (the paper's §3.1 setting)


@dataclass
class ReplacedTokens:
    """What the discriminator read and what it says about every token.

    Attributes:
        tokens: (T) the tokens the discriminator read, specials included.
        original_tokens: (T) the tokens of the sentence as typed (equal to `tokens` when nothing
            was corrupted).
        p_replaced: (T,) float32, the discriminator's P(replaced) at every position (0 at specials,
            which it is never asked about).
        masked: (T,) bool, the positions the generator filled (all False for a typed sentence).
        replaced: (T,) bool, the positions whose token the generator changed.
        special: (T,) bool, [CLS]/[SEP] (or <s>/</s>) positions.
        text: the sentence as typed; `read_text`, what the discriminator read, decoded.
        truncated: the sentence was cut to fit the model.
    """

    text: str
    read_text: str
    tokens: list[str]
    original_tokens: list[str]
    p_replaced: np.ndarray
    masked: np.ndarray
    replaced: np.ndarray
    special: np.ndarray
    truncated: bool = False

    @property
    def flagged(self) -> np.ndarray:
        """(T,) bool: the tokens the discriminator calls replaced (P >= 0.5)."""
        return (self.p_replaced >= 0.5) & ~self.special

    @property
    def accuracy(self) -> float | None:
        """The share of the sentence's tokens the discriminator labels right (replaced or not), as
        ELECTRA's discriminator accuracy counts them; None when nothing was corrupted (no truth to score)."""
        if not self.masked.any():
            return None
        scored = ~self.special
        return float((self.flagged == self.replaced)[scored].mean())


def _check_discriminator(lm: LoadedModel) -> None:
    if "rtd" not in lm.heads:
        raise InputError(
            f"{lm.path or 'this model'} has no replaced-token detection head (it has "
            f"{', '.join(lm.heads) or 'no pretraining head'}); open an ELECTRA discriminator, "
            "or a pair folder's discriminator/ half"
        )


def _judge(lm: LoadedModel, ids: list[int], type_ids: list[int]) -> np.ndarray:
    """(T,) float32 P(replaced) for one row of ids."""
    input_ids = torch.tensor([ids], device=lm.device)
    types = torch.tensor([type_ids], device=lm.device)
    with torch.inference_mode(), torch.autocast(lm.device.type, enabled=False):
        logits = lm.model(input_ids, types, torch.ones_like(input_ids)).rtd_logits  # (1, T)
    return logits[0].float().sigmoid().cpu().numpy()


def _result(lm: LoadedModel, text: str, enc: Encoding, read_ids: list[int], masked: np.ndarray) -> ReplacedTokens:
    """What the discriminator says about `read_ids` (the typed ids, or the generator's corruption of them)."""
    special = np.array([s is None for s in enc.sequence_ids], dtype=bool)
    p = _judge(lm, read_ids, enc.type_ids)
    p[special] = 0.0
    return ReplacedTokens(
        text=text,
        read_text=lm.tokenizer.decode(read_ids),
        tokens=lm.tokenizer.convert_ids_to_tokens(read_ids),
        original_tokens=list(enc.tokens),
        p_replaced=p,
        masked=masked,
        replaced=np.array([a != b for a, b in zip(read_ids, enc.ids, strict=True)], dtype=bool),
        special=special,
        truncated=enc.truncated,
    )


def _encode(lm: LoadedModel, text: str) -> Encoding:
    if not isinstance(text, str):
        raise InputError(f"the sentence must be a string, got {type(text).__name__}")
    if not text.strip():
        raise InputError("the sentence is empty; type a sentence")
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(f"the sentence has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} are read: shorten it")
    return lm.tokenizer.encode(text, max_length=lm.max_length)


def detect_replaced(discriminator: LoadedModel, text: str) -> ReplacedTokens:
    """P(replaced) for every token of `text` as typed: a word that does not fit should score high.

    Raises:
        InputError: the model has no replaced-token head, or the text is empty.
    """
    _check_discriminator(discriminator)
    enc = _encode(discriminator, text)
    return _result(discriminator, text, enc, list(enc.ids), np.zeros(len(enc.ids), dtype=bool))


def corrupt_and_detect(
    generator: LoadedModel, discriminator: LoadedModel, text: str, mask_prob: float = MASK_PROB, seed: int = 0
) -> ReplacedTokens:
    """Corrupt `text` as ELECTRA's training does, then ask the discriminator which tokens were replaced.

    Args:
        generator: the masked LM of the same pair (the same vocabulary as `discriminator`).
        mask_prob: the share of the sentence's tokens masked (at least one).
        seed: which positions are masked and which tokens are sampled (the same seed, the same corruption).

    Raises:
        InputError: a model without the head it needs, vocabularies that differ, an empty text,
            or a `mask_prob` outside (0, 1].
    """
    _check_discriminator(discriminator)
    if "mlm" not in generator.heads:
        raise InputError(
            f"{generator.path or 'the generator'} has no masked-LM head to corrupt the sentence with; "
            "open the pair folder (its generator/ half fills the masks)"
        )
    if generator.tokenizer.vocab != discriminator.tokenizer.vocab:
        raise InputError(
            "the generator and the discriminator have different vocabularies; use the two halves of one pair folder"
        )
    if not isinstance(mask_prob, int | float) or not 0 < mask_prob <= 1:
        raise InputError(f"mask_prob must be a share of the tokens above 0 and at most 1, got {mask_prob!r}")
    if not is_whole_number(seed):
        raise InputError(f"seed must be a whole number, got {seed!r}")
    enc = _encode(discriminator, text)
    words = [i for i, s in enumerate(enc.sequence_ids) if s is not None]
    rng = random.Random(seed)
    chosen = sorted(rng.sample(words, max(1, round(mask_prob * len(words)))))
    masked_ids = list(enc.ids)
    for p in chosen:
        masked_ids[p] = generator.tokenizer.mask_id
    input_ids = torch.tensor([masked_ids], device=generator.device)
    select = torch.zeros_like(input_ids, dtype=torch.bool)
    select[0, chosen] = True
    with torch.inference_mode(), torch.autocast(generator.device.type, enabled=False):
        types = torch.tensor([enc.type_ids], device=generator.device)
        logits = generator.model(input_ids, types, torch.ones_like(input_ids), mlm_positions=select).mlm_logits
        draw = torch.Generator(device="cpu").manual_seed(int(seed))
        samples = torch.multinomial(logits.float().softmax(-1).cpu(), 1, generator=draw)[:, 0]  # (len(chosen),)
    read_ids = list(enc.ids)
    for p, token_id in zip(chosen, samples.tolist(), strict=True):
        read_ids[p] = int(token_id)
    masked = np.zeros(len(enc.ids), dtype=bool)
    masked[chosen] = True
    return _result(discriminator, text, enc, read_ids, masked)
