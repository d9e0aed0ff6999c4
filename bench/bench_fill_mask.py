"""Fill-mask latency on CPU, bertlab vs the transformers fill-mask pipeline: median over repeated runs.

    python -m bench.bench_fill_mask                 # random "mini" model (L4/H256/A4), ~8000-token vocab
    python -m bench.bench_fill_mask --model DIR     # any checkpoint folder or Hub id

(from the repository root; `python bench/bench_fill_mask.py` works too when bertlab is installed)

Measures one sentence with one [MASK], and one with two [MASK]s (independent answers only, and
with the joint most-confident-first fill, which costs one extra forward pass per extra mask).
The peer is `transformers.pipeline("fill-mask")` on the same checkpoint (it opens ours as it
is), timed alternately with bertlab run by run, so load on the machine hits both alike; the
ratio is printed for the cases the pipeline has (it answers several masks independently only).
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

from bertlab.config import preset
from bertlab.inference import LoadedModel, load_model
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import save_checkpoint
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
    return [
        " ".join(rng.choice(ENGLISH) if rng.random() < 0.5 else rng.choice(made_up) for _ in range(12)) + "."
        for _ in range(n_lines)
    ]


def build_random_mini(directory: Path, vocab_size: int = 8000, seed: int = 0) -> Path:
    """A randomly initialised mini model (L4/H256/A4) with a freshly trained vocabulary."""
    rng = random.Random(seed)
    tokenizer = BertTokenizer.train(texts=synthetic_corpus(rng), vocab_size=vocab_size, min_frequency=1)
    torch.manual_seed(seed)
    model = BertForPreTraining(preset("mini", vocab_size=len(tokenizer)))
    return save_checkpoint(directory, model, tokenizer)


def time_alternating(fns: dict[str, Callable[[], object]], runs: int, warmup: int) -> dict[str, list[float]]:
    """Time several functions run by run in turn (A, B, A, B, ...)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def peer_pipeline(path, device: str):
    """transformers' fill-mask pipeline on the same checkpoint, or None when transformers is missing."""
    try:
        import transformers
    except ImportError:
        return None
    transformers.logging.set_verbosity_error()
    return transformers.pipeline("fill-mask", model=str(path), tokenizer=str(path), device=device, top_k=5)


def bench(lm: LoadedModel, runs: int, warmup: int, peer=None) -> dict[str, dict[str, list[float]]]:
    cases = {
        "1 mask": {"bertlab": lambda: lm.fill_mask(ONE_MASK, top_k=5)},
        "2 masks, independent only": {"bertlab": lambda: lm.fill_mask(TWO_MASKS, top_k=5, joint=False)},
        "2 masks, with joint fill": {"bertlab": lambda: lm.fill_mask(TWO_MASKS, top_k=5, joint=True)},
    }
    if peer is not None:
        cases["1 mask"]["transformers"] = lambda: peer(ONE_MASK)
        cases["2 masks, independent only"]["transformers"] = lambda: peer(TWO_MASKS)
    return {name: time_alternating(fns, runs, warmup) for name, fns in cases.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="checkpoint folder or Hub id (default: random mini model)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-peer", action="store_true", help="time bertlab only")
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
        peer = None if args.no_peer else peer_pipeline(path, args.device)
        for name, by_impl in bench(lm, args.runs, args.warmup, peer).items():
            for impl, times in by_impl.items():
                q = statistics.quantiles(times, n=10)
                print(
                    f"{name:<26} {impl:<13} median {statistics.median(times):7.2f} ms   min {min(times):7.2f}   "
                    f"p10 {q[0]:7.2f}   p90 {q[-1]:7.2f}   ({args.runs} runs)"
                )
            if len(by_impl) == 2:
                ratio = statistics.median(by_impl["transformers"]) / statistics.median(by_impl["bertlab"])
                print(f"{'':<26} bertlab is {ratio:.2f}x as fast as the transformers pipeline")
        print(f"machine load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
