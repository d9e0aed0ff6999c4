"""The feed-forward neurons: what fires where, summed up as a few factors (as ecco's neuron factors).

Owns `ffn_activations` (every layer's feed-forward activations on a text: the GELU output of each
layer's intermediate dense layer, 4H neurons a layer: BERT's `intermediate`, ALBERT's `activation`,
read in the order the layers run, so that ALBERT's shared layers, one module L times, give L rows) and `neuron_factors` with its result
`NeuronFactors`: a non-negative matrix factorisation (Lee & Seung 2001, multiplicative updates on
the Frobenius loss) of the tokens x neurons activations of the layers picked into k factors. Each
factor is a group of neurons that fire together and the tokens they fire on; on a trained model
they tend to pick out positions, punctuation, the start of the text, or words of one kind.

GELU can be slightly negative (down to -0.17); those values are set to 0 before factorising, as
ecco does (NMF needs a non-negative matrix). [CLS] and [SEP] fire far more than the words and can
fill every factor, so they are left out unless asked for.

Imports torch, bertlab.errors and bertlab.interpret.targets (the model as a Subject, and its private copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bertlab.errors import InputError
from bertlab.interpret.targets import as_subject, private_copy

MAX_FACTORS = 12
ITERATIONS = 300
SPECIAL = ("[CLS]", "[SEP]")  # what is special where the activations do not say (`Activations.special`)


@dataclass(frozen=True)
class Activations:
    """A text's feed-forward activations: `values[l]` is (T, F) for layer l+1 (layers counted from 1);
    `pieces`, the T tokens as a page draws them (`readable_tokens`: RoBERTa's 'Ġcat' reads '␣cat');
    `special`, which tokens the tokenizer added (BERT's [CLS] and [SEP], RoBERTa's <s> and </s>); empty:
    those named in SPECIAL."""

    tokens: tuple[str, ...]
    values: torch.Tensor  # (L, T, F) float32
    pieces: tuple[str, ...]
    special: tuple[bool, ...] = ()

    @property
    def num_layers(self) -> int:
        return self.values.shape[0]


@dataclass(frozen=True)
class NeuronFactors:
    """k factors of the activations of `layers` (counted from 1) over `tokens` (the ones factorised;
    `pieces`, the same as a page draws them).

    `strength[f, t]` is factor f at token t, each factor scaled to its largest (0..1); `neurons[f]`
    the (up to five) neurons that load most on it as (layer, neuron, share of the factor's loading,
    at least 1%); `fit` the
    share of the activations the k factors reproduce (1 - |V - WH| / |V|, Frobenius)."""

    tokens: tuple[str, ...]
    pieces: tuple[str, ...]
    positions: tuple[int, ...]  # of `tokens` in the whole input
    layers: tuple[int, ...]
    strength: torch.Tensor  # (k, T)
    neurons: tuple[tuple[tuple[int, int, float], ...], ...]
    fit: float

    def strongest(self, factor: int, top: int = 3, floor: float = 0.1) -> list[str]:
        """The tokens where a factor is strongest, as drawn (`pieces`), strongest first (each once; none under
        `floor` of its peak)."""
        order = torch.argsort(self.strength[factor], descending=True).tolist()
        seen: list[str] = []
        for t in order:
            if self.strength[factor, t] < floor:
                break
            if self.pieces[t] not in seen:
                seen.append(self.pieces[t])
            if len(seen) == top:
                break
        return seen


@torch.inference_mode()
def ffn_activations(model, text: str, text_b: str | None = None) -> Activations:
    """Every layer's feed-forward activations on `text` (and `text_b`), as the model reads them."""
    subject = as_subject(model, gradients=False)
    if not isinstance(text, str) or not text.strip():
        raise InputError("type a text")
    enc = subject.tokenizer.encode(text, text_b, max_length=subject.max_length)
    ids = torch.tensor([enc.ids], device=subject.device)
    types = torch.tensor([enc.type_ids], device=subject.device)
    encoder = private_copy(subject.module).bert  # hooks on our own copy: the app's model serves other sessions
    layers = encoder.encoder.layer
    caught: list[torch.Tensor] = []  # one (T, 4H) per call, in the order the layers run

    def keep(_module, _inputs, output):
        caught.append(output[0].float().cpu())

    # each module hooked once: a module shared by several layers (ALBERT) fires once per layer it serves
    blocks = {id(b): b for b in (_neurons_of(layer) for layer in layers)}
    for block in blocks.values():
        block.register_forward_hook(keep)
    encoder(input_ids=ids, token_type_ids=types, attention_mask=torch.ones_like(ids))
    if len(caught) != len(layers):
        raise RuntimeError(f"the feed-forward activations were read {len(caught)} times for {len(layers)} layers")
    pieces = tuple(subject.tokenizer.readable_tokens(enc.tokens))
    return Activations(tuple(enc.tokens), torch.stack(caught), pieces, tuple(s is None for s in enc.sequence_ids))


def _neurons_of(layer: torch.nn.Module) -> torch.nn.Module:
    """The module whose output is a layer's feed-forward activations: BERT's (and every family built on
    BertLayer's) `intermediate`, dense + GELU; ALBERT's `activation`, the GELU after its `ffn`."""
    block = getattr(layer, "intermediate", None)
    block = getattr(layer, "activation", None) if block is None else block
    if block is None:
        raise InputError(f"{type(layer).__name__} has no feed-forward activations to read (no intermediate layer)")
    return block


def _nmf(v: torch.Tensor, k: int, seed: int, iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """W (n, k), H (k, m) >= 0 with V ~ WH (multiplicative updates, Frobenius loss), from a seeded start."""
    g = torch.Generator().manual_seed(seed)
    scale = (v.mean() / k).sqrt().clamp_min(1e-6)
    w = torch.rand(v.shape[0], k, generator=g, dtype=v.dtype) * scale
    h = torch.rand(k, v.shape[1], generator=g, dtype=v.dtype) * scale
    eps = 1e-10
    for _ in range(iterations):
        h *= (w.T @ v) / (w.T @ w @ h + eps)
        w *= (v @ h.T) / (w @ (h @ h.T) + eps)
    return w, h


def neuron_factors(
    acts: Activations,
    k: int = 6,
    layers: Sequence[int] | None = None,
    special: bool = False,
    seed: int = 0,
    iterations: int = ITERATIONS,
) -> NeuronFactors:
    """Factorise the activations of `layers` (counted from 1; default all) into `k` factors.

    `special` keeps the tokens the tokenizer added ([CLS] and [SEP], RoBERTa's <s> and </s>) in.
    InputError: k out of 1..MAX_FACTORS, a layer the model lacks, fewer tokens than factors, or
    activations that are all zero."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_FACTORS:
        raise InputError(f"the number of factors must be a whole number from 1 to {MAX_FACTORS}, got {k!r}")
    picked = tuple(range(1, acts.num_layers + 1)) if layers is None else tuple(sorted(set(layers)))
    if not picked or any(not (isinstance(x, int) and 1 <= x <= acts.num_layers) for x in picked):
        raise InputError(f"layers are counted from 1 to {acts.num_layers}; got {list(layers or [])}")
    added = acts.special or tuple(tok in SPECIAL for tok in acts.tokens)
    positions = tuple(t for t in range(len(acts.tokens)) if special or not added[t])
    if len(positions) < k:
        raise InputError(f"{len(positions)} tokens to factorise into {k} factors: use fewer factors or a longer text")
    v = torch.cat([acts.values[layer - 1][list(positions)] for layer in picked], 1).clamp_min(0).double()
    total = v.norm()
    if total == 0:
        raise InputError("every activation is zero here: nothing to factorise")
    w, h = _nmf(v, k, seed, iterations)
    fit = float(1 - (v - w @ h).norm() / total)
    # order the factors by how much of the activation they carry, largest first
    weight = (w.sum(0) * h.sum(1)).argsort(descending=True)
    w, h = w[:, weight], h[weight]
    strength = (w / w.max(0).values.clamp_min(1e-12)).T.float()  # (k, T), each factor's peak = 1
    width = acts.values.shape[2]
    neurons = []
    for f in range(k):
        share = h[f] / h[f].sum().clamp_min(1e-12)
        top = [
            i for i in torch.argsort(share, descending=True)[:5].tolist() if share[i] >= 0.01
        ]  # none that barely load
        neurons.append(tuple((picked[i // width], i % width, float(share[i])) for i in top))
    return NeuronFactors(
        tokens=tuple(acts.tokens[t] for t in positions),
        pieces=tuple(acts.pieces[t] for t in positions),
        positions=positions,
        layers=picked,
        strength=strength,
        neurons=tuple(neurons),
        fit=fit,
    )
