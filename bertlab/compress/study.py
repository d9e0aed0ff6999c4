"""The compression lab's studies (#55): quality against the share removed (a pruning curve, heads or
magnitude), computed in memory without writing folders; the committed results' tables
(results/compression/*.csv) as the page and README read them; the papers' claims beside ours.

Imports torch, bertlab.compress (measure, prune, source), bertlab.errors, bertlab.finetune, bertlab.interpret.heads.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from bertlab.compress.measure import CompressionRecord, count_parameters, masked_lm_accuracy
from bertlab.compress.prune import Head, heads_to_prune, remove_heads, zero_smallest
from bertlab.compress.source import CLASSIFIER, Source
from bertlab.errors import InputError
from bertlab.finetune.answers import answer_file
from bertlab.finetune.data import SequenceExample, read_task_file
from bertlab.finetune.models import build_task_model
from bertlab.finetune.tasks import get_task
from bertlab.interpret.heads import LabelledSentences, MaskedSentences, head_importance

METHODS = ("heads", "sparsity")
HEAD_SHARES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75)
SPARSITY_SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class CurvePoint:
    """Quality with `share` of the heads (or of each Linear weight) removed."""

    method: str  # "heads" or "sparsity"
    share: float  # asked for: of all heads, or of each Linear weight's entries
    parameters: int
    quality: float  # masked-LM accuracy on the held-out lines, or dev accuracy of a classifier
    metric: str  # "mlm_accuracy" or "dev_accuracy"


@dataclass(frozen=True)
class Claim:
    """A paper's result, beside which the page and README put ours."""

    method: str
    source: str
    claim: str
    ours: str  # which of our measurements answers it


CLAIMS = (
    Claim(
        "distillation",
        "DistilBERT (Sanh et al. 2019)",
        "6 of BERT-base's 12 layers: 40% fewer parameters, 60% faster, 97% of BERT's GLUE score",
        "the distilled 2-layer student of the shipped model (results/compression/distill/)",
    ),
    Claim(
        "prune heads",
        "Michel et al. 2019, 'Are Sixteen Heads Really Better than One?'",
        "about 40% of BERT's heads pruned on MNLI with little loss of accuracy",
        "the head-pruning curve of the shipped model (masked LM) and of the SST-2 classifier",
    ),
    Claim(
        "int8",
        "PyTorch's dynamic quantization tutorial (BERT-base, MRPC)",
        "F1 0.902 -> 0.896, 438 MB -> 181 MB, post-training dynamic int8 of the Linear layers",
        "int8-dynamic of the shipped model and of the SST-2 classifier (also post-training)",
    ),
    Claim(
        "int8",
        "Q8BERT (Zafrir et al. 2019)",
        "within 1% of BERT at 4x smaller, with quantization-aware training",
        "ours is post-training: no training after quantizing",
    ),
)


def head_ranking_data(source: Source, lines: Sequence[str] | None = None, labelled: str | Path | None = None):
    """What a curve ranks heads on: masked sentences of `lines` (a masked LM), or up to 512
    labelled examples of the file `labelled` in the classifier's task format (its train file, so the
    dev set it is scored on stays unseen)."""
    if source.kind != CLASSIFIER:
        if not lines:
            raise InputError("a masked LM's heads are ranked on held-out lines; give some")
        return MaskedSentences(list(lines))
    if labelled is None:
        raise InputError("a classifier's heads are ranked on labelled examples of its task; give a file")
    examples = [e for e in read_task_file(get_task(source.loaded.task), labelled) if isinstance(e, SequenceExample)]
    return LabelledSentences([e for e in examples if e.label not in (None, "")][:512])


def rank_heads(source: Source, data) -> list[Head]:
    """Heads least important first (Michel et al.) on `data` (head_ranking_data)."""
    return head_importance(source.loaded, data).order()


def pruning_curve(
    source: Source,
    method: str,
    shares: Sequence[float],
    lines: Sequence[str] | None = None,
    dev: str | Path | None = None,
    order: Sequence[Head] | None = None,
    on_point: Callable[[int, int], None] | None = None,
) -> list[CurvePoint]:
    """Quality at each share removed: masked-LM accuracy on `lines`, or a classifier's accuracy on
    `dev`. Heads go in `order` (least important first); 0 is the model as it is.

    Raises:
        InputError: an unknown method, no data to score on, heads without an order, or a share that
            cannot be removed (see heads_to_prune, zero_smallest).
    """
    if method not in METHODS:
        raise InputError(f"method must be one of {METHODS}, got {method!r}")
    if source.kind == CLASSIFIER and dev is None:
        raise InputError("a classifier's curve is scored on its dev file; give one")
    if source.kind != CLASSIFIER and not lines:
        raise InputError("a masked LM's curve is scored on held-out lines; give some")
    if method == "heads" and order is None:
        raise InputError("a head-pruning curve needs the heads' order (rank_heads)")
    points = []
    for i, share in enumerate(shares):
        module = source.module if share == 0 else _pruned(source, method, share, order)
        model = source.wrap(module, source.path)
        if source.kind == CLASSIFIER:
            quality, metric = answer_file(model, dev).accuracy, "dev_accuracy"
        else:
            quality, metric = masked_lm_accuracy(model, lines), "mlm_accuracy"
        points.append(CurvePoint(method, float(share), count_parameters(module), round(quality, 4), metric))
        if on_point is not None:
            on_point(i + 1, len(shares))
    return points


