"""Attention rollout and attention flow (Abnar & Zuidema 2020), beside the raw attention.

Owns `attention_rollout`, `attention_flow` (plain functions of an (L, A, T, T) attention array)
and `attention_maps`, which runs a model (pretrained or fine-tuned) once and returns all three
for one input.

Both methods average the heads of a layer and add the residual connection as half of the
attention, A' = 0.5 A + 0.5 I (rows renormalised):
- rollout multiplies A'_L ... A'_1: how much of each input token reaches each output token if
  attention were the only way information moves;
- flow treats A'_l as capacities of a layered graph and takes the maximum flow from each input
  token to one output token. Flow runs one max-flow per input token; `MAX_FLOW_EDGES` keeps it
  to interactive time (about a second at 4 layers x 31 tokens on one core).

Imports numpy, networkx (a dependency of torch), torch, bertlab.data.batching, bertlab.errors,
bertlab.inference (a pretrained model reads through its own `inspect`) and
bertlab.interpret.targets (any other model, as a `Subject`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError, is_whole_number
from bertlab.inference import LoadedModel
from bertlab.interpret.targets import as_subject

RESIDUAL = 0.5  # Abnar & Zuidema's weight of the identity (the residual connection)
MAX_ROLLOUT_TOKENS = 1_024  # rollout's T x T products; a long windowed model reads 4,096 (bertlab.patterns)
MAX_FLOW_EDGES = 4_000  # L x T x T edges (about 1 s on one core); over this attention_maps skips flow and says why


def _check(attentions: np.ndarray) -> np.ndarray:
    att = np.asarray(attentions, dtype=np.float64)
    if att.ndim != 4 or att.shape[-1] != att.shape[-2]:
        raise InputError(f"attentions must be (L, A, T, T) with rows summing to 1; got shape {att.shape}")
    return att


def _check_residual(residual: float) -> float:
    if isinstance(residual, bool) or not isinstance(residual, int | float | np.floating) or not 0 <= residual <= 1:
        raise InputError(
            f"residual must be a number between 0 and 1 (the identity's share of each layer's attention; "
            f"{RESIDUAL} as Abnar & Zuidema), got {residual!r}"
        )
    return float(residual)


def with_residual(attentions: np.ndarray, residual: float = RESIDUAL) -> np.ndarray:
    """(L, T, T): each layer's heads averaged, then `residual` x I added and rows renormalised.

    Heads switched off (rows of zeros) are left out of the average.

    Raises:
        InputError: attentions not (L, A, T, T), or `residual` outside 0..1.
    """
    residual = _check_residual(residual)
    att = _check(attentions)
    live = att.sum(-1, keepdims=True) > 0.5  # (L, A, T, 1)
    count = live.sum(1)  # (L, T, 1)
    mean = np.where(count > 0, att.sum(1) / np.maximum(count, 1), 0.0)  # (L, T, T)
    T = att.shape[-1]
    mixed = (1 - residual) * mean + residual * np.eye(T)[None]
    return mixed / mixed.sum(-1, keepdims=True)


def _check_position(position: int, T: int) -> int:
    """The output token `position` as an int, once it is one of the T tokens."""
    if not is_whole_number(position):
        raise InputError(f"position must be a whole number, a token's index (0 = [CLS]), got {position!r}")
    if not 0 <= position < T:
        raise InputError(f"position {position} is outside the {T} tokens; pick one of 0..{T - 1} (0 = [CLS])")
    return int(position)


def attention_rollout(attentions: np.ndarray, residual: float = RESIDUAL) -> np.ndarray:
    """(L, T, T): row i of layer l's map is how much of each input token reaches token i after layer l.

    Args:
        attentions: (L, A, T, T) attention probabilities (rows sum to 1; 0 for heads switched off).
    """
    mixed = with_residual(attentions, residual)
    out = np.empty_like(mixed)
    acc = np.eye(mixed.shape[-1])
    for layer, a in enumerate(mixed):
        acc = a @ acc  # (T, T): layer l mixes the rows of what came before
        out[layer] = acc
    return out


def attention_flow(attentions: np.ndarray, position: int = 0, residual: float = RESIDUAL) -> np.ndarray:
    """(T,) the maximum flow from each input token to token `position` of the last layer.

    Args:
        attentions: (L, A, T, T) attention probabilities.
        position: the output token (default 0, [CLS]).
    """
    mixed = with_residual(attentions, residual)
    L, T, _ = mixed.shape
    position = _check_position(position, T)
    graph = nx.DiGraph()
    for layer in range(L):
        for i in range(T):
            for j in range(T):
                # node (layer, j) feeds (layer + 1, i) with capacity A'[i, j]; node 0 layer = inputs
                graph.add_edge((layer, j), (layer + 1, i), capacity=float(mixed[layer, i, j]))
    sink = (L, position)
    return np.array([nx.maximum_flow_value(graph, (0, j), sink) for j in range(T)])


@dataclass
class AttentionMaps:
    """Raw attention, rollout and flow for one input.

    Attributes:
        tokens: the T tokens the model read.
        pieces: the same T tokens as a page draws them (`readable_tokens`: RoBERTa's 'Ġmat' reads '␣mat').
        raw: (L, T, T) the heads of each layer averaged (no residual).
        rollout: (L, T, T) cumulative rollout after each layer.
        flow: (T,) flow from each input token to `flow_position` at the last layer, or None when
            the input is too big for interactive time (`flow_note` says why).
    """

    tokens: list[str]
    pieces: list[str]
    raw: np.ndarray
    rollout: np.ndarray
    flow: np.ndarray | None
    flow_position: int
    flow_seconds: float
    flow_note: str = ""


def _check_length(T: int) -> None:
    """Rollout multiplies every layer's T x T map: a long model's 4,096 tokens would need 64 MiB a map."""
    if T > MAX_ROLLOUT_TOKENS:
        raise InputError(
            f"attention rollout multiplies every layer's full {T:,} x {T:,} map; it reads up to "
            f"{MAX_ROLLOUT_TOKENS:,} tokens: shorten the text (the Attention page draws a long text's pattern)"
        )


def _attentions(
    model, text: str, text_b: str | None, head_mask: torch.Tensor | None
) -> tuple[list[str], list[str], np.ndarray]:
    """The tokens, the same as drawn, and (L, A, T, T) attention of one input, for a `LoadedModel` (its
    `inspect`) or a fine-tuned model (its encoder, read without gradients: a frozen encoder is fine here)."""
    if isinstance(model, LoadedModel):
        model._check_text(text)
        _check_length(len(model.tokenizer.encode(text, text_b, max_length=model.max_length)))
        ins = model.inspect(text, text_b, head_mask=head_mask)
        return ins.tokens, model.tokenizer.readable_tokens(ins.tokens), ins.attentions
    subject = as_subject(model, gradients=False)
    for value, what in ((text, "text"), (text_b, "text_b")):
        if value is None and what == "text_b":
            continue
        if not isinstance(value, str):
            raise InputError(f"{what} must be a string, got {type(value).__name__}")
        if not value.strip():
            raise InputError(f"{what} is empty; type a sentence")
    hm = None
    if head_mask is not None:
        hm = torch.as_tensor(head_mask)
        expected = (subject.num_layers, subject.num_heads)
        if tuple(hm.shape) != expected:
            raise InputError(
                f"head_mask has shape {tuple(hm.shape)}; this model needs {expected} (layers, heads), 1 = keep, 0 = off"
            )
        hm = hm.to(device=subject.device, dtype=next(subject.module.parameters()).dtype)
    tok = subject.tokenizer
    e = tok.encode(text, text_b, max_length=subject.max_length)
    _check_length(len(e))
    batch = {k: v.to(subject.device) for k, v in pad_batch([e.ids], tok.pad_id, [e.type_ids]).items()}
    # as LoadedModel.inspect: no gradients and the model's own precision, whatever the caller has on
    with torch.inference_mode(), torch.autocast(subject.device.type, enabled=False):
        enc = subject.module.bert(**batch, head_mask=hm, output_attentions=True)
    att = torch.stack(enc.attentions, 0)[:, 0].float().cpu().numpy()  # (L, A, T, T)
    return e.tokens, tok.readable_tokens(e.tokens), att


def attention_maps(
    model,
    text: str,
    text_b: str | None = None,
    flow: bool = True,
    position: int = 0,
    head_mask: torch.Tensor | None = None,
    max_flow_edges: int = MAX_FLOW_EDGES,
) -> AttentionMaps:
    """Run a model on one input and return its raw attention, rollout and (if small enough) flow.

    Args:
        model: a `LoadedModel`, a `FinetunedModel` (its encoder's attention) or a `Subject`.
        position: the token (0 = [CLS]) the flow goes into, and whose row the flow figure shows.

    Raises:
        InputError: empty text, a head mask of the wrong shape, or `position` not a token of the input.
    """
    tokens, pieces, att = _attentions(model, text, text_b, head_mask)  # att: (L, A, T, T)
    L, A, T, _ = att.shape
    position = _check_position(position, T)
    live = att.sum(-1, keepdims=True) > 0.5
    raw = (att.sum(1) / np.maximum(live.sum(1), 1)).astype(np.float64)  # (L, T, T)
    flows, seconds, note = None, 0.0, ""
    if flow:
        edges = L * T * T
        if edges > max_flow_edges:
            note = (
                f"flow skipped: {T} tokens x {L} layers is {edges:,} edges, over the {max_flow_edges:,} that run "
                "in interactive time; shorten the text to see it"
            )
        else:
            started = time.perf_counter()
            flows = attention_flow(att, position)
            seconds = time.perf_counter() - started
    return AttentionMaps(tokens, pieces, raw, attention_rollout(att), flows, position, seconds, note)
