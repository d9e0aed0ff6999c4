"""Long inputs: time and peak memory of full attention against sparse patterns, 256 to 4,096 tokens.

For each sequence length and attention setting it times one forward pass (eval, no gradients, the
masked-LM head at the masked 15%) and one training step (forward + backward + AdamW step, masked LM
on 15% of positions, dropout 0.1 as pretraining has it), in fp32 and in bf16 autocast (where the
CPU multiplies bf16 natively), and measures their peak memory. The settings:

- full (SDPA): the default path, PyTorch's fused attention (memory linear in length, time quadratic);
- full, explicit scores: output_attentions=True, the T x T score matrix that attention views and the
  original BERT compute (memory quadratic too);
- window 256 / window 512: Longformer's sliding window (the whole window; half each side) plus [CLS]
  as the global token;
- bigbird 64x3: BigBird blocks of 64 tokens, 3 random blocks, first and last block global.

The model is the shipped model's shape (mini: L=4, H=256, A=4, intermediate 1024, vocab 8192) with
random weights and 4,096 positions; batch 1. Every configuration of every round runs in a freshly
forked process of a parent that built every model and warmed it up (a step at 16 tokens), on one
thread. Peak memory is the process's peak resident set (VmHWM, reset through /proc/self/clear_refs) minus its resident set just
before the measured call: a forward pass, then (after a reset) a training step (its activations,
workspace and gradients; the weights and AdamW's state exist already).
Rounds are interleaved (every length and setting once, then again), so load on the shared machine
hits all alike; times are medians over rounds, memory the largest.

    python -m bench.bench_long_inputs                       # all lengths, 2 rounds, writes bench/results/
    python -m bench.bench_long_inputs --lengths 256 512 --rounds 1 --out /tmp/x
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bertlab.config import BertConfig, preset
from bertlab.hardware import cpu_bf16_instructions
from bertlab.losses import IGNORE, masked_lm_score
from bertlab.model import BertForPreTraining

LENGTHS = (256, 512, 1024, 2048, 4096)
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Setting:
    """One attention setting: the config fields it changes and whether it asks for attention maps."""

    name: str
    overrides: dict = field(default_factory=dict)
    explicit: bool = False  # output_attentions=True: the explicit T x T score matrix under full attention


SETTINGS = (  # --settings picks by name; the default run leaves out the ones in EXTRA
    Setting("full (SDPA)"),
    Setting("full, explicit scores", explicit=True),
    # PyTorch's fused CPU kernel takes no dropout: with attention dropout (0.1, as pretraining) a training
    # step's SDPA falls back to its math path, which makes the T x T matrix; without, it stays fused
    Setting("full (SDPA), no attention dropout", {"attention_dropout": 0.0}),
    Setting("window 256", {"attention_pattern": "window", "attention_window": 256}),
    Setting("window 512", {"attention_pattern": "window", "attention_window": 512}),
    Setting("bigbird 64x3", {"attention_pattern": "bigbird", "attention_block": 64, "random_blocks": 3}),
)
SDPA, EXPLICIT = SETTINGS[0].name, SETTINGS[1].name
EXTRA = (SETTINGS[2].name,)


def model_config(setting: Setting, vocab: int = 8192, size: str = "mini", positions: int = 4096) -> BertConfig:
    fields = {
        "vocab_size": vocab,
        "max_position_embeddings": positions,
        "hidden_dropout": 0.1,
        "attention_dropout": 0.1,
    }
    return preset(size, **{**fields, **setting.overrides})


def make_batch(vocab: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """(1, T) ids with [CLS] first, 15% of positions chosen (never [CLS]) and masked, their labels."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (1, length), generator=g)
    ids[:, 0] = 2  # [CLS] in bertlab's vocabularies ([PAD] [UNK] [CLS] [SEP] [MASK])
    chosen = torch.rand(1, length, generator=g) < 0.15
    chosen[:, 0] = False
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    return {"input_ids": torch.where(chosen, torch.full_like(ids, 4), ids), "labels": labels, "chosen": chosen}


def forward(model: BertForPreTraining, batch: dict, explicit: bool, dtype: torch.dtype | None) -> None:
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        model(batch["input_ids"], mlm_positions=batch["chosen"], output_attentions=explicit)


def train_step(model, opt, batch: dict, explicit: bool, dtype: torch.dtype | None) -> None:
    """Forward + backward + AdamW step on the masked LM. With explicit scores the maps are returned
    (and the last layer runs at every position: bertlab's masked-only last layer needs no maps)."""
    model.train()
    cap = None if explicit else int(batch["chosen"].sum())
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        out = model(batch["input_ids"], mlm_positions=batch["chosen"], output_attentions=explicit, prediction_cap=cap)
        loss = masked_lm_score(out, batch["labels"])[0]
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


