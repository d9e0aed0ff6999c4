"""Masked-LM accuracy on long passages, by position: a 512-token model reading chunks against a long
(windowed) model reading the whole passage at once (#56).

The held-out text (read in place) is tokenized with the models' shared vocabulary and cut into
consecutive passages of `--length` tokens ([CLS] passage [SEP]; Project Gutenberg's licence header
and footer are left out). In every passage 15% of the text tokens are replaced by [MASK], chosen with
a fixed seed, so every reading below answers the same masked positions of the same passages; a
prediction is right when its top-1 token is the original. Positions are the token's place in the
whole passage ([CLS] is 0), and accuracy is reported per bucket (0-511, 512-1023, 1024-2047,
2048-4095) and for < 512 and >= 512.

Readings:
- short, chunks: the short model reads [CLS] chunk [SEP] inputs of its own length (512), the chunks
  side by side without overlap (the plain baseline: a token near a chunk's start sees no left context);
- short, strided: windows of the same length advanced by half of it; each masked token is answered
  by the window where it sits farthest from an edge (at least a quarter window of context on each side,
  except at the passage's ends);
- long, whole passage: the long model reads the passage in one input (it must have at least
  `--length` positions; a model with fewer reads it in chunks of its length, as the short one).

    python -m bench.eval_long_mlm --short checkpoints/bertlab-mini --long /work/runs/long-4096/model \
        --text ../shared/data/corpus/gutenberg/pg1661.txt --length 4096
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bertlab.errors import InputError
from bertlab.inference import LoadedModel, load_model

BUCKETS = (0, 512, 1024, 2048, 4096)  # bucket edges: [0, 512), [512, 1024), ...
MASK_SHARE = 0.15
GUTENBERG_MARKERS = ("*** START OF", "*** END OF")


@dataclass
class Passages:
    """Masked passages: (N, T) ids as the models read them, and where the masks are."""

    ids: torch.Tensor  # (N, T) long: [CLS] text [SEP] with [MASK] at the masked positions
    labels: torch.Tensor  # (N, T) long: the original token at masked positions, -1 elsewhere

    @property
    def masked(self) -> torch.Tensor:
        return self.labels >= 0  # (N, T) bool


@dataclass
class Score:
    """Correct answers and masked positions per bucket of passage positions."""

    edges: tuple[int, ...]
    correct: list[int] = field(default_factory=list)
    count: list[int] = field(default_factory=list)

    def add(self, positions: torch.Tensor, right: torch.Tensor) -> None:
        """positions: (M,) long passage positions; right: (M,) bool."""
        if not self.count:
            self.correct, self.count = [0] * (len(self.edges) - 1), [0] * (len(self.edges) - 1)
        for b, (lo, hi) in enumerate(itertools.pairwise(self.edges)):
            inside = (positions >= lo) & (positions < hi)
            self.count[b] += int(inside.sum())
            self.correct[b] += int((right & inside).sum())

    def split(self, at: int = 512) -> dict[str, tuple[int, int]]:
        """{"< at": (correct, count), ">= at": (...)} over the buckets wholly on either side."""
        out = {f"< {at}": [0, 0], f">= {at}": [0, 0]}
        for lo, c, n in zip(self.edges[:-1], self.correct, self.count, strict=True):
            side = out[f"< {at}" if lo < at else f">= {at}"]
            side[0] += c
            side[1] += n
        return {k: (c, n) for k, (c, n) in out.items()}


def book_text(path: str | Path) -> str:
    """The text of a book file, without Project Gutenberg's header and licence when it has them."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    start, end = text.find(GUTENBERG_MARKERS[0]), text.find(GUTENBERG_MARKERS[1])
    if start >= 0:
        text = text[text.find("\n", start) + 1 : end if end > start else None]
    return text


