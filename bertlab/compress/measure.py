"""What a compression buys and costs, measured the same way before and after: parameters, bytes of
weights on disk, fill-mask latency (p50/p95 at a given thread count) and held-out masked-LM accuracy.

The record (`Measurement`, `CompressionRecord`) is what `bertlab compress` prints and saves as the
output folder's `compression.json`; `check_output_folder` is the check every command makes before
it loads anything.

Imports torch, safetensors, bertlab.data.batching, bertlab.errors, bertlab.inference and bertlab.storage (quantized, checkpoint).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save as safetensors_bytes

from bertlab.data.batching import pad_batch
from bertlab.errors import InputError
from bertlab.inference import LoadedModel
from bertlab.storage import quantized
from bertlab.storage.checkpoint import weights_file

RECORD_FILE = "compression.json"
PROBE_SENTENCE = "The capital of France is [MASK]."


@dataclass(frozen=True)
class Latency:
    """Fill-mask wall time of one sentence, in milliseconds, over `repeats` runs after a warm-up."""

    threads: int
    p50_ms: float
    p95_ms: float
    repeats: int


@dataclass(frozen=True)
class Measurement:
    """One model as measured: before or after compression."""

    parameters: int  # weights in the model, int8 ones included (tied decoder counted once)
    weights_bytes: int  # model.safetensors' size as written (or as it would be written)
    dtype: str  # what the Linear weights are stored as: float32, float16, bfloat16, int8
    latency: tuple[Latency, ...] = ()
    mlm_accuracy: float | None = None  # share of masked tokens guessed right on the held-out file
    dev_accuracy: float | None = None  # a fine-tuned classifier's accuracy on its task's dev file
    # what one timed call does (bertlab.compress.source.probe): "fill-mask", "classification", or "one forward
    # pass" for a model without a masked LM (an ELECTRA discriminator); records written before it say fill-mask
    timed: str = "fill-mask"


@dataclass(frozen=True)
class CompressionRecord:
    """Before and after, as saved in compression.json."""

    method: str  # "quantize", "prune-heads", "prune-sparsity"
    scheme: str  # "int8-dynamic", "bf16", "fp16"; for pruning the share asked for, e.g. "heads 0.25"
    source: str
    before: Measurement  # the source, loaded in float32 as the pages run it; weights_bytes as stored
    after: Measurement
    fp32_weights_bytes: int  # the source's weights had they been saved in float32
    held_out: str | None = None  # the file the accuracies were counted on
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)  # what the method did: heads removed, sparsity reached
    kind: str = "pretraining"  # what was compressed: "pretraining" or "classifier" (bertlab.compress.source)
    dev: str | None = None  # a classifier's dev file, which the dev accuracies were counted on


def weights_bytes(state: dict[str, torch.Tensor]) -> int:
    """The size model.safetensors would have with these tensors (same metadata as save_checkpoint)."""
    return len(safetensors_bytes(state, metadata={"format": "pt"}))


def count_parameters(model: torch.nn.Module) -> int:
    """Float parameters plus the weights and biases of int8 Linears (packed, so not parameters)."""
    return sum(p.numel() for p in model.parameters()) + quantized.packed_parameters(model)


def fill_mask_latency(
    loaded: LoadedModel, threads: int, repeats: int = 30, warmup: int = 3, sentence: str = PROBE_SENTENCE
) -> Latency:
    """p50/p95 of `loaded.fill_mask(sentence)` with torch using `threads` threads (restored after)."""
    return call_latency(lambda: loaded.fill_mask(sentence, joint=False), threads, repeats, warmup)


def call_latency(call: Callable[[], object], threads: int, repeats: int = 30, warmup: int = 3) -> Latency:
    """p50/p95 of `call()` with torch using `threads` threads (restored after)."""
    return summarize_times(timed_calls(call, threads, repeats, warmup), threads)


def timed_calls(call: Callable[[], object], threads: int, repeats: int, warmup: int = 3) -> list[float]:
    """Wall times of `repeats` calls in milliseconds, after `warmup` untimed ones, on `threads` threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # process-wide in torch; put back below
    try:
        for _ in range(warmup):
            call()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1000)
    finally:
        torch.set_num_threads(before)
    return times


def summarize_times(times: Sequence[float], threads: int) -> Latency:
    """p50 (the median) and p95 (nearest rank) of wall times in milliseconds."""
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return Latency(threads, round(statistics.median(ordered), 3), round(p95, 3), len(ordered))


