"""Fill-mask latency of the teacher and its distilled student, alternating on one machine.

    PYTHONPATH=. python results/compression/distill/latency.py checkpoints/bertlab-mini \
        /work/runs/distill-mini-student --rounds 5 --repeats 50 > results/compression/distill/latency.csv

Each round times both models at 1 and 2 threads, the order of the two models swapped every round, so that
a change in the machine's load falls on both. Per row: wall-clock p50/p95 as `bertlab compress` records
them (bertlab.compress.measure.fill_mask_latency), then, over as many calls again, the fastest call and the
p50 of the process's CPU time per call. On a busy machine the wall clock mostly measures waiting for a core
(and with 2 threads, waiting for both); the CPU time of a one-thread call is the work itself.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time

import torch

from bertlab.compress.measure import PROBE_SENTENCE, fill_mask_latency
from bertlab.inference import LoadedModel, load_model


def fastest_and_cpu(loaded: LoadedModel, threads: int, repeats: int) -> tuple[float, float]:
    """(the fastest wall-clock call, the p50 of CPU time per call), in ms, of the same call as fill_mask_latency."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        wall, cpu = [], []
        for _ in range(repeats):
            w, c = time.perf_counter(), time.process_time()
            loaded.fill_mask(PROBE_SENTENCE, joint=False)
            wall.append((time.perf_counter() - w) * 1000)
            cpu.append((time.process_time() - c) * 1000)
    finally:
        torch.set_num_threads(before)
    return round(min(wall), 3), round(statistics.median(cpu), 3)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("teacher")
    p.add_argument("student")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=50)
    args = p.parse_args()
    models = {"teacher": load_model(args.teacher, device="cpu"), "student": load_model(args.student, device="cpu")}
    out = csv.writer(sys.stdout)
    out.writerow(["round", "threads", "model", "p50_ms", "p95_ms", "min_ms", "cpu_p50_ms", "repeats", "load_avg_1min"])
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for threads in (1, 2):
            for name in order:
                lat = fill_mask_latency(models[name], threads, args.repeats)
                fastest, cpu = fastest_and_cpu(models[name], threads, args.repeats)
                load = round(os.getloadavg()[0], 2)
                out.writerow([r, threads, name, lat.p50_ms, lat.p95_ms, fastest, cpu, lat.repeats, load])
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