def make_passages(lm: LoadedModel, text: str, length: int, limit: int | None = None, seed: int = 0) -> Passages:
    """Consecutive passages of `length` tokens ([CLS] + length-2 text tokens + [SEP]) with 15% of their
    text tokens masked (a torch.Generator seeded with `seed`)."""
    tok = lm.tokenizer
    stream = torch.tensor(tok.tokenize_batch([text])[0], dtype=torch.long)
    body = length - 2
    n = len(stream) // body if limit is None else min(limit, len(stream) // body)
    if n == 0:
        raise InputError(
            f"the text has {len(stream):,} tokens, fewer than one passage of {length:,}; use a longer text"
        )
    text_ids = stream[: n * body].view(n, body)  # (N, T-2)
    ids = torch.cat([torch.full((n, 1), tok.cls_id), text_ids, torch.full((n, 1), tok.sep_id)], dim=1)  # (N, T)
    g = torch.Generator().manual_seed(seed)
    chosen = torch.rand(n, length, generator=g) < MASK_SHARE
    chosen[:, 0] = chosen[:, -1] = False
    labels = torch.where(chosen, ids, torch.full_like(ids, -1))
    return Passages(torch.where(chosen, torch.full_like(ids, tok.mask_id), ids), labels)


def windows(length: int, window: int, stride: int) -> list[int]:
    """Starts (in text-token indices, [CLS] and [SEP] left out) of windows of `window` text tokens
    that cover `length` text tokens, advancing by `stride`; the last one ends at the end."""
    if window >= length:
        return [0]
    starts = list(range(0, length - window + 1, stride))
    if starts[-1] + window < length:
        starts.append(length - window)
    return starts


@torch.no_grad()
def predict(lm: LoadedModel, passages: Passages, max_length: int, stride: int | None = None, batch: int = 8):
    """(N, T) long: the model's top-1 token at every masked position (-1 elsewhere), reading each
    passage in [CLS] window [SEP] inputs of `max_length` tokens advanced by `stride` (default: the
    window, no overlap); a masked token is answered by the window where it is farthest from an edge."""
    N, T = passages.ids.shape
    body, window = T - 2, min(max_length, T) - 2
    starts = windows(body, window, stride or window)
    guess = torch.full((N, T), -1, dtype=torch.long)
    margin = torch.full((N, T), -1, dtype=torch.long)  # the answering window's context on the shorter side
    cls, sep = passages.ids[:, :1], passages.ids[:, -1:]
    inputs = [(p, s) for p in range(N) for s in starts]
    for i in range(0, len(inputs), batch):
        part = inputs[i : i + batch]
        rows = torch.stack([torch.cat([cls[p], passages.ids[p, 1 + s : 1 + s + window], sep[p]]) for p, s in part])
        masked = rows == lm.tokenizer.mask_id  # (b, window+2)
        out = lm.model(rows.to(lm.device), mlm_positions=masked.to(lm.device))
        answers = out.mlm_logits.argmax(-1).cpu()  # (M,) row-major over `masked`
        row_of, col = masked.nonzero(as_tuple=True)
        for k, (p, s) in enumerate(part):
            c = col[row_of == k]  # masked columns of this input (column 0 is [CLS])
            t = s + c - 1  # their text-token indices
            left = t - s if s > 0 else torch.full_like(t, body)  # the passage's own ends are not edges
            right = s + window - 1 - t if s + window < body else torch.full_like(t, body)
            ctx = torch.minimum(left, right)
            better = ctx > margin[p, t + 1]
            guess[p, t[better] + 1] = answers[row_of == k][better]
            margin[p, t[better] + 1] = ctx[better]
    return guess


def score(passages: Passages, guess: torch.Tensor, edges: tuple[int, ...] = BUCKETS) -> Score:
    masked = passages.masked
    positions = masked.nonzero(as_tuple=True)[1]
    result = Score(edges)
    result.add(positions, guess[masked] == passages.labels[masked])
    return result


