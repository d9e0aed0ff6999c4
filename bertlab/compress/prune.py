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

A fine-tuned classifier prunes the same way (bertlab.compress.source), its heads ranked by its own
head study (saved beside it by `bertlab interpret heads`) or by importance on its dev file.

Imports torch, numpy, bertlab.compress (measure, source), bertlab.config, bertlab.errors,
bertlab.finetune, bertlab.inference, bertlab.interpret (heads, saved), bertlab.models.registry and
bertlab.storage.checkpoint.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bertlab.compress.measure import (
    RECORD_FILE,
    CompressionRecord,
    check_output_folder,
    read_held_out,
    stored_dtype,
    weights_bytes,
)
from bertlab.compress.source import CLASSIFIER, PRETRAINING, Source, open_source
from bertlab.config import BertConfig
from bertlab.errors import InputError
from bertlab.finetune.data import SequenceExample, read_task_file
from bertlab.finetune.models import build_task_model
from bertlab.finetune.predict import FinetunedModel
from bertlab.finetune.tasks import get_task
from bertlab.inference import LoadedModel
from bertlab.interpret.heads import HeadImportance, LabelledSentences, MaskedSentences, head_importance
from bertlab.interpret.saved import read_results
from bertlab.models.registry import build_model
from bertlab.storage.checkpoint import export_state_dict, load_state

log = logging.getLogger(__name__)

Head = tuple[int, int]  # (layer, head), the unpruned numbering
KEEP_DENSE = ("cls.predictions.decoder",)  # the word embeddings, tied: not a Linear weight of its own
STORED = {"float16": torch.float16, "bfloat16": torch.bfloat16}
MAX_IMPORTANCE_EXAMPLES = 512  # dev examples a classifier's heads are ranked on when no study is saved
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


def remove_heads(
    model: nn.Module, heads: dict[int, list[int]], build: Callable[[BertConfig], nn.Module] = build_model
) -> nn.Module:
    """A new model without `heads` (layer -> heads): their query/key/value rows and output-projection
    columns gone, config.pruned_heads saying so. `build` makes the empty model from the pruned config
    (a fine-tuned classifier's builder for a classifier)."""
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
    new = build(new_config)
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
    dev: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[CompressionRecord, LoadedModel | FinetunedModel]:
    """Write a pruned copy of `model` (a pretraining folder or a fine-tuned classifier) to `out` with
    its compression.json; one of `heads`, `sparsity`.

    A classifier's heads go in the order of its own head study where one is saved beside it
    (`bertlab interpret heads`), else of its importance on the `dev` file.

    Returns:
        (the record, the pruned model as held in memory: what `load_model(out)`, or
        `load_finetuned(out)` for a classifier, rebuilds).
    """
    if (heads is None) == (sparsity is None):
        raise InputError("give one of --heads FRACTION (remove heads) or --sparsity FRACTION (zero weights)")
    if heads is not None:
        _share(heads, "--heads", "of all heads to remove")
    else:
        _share(sparsity, "--sparsity", "of each Linear weight's entries to zero")
    say = progress or (lambda stage: None)
    out = check_output_folder(out, model)
    say("loading the model")
    source = open_source(model, dev)
    if source.quantization:
        raise InputError(f"{source.path} is quantized ({source.quantization}); prune its float source")
    stored = stored_dtype(source.raw_config)
    lines = read_held_out(held_out) if held_out is not None else None
    if heads is not None:
        say("ranking the heads")
        new_model, details = _prune_heads(source, heads, order, lines, dev)
        method, scheme = "prune-heads", f"heads {heads}"
    else:
        say("zeroing the smallest weights")
        new_model, reached = zero_smallest(source.module, sparsity)
        method, scheme, details = "prune-sparsity", f"sparsity {sparsity}", {"sparsity": round(reached, 4)}
    # measured after pruning, so that a refused request (every head of a layer) fails at once
    say("measuring the original")
    before = source.measure(source.loaded, source.stored_bytes, stored, threads, repeats, lines, dev)
    dtype = STORED.get(stored)
    pruned = source.wrap(new_model, out)
    say("measuring the copy")
    after_bytes = weights_bytes(export_state_dict(new_model, dtype))
    record = CompressionRecord(
        method=method,
        scheme=scheme,
        source=source.path,
        before=before,
        after=source.measure(pruned, after_bytes, stored, threads, repeats, lines, dev),
        fp32_weights_bytes=weights_bytes(export_state_dict(source.module)),
        held_out=None if held_out is None else str(held_out),
        notes=_notes(method),
        details=details,
        kind=source.kind,
        dev=None if dev is None else str(dev),
    )
    say("saving")
    source.save(out, new_model, {}, {RECORD_FILE: asdict(record)}, dtype=dtype)
    log.info("wrote %s (%s)", out, scheme)
    return record, pruned


