"""The "Make it smaller" page's logic (#55): the methods it offers, one call that runs any of them
into a folder, the before/after comparison as rows, and both models' answers to one input.

    from bertlab.compress.lab import run_method
    record, smaller = run_method("int8", "checkpoints/bertlab-mini", "runs/mini-int8/model")

Imports torch (through the methods), bertlab.compress (measure, prune, quantize, source),
bertlab.errors, bertlab.finetune.predict, bertlab.inference, bertlab.storage.runfolder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertlab.compress.measure import RECORD_FILE, CompressionRecord, Latency, Measurement
from bertlab.compress.prune import prune
from bertlab.compress.quantize import quantize
from bertlab.compress.source import CLASSIFIER, PROBE_REVIEW
from bertlab.errors import CheckpointError, InputError
from bertlab.finetune.predict import FinetunedModel
from bertlab.inference import LoadedModel
from bertlab.storage.runfolder import REPO_ROOT

# WikiText-2's raw test text, where this workspace keeps it (read in place; absent elsewhere)
DEFAULT_HELD_OUT = REPO_ROOT.parent / "shared" / "data" / "corpus" / "wikitext-2-raw" / "wiki.test.raw"


@dataclass(frozen=True)
class Method:
    """One way to make a model smaller, as the page offers it."""

    key: str  # int8 | bf16 | fp16 | heads | sparsity
    label: str
    explains: str
    share: str = ""  # what the share slider means; "" when the method takes none
    default_share: float = 0.5


METHODS = (
    Method(
        "int8",
        "int8 (dynamic quantization)",
        "Every Linear weight stored as an 8-bit integer with a scale per output channel; activations "
        "quantized on the fly (post-training, no retraining). CPU only, and no gradients.",
    ),
    Method(
        "bf16",
        "bf16 (half precision)",
        "Every weight cast to bfloat16: half the bytes of fp32, fp32's range, 8 bits of mantissa.",
    ),
    Method("fp16", "fp16 (half precision)", "Every weight cast to float16: half the bytes, 11 bits of precision."),
    Method(
        "heads",
        "Prune attention heads",
        "The least important heads (Michel et al. 2019) removed from the weight matrices: smaller and faster.",
        "Share of all heads to remove",
        0.5,
    ),
    Method(
        "sparsity",
        "Magnitude sparsity",
        "The smallest weights of every Linear layer set to zero. Stored dense, so no smaller and no faster "
        "on dense kernels: it shows how much of a model is near zero.",
        "Share of each weight matrix to zero",
        0.5,
    ),
)
METHOD_KEYS = tuple(m.key for m in METHODS)


def method(key: str) -> Method:
    """The method named `key`. Raises InputError for an unknown one."""
    for m in METHODS:
        if m.key == key:
            return m
    raise InputError(f"unknown method {key!r}; choose one of {', '.join(METHOD_KEYS)}")


def default_out(root: str | Path, model_path: str, key: str, share: float | None = None) -> Path:
    """Where the page suggests writing: `<runs>/<model>-<method>[<percent>]/model`, so that the
    copy is listed with the runs (the sidebar, the fine-tuned lists) as its source is."""
    name = Path(model_path.rstrip("/")).name
    if name == "model":  # a run's model folder: name it after the run
        name = Path(model_path.rstrip("/")).parent.name
    suffix = f"{key}{round(share * 100)}" if method(key).share and share is not None else key
    return Path(root) / f"{name}-{suffix}" / "model"


def run_method(
    key: str,
    model: str | Path,
    out: str | Path,
    share: float | None = None,
    held_out: str | Path | None = None,
    dev: str | Path | None = None,
    threads: Sequence[int] = (1, 2),
    repeats: int = 20,
    progress: Callable[[str], None] | None = None,
) -> tuple[CompressionRecord, LoadedModel | FinetunedModel]:
    """Make a smaller copy of `model` in `out` by method `key`, measured before and after.

    Raises:
        InputError: an unknown method, a share out of range, an output folder in use, a bad file.
        CheckpointError: the model folder is missing or incomplete.
    """
    m = method(key)
    common = dict(held_out=held_out, dev=dev, threads=threads, repeats=repeats, progress=progress)
    if m.key in ("int8", "bf16", "fp16"):
        return quantize(model, out, "int8-dynamic" if m.key == "int8" else m.key, **common)
    if share is None:
        raise InputError(f"{m.label} needs a share: {m.share.lower()}")
    if m.key == "heads":
        return prune(model, out, heads=share, **common)
    return prune(model, out, sparsity=share, **common)


def read_record(folder: str | Path) -> CompressionRecord:
    """The compression.json of a compressed folder.

    Raises:
        CheckpointError: the folder holds no record, or one that cannot be read.
    """
    path = Path(folder) / RECORD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        for side in ("before", "after"):
            m = data[side]
            data[side] = Measurement(**{**m, "latency": tuple(Latency(**lat) for lat in m["latency"])})
        return CompressionRecord(**data)
    except FileNotFoundError:
        raise CheckpointError(f"{folder}: no {RECORD_FILE}; it was not made by bertlab compress") from None
    except (json.JSONDecodeError, TypeError, KeyError) as exc:
        raise CheckpointError(f"{path}: not a compression record ({exc})") from exc


def comparison_rows(record: CompressionRecord) -> list[dict]:
    """Before and after as rows (what, before, after, change) for the page's table."""
    b, a = record.before, record.after
    mib = 2**20
    rows = [
        {"": "parameters", "before": f"{b.parameters:,}", "after": f"{a.parameters:,}",
         "change": f"{a.parameters / b.parameters:.2f}x"},
        {"": "weights on disk", "before": f"{b.weights_bytes / mib:.2f} MiB ({b.dtype})",
         "after": f"{a.weights_bytes / mib:.2f} MiB ({a.dtype})",
         "change": f"{a.weights_bytes / b.weights_bytes:.2f}x of the source, "
                   f"{a.weights_bytes / record.fp32_weights_bytes:.2f}x of fp32"},
    ]  # fmt: skip
    what = "classification" if record.kind == CLASSIFIER else record.before.timed
    for lb, la in zip(b.latency, a.latency, strict=True):
        rows.append(
            {
                "": f"{what} p50 / p95, {lb.threads} thread{'s' if lb.threads > 1 else ''}",
                "before": f"{lb.p50_ms:.2f} / {lb.p95_ms:.2f} ms",
                "after": f"{la.p50_ms:.2f} / {la.p95_ms:.2f} ms",
                "change": f"{lb.p50_ms / la.p50_ms:.2f}x the speed",
            }
        )
    for name, before, after in (
        ("held-out masked-LM accuracy", b.mlm_accuracy, a.mlm_accuracy),
        ("dev accuracy", b.dev_accuracy, a.dev_accuracy),
    ):
        if before is not None and after is not None:
            rows.append(
                {"": name, "before": f"{before:.1%}", "after": f"{after:.1%}",
                 "change": f"{(after - before) * 100:+.1f} points"}
            )  # fmt: skip
    return rows


