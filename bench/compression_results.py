"""results/compression/: the compression lab's committed results (#55), for the shipped model and a
fine-tuned SST-2 classifier made from it.

    python bench/compression_results.py --work /work/runs/compressed \
        --held-out ../shared/data/corpus/wikitext-2-raw/wiki.test.raw \
        --rank-on ../shared/data/corpus/wikitext-2-raw/wiki.valid.raw \
        --classifier /work/runs/sst2-mini/model --dev ../shared/data/glue/SST-2/dev.tsv \
        --train ../shared/data/glue/SST-2/train.tsv

For each model: int8-dynamic and bf16 copies, heads pruned at 25 and 50%, magnitude pruning at 50
and 80%, each written by `bertlab compress` into `--work/<model>-<method>/model` (outside the
repository: no weights in git; a folder already there is read back, so the script resumes), its
compression.json copied beside the table; then a pruning curve (heads 0-75%, sparsity 0-90%)
computed in memory. Heads are ranked on other data than they are scored on: the masked LM on
WikiText-2's validation text (scored on its test text), the classifier on 512 of its training
sentences (scored on the dev set). One thread (the benchmark, bench_compression.py, times 1 and 2).

Writes <out>/{shipped,sst2}.csv, curve-{shipped,sst2}.csv and records/*.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from pathlib import Path

import torch

from bertlab.compress.measure import RECORD_FILE, CompressionRecord, Latency, Measurement, read_held_out
from bertlab.compress.prune import prune
from bertlab.compress.quantize import quantize
from bertlab.compress.source import CLASSIFIER, open_source
from bertlab.compress.study import (
    HEAD_SHARES,
    RECORD_COLUMNS,
    SPARSITY_SHARES,
    curve_rows,
    head_ranking_data,
    pruning_curve,
    rank_heads,
    record_row,
    source_row,
    write_csv,
)

log = logging.getLogger("compression_results")
VARIANTS = (
    ("int8", dict(kind="quantize", scheme="int8-dynamic")),
    ("bf16", dict(kind="quantize", scheme="bf16")),
    ("heads25", dict(kind="prune", heads=0.25)),
    ("heads50", dict(kind="prune", heads=0.5)),
    ("magnitude50", dict(kind="prune", sparsity=0.5)),
    ("magnitude80", dict(kind="prune", sparsity=0.8)),
)


def _read_record(folder: Path) -> CompressionRecord:
    data = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
    for side in ("before", "after"):
        m = data[side]
        data[side] = Measurement(**{**m, "latency": tuple(Latency(**lat) for lat in m["latency"])})
    return CompressionRecord(**data)


def _variant(model, out: Path, spec: dict, order, held_out, dev, repeats: int) -> CompressionRecord:
    if (out / RECORD_FILE).is_file():
        log.info("%s: read back", out)
        return _read_record(out)
    common = dict(held_out=held_out, dev=dev, threads=(1,), repeats=repeats)
    if spec["kind"] == "quantize":
        return quantize(model, out, spec["scheme"], **common)[0]
    return prune(model, out, spec.get("heads"), spec.get("sparsity"), order if "heads" in spec else None, **common)[0]


def one_model(name: str, model: str, args, lines, rank_lines) -> None:
    source = open_source(model, args.dev if name != "shipped" else None)
    if source.kind == CLASSIFIER:
        rank_data = head_ranking_data(source, labelled=args.train)
    else:
        rank_data = head_ranking_data(source, rank_lines)
    started = time.perf_counter()
    order = rank_heads(source, rank_data)
    log.info("%s: heads ranked in %.1f s: %s", name, time.perf_counter() - started, order)
    held_out = None if source.kind == CLASSIFIER else args.held_out
    dev = args.dev if source.kind == CLASSIFIER else None
    rows, records = [], Path(args.out) / "records"
    records.mkdir(parents=True, exist_ok=True)
    for variant, spec in VARIANTS:
        folder = Path(args.work) / f"{name}-{variant}" / "model"
        record = _variant(model, folder, spec, order, held_out, dev, args.repeats)
        if not rows:
            rows.append(source_row(record))
        rows.append(record_row(record))
        shutil.copyfile(folder / RECORD_FILE, records / f"{name}-{variant}.json")
        log.info("%s %s: %s", name, variant, rows[-1])
    write_csv(Path(args.out) / f"{name}.csv", rows, RECORD_COLUMNS)
    points = []
    for method, shares in (("heads", HEAD_SHARES), ("sparsity", SPARSITY_SHARES)):
        points += pruning_curve(source, method, shares, lines, dev, order)
        log.info("%s curve %s: %s", name, method, [(p.share, p.quality) for p in points if p.method == method])
    write_csv(Path(args.out) / f"curve-{name}.csv", curve_rows(points))
    (Path(args.out) / f"order-{name}.json").write_text(json.dumps([list(h) for h in order]) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="results/compression")
    p.add_argument("--model", default="checkpoints/bertlab-mini", help="the shipped model, as the records name it")
    p.add_argument("--work", required=True, help="folder for the compressed models (outside the repository)")
    p.add_argument("--held-out", required=True, help="text the masked LM is scored on (WikiText-2 test, raw)")
    p.add_argument("--rank-on", required=True, help="text the masked LM's heads are ranked on (WikiText-2 valid)")
    p.add_argument("--classifier", help="a fine-tuned SST-2 folder made from the shipped model")
    p.add_argument("--dev", help="its dev file")
    p.add_argument("--train", help="its training file (512 sentences rank its heads)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--max-lines", type=int, default=500, help="paragraphs read (500: what --held-out reads)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    torch.set_num_threads(1)
    lines = read_held_out(args.held_out, args.max_lines)
    one_model("shipped", args.model, args, lines, read_held_out(args.rank_on, args.max_lines))
    if args.classifier:
        one_model("sst2", args.classifier, args, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