def masked_lm_accuracy(
    loaded: LoadedModel, lines: Sequence[str], mask_prob: float = 0.15, seed: int = 0, batch_size: int = 32
) -> float:
    """Share of masked tokens whose top answer is the original token.

    Each line is tokenized, and `mask_prob` of its non-special tokens (at least one) replaced by
    [MASK], chosen by `random.Random(seed)`: the same positions for every model with the same
    vocabulary, so before and after are compared on the same questions."""
    rng = random.Random(seed)
    tok = loaded.tokenizer
    right = total = 0
    texts = [line.strip() for line in lines if line.strip()]
    for start in range(0, len(texts), batch_size):
        rows, types, targets = [], [], []
        for text in texts[start : start + batch_size]:
            enc = tok.encode(text, max_length=loaded.max_length)
            candidates = [i for i, t in enumerate(enc.ids) if t not in tok.special_ids]
            if not candidates:
                continue
            chosen = rng.sample(candidates, max(1, round(mask_prob * len(candidates))))
            ids = list(enc.ids)
            for i in chosen:
                ids[i] = tok.mask_id
            rows.append(ids)
            types.append(enc.type_ids)
            targets.append({i: enc.ids[i] for i in chosen})
        if not rows:
            continue
        batch = pad_batch(rows, tok.pad_id, types)
        select = batch["input_ids"] == tok.mask_id  # (B, T)
        with torch.inference_mode():
            out = loaded.model(
                batch["input_ids"].to(loaded.device),
                batch["token_type_ids"].to(loaded.device),
                batch["attention_mask"].to(loaded.device),
                mlm_positions=select.to(loaded.device),
            )
        guesses = out.mlm_logits.argmax(-1).tolist()  # (N,), in select.nonzero() order
        wanted = [targets[b][t] for b, t in select.nonzero().tolist()]
        right += sum(g == w for g, w in zip(guesses, wanted, strict=True))
        total += len(wanted)
    if total == 0:
        raise InputError("the held-out file has no tokens to mask; give a text file with one sentence a line")
    return right / total


def read_held_out(path: str | Path, max_lines: int = 500) -> list[str]:
    """The first `max_lines` non-empty lines of a text file (one sentence or document a line);
    WikiText's headings (` = Title = `) are left out, so its raw files can be read in place."""
    if not Path(path).is_file():
        raise InputError(f"--held-out {path}: no such file; give a text file with one sentence a line")
    lines = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip() and not line.strip().startswith("= "):
                lines.append(line)
                if len(lines) >= max_lines:
                    break
    return lines


def check_output_folder(out: str | Path, source: str | Path | None = None) -> Path:
    """`out` as a Path, when it is free to write: absent or an empty folder (the atomic write replaces
    the whole folder, so anything already there would be lost).

    Raises:
        InputError: `out` is the source, a file, or a folder that holds anything.
    """
    out = Path(out)
    if source is not None and out.exists() and out.resolve() == Path(source).resolve():
        raise InputError(f"--out {out} is the model's own folder; give a new folder for the compressed copy")
    if out.is_file():
        raise InputError(f"--out {out} is a file; give a new folder")
    if out.is_dir() and any(out.iterdir()):
        what = "already holds a model" if (out / "config.json").is_file() else "is not empty"
        raise InputError(f"--out {out} {what}; give a new folder, or delete that one first")
    return out


def source_weights_bytes(source: LoadedModel) -> int:
    """The size of the source folder's weights file, as stored.

    Raises:
        InputError: the folder is a pair (ELECTRA's generator/ and discriminator/), whose halves are
            each a model: compress one of them.
    """
    if source.halves:
        first = next(iter(source.halves.values()))
        raise InputError(
            f"{source.path} is a pair folder ({', '.join(source.halves)}), a model in each; compress one half, "
            f"e.g. --model {first}"
        )
    return weights_file(source.path).stat().st_size


def measure(
    loaded: LoadedModel,
    stored_bytes: int,
    dtype: str,
    threads: Sequence[int],
    repeats: int,
    held_out: Sequence[str] | None,
) -> Measurement:
    """Parameters, bytes, fill-mask latency at each thread count and held-out accuracy of one model."""
    return Measurement(
        parameters=count_parameters(loaded.model),
        weights_bytes=stored_bytes,
        dtype=dtype,
        latency=tuple(fill_mask_latency(loaded, n, repeats) for n in threads),
        mlm_accuracy=None if held_out is None else round(masked_lm_accuracy(loaded, held_out), 4),
    )


def stored_dtype(raw_config: dict) -> str:
    """The dtype a folder's weights are stored in, from config.json (float32 when it does not say)."""
    return str(raw_config.get("torch_dtype") or "float32")