def answers_side_by_side(
    before: LoadedModel | FinetunedModel, after: LoadedModel | FinetunedModel, text: str, top_k: int = 5
) -> list[dict]:
    """Both models' answers to `text`: the first [MASK]'s top words (a masked LM) or each class's
    probability (a classifier), as rows.

    Raises:
        InputError: empty text, no [MASK] for a masked LM, a model without a masked-LM head.
    """
    if isinstance(before, FinetunedModel):
        pb, pa = before.predict(text), after.predict(text)
        return [
            {"class": label, "before": round(pb.probabilities[label], 4), "after": round(pa.probabilities[label], 4)}
            for label in before.labels
        ]
    cb = before.fill_mask(text, top_k=top_k, joint=False).masks[0].candidates
    ca = after.fill_mask(text, top_k=top_k, joint=False).masks[0].candidates
    return [
        {"rank": i + 1, "before": f"{x.token} ({x.score:.1%})", "after": f"{y.token} ({y.score:.1%})"}
        for i, (x, y) in enumerate(zip(cb, ca, strict=False))
    ]


def probe_text(kind: str) -> str:
    """What the page asks both models first: a masked sentence, or a review for a classifier."""
    return PROBE_REVIEW if kind == CLASSIFIER else "The capital of France is [MASK]."
