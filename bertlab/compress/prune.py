"""`bertlab compress prune`: heads removed (structured) or weights zeroed (unstructured), measured.

- Heads (`--heads FRACTION`): the least important heads first, by Michel et al.'s gradient importance
  on a few sentences (bertlab.interpret.heads) or in an order given; never a layer's last head. The
  heads' rows leave query/key/value and their columns leave the attention output projection: smaller
  matrices, not a mask. Layers then hold different numbers of heads, written as transformers 4 wrote
  it, `pruned_heads` in config.json (BertConfig.pruned_heads; bertlab.model builds such layers).
  transformers 5 dropped head pruning, so there such a folder is refused on its smaller shapes.
  A pruned model computes what the unpruned one does with those heads masked off (tests hold it).
  BERT folders only (the weight names and the head gates are BERT's); any family takes --sparsity.
- Sparsity (`--sparsity FRACTION`): in every Linear weight (the tied masked-LM decoder, which is the
  word embeddings, aside) that share of the smallest-magnitude entries set to zero. The folder stays
  dense (same size on disk, same speed on dense kernels); the record states the sparsity reached.

The folder keeps the source's stored dtype (fp16 for the shipped model: lossless, as the float32
model held its fp16 values).

Imports torch, bertlab.compress.measure, bertlab.errors, bertlab.inference, bertlab.interpret.heads,
bertlab.models.registry and bertlab.storage.checkpoint.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from bertlab.compress.measure import (
    RECORD_FILE,
    CompressionRecord,
    check_output_folder,
    measure,
    read_held_out,
    source_weights_bytes,
    stored_dtype,
    weights_bytes,
)
from bertlab.errors import InputError
from bertlab.inference import LoadedModel, load_model
from bertlab.interpret.heads import MaskedSentences, head_importance
from bertlab.models.registry import build_model
from bertlab.storage.checkpoint import export_state_dict, load_state, save_checkpoint

log = logging.getLogger(__name__)

Head = tuple[int, int]  # (layer, head), the unpruned numbering
KEEP_DENSE = ("cls.predictions.decoder",)  # the word embeddings, tied: not a Linear weight of its own
STORED = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# what the importance is measured on when no held-out file is given: plain sentences, a few of each kind
IMPORTANCE_SENTENCES = (
    "The capital of France is Paris.",
    "She went to the store to buy some milk and bread.",
    "The cat sat on the mat and looked out of the window.",
    "He played football with his friends after school.",
    "The river flows through the city and into the sea.",
    "They were married in a small church near the village.",
    "The book was written by a famous author in the nineteenth century.",
    "It rained all day, so we stayed at home and read.",
)


def _share(value: float, flag: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InputError(f"{flag} must be a share above 0 and below 1 ({what}), got {value!r}")
    return float(value)


def parse_order(text: str) -> list[Head]:
    """'layer:head,layer:head,...' (least important first) as a list of (layer, head)."""
    try:
        return [(int(a), int(b)) for a, b in (item.split(":") for item in text.split(",") if item.strip())]
    except ValueError:
        raise InputError(
            f"--order {text!r}: give heads as layer:head pairs, least important first, e.g. 3:1,0:2"
        ) from None


def heads_to_prune(num_layers: int, num_heads: int, order: Sequence[Head], fraction: float) -> dict[int, list[int]]:
    """The first `fraction` of all heads in `order` (a layer's last head is skipped: never all of a layer).

    Raises:
        InputError: the fraction is not in (0, 1), asks for more heads than can go, or for none.
    """
    fraction = _share(fraction, "--heads", "of all heads to remove")
    total, most = num_layers * num_heads, num_layers * (num_heads - 1)
    wanted = round(fraction * total)
    if wanted > most:
        raise InputError(
            f"--heads {fraction} removes {wanted} of {total} heads, but each layer keeps at least one: at most "
            f"{most} ({most / total:.2f}) can go"
        )
    if wanted == 0:
        raise InputError(f"--heads {fraction} removes no head of {total}; ask for at least {1 / total:.3f}")
    chosen: dict[int, list[int]] = {}
    for layer, head in order:
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise InputError(f"head {layer}:{head} is outside {num_layers} layers of {num_heads} heads")
        gone = chosen.setdefault(layer, [])
        if head not in gone and len(gone) < num_heads - 1:
            gone.append(head)
            wanted -= 1
            if wanted == 0:
                return {layer: sorted(heads) for layer, heads in sorted(chosen.items()) if heads}
    raise InputError(f"the order names too few heads for --heads {fraction}; list more layer:head pairs")


def remove_heads(model: nn.Module, heads: dict[int, list[int]]) -> nn.Module:
    """A new model without `heads` (layer -> heads): their query/key/value rows and output-projection
    columns gone, config.pruned_heads saying so."""
    config = model.config
    if config.pruned_heads:
        raise InputError("this model's heads were pruned already; prune its unpruned source instead")
    pruned = tuple(sorted((layer, tuple(sorted(hs))) for layer, hs in heads.items() if hs))
    new_config = dataclasses.replace(config, pruned_heads=pruned)  # validates: no layer loses every head
    state = export_state_dict(model)
    size = config.head_size
    for layer, gone in pruned:
        kept = [h for h in range(config.num_heads) if h not in gone]
        rows = torch.cat([torch.arange(h * size, (h + 1) * size) for h in kept])  # (kept * head_size,)
        p = f"bert.encoder.layer.{layer}.attention."
        for name in ("self.query", "self.key", "self.value"):
            state[f"{p}{name}.weight"] = state[f"{p}{name}.weight"][rows].contiguous()  # (kept*hs, H)
            state[f"{p}{name}.bias"] = state[f"{p}{name}.bias"][rows].contiguous()
        state[f"{p}output.dense.weight"] = state[f"{p}output.dense.weight"][:, rows].contiguous()  # (H, kept*hs)
    new = build_model(new_config)
    load_state(new, state, "the pruned model")
    return new.eval()


def zero_smallest(model: nn.Module, sparsity: float) -> tuple[nn.Module, float]:
    """A copy with `sparsity` of each Linear weight's entries (smallest |w| first) set to zero, and
    the share of those weights that are zero afterwards."""
    sparsity = _share(sparsity, "--sparsity", "of each Linear weight's entries to zero")
    new = copy.deepcopy(model).eval()
    zeros = total = 0
    with torch.no_grad():
        for name, module in new.named_modules():
            if type(module) is not nn.Linear or name in KEEP_DENSE:
                continue
            flat = module.weight.view(-1)
            count = round(sparsity * flat.numel())
            flat[flat.abs().argsort()[:count]] = 0.0
            zeros += int((flat == 0).sum())
            total += flat.numel()
    return new, zeros / total


def prune(
    model: str | Path,
    out: str | Path,
    heads: float | None = None,
    sparsity: float | None = None,
    order: Sequence[Head] | None = None,
    held_out: str | Path | None = None,
    threads: Sequence[int] = (1, 2),
    repeats: int = 30,
) -> tuple[CompressionRecord, LoadedModel]:
    """Write a pruned copy of `model` to `out` with its compression.json; one of `heads`, `sparsity`.

    Returns:
        (the record, the pruned model as held in memory: what `load_model(out)` rebuilds).
    """
    if (heads is None) == (sparsity is None):
        raise InputError("give one of --heads FRACTION (remove heads) or --sparsity FRACTION (zero weights)")
    if heads is not None:
        _share(heads, "--heads", "of all heads to remove")
    else:
        _share(sparsity, "--sparsity", "of each Linear weight's entries to zero")
    out = check_output_folder(out, model)
    source = load_model(model, device="cpu")
    if source.info.get("quantization"):
        raise InputError(f"{source.path} is quantized ({source.info['quantization']}); prune its float source")
    raw = source.info.get("raw_config", {})
    stored = stored_dtype(raw)
    lines = read_held_out(held_out) if held_out is not None else None
    if heads is not None:
        if source.info.get("family") != "BERT":
            # the weight names (bert.encoder.layer.N.attention.self.*) and the head gates are BERT's
            raise InputError(f"{source.path} is a {source.info.get('family')} model; --heads prunes BERT folders only")
        config = source.config
        ranked = order or head_importance(source, MaskedSentences(list(lines or IMPORTANCE_SENTENCES))).order()
        removed = heads_to_prune(config.num_layers, config.num_heads, ranked, heads)
        new_model = remove_heads(source.model, removed)
        method, scheme = "prune-heads", f"heads {heads}"
        details = {"pruned_heads": {str(k): v for k, v in removed.items()}, "order": "given" if order else "importance"}
        details["heads_removed"] = sum(len(v) for v in removed.values())
    else:
        new_model, reached = zero_smallest(source.model, sparsity)
        method, scheme, details = "prune-sparsity", f"sparsity {sparsity}", {"sparsity": round(reached, 4)}
    # measured after pruning, so that a refused request (every head of a layer) fails at once
    before = measure(source, source_weights_bytes(source), stored, threads, repeats, lines)
    dtype = STORED.get(stored)
    pruned = LoadedModel(new_model, source.tokenizer, {**source.info, "path": str(out)})
    record = CompressionRecord(
        method=method,
        scheme=scheme,
        source=source.path,
        before=before,
        after=measure(pruned, weights_bytes(export_state_dict(new_model, dtype)), stored, threads, repeats, lines),
        fp32_weights_bytes=weights_bytes(export_state_dict(source.model)),
        held_out=None if held_out is None else str(held_out),
        notes=_notes(method),
        details=details,
    )
    ours = {**(raw.get("bertlab") or {}), "compressed_from": source.path}
    save_checkpoint(
        out, new_model, source.tokenizer, extra_config=ours, extra_files={RECORD_FILE: asdict(record)}, dtype=dtype
    )
    log.info("wrote %s (%s)", out, scheme)
    return record, pruned


def _notes(method: str) -> list[str]:
    if method == "prune-heads":
        return [
            "structured: the heads' query/key/value rows and output-projection columns removed; config.json's "
            "pruned_heads says which (transformers 4's format; transformers 5 dropped head pruning)",
        ]
    return ["unstructured: zeros in dense matrices, so the same size on disk and the same dense-kernel speed"]
