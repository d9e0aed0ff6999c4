"""Fill-mask latency on CPU: median over repeated runs after warm-up.

    python -m bench.bench_fill_mask                 # random "mini" model (L4/H256/A4), ~8000-token vocab
    python -m bench.bench_fill_mask --model DIR     # any checkpoint folder or Hub id

(from the repository root; `python bench/bench_fill_mask.py` works too when bertlab is installed)

Measures one sentence with one [MASK], and one with two [MASK]s (independent answers only, and
with the joint most-confident-first fill, which costs one extra forward pass per extra mask).
Weights are random when no --model is given: the numbers are about speed, not answers.
On a shared machine the median moves with other load (printed at the end); `min` shows what
the code itself costs.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from bertlab.checkpoint import save_checkpoint
from bertlab.config import preset
from bertlab.inference import LoadedModel, load_model
from bertlab.model import BertForPreTraining
from bertlab.tokenizer import BertTokenizer

ONE_MASK = "The capital of France is [MASK], a city on the river Seine."
TWO_MASKS = "The [MASK] sat on the mat and looked at the [MASK] outside."
ENGLISH = (
    "the a an of to in on and is was it he she they we you that this with for as at by from "
    "capital france paris city river seine cat dog sat mat looked outside bird tree sun sky day "
    "night man woman king queen house park ran walked played water world time year people"
).split()


def synthetic_corpus(rng: random.Random, n_lines: int = 20_000) -> list[str]:
    """English filler plus made-up words, so WordPiece training reaches ~8000 pieces."""
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 2, 1.5, 1, 0.8, 0.2, 0.2, 0.1, 0.1]
    made_up = ["".join(rng.choices(letters, weights, k=rng.randint(3, 10))) for _ in range(30_000)]
    return [" ".join(rng.choice(ENGLISH) if rng.random() < 0.5 else rng.choice(made_up) for _ in range(12)) + "." for _ in range(n_lines)]


def build_random_mini(directory: Path, vocab_size: int = 8000, seed: int = 0) -> Path:
    """A randomly initialised mini model (L4/H256/A4) with a freshly trained vocabulary."""
    rng = random.Random(seed)
    tokenizer = BertTokenizer.train(texts=synthetic_corpus(rng), vocab_size=vocab_size, min_frequency=1)
    torch.manual_seed(seed)
    model = BertForPreTraining(preset("mini", vocab_size=len(tokenizer)))
    return save_checkpoint(directory, model, tokenizer)


def time_ms(fn: Callable[[], object], runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def bench(lm: LoadedModel, runs: int, warmup: int) -> dict[str, list[float]]:
    cases = {
        "1 mask": lambda: lm.fill_mask(ONE_MASK, top_k=5),
        "2 masks, independent only": lambda: lm.fill_mask(TWO_MASKS, top_k=5, joint=False),
        "2 masks, with joint fill": lambda: lm.fill_mask(TWO_MASKS, top_k=5, joint=True),
    }
    return {name: time_ms(fn, runs, warmup) for name, fn in cases.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="checkpoint folder or Hub id (default: random mini model)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        if args.model is None:
            start = time.perf_counter()
            path = build_random_mini(Path(tmp) / "mini")
            print(f"built random mini model in {time.perf_counter() - start:.1f}s")
        else:
            path = args.model
        lm = load_model(path, device=args.device)
        c = lm.config
        print(
            f"model: {path}  L={c.num_layers} H={c.hidden_size} A={c.num_heads} vocab={len(lm.tokenizer)}  "
            f"device={lm.device} threads={torch.get_num_threads()} torch={torch.__version__}"
        )
        for text in (ONE_MASK, TWO_MASKS):
            print(f"  {len(lm.tokenizer.encode(text))} tokens: {text}")
        for name, times in bench(lm, args.runs, args.warmup).items():
            q = statistics.quantiles(times, n=10)
            print(
                f"{name:<28} median {statistics.median(times):7.2f} ms   min {min(times):7.2f}   "
                f"p10 {q[0]:7.2f}   p90 {q[-1]:7.2f}   ({args.runs} runs)"
            )
        print(f"machine load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