def _pruned(source: Source, method: str, share: float, order: Sequence[Head] | None):
    if method == "sparsity":
        return zero_smallest(source.module, share)[0]
    config = source.module.config
    removed = heads_to_prune(config.num_layers, config.num_heads, order, share)
    if source.kind == CLASSIFIER:
        head = source.loaded.setup.head
        return remove_heads(source.module, removed, lambda c: build_task_model(c, head))
    return remove_heads(source.module, removed)


# --------------------------------------------------------------------------------------
# Tables: what results/compression/ holds
# --------------------------------------------------------------------------------------
RECORD_COLUMNS = (
    "method",
    "scheme",
    "parameters",
    "weights_mib",
    "vs_fp32",
    "vs_source",
    "p50_1t_ms",
    "p95_1t_ms",
    "p50_2t_ms",
    "p95_2t_ms",
    "speedup_1t",
    "speedup_2t",
    "quality_before",
    "quality_after",
    "metric",
)


def record_row(record: CompressionRecord) -> dict:
    """One row of a results table: the copy as measured, against fp32 and the source as stored."""
    b, a = record.before, record.after
    metric = "dev_accuracy" if record.kind == CLASSIFIER else "mlm_accuracy"
    by = {lat.threads: lat for lat in a.latency}
    before = {lat.threads: lat for lat in b.latency}
    row = {
        "method": record.method,
        "scheme": record.scheme,
        "parameters": a.parameters,
        "weights_mib": round(a.weights_bytes / 2**20, 2),
        "vs_fp32": round(a.weights_bytes / record.fp32_weights_bytes, 3),
        "vs_source": round(a.weights_bytes / b.weights_bytes, 3),
        "quality_before": getattr(b, metric),
        "quality_after": getattr(a, metric),
        "metric": metric,
    }
    for n in (1, 2):
        lat, ref = by.get(n), before.get(n)
        row[f"p50_{n}t_ms"] = None if lat is None else lat.p50_ms
        row[f"p95_{n}t_ms"] = None if lat is None else lat.p95_ms
        row[f"speedup_{n}t"] = None if lat is None or ref is None else round(ref.p50_ms / lat.p50_ms, 2)
    return row


def source_row(record: CompressionRecord) -> dict:
    """The first row of a table: the source as measured (its stored dtype and size)."""
    b = record.before
    metric = "dev_accuracy" if record.kind == CLASSIFIER else "mlm_accuracy"
    row = {
        "method": "source",
        "scheme": b.dtype,
        "parameters": b.parameters,
        "weights_mib": round(b.weights_bytes / 2**20, 2),
        "vs_fp32": round(b.weights_bytes / record.fp32_weights_bytes, 3),
        "vs_source": 1.0,
        "quality_before": getattr(b, metric),
        "quality_after": getattr(b, metric),
        "metric": metric,
    }
    for lat in b.latency:
        row[f"p50_{lat.threads}t_ms"], row[f"p95_{lat.threads}t_ms"] = lat.p50_ms, lat.p95_ms
        row[f"speedup_{lat.threads}t"] = 1.0
    return row


def write_csv(path: str | Path, rows: Sequence[dict], columns: Sequence[str] | None = None) -> Path:
    """`rows` as a CSV file with `columns` (default: the first row's keys)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(columns or (rows[0].keys() if rows else ()))
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def curve_rows(points: Sequence[CurvePoint]) -> list[dict]:
    return [asdict(p) for p in points]


def read_csv(path: str | Path) -> list[dict]:
    """A committed table's rows (numbers as floats where they parse); [] when the file is absent."""
    path = Path(path)
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as fh:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def _number(text: str):
    try:
        return float(text)
    except (TypeError, ValueError):
        return text if text != "" else None


def read_curve(path: str | Path) -> list[CurvePoint]:
    """A committed pruning curve (curve_rows' CSV) as points; [] when absent."""
    names = {f.name for f in fields(CurvePoint)}
    out = []
    for row in read_csv(path):
        out.append(
            CurvePoint(
                str(row["method"]),
                float(row["share"]),
                int(row["parameters"]),
                float(row["quality"]),
                str(row["metric"]),
            )
            if names <= set(row)
            else None
        )
    return [p for p in out if p is not None]
