"""The successors suite's pretraining record (#54): each finished variant's parameters, size on disk,
tokens, seconds and held-out accuracies from its run folder (bertlab.ablations.successors_record),
plus what needs torch: a sentence-pair head's accuracy on held-out NSP and sentence-order instances
both ways (BERT's NSP head and ALBERT's SOP head, bertlab.training.pair_tasks; each run's own
tokenizer and held-out documents), and with --latency fill-mask latency. Writes pretraining.csv and
curves.csv into --out.

    python -m bench.successors_record --runs /work/runs --out results/successors
    python -m bench.successors_record --runs /work/runs --out results/successors --latency --threads 1

Rows whose run is missing or has not finished are skipped with a note. The pair heads are scored on
the run's held-out instances as its evaluation reads them (masked, static), in float32, so a head on
its own task gets the accuracy the run logged, to within the logged evaluation's bf16 rounding.

Latency is the Fill-mask page's call, `LoadedModel.fill_mask(sentence, top_k=8, joint=True)`, on the
model folder as the page opens it (an ELECTRA pair opens as its generator, which answers), over
`SENTENCES` (one [MASK] each): a warm-up pass, then --rounds rounds in which every model answers every
sentence in turn (the models' order turning each round, so that load that comes and goes hits all
alike); p50 and p90 are over every timed call. Time on a quiet machine (pause training, or --pause its
pids); without --latency, latencies an earlier record at --out measured for the same run are kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.bench_compression import paused
from bertlab.ablations.successors_record import PretrainingRow, read_record, read_suite_runs, write_record
from bertlab.data.corpus import Corpus
from bertlab.explore import FILL_MASK_EXAMPLES, MASK
from bertlab.inference import LoadedModel, load_model
from bertlab.storage.checkpoint import load_pretraining_model
from bertlab.storage.runfolder import model_dir
from bertlab.training.pair_tasks import heldout_instances, run_corpus, run_settings, score_both_ways
from bertlab.training.pretrain_config import PretrainConfig
from bertlab.training.replaced_eval import score_replaced_detection

# one [MASK] each: the Fill-mask page's one-mask examples, then everyday sentences of the same kind
SENTENCES = tuple(s for s in FILL_MASK_EXAMPLES if s.count(MASK) == 1) + (
    "He played the [MASK] in the school orchestra.",
    "The river flows into the [MASK] near the old harbour.",
    "They elected a new [MASK] after the war.",
    "The book was written in the [MASK] century.",
    "She opened the door and walked into the [MASK].",
    "The children went to [MASK] early in the morning.",
    "The train arrived at the [MASK] ten minutes late.",
    "He was born in a small [MASK] in the north of England.",
    "The army crossed the river and attacked the [MASK].",
    "Water boils at one hundred degrees [MASK].",
    "The king and the [MASK] ruled the country together.",
    "We ate dinner at a [MASK] near the station.",
    "The film was directed by a famous [MASK].",
)
TOP_K = 8  # the Fill-mask page's default answers per mask
LATENCY_FIELDS = ("latency_p50_ms", "latency_p90_ms", "latency_threads", "latency_calls")


def run_text(run_dir: Path, corpora: dict, args) -> tuple[PretrainConfig, Corpus]:
    """A run's recipe and its corpus; the variants read the same text, so each corpus is loaded once."""
    cfg = run_settings(run_dir)
    key = tuple(cfg.corpus)
    if key not in corpora:
        corpora[key] = run_corpus(cfg, args.data_dir)
    return cfg, corpora[key]


def replaced_scores(row: PretrainingRow, run_dir: Path, corpora: dict, args) -> PretrainingRow:
    """An ELECTRA row with its discriminator scored on held-out tokens against the rate it must beat."""
    if row.objective != "electra":
        return row
    cfg, corpus = run_text(run_dir, corpora, args)
    pair, tokenizer, _ = load_pretraining_model(model_dir(run_dir), whole=True)
    instances = heldout_instances(cfg, corpus, tokenizer, limit=args.instances or None)
    s = score_replaced_detection(pair, instances, cfg.heldout_data(), tokenizer.pad_id)
    print(
        f"{row.variant}: discriminator {s.accuracy:.2%} on {s.tokens:,} held-out tokens; answering 'original' "
        f"everywhere {s.trivial:.2%}; AUC replaced vs original {s.auc:.3f}"
    )
    return dataclasses.replace(row, rtd_trivial_acc=round(s.trivial, 4), rtd_auc=round(s.auc, 4))


