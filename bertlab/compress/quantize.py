"""`bertlab compress quantize`: a smaller copy of a model folder, dynamic int8 or half precision,
measured before and after.

Schemes:
- "int8-dynamic": the Linear layers (the masked-LM decoder aside: it is the word embeddings, tied)
  get int8 weights, one scale per output channel, and quantize their input on the fly
  (`torch.ao.quantization.quantize_dynamic`, fbgemm); the float parts keep the source's stored dtype
  where that is lossless (fp16 for the shipped model). Why torch.ao and not torchao, which PyTorch
  now points eager-mode users to: torchao 0.18 installs beside torch 2.13 (it pins no torch), but
  its CPU int8 path is tensor subclasses that safetensors cannot store as they are, and fbgemm's
  dynamic int8 kernels are what the issue's 2x fill-mask measurement used. The folder format is
  bertlab.storage.quantized's.
- "bf16" / "fp16": every float weight cast and saved; the folder is an ordinary one that loads
  anywhere (as float32 unless a dtype is asked for).

Imports torch, bertlab.compress (measure, source), bertlab.errors, bertlab.finetune.predict, bertlab.inference,
bertlab.storage.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import torch

from bertlab.compress.measure import (
    RECORD_FILE,
    CompressionRecord,
    check_output_folder,
    read_held_out,
    stored_dtype,
    weights_bytes,
)
from bertlab.compress.source import open_source
from bertlab.errors import InputError
from bertlab.finetune.predict import FinetunedModel
from bertlab.inference import LoadedModel
from bertlab.storage import quantized
from bertlab.storage.checkpoint import export_state_dict

log = logging.getLogger(__name__)

HALF_SCHEMES = {"bf16": torch.bfloat16, "fp16": torch.float16}
SCHEMES = (quantized.INT8_DYNAMIC, *HALF_SCHEMES)


def quantize(
    model: str | Path,
    out: str | Path,
    scheme: str = quantized.INT8_DYNAMIC,
    held_out: str | Path | None = None,
    threads: Sequence[int] = (1, 2),
    repeats: int = 30,
    dev: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[CompressionRecord, LoadedModel | FinetunedModel]:
    """Write a quantized copy of `model` (a pretraining folder or a fine-tuned classifier) to `out`
    with its compression.json record.

    Args:
        held_out: a text file to count masked-LM accuracy on (pretraining models).
        dev: a fine-tuned classifier's dev file (its task's format) to count accuracy on.
        progress: told each stage's name as it starts (the page's progress line).

    Returns:
        (the record, the compressed model as held in memory: what `load_model(out)`, or
        `load_finetuned(out)` for a classifier, rebuilds).

    Raises:
        InputError: an unknown scheme, an output folder in use, or a folder that is already int8.
        CheckpointError: the model folder is missing, has no weights, or no family opens it.
    """
    if scheme not in SCHEMES:
        raise InputError(f"--scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
    say = progress or (lambda stage: None)
    out = check_output_folder(out, model)
    say("loading the model")
    source = open_source(model, dev)
    if source.quantization:
        raise InputError(f"{source.path} is already quantized ({source.quantization}); start from its source")
    stored = stored_dtype(source.raw_config)
    lines = read_held_out(held_out) if held_out is not None else None
    say("measuring the original")
    before = source.measure(source.loaded, source.stored_bytes, stored, threads, repeats, lines, dev)
    say(f"quantizing ({scheme})")
    if scheme == quantized.INT8_DYNAMIC:
        compressed_model = quantized.quantize_int8(source.module)
        weights = _as_stored(quantized.int8_state_dict(compressed_model), stored)
        entries, hf_config = quantized.config_entries()
        dtype, after_dtype = None, "int8"
    else:
        dtype = HALF_SCHEMES[scheme]
        compressed_model = copy.deepcopy(source.module).to(dtype)
        weights, entries, hf_config = export_state_dict(compressed_model), {}, {}
        after_dtype = str(dtype).removeprefix("torch.")
    compressed = source.wrap(compressed_model, out, entries.get(quantized.SCHEME_KEY))
    say("measuring the copy")
    record = CompressionRecord(
        method="quantize",
        scheme=scheme,
        source=source.path,
        before=before,
        after=source.measure(compressed, weights_bytes(weights), after_dtype, threads, repeats, lines, dev),
        fp32_weights_bytes=weights_bytes(export_state_dict(source.module)),
        held_out=None if held_out is None else str(held_out),
        notes=_notes(scheme),
        kind=source.kind,
        dev=None if dev is None else str(dev),
    )
    say("saving")
    source.save(
        out, compressed_model, entries, {RECORD_FILE: asdict(record)}, dtype, weights, hf_config, source.module.config
    )
    log.info("wrote %s (%s)", out, scheme)
    return record, compressed


def _as_stored(weights: dict[str, torch.Tensor], stored: str) -> dict[str, torch.Tensor]:
    """The float tensors (embeddings, LayerNorms, biases) in the source's own dtype where that loses
    nothing: a source stored in fp16 (the shipped model) loaded as float32 holds fp16 values, so its
    float parts cost half the bytes and reload bit for bit. The int8 scales stay float32."""
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(stored)
    if dtype is None:
        return weights
    out = {}
    for key, value in weights.items():
        if value.dtype == torch.float32 and not key.endswith(quantized.SCALE_SUFFIX):
            narrow = value.to(dtype)
            value = narrow if torch.equal(narrow.to(torch.float32), value) else value
        out[key] = value
    return out


def _notes(scheme: str) -> list[str]:
    if scheme == quantized.INT8_DYNAMIC:
        return [
            "post-training dynamic int8 (torch.ao, fbgemm): Linear weights int8 per output channel, activations "
            "quantized on the fly; embeddings, LayerNorms, biases and the tied masked-LM decoder stay float "
            "(stored in the source's dtype where lossless)",
            "CPU only, no gradients through the int8 layers; opens in BERT Lab only (transformers refuses its int8 "
            "dtype)",
        ]
    return [f"every float weight stored as {scheme}; the 'before' model runs in float32, the 'after' one in {scheme}"]