def _prune_heads(
    source: Source, fraction: float, order: Sequence[Head] | None, lines: Sequence[str] | None, dev
) -> tuple[nn.Module, dict]:
    """The model without `fraction` of its heads, least important first, and what was done."""
    if source.family != "BERT":
        # the weight names (bert.encoder.layer.N.attention.self.*) and the head gates are BERT's
        raise InputError(f"{source.path} is a {source.family} model; --heads prunes BERT folders only")
    config = source.module.config
    ranked, how = (list(order), "given") if order else ranking(source, lines, dev)
    removed = heads_to_prune(config.num_layers, config.num_heads, ranked, fraction)
    if source.kind == CLASSIFIER:
        head = source.loaded.setup.head
        new_model = remove_heads(source.module, removed, lambda c: build_task_model(c, head))
    else:
        new_model = remove_heads(source.module, removed)
    details = {"pruned_heads": {str(k): v for k, v in removed.items()}, "order": how}
    details["heads_removed"] = sum(len(v) for v in removed.values())
    return new_model, details


def ranking(source: Source, lines: Sequence[str] | None = None, dev=None) -> tuple[list[Head], str]:
    """Heads least important first, and where the order came from. A masked LM: Michel et al.'s
    importance on the held-out lines (or a few built-in sentences). A classifier: its saved head
    study when there is one, else its importance on up to `MAX_IMPORTANCE_EXAMPLES` of the dev file.

    Raises:
        InputError: a classifier with neither a saved study nor a dev file.
    """
    if source.kind == PRETRAINING:
        data = MaskedSentences(list(lines or IMPORTANCE_SENTENCES))
        return head_importance(source.loaded, data).order(), "importance"
    saved = read_results(source.path, "heads")
    if saved:
        task, study = next(iter(saved.items()))
        scores = np.asarray(study["importance"], dtype=float)
        return HeadImportance(scores, scores, 0.0, 0.0, 0).order(), f"the model's saved head study ({task})"
    if dev is None:
        raise InputError(
            f"{source.path} has no head study saved beside it; give its task's dev file (--dev) to rank its heads "
            "on, or an --order"
        )
    ft = source.loaded
    examples = [e for e in read_task_file(get_task(ft.task), dev) if isinstance(e, SequenceExample)]
    labelled = [e for e in examples if e.label is not None and str(e.label) != ""][:MAX_IMPORTANCE_EXAMPLES]
    imp = head_importance(ft, LabelledSentences(labelled))
    return imp.order(), f"importance on {len(labelled)} examples of {Path(dev).name}"


def _notes(method: str) -> list[str]:
    if method == "prune-heads":
        return [
            "structured: the heads' query/key/value rows and output-projection columns removed; config.json's "
            "pruned_heads says which (transformers 4's format; transformers 5 dropped head pruning)",
        ]
    return ["unstructured: zeros in dense matrices, so the same size on disk and the same dense-kernel speed"]
