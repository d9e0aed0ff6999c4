"""The compression lab's targets (#55), side by side in one run: fill-mask latency of the shipped
model in fp32 against its int8-dynamic, bf16, heads-pruned-50% and magnitude-50% copies (and a
distilled student's folder when given), at 1 and 2 threads, reported as ratios to fp32; held-out
masked-LM accuracy of each; the CPU's flags.

    python -m bench.bench_compression --held-out ../shared/data/corpus/wikitext-2-raw/wiki.test.raw \
        [--student runs/mini-l2/model] [--rounds 7 --repeats 40] [--out bench/results/compression]

Every variant is built in memory from the same source (the heads ranked by Michel et al.'s
importance on --rank-on, else on the held-out text). Timing is interleaved: in each round, for
each thread count, each variant runs `--repeats` fill-masks after a warm-up, so load that comes and
goes hits all of them alike; p50 and p95 are over all the rounds' calls. The load average before
and after is printed: run it on a quiet machine (the issue's targets are for one).

Targets (issue #55): int8 p50 >= 1.5x faster than fp32 at 2 threads with masked-LM accuracy within
1 point; heads pruned by 50% measurably faster; a distilled student >= 1.6x faster.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from bertlab.compress.measure import PROBE_SENTENCE, masked_lm_accuracy, read_held_out, summarize_times, timed_calls
from bertlab.compress.prune import heads_to_prune, remove_heads, zero_smallest
from bertlab.compress.study import write_csv
from bertlab.hardware import cpu_flags
from bertlab.inference import LoadedModel, load_model
from bertlab.interpret.heads import MaskedSentences, head_importance
from bertlab.storage import quantized

FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def variants(source: LoadedModel, rank_lines: list[str], student: str | None) -> dict[str, LoadedModel]:
    """name -> model: fp32, int8, bf16, heads50, magnitude50 (and student)."""
    info = {**source.info}
    order = head_importance(source, MaskedSentences(rank_lines)).order()
    c = source.config
    out = {
        "fp32": source,
        # the same model again, in memory of its own: how far two timings of one model differ (the noise floor)
        "fp32-again": LoadedModel(copy.deepcopy(source.model), source.tokenizer, info),
        "int8": LoadedModel(quantized.quantize_int8(source.model), source.tokenizer, {**info, "quantization": "int8"}),
        "bf16": LoadedModel(copy.deepcopy(source.model).to(torch.bfloat16), source.tokenizer, info),
        "heads50": LoadedModel(
            remove_heads(source.model, heads_to_prune(c.num_layers, c.num_heads, order, 0.5)), source.tokenizer, info
        ),
        "magnitude50": LoadedModel(zero_smallest(source.model, 0.5)[0], source.tokenizer, info),
    }
    if student:
        out["student"] = load_model(student, device="cpu")
    return out


def time_all(models: dict[str, LoadedModel], threads: tuple[int, ...], rounds: int, repeats: int) -> dict:
    """(name, threads) -> every timed call (ms), interleaved round by round; the order of the models
    turns by one each round, so that none is always first after the thread count changes."""
    times: dict[tuple[str, int], list[float]] = {(n, t): [] for n in models for t in threads}
    names = list(models)
    for r in range(rounds):
        for t in threads:
            for name in names[r % len(names) :] + names[: r % len(names)]:
                m = models[name]
                call = lambda m=m: m.fill_mask(PROBE_SENTENCE, joint=False)  # noqa: E731
                times[(name, t)] += timed_calls(call, t, repeats, warmup=3)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return times


@contextlib.contextmanager
def paused(pids: Sequence[int]) -> Iterator[None]:
    """Other processes stopped (SIGSTOP) for the timing only, and continued (SIGCONT) afterwards
    whatever happens: an exception, Ctrl-C or a SIGTERM (turned into an exception here)."""

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, stop)
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it has ended: nothing to pause
                os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: nothing to continue
                os.kill(pid, signal.SIGCONT)
        signal.signal(signal.SIGTERM, old)


def _accuracy(name: str, model: LoadedModel, lines: list[str], earlier: str | None) -> float:
    """Held-out masked-LM accuracy, or the one an earlier run of this benchmark on the same text wrote."""
    if earlier:
        rows = {r["model"]: r for r in json.loads(Path(earlier).read_text())["rows"]}
        if name.removesuffix("-again") in rows:
            return rows[name.removesuffix("-again")]["mlm_accuracy"]
    return masked_lm_accuracy(model, lines)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        return platform.machine()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="checkpoints/bertlab-mini")
    p.add_argument("--held-out", required=True, help="text file to count masked-LM accuracy on")
    p.add_argument("--rank-on", help="text file to rank the heads on (default: the held-out file)")
    p.add_argument("--student", help="a distilled student's folder, timed beside the others")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--repeats", type=int, default=40)
    p.add_argument("--out", help="folder for compression.csv and compression.json")
    p.add_argument("--pause", type=int, nargs="*", default=[], help="pids to pause while timing (resumed after)")
    p.add_argument("--accuracy-from", help="an earlier run's compression.json: its accuracies (same held-out text)")
    p.add_argument("--pause-matching", help="also pause the processes whose command line matches (pgrep -f)")
    p.add_argument("--paused-file", help="write the paused pids here (for a shell trap that resumes them)")
    args = p.parse_args(argv)
    threads = tuple(int(t) for t in args.threads.split(","))
    torch.set_num_threads(1)
    lines = read_held_out(args.held_out)
    source = load_model(args.model, device="cpu")
    models = variants(source, read_held_out(args.rank_on) if args.rank_on else lines, args.student)
    pids = list(args.pause)
    if args.pause_matching:  # looked up now, not when the command was typed: runs start and end meanwhile
        found = subprocess.run(["pgrep", "-f", args.pause_matching], capture_output=True, text=True).stdout
        own = {os.getpid(), os.getppid()}  # this command line names the pattern too (and `timeout` above it)
        pids += [int(p) for p in found.split() if int(p) not in own]
    if args.paused_file:
        Path(args.paused_file).write_text(" ".join(map(str, pids)) + "\n")
    with paused(pids):
        time.sleep(5)  # the paused processes' threads leave the cores
        load_before = os.getloadavg()
        started = time.time()
        times = time_all(models, threads, args.rounds, args.repeats)
        timed_s = time.time() - started
        load_after = os.getloadavg()
    accuracy = {name: _accuracy(name, m, lines, args.accuracy_from) for name, m in models.items()}  # after the pause
    rows = []
    for name, m in models.items():
        row = {"model": name, "parameters": m.num_parameters(), "mlm_accuracy": round(accuracy[name], 4)}
        for t in threads:
            lat, ref = summarize_times(times[(name, t)], t), summarize_times(times[("fp32", t)], t)
            row |= {f"p50_{t}t_ms": lat.p50_ms, f"p95_{t}t_ms": lat.p95_ms}
            row[f"speedup_p50_{t}t"] = round(ref.p50_ms / lat.p50_ms, 2)
        rows.append(row)
    flags = sorted(f for f in FLAGS if f in cpu_flags())
    meta = {
        "cpu": _cpu_name(),
        "cpu_flags": flags,
        "torch": torch.__version__,
        "quantized_engine": torch.backends.quantized.engine,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "timing_seconds": round(timed_s, 1),
        "paused_pids": pids,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "sentence": PROBE_SENTENCE,
        "held_out": args.held_out,
        "held_out_lines": len(lines),
        "accuracy_from": args.accuracy_from,
    }
    header = ["model", "parameters", "mlm_accuracy"] + [
        k for t in threads for k in (f"p50_{t}t_ms", f"p95_{t}t_ms", f"speedup_p50_{t}t")
    ]
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(row[k]) for k in header))
    print(json.dumps(meta, indent=2))
    if args.out:
        write_csv(Path(args.out) / "compression.csv", rows, header)
        (Path(args.out) / "compression.json").write_text(json.dumps(meta | {"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