# --- one configuration in a fresh process ----------------------------------------------------
def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def _measure(fn) -> tuple[float, float]:
    """(seconds, MB of peak resident memory above the resident memory just before `fn`)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS now
    except OSError:
        pass  # no reset: the delta below is still a lower bound of the call's peak
    before = _status_kb("VmRSS")
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return seconds, max(0, _status_kb("VmHWM") - before) / 1024


@dataclass
class Prepared:
    """A setting's model and optimizer, built and warmed up once in the parent (forked children share them)."""

    setting: Setting
    model: BertForPreTraining
    opt: torch.optim.Optimizer


def prepare(settings, precisions, vocab: int = 8192, size: str = "mini") -> dict[str, Prepared]:
    """One model per setting (the same random weights), with a warm-up forward and training step at 16
    tokens in every precision: the gradients' shapes, AdamW's state and the kernels' set-up exist before
    any measured call."""
    out = {}
    for setting in settings:
        torch.manual_seed(0)
        model = BertForPreTraining(model_config(setting, vocab, size))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        warm = make_batch(vocab, 16, seed=1)
        for precision in precisions:
            dtype = torch.bfloat16 if precision == "bf16" else None
            forward(model, warm, setting.explicit, dtype)
            train_step(model, opt, warm, setting.explicit, dtype)
        out[setting.name] = Prepared(setting, model, opt)
    return out


def run_config(prepared: Prepared, length: int, precision: str, vocab: int) -> dict:
    """Time and measure one forward pass and one training step (in the process that calls it). The
    step's memory includes its gradients (set to None after every step), not the weights or AdamW state."""
    dtype = torch.bfloat16 if precision == "bf16" else None
    model, opt, explicit = prepared.model, prepared.opt, prepared.setting.explicit
    warm = make_batch(vocab, 16, seed=1)  # a forked child faults in the library pages it runs: not the call's memory
    forward(model, warm, explicit, dtype)
    train_step(model, opt, warm, explicit, dtype)
    batch = make_batch(vocab, length)
    fwd_s, fwd_mb = _measure(lambda: forward(model, batch, explicit, dtype))
    train_s, train_mb = _measure(lambda: train_step(model, opt, batch, explicit, dtype))
    return {"forward_s": fwd_s, "forward_mb": fwd_mb, "train_s": train_s, "train_mb": train_mb}


def _child(conn, *args) -> None:
    # one thread: torch then enters no OpenMP parallel region, whose pool (if the parent ran one) did not
    # survive the fork and would hang the child
    torch.set_num_threads(1)
    try:
        conn.send(run_config(*args))
    except Exception as exc:  # sent back to the parent, which reports it beside the configuration
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    conn.close()