def readings(short: LoadedModel, long: LoadedModel, passages: Passages, edges=BUCKETS) -> dict[str, Score]:
    """The three readings of the module docstring, scored on the same masked positions."""
    n, T = short.max_length, passages.ids.shape[1]
    long_name = (
        f"long, whole passage ({T} tokens)"
        if long.max_length >= T
        else f"long, {long.max_length}-token chunks (no overlap; it reads no more)"
    )
    return {
        f"short, {n}-token chunks (no overlap)": score(passages, predict(short, passages, n), edges),
        f"short, {n}-token windows, stride {n // 2}": score(passages, predict(short, passages, n, n // 2), edges),
        long_name: score(passages, predict(long, passages, long.max_length), edges),
    }


def check_same_vocabulary(a: LoadedModel, b: LoadedModel) -> None:
    if a.tokenizer.vocab != b.tokenizer.vocab:
        raise InputError(
            f"{a.path} and {b.path} have different vocabularies, so their masked positions cannot be the same "
            "tokens; compare models that share a vocab.txt (the long model continued from the short one)"
        )


def report(results: dict[str, Score], at: int = 512) -> str:
    edges = next(iter(results.values())).edges
    names = [f"{lo}-{hi - 1}" for lo, hi in itertools.pairwise(edges)]
    head = "| reading | " + " | ".join(names) + f" | < {at} | >= {at} |"
    lines = [head, "|---|" + "---:|" * (len(names) + 2)]
    for name, s in results.items():
        cells = [f"{c / n:.1%} ({c}/{n})" if n else "-" for c, n in zip(s.correct, s.count, strict=True)]
        cells += [f"{c / n:.1%} ({c}/{n})" if n else "-" for c, n in s.split(at).values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--short", required=True, help="model folder of the 512-token (full attention) model")
    ap.add_argument("--long", required=True, help="model folder of the long (windowed) model")
    ap.add_argument("--text", required=True, help="held-out text file (read in place)")
    ap.add_argument("--length", type=int, default=None, help="passage tokens (default: the long model's positions)")
    ap.add_argument("--passages", type=int, default=None, help="at most this many passages (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="also write the counts here")
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="NAME=FOLDER[@TOKENS]",
        help="another reading: a model (same vocabulary) reading the passage whole, or in chunks of TOKENS "
        "(e.g. shipped=checkpoints/bertlab-mini@128: the shipped model at the length it was trained on)",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    short, long = load_model(args.short, device="cpu"), load_model(args.long, device="cpu")
    check_same_vocabulary(short, long)
    length = args.length or long.config.max_position_embeddings
    passages = make_passages(short, book_text(args.text), length, args.passages, args.seed)
    edges = tuple(e for e in BUCKETS if e < length) + (length,)
    results = readings(short, long, passages, edges)
    for spec in args.also:
        name, _, where = spec.partition("=")
        folder, _, tokens = where.partition("@")
        other = load_model(folder, device="cpu")
        check_same_vocabulary(short, other)
        n = min(int(tokens), other.max_length) if tokens else other.max_length
        how = f"whole passage ({length} tokens)" if n >= length else f"{n}-token chunks (no overlap)"
        results[f"{name}, {how}"] = score(passages, predict(other, passages, n), edges)
    print(
        f"short: {args.short} (reads {short.max_length}, {short.config.attention_pattern} attention)  "
        f"long: {args.long} (reads {long.max_length}, {long.config.attention_pattern} attention)\n"
        f"text: {args.text}: {passages.ids.shape[0]} passages of {length} tokens, "
        f"{int(passages.masked.sum())} masked ({MASK_SHARE:.0%}, seed {args.seed})\n"
    )
    print(report(results))
    print(f"\n{time.perf_counter() - start:.0f} s, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "short": str(args.short),
                    "long": str(args.long),
                    "text": str(args.text),
                    "length": length,
                    "passages": passages.ids.shape[0],
                    "seed": args.seed,
                    "readings": {
                        k: {"edges": s.edges, "correct": s.correct, "count": s.count} for k, s in results.items()
                    },
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
