"""`bertlab compress quantize`: the compression lab's commands (#55).

    bertlab compress quantize --model checkpoints/bertlab-mini --out checkpoints/bertlab-mini-int8
    bertlab compress quantize --model checkpoints/bertlab-mini --out /tmp/mini-bf16 --scheme bf16 \
        --held-out DATA/heldout.txt

Each prints the before/after record and saves it as the output folder's compression.json.

Imports bertlab.compress.quantize and bertlab.compress.measure.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from bertlab.compress.measure import CompressionRecord, Measurement
from bertlab.compress.quantize import SCHEMES, quantize


def add_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="compress_command", required=True)
    q = sub.add_parser("quantize", help="a dynamic int8 or half-precision copy of a model folder, measured")
    q.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    q.add_argument("--out", required=True, help="new folder for the compressed copy")
    q.add_argument(
        "--scheme",
        choices=SCHEMES,
        default=SCHEMES[0],
        help="int8-dynamic: int8 Linear weights, CPU only, BERT Lab only; bf16/fp16: every weight cast",
    )
    q.add_argument("--held-out", help="text file (a sentence a line) to count masked-LM accuracy on")
    q.add_argument("--repeats", type=int, default=30, help="timed fill-mask runs per thread count")
    q.add_argument("--json", action="store_true", help="print the record as JSON")


def run(args: argparse.Namespace) -> int:
    record, _ = quantize(args.model, args.out, args.scheme, args.held_out, repeats=args.repeats)
    print(json.dumps(asdict(record), indent=2) if args.json else format_record(record, args.out))
    return 0


def _row(name: str, m: Measurement, record: CompressionRecord) -> str:
    times = "  ".join(f"{lat.threads}t p50 {lat.p50_ms:.2f} / p95 {lat.p95_ms:.2f} ms" for lat in m.latency)
    acc = "" if m.mlm_accuracy is None else f"  mlm acc {m.mlm_accuracy:.1%}"
    size = f"{m.weights_bytes / 2**20:.2f} MiB ({m.weights_bytes / record.fp32_weights_bytes:.2f}x fp32)"
    return f"{name:<7}{m.dtype:<9}{m.parameters:>11,} params  {size}  {times}{acc}"


def format_record(record: CompressionRecord, out: str) -> str:
    """The record as a few lines: before, after, the ratios that matter."""
    b, a = record.before, record.after
    lines = [
        f"{record.method} {record.scheme}: {record.source} -> {out}",
        _row("before", b, record),
        _row("after", a, record),
        f"size: {a.weights_bytes / record.fp32_weights_bytes:.2f}x of fp32 "
        f"({record.fp32_weights_bytes / 2**20:.2f} MiB), {a.weights_bytes / b.weights_bytes:.2f}x of the source "
        f"as stored ({b.dtype}, {b.weights_bytes / 2**20:.2f} MiB)",
    ]
    for lb, la in zip(b.latency, a.latency, strict=True):
        lines.append(f"fill-mask p50 at {lb.threads} thread(s): {lb.p50_ms / la.p50_ms:.2f}x faster")
    lines += [f"note: {n}" for n in record.notes]
    return "\n".join(lines)