def run_forked(prepared: Prepared, length: int, precision: str, vocab: int) -> dict:
    """run_config in a forked child: its memory starts from the parent's, and what it allocates and
    what its step changes (weights, AdamW state) go away with it, so every configuration starts alike.
    The parent runs torch on one thread, so no thread pool is forked half-way."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, prepared, length, precision, vocab))
    proc.start()
    child.close()
    result = parent.recv()
    proc.join()
    if "error" in result:
        raise RuntimeError(f"{prepared.setting.name} at {length} tokens, {precision}: {result['error']}")
    return result


# --- rounds, ratios, tables ----------------------------------------------------------------
def measure(settings, lengths, precisions, rounds: int, vocab: int = 8192, size: str = "mini", runner=run_forked):
    """Rows {setting, length, precision, forward_s, train_s (medians), forward_mb, train_mb (max)}.
    Sets torch to one thread (forked children must not inherit a thread pool)."""
    torch.set_num_threads(1)
    prepared = prepare(settings, precisions, vocab, size)
    samples: dict[tuple, list[dict]] = {}
    for r in range(rounds):
        start = time.perf_counter()
        for length in lengths:
            for setting in settings:
                for precision in precisions:
                    key = (setting.name, length, precision)
                    samples.setdefault(key, []).append(runner(prepared[setting.name], length, precision, vocab))
        print(f"  round {r + 1}/{rounds}: {time.perf_counter() - start:.0f} s, load {_load()}", flush=True)
    rows = []
    for (name, length, precision), runs in samples.items():
        row = {"setting": name, "length": length, "precision": precision}
        row.update({k: statistics.median(x[k] for x in runs) for k in ("forward_s", "train_s")})
        row.update({k: max(x[k] for x in runs) for k in ("forward_mb", "train_mb")})
        rows.append(row)
    return rows


METRICS = (("forward_s", "forward time"), ("train_s", "train-step time"), ("forward_mb", "forward memory"),
           ("train_mb", "train-step memory"))  # fmt: skip


def baseline_of(rows: list[dict]) -> str:
    """Full attention (SDPA) when it was measured, else the first setting."""
    names = [r["setting"] for r in rows]
    return SDPA if SDPA in names else names[0]


def ratios(rows: list[dict], baseline: str | None = None) -> list[dict]:
    """Each other setting's value / the baseline's (default: `baseline_of`), per length, precision and metric."""
    baseline = baseline or baseline_of(rows)
    at = {(r["setting"], r["length"], r["precision"]): r for r in rows}
    out = []
    for r in rows:
        base = at.get((baseline, r["length"], r["precision"]))
        if r["setting"] == baseline or base is None:
            continue
        out.append({**{k: r[k] for k in ("setting", "length", "precision")},
                    **{m: r[m] / base[m] if base[m] else math.nan for m, _ in METRICS}})  # fmt: skip
    return out


def growth(rows: list[dict], start: int | None = None) -> list[dict]:
    """Per setting and precision: value at the longest length / at `start` (default: the shortest), and
    the exponent k of n^k that growth means (1: linear, 2: quadratic)."""
    out = []
    for name in dict.fromkeys(r["setting"] for r in rows):
        for precision in dict.fromkeys(r["precision"] for r in rows):
            mine = sorted((r for r in rows if r["setting"] == name and r["precision"] == precision
                           and r["length"] >= (start or 0)), key=lambda r: r["length"])  # fmt: skip
            if len(mine) < 2:
                continue
            lo, hi = mine[0], mine[-1]
            n = hi["length"] / lo["length"]
            row = {"setting": name, "precision": precision, "from": lo["length"], "to": hi["length"], "n": n}
            for m, _ in METRICS:
                g = hi[m] / lo[m] if lo[m] > 0 else math.nan
                row[m] = g
                row[m + "_exponent"] = math.log(g) / math.log(n) if g > 0 and not math.isnan(g) else math.nan
            out.append(row)
    return out


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def machine_facts() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.machine())  # fmt: skip
    return (f"CPU: {model}, {os.cpu_count()} logical cores, bf16 instructions: {cpu_bf16_instructions() or 'none'}; "
            f"torch {torch.__version__}, 1 thread")  # fmt: skip


def markdown(rows, rat, grows, facts: str, command: str, elapsed: float, loads: tuple[str, str]) -> str:
    lines = [
        "# Long inputs: full attention against sliding-window and BigBird attention (#56)",
        "",
        f"`{command}` ({elapsed / 60:.1f} min). {facts}. Load average (1, 5, 15 min) {loads[0]} at the start,",
        f"{loads[1]} at the end: other training runs shared the 2 cores, so absolute times are slow and noisy;",
        "the rounds are interleaved, so the ratios are the numbers to read. Model: mini (L=4, H=256, A=4,",
        "intermediate 1024, vocab 8192, 4,096 positions), random weights, batch 1. Memory: peak resident set",
        "(VmHWM, reset through /proc/self/clear_refs) above the resident set before the call, each",
        "configuration in a freshly forked process. The training step's memory is its activations, workspace",
        "and gradients (25 MB), not the weights or AdamW state (made by a warm-up step). See the docstring of",
        "bench/bench_long_inputs.py for the settings.",
        "",
        "## Measurements",
        "",
        "| setting | tokens | precision | forward s | train step s | forward MB | train step MB |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['length']} | {r['precision']} | {r['forward_s']:.3f} | "
                     f"{r['train_s']:.3f} | {r['forward_mb']:.0f} | {r['train_mb']:.0f} |")  # fmt: skip
    lines += ["", f"## Each setting / {baseline_of(rows)} at each length", "",
              "| setting | tokens | precision | " + " | ".join(t for _, t in METRICS) + " |",
              "|---|---:|---|" + "---:|" * len(METRICS)]  # fmt: skip
    for r in rat:
        lines.append(f"| {r['setting']} | {r['length']} | {r['precision']} | "
                     + " | ".join(f"{r[m]:.2f}x" for m, _ in METRICS) + " |")  # fmt: skip
    for grow in grows:
        if not grow:
            continue
        n = grow[0]["n"]
        lines += ["", f"## Growth from {grow[0]['from']} to {grow[0]['to']} tokens ({n:.0f}x the length: "
                  f"linear would be {n:.0f}x, quadratic {n * n:.0f}x)", "",
                  "Each cell: the value at the longest length / at the shortest (the exponent k of n^k).", "",
                  "| setting | precision | " + " | ".join(t for _, t in METRICS) + " |",
                  "|---|---|" + "---:|" * len(METRICS)]  # fmt: skip
        for g in grow:
            cells = " | ".join(f"{g[m]:.1f}x (k={g[m + '_exponent']:.2f})" for m, _ in METRICS)
            lines.append(f"| {g['setting']} | {g['precision']} | {cells} |")
    return "\n".join(lines) + "\n"


def print_table(rows, rat) -> None:
    print(f"  {'setting':<22} {'tokens':>6} {'prec':<5} {'fwd s':>8} {'train s':>8} {'fwd MB':>8} {'train MB':>9}")
    for r in rows:
        print(f"  {r['setting']:<22} {r['length']:>6} {r['precision']:<5} {r['forward_s']:8.3f} {r['train_s']:8.3f} "
              f"{r['forward_mb']:8.0f} {r['train_mb']:9.0f}")  # fmt: skip
    print(f"  each / {baseline_of(rows)}:  fwd time, train time, fwd memory, train memory")
    for r in rat:
        print(f"  {r['setting']:<22} {r['length']:>6} {r['precision']:<5} "
              + "  ".join(f"{r[m]:6.2f}x" for m, _ in METRICS))  # fmt: skip


def plot(rows: list[dict], path: Path) -> Path:
    """Time and memory against length, log-log, with n and n^2 reference lines: a PNG (matplotlib)."""
    # deferred: matplotlib is a dev dependency (requirements-dev.txt) and slow to import
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    precisions = list(dict.fromkeys(r["precision"] for r in rows))
    styles = {"fp32": "-", "bf16": "--"}
    for ax, (metric, title) in zip(axes.flat, METRICS, strict=True):
        for i, name in enumerate(dict.fromkeys(r["setting"] for r in rows)):
            for precision in precisions:
                mine = sorted((r for r in rows if r["setting"] == name and r["precision"] == precision),
                              key=lambda r: r["length"])  # fmt: skip
                xs, ys = [r["length"] for r in mine], [max(r[metric], 1e-3) for r in mine]
                ax.plot(xs, ys, styles.get(precision, ":"), marker="o", color=f"C{i}", label=f"{name} {precision}")
        lo = [r for r in rows if r["setting"] == SDPA and r["precision"] == precisions[0]]
        if lo:
            first = min(lo, key=lambda r: r["length"])
            xs = sorted({r["length"] for r in rows})
            y0 = max(first[metric], 1e-3)
            ax.plot(xs, [y0 * x / xs[0] for x in xs], ":", color="grey", label="∝ n")
            ax.plot(xs, [y0 * (x / xs[0]) ** 2 for x in xs], "-.", color="black", label="∝ n²")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel("seconds" if metric.endswith("_s") else "MB above the resident set")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("bertlab mini, batch 1, 1 CPU thread: full attention vs sliding window and BigBird")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--precision", choices=("all", "fp32", "bf16"), default="all")
    ap.add_argument("--settings", nargs="+", default=None, help="names from SETTINGS (default: all)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for NAME.md, .csv and .png")
    ap.add_argument("--name", default="long_inputs", help="file name of the results (without suffix)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    precisions = ["fp32"] + (["bf16"] if cpu_bf16_instructions() else [])
    if args.precision != "all":
        precisions = [args.precision]
    settings = [s for s in SETTINGS if (s.name not in EXTRA if args.settings is None else s.name in args.settings)]
    facts, load_start, start = machine_facts(), _load(), time.perf_counter()
    print(f"{facts}\n  load average {load_start}", flush=True)
    rows = measure(settings, args.lengths, precisions, args.rounds)
    lengths = sorted(args.lengths)
    # from the shortest, and from the middle length, where fixed costs (a few MB, kernel set-up) weigh less
    rat, grows = ratios(rows), [growth(rows), growth(rows, lengths[len(lengths) // 2]) if len(lengths) > 2 else []]
    elapsed = time.perf_counter() - start
    print_table(rows, rat)
    for g in grows[0]:
        print(f"  {g['setting']:<22} {g['precision']:<5} {g['from']}->{g['to']} (n x{g['n']:.0f}, n² x{g['n'] ** 2:.0f}): "
              + "  ".join(f"{t} x{g[m]:.1f} (k={g[m + '_exponent']:.2f})" for m, t in METRICS))  # fmt: skip
    print(f"  load average {_load()}  ({elapsed:.0f} s)")
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m bench.bench_long_inputs", *(sys.argv[1:] if argv is None else argv)])
    md = markdown(rows, rat, grows, facts, command, elapsed, (load_start, _load()))
    (args.out / f"{args.name}.md").write_text(md + f"\n![time and memory against length]({args.name}.png)\n")
    with open(args.out / f"{args.name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"  wrote {args.out / args.name}.md, .csv, {plot(rows, args.out / f'{args.name}.png').name}")


if __name__ == "__main__":
    main()