def pair_scores(row: PretrainingRow, lm: LoadedModel, run_dir: Path, corpora: dict, args) -> PretrainingRow:
    """The row with its sentence-pair head scored on held-out NSP and SOP instances (as it was without a head)."""
    if not row.pair_head:
        return row
    if row.pair_head not in lm.heads:
        print(f"note: {row.variant}: its model folder has no {row.pair_head} head; pair tasks not scored")
        return row
    cfg, corpus = run_text(run_dir, corpora, args)
    start = time.time()
    scores = score_both_ways(lm.model, row.pair_head, cfg, corpus, lm.tokenizer, limit=args.instances)
    for task, s in scores.items():
        print(
            f"{row.variant}: {row.pair_head} head on held-out {task} instances: {s.accuracy:.1%} of {s.instances} "
            f"(always answering 0 scores {s.label0_share:.1%})"
        )
    print(f"{row.variant}: pair tasks scored in {time.time() - start:.0f}s")
    return dataclasses.replace(
        row,
        nsp_acc=round(scores["nsp"].accuracy, 4),
        nsp_instances=scores["nsp"].instances,
        sop_acc=round(scores["sop"].accuracy, 4),
        sop_instances=scores["sop"].instances,
    )


def nearest_rank(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def time_fill_mask(models: dict[str, LoadedModel], threads: int, rounds: int) -> dict[str, list[float]]:
    """variant -> every timed fill-mask call (ms): a warm-up pass, then `rounds` rounds of every model
    on every sentence, the models' order turning by one each round."""
    torch.set_num_threads(threads)
    for lm in models.values():
        for sentence in SENTENCES:
            lm.fill_mask(sentence, top_k=TOP_K, joint=True)
    times: dict[str, list[float]] = {name: [] for name in models}
    names = list(models)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            lm = models[name]
            for sentence in SENTENCES:
                start = time.perf_counter()
                lm.fill_mask(sentence, top_k=TOP_K, joint=True)
                times[name].append((time.perf_counter() - start) * 1000)
        print(f"latency round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return times


def kept_latency(row: PretrainingRow, earlier: dict[str, PretrainingRow]) -> PretrainingRow:
    """The row with the latency an earlier record measured for the same run at the same step, if any."""
    old = earlier.get(row.variant)
    if old is None or (old.run, old.steps) != (row.run, row.steps) or old.latency_p50_ms is None:
        return row
    return dataclasses.replace(row, **{k: getattr(old, k) for k in LATENCY_FIELDS})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", required=True, help="the folder holding the suite's run folders (succ-bert, ...)")
    p.add_argument("--out", required=True, help="folder for pretraining.csv and curves.csv (results/successors)")
    p.add_argument("--latency", action="store_true", help="also time fill-mask (on a quiet machine)")
    p.add_argument("--threads", type=int, default=1, help="torch threads while timing (default 1)")
    p.add_argument("--rounds", type=int, default=10, help="latency rounds of every sentence (default 10)")
    p.add_argument(
        "--data-dir",
        help="where the runs' corpus folders are, when not at the paths their run_config.json names "
        "(e.g. ../shared/data/corpus)",
    )
    p.add_argument(
        "--instances", type=int, help="held-out pair instances per task (default: each run's eval_instances)"
    )
    p.add_argument("--pause", type=int, nargs="*", default=[], help="pids to pause while timing (resumed after)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    found = read_suite_runs(args.runs)
    for note in found.skipped:
        print(f"skipped {note}")
    if not found.rows:
        print("no finished run to record")
        return 1
    models = {row.variant: load_model(model_dir(found.run_dirs[row.variant]), device="cpu") for row in found.rows}
    corpora: dict = {}
    rows = [pair_scores(row, models[row.variant], found.run_dirs[row.variant], corpora, args) for row in found.rows]
    rows = [replaced_scores(row, found.run_dirs[row.variant], corpora, args) for row in rows]
    if args.latency:
        with paused(args.pause):
            if args.pause:
                time.sleep(5)  # the paused processes' threads leave the cores
            load_before = os.getloadavg()
            times = time_fill_mask(models, args.threads, args.rounds)
            load_after = os.getloadavg()
        print(f"load average (1, 5, 15 min) before timing {load_before}, after {load_after}")
        rows = [
            dataclasses.replace(
                row,
                latency_p50_ms=round(statistics.median(times[row.variant]), 3),
                latency_p90_ms=round(nearest_rank(sorted(times[row.variant]), 0.9), 3),
                latency_threads=args.threads,
                latency_calls=len(times[row.variant]),
            )
            for row in rows
        ]
    else:
        earlier = {r.variant: r for r in read_record(args.out).rows}
        rows = [kept_latency(row, earlier) for row in rows]
    pretraining, curves = write_record(args.out, rows, found.curves)
    shown = ("variant", "parameters", "size_mb", "tokens", "train_s", "mlm_acc", "task_metric", "task_acc")
    shown += ("nsp_acc", "sop_acc", "latency_p50_ms", "latency_p90_ms")
    print(" | ".join(shown))
    for row in rows:
        print(" | ".join("" if getattr(row, k) is None else str(getattr(row, k)) for k in shown))
    print(f"wrote {pretraining} and {curves} ({len(found.curves)} curve points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
