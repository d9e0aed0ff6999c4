"""`bertlab compress quantize|prune|distill`: the compression lab's commands (#55).

    bertlab compress quantize --model checkpoints/bertlab-mini --out checkpoints/bertlab-mini-int8
    bertlab compress quantize --model checkpoints/bertlab-mini --out /tmp/mini-bf16 --scheme bf16 \
        --held-out DATA/heldout.txt
    bertlab compress prune --model checkpoints/bertlab-mini --heads 0.25 --out /tmp/mini-heads25
    bertlab compress prune --model checkpoints/bertlab-mini --sparsity 0.5 --out /tmp/mini-sparse50
    bertlab compress distill --teacher checkpoints/bertlab-mini --layers 2 --out /tmp/mini-l2 \
        --config configs/compress/distill-mini.yaml train.max_time_s=1800
    bertlab compress quantize --model runs/sst2/model --dev DATA/glue/SST-2/dev.tsv --out runs/sst2-int8/model

Each prints the before/after record and saves it as the output folder's compression.json.

Imports bertlab.compress.quantize, bertlab.compress.prune, bertlab.compress.measure and
bertlab.compress.distill (with its torch-free arguments, distill_args).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from bertlab.compress import distill_args
from bertlab.compress.distill import distil_from_args
from bertlab.compress.measure import CompressionRecord, Measurement
from bertlab.compress.prune import parse_order, prune
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
    _common(q)
    r = sub.add_parser("prune", help="remove the least important heads, or zero the smallest weights, measured")
    r.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    r.add_argument("--out", required=True, help="new folder for the pruned copy")
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--heads", type=float, help="share of all heads to remove (structured), e.g. 0.25")
    how.add_argument("--sparsity", type=float, help="share of each Linear weight to zero (unstructured), e.g. 0.5")
    r.add_argument("--order", help="heads to remove first, as layer:head pairs (default: Michel et al. importance)")
    _common(r)
    d = sub.add_parser(
        "distill", help="a student of N of the teacher's layers trained to match it (DistilBERT), measured"
    )
    distill_args.add_args(d)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--held-out", help="text file (a sentence a line) to count masked-LM accuracy on")
    p.add_argument("--dev", help="a fine-tuned classifier's dev file (its task's format) to count accuracy on")
    p.add_argument("--repeats", type=int, default=30, help="timed fill-mask runs per thread count")
    p.add_argument("--json", action="store_true", help="print the record as JSON")


def run(args: argparse.Namespace) -> int:
    if args.compress_command == "distill":
        return _distill(args)
    if args.compress_command == "prune":
        order = parse_order(args.order) if args.order else None
        record, _ = prune(
            args.model, args.out, args.heads, args.sparsity, order, args.held_out, repeats=args.repeats, dev=args.dev
        )
    else:
        record, _ = quantize(args.model, args.out, args.scheme, args.held_out, repeats=args.repeats, dev=args.dev)
    print(json.dumps(asdict(record), indent=2) if args.json else format_record(record, args.out))
    return 0


def _distill(args: argparse.Namespace) -> int:
    record, out, result = distil_from_args(args)
    if record is None:
        print(f"stopped at step {result.progress.step}; continue with --resume --run-dir {result.run_dir}")
        return 3
    print(json.dumps(asdict(record), indent=2) if args.json else format_record(record, str(out)))
    return 0


def _row(name: str, m: Measurement, record: CompressionRecord) -> str:
    times = "  ".join(f"{lat.threads}t p50 {lat.p50_ms:.2f} / p95 {lat.p95_ms:.2f} ms" for lat in m.latency)
    acc = "" if m.mlm_accuracy is None else f"  mlm acc {m.mlm_accuracy:.1%}"
    acc += "" if m.dev_accuracy is None else f"  dev acc {m.dev_accuracy:.1%}"
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
    what = "classification" if record.kind == "classifier" else record.before.timed
    for lb, la in zip(b.latency, a.latency, strict=True):
        lines.append(
            f"{what} p50 at {lb.threads} thread(s): {lb.p50_ms:.2f} -> {la.p50_ms:.2f} ms, "
            f"{lb.p50_ms / la.p50_ms:.2f}x the speed (timings share the CPU with whatever else runs)"
        )
    lines += [f"{key}: {value}" for key, value in record.details.items()]
    lines += [f"note: {n}" for n in record.notes]
    return "\n".join(lines)
