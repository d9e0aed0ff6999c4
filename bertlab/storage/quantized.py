"""The int8 model folder: how a dynamically quantized model is written and rebuilt (one owner of the format).

`bertlab compress quantize --scheme int8-dynamic` (bertlab.compress) writes, and `load_pretraining_model`
(bertlab.storage.checkpoint) reads, a folder that is an ordinary checkpoint folder except that:
- every quantized Linear's `weight` in model.safetensors is int8, with its per-output-channel scales
  beside it as `<layer>.weight_scale` (float32, (out,)) and zero points as `<layer>.weight_zero_point`
  (int64, (out,); 0 for the symmetric scheme used); its bias stays float32. Embeddings, LayerNorms
  and the masked-LM decoder (tied to the word embeddings) stay float32;
- config.json's `bertlab` section says `"quantization": "int8-dynamic"`; its `dtype` (and the older
  `torch_dtype`) is "int8", so that transformers (5.x, whose default dtype is "auto") refuses the
  folder ("cannot be instantiated under dtype=torch.int8") instead of reading int8 numbers as float
  weights, which it does when given an explicit float dtype; `quantization_config` names the scheme
  (transformers warns that it does not know it). Opening it there would need a quantizer (a
  transformers `HfQuantizer`) that swaps the Linears for int8 ones reading these scales.

Loading builds the float model from config.json with the weights dequantized (int8 * scale, which
passes the usual shape checks), quantizes it with the same qconfig, and then puts the stored int8
weights and scales back into each quantized Linear, so the reloaded model computes exactly what
the saved one did. Dynamic int8 uses `torch.ao.quantization.quantize_dynamic` (fbgemm, VNNI where the
CPU has it): CPU only, float32 activations, and no gradients through the int8 layers.

Imports torch only.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping

import torch
from torch import nn

INT8_DYNAMIC = "int8-dynamic"
SCHEME_KEY = "quantization"  # in config.json's `bertlab` section
QUANT_METHOD = "bertlab-int8-dynamic"  # config.json's quantization_config.quant_method: unknown to transformers
SCALE_SUFFIX = ".weight_scale"
ZERO_POINT_SUFFIX = ".weight_zero_point"
# tied to the word embeddings (an nn.Embedding, which dynamic quantization leaves in float): kept
# float so the tie, and the embeddings' precision, hold
KEEP_FLOAT = ("cls.predictions.decoder",)


def scheme_of(raw_config: Mapping) -> str | None:
    """The quantization scheme config.json names ("int8-dynamic"), or None for a float folder."""
    ours = raw_config.get("bertlab") or {}
    return ours.get(SCHEME_KEY) if isinstance(ours, Mapping) else None


def config_entries() -> tuple[dict, dict]:
    """(entries for config.json's `bertlab` section, top-level config.json entries) of an int8 folder."""
    return {SCHEME_KEY: INT8_DYNAMIC}, {
        "dtype": "int8",
        "torch_dtype": "int8",
        "quantization_config": {"quant_method": QUANT_METHOD, "bits": 8, "granularity": "per_channel"},
    }


def _quantize_dynamic(model: nn.Module) -> nn.Module:
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    names = {
        name: per_channel_dynamic_qconfig
        for name, module in model.named_modules()
        if type(module) is nn.Linear and name not in KEEP_FLOAT
    }
    with _quiet():
        return quantize_dynamic(model, names, dtype=torch.qint8, inplace=False)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.ao's notices that it and quantized tensors are deprecated (in favour of torchao; why
    this still uses them: bertlab.compress.quantize), kept off the user's screen."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*", category=UserWarning)
        yield


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of a float32 CPU model with its Linear layers (the tied decoder aside) dynamic int8,
    per output channel. The model keeps its surface (forward, .config, .bert, heads)."""
    if next(model.parameters()).dtype != torch.float32 or next(model.parameters()).device.type != "cpu":
        raise ValueError("dynamic int8 quantization needs a float32 model on the CPU; load it with dtype float32")
    return _quantize_dynamic(model.eval())


def is_int8(model: nn.Module) -> bool:
    """Whether `model` holds dynamic int8 Linear layers (which have no gradients)."""
    return any(_is_quantized_linear(m) for m in model.modules())


def packed_parameters(model: nn.Module) -> int:
    """Weights and biases held by int8 Linears: packed, so `model.parameters()` does not list them."""
    total = 0
    for module in model.modules():
        if _is_quantized_linear(module):
            bias = module.bias()
            total += module.weight().numel() + (0 if bias is None else bias.numel())
    return total


def _is_quantized_linear(module: nn.Module) -> bool:
    return type(module).__name__ == "Linear" and type(module).__module__.startswith("torch.ao.nn.quantized")


def int8_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The tensors an int8 folder's model.safetensors holds: the model's float weights (tied copies
    dropped) plus, for each quantized Linear, its int8 weight, scales, zero points and float bias."""
    tied = set(getattr(model, "tied_keys", ()))
    quantized = {name for name, module in model.named_modules() if _is_quantized_linear(module)}
    out = {
        k: v.detach().contiguous()
        for k, v in model.state_dict().items()
        if isinstance(v, torch.Tensor)
        and k not in tied
        and k.rsplit(".", 1)[0] not in quantized
        and "._packed_params." not in k
    }
    for name, module in model.named_modules():
        if not _is_quantized_linear(module):
            continue
        weight = module.weight()  # a per-channel quantized tensor, (out, in)
        out[f"{name}.weight"] = weight.int_repr().contiguous()
        out[name + SCALE_SUFFIX] = weight.q_per_channel_scales().to(torch.float32).contiguous()
        out[name + ZERO_POINT_SUFFIX] = weight.q_per_channel_zero_points().to(torch.int64).contiguous()
        bias = module.bias()
        if bias is not None:
            out[f"{name}.bias"] = bias.detach().to(torch.float32).contiguous()
    return out


def split_int8(state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, tuple]]:
    """(a float state dict with each int8 weight dequantized, so the usual checks and loading apply;
    layer name -> (int8 weight, scales, zero points) to put back with `restore_int8`)."""
    floats, packed = {}, {}
    for key, value in state.items():
        if key.endswith((SCALE_SUFFIX, ZERO_POINT_SUFFIX)):
            continue
        layer = key.removesuffix(".weight")
        if value.dtype == torch.int8 and layer + SCALE_SUFFIX in state:
            scales = state[layer + SCALE_SUFFIX].to(torch.float32)
            zero_points = state.get(layer + ZERO_POINT_SUFFIX, torch.zeros_like(scales, dtype=torch.int64))
            packed[layer] = (value, scales, zero_points.to(torch.int64))
            value = (value.to(torch.float32) - zero_points[:, None]) * scales[:, None]  # (out, in)
        floats[key] = value
    return floats, packed


def restore_int8(model: nn.Module, packed: Mapping[str, tuple]) -> nn.Module:
    """Quantize a float32 CPU model loaded from an int8 folder, then put its stored int8 weights and
    scales back, so it computes exactly as the model that was saved."""
    qmodel = quantize_int8(model)
    modules = dict(qmodel.named_modules())
    for name, (weight, scales, zero_points) in packed.items():
        module = modules.get(name)
        if module is None or not _is_quantized_linear(module):
            raise ValueError(f"{name}: int8 weights stored for a layer that is not a quantized Linear")
        with _quiet():
            qweight = torch._make_per_channel_quantized_tensor(weight, scales.double(), zero_points, 0)
        module.set_weight_bias(qweight, module.bias())
    return qmodel
