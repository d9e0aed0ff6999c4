"""Does bf16 cost quality? bertlab pretraining in fp32 and under bf16 autocast at equal tokens.

Two runs of the project's own `bertlab pretrain` that differ only in `train.precision`: the recipe
study's base recipe (mini, lr 1e-3, warm-up 3%, batch 32, 128 tokens, 15% dynamic masking, no
dropout), the same corpus, vocabulary, seed and token budget, eager (`train.compile=false`, so the
comparison is the precision alone), scored every 100 steps on the same held-out instances (each run
scores under its own precision). At the end both final models are also scored in fp32 on English
outside the corpus (`bench.eval_unseen_english`), where the binomial standard error of the
difference says what gap the scoring alone would show. It writes both held-out curves, each run's
tokens/s and the gaps at the end.

    python -m bench.precision_quality --data ../shared/data --tokens 6M            # one after another
    python -m bench.precision_quality --data ../shared/data --tokens 6M --parallel 2
    python -m bench.precision_quality --data ../shared/data --tokens 4M --init-from checkpoints/bertlab-mini \
        --out bench/results/precision_quality_continued                            # past the plateau
    python -m bench.precision_quality --report                                     # table + figure only

bf16 needs a device that computes it natively (a GPU, or a CPU with AVX-512 BF16 or AMX); elsewhere
torch emulates it, ~60x slower than fp32, and the script refuses to start.

Writes, under --out (default bench/results/precision_quality):
    curves.csv     one row per held-out evaluation: precision, step, tokens, train_s, mlm_acc, mlm_loss, nsp_acc
    summary.json   commit, hardware, recipe, token budget, per precision: final metrics and tokens/s; the gap
    curves.png     held-out MLM accuracy against tokens and against training minutes (needs matplotlib)
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

from bench.recipe_study import (
    BASE,
    EVAL,
    REPO,
    add_run_arguments,
    commit,
    common_overrides,
    hardware,
    pretrain_command,
    pyplot,
    read_curve,
    run_commands,
)
from bertlab.formatting import parse_count
from bertlab.hardware import cpu_bf16_instructions
from bertlab.storage.runfolder import read_run_config, read_status

DEFAULT_OUT = REPO / "bench" / "results" / "precision_quality"
PRECISIONS = ("fp32", "bf16")


def run_both(
    data_dir: Path, out: Path, tokens: int, parallel: int, threads: int, seed: int, device: str, init_from: str | None
) -> None:
    def command(prec: str) -> Callable[[Path], list[str]]:
        overrides = [
            *common_overrides(data_dir, threads, seed),
            *([f"init_from={init_from}"] if init_from else []),
            f"train.max_tokens={tokens}",
            f"train.precision={prec}",
            "train.compile=false",
            f"train.device={device}",
            f"name=precision-{prec}",
        ]
        return lambda run_dir: pretrain_command(run_dir, overrides)

    codes = run_commands({prec: command(prec) for prec in PRECISIONS}, out, parallel)
    failed = [prec for prec, code in codes.items() if code]
    if failed:
        sys.exit(f"the {failed[0]} run failed: see {out / 'runs' / f'{failed[0]}.log'}")


def unseen_english(out: Path, prec: str, data_dir: Path) -> dict:
    """The run's final model scored in fp32 on English outside its corpus (kept in the run folder)."""
    run_dir = out / "runs" / prec
    cached = run_dir / "unseen_english.json"
    if cached.is_file():
        return json.loads(cached.read_text())["overall"]
    from bench.eval_unseen_english import evaluate
    from bertlab.inference import load_model

    result = evaluate(load_model(str(run_dir / "model"), device="cpu"), data_dir, max_sentences=1000)
    cached.write_text(json.dumps(result, indent=2))
    return result["overall"]


def report(out: Path, data_dir: Path, threads: int, seed: int) -> None:
    rows, summary = [], {}
    for prec in PRECISIONS:
        run_dir = out / "runs" / prec
        status = read_status(run_dir)
        if status.get("state") != "finished":
            print(f"{prec}: not finished ({status.get('state', 'not started')})")
            continue
        curve = read_curve(run_dir)
        for rec in curve:
            rows.append(
                {
                    "precision": prec,
                    "step": rec["step"],
                    "tokens": rec["tokens"],
                    "train_s": round(rec["train_s"], 1),
                    "mlm_acc": round(rec["mlm_acc"], 4),
                    "mlm_loss": round(rec["mlm_loss"], 4),
                    "nsp_acc": round(rec.get("nsp_acc", float("nan")), 4),
                }
            )
        last = curve[-1]
        summary[prec] = {
            "ran_as": status.get("precision"),
            "steps": last["step"],
            "tokens": last["tokens"],
            "train_s": round(last["train_s"], 1),
            "tokens_per_s": round(last["tokens"] / max(1.0, last["train_s"]), 1),
            "mlm_acc": round(last["mlm_acc"], 4),
            "mlm_loss": round(last["mlm_loss"], 4),
            "nsp_acc": round(last.get("nsp_acc", float("nan")), 4),
            "unseen_english": unseen_english(out, prec, data_dir),
        }
    if len(summary) < 2:
        return
    fp, bf = summary["fp32"], summary["bf16"]
    ufp, ubf = fp["unseen_english"], bf["unseen_english"]
    n, p = ufp["masked_tokens"], (ufp["mlm_acc"] + ubf["mlm_acc"]) / 2
    # the binomial standard error of the difference of two accuracies over the same n masked tokens
    se = math.sqrt(2 * p * (1 - p) / n)
    gap = {
        "heldout_mlm_acc_bf16_minus_fp32": round(bf["mlm_acc"] - fp["mlm_acc"], 4),
        "heldout_mlm_loss_bf16_minus_fp32": round(bf["mlm_loss"] - fp["mlm_loss"], 4),
        "heldout_nsp_acc_bf16_minus_fp32": round(bf["nsp_acc"] - fp["nsp_acc"], 4),
        "unseen_mlm_acc_bf16_minus_fp32": round(ubf["mlm_acc"] - ufp["mlm_acc"], 4),
        "unseen_masked_tokens": n,
        "unseen_mlm_acc_difference_se": round(se, 4),
        "speed_bf16_over_fp32": round(bf["tokens_per_s"] / fp["tokens_per_s"], 2),
    }
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    record = {
        "commit": commit(),
        "hardware": hardware(threads),
        "seed": seed,
        "init_from": read_run_config(out / "runs" / "fp32")["config"].get("init_from"),
        "base": BASE,
        "eval": EVAL,
        "precisions": summary,
        "gap": gap,
    }
    (out / "summary.json").write_text(json.dumps(record, indent=2))
    print(
        f"{'precision':<10} {'tokens':>11} {'tok/s':>7} {'held-out MLM':>13} {'loss':>6} {'NSP':>6} {'unseen MLM':>11}"
    )
    for prec, s in summary.items():
        print(
            f"{prec:<10} {s['tokens']:>11,} {s['tokens_per_s']:>7.0f} {s['mlm_acc']:>13.2%} "
            f"{s['mlm_loss']:>6.3f} {s['nsp_acc']:>6.1%} {s['unseen_english']['mlm_acc']:>11.2%}"
        )
    print(
        f"bf16 - fp32: held-out masked-token accuracy {gap['heldout_mlm_acc_bf16_minus_fp32']:+.2%}, "
        f"loss {gap['heldout_mlm_loss_bf16_minus_fp32']:+.3f}, NSP {gap['heldout_nsp_acc_bf16_minus_fp32']:+.1%}; "
        f"unseen English (both scored in fp32) {gap['unseen_mlm_acc_bf16_minus_fp32']:+.2%} "
        f"(standard error of a difference {se:.2%} over {n:,} masked tokens); "
        f"bf16 trained {gap['speed_bf16_over_fp32']:.2f}x as many tokens a second"
    )
    figure(rows, out / "curves.png")


def figure(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for prec in PRECISIONS:
        pts = [r for r in rows if r["precision"] == prec]
        acc = [100 * p["mlm_acc"] for p in pts]
        axes[0].plot([p["tokens"] / 1e6 for p in pts], acc, label=prec)
        axes[1].plot([p["train_s"] / 60 for p in pts], acc, label=prec)
    axes[0].set_xlabel("input tokens (millions)")
    axes[1].set_xlabel("training minutes")
    axes[0].set_ylabel("held-out masked-token accuracy (%)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("bertlab pretraining, mini: fp32 vs bf16 autocast at equal tokens")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(ap, DEFAULT_OUT, parallel=1)
    ap.add_argument("--tokens", default="6M", help="input tokens per run (e.g. 6M)")
    ap.add_argument(
        "--init-from",
        help="continue this checkpoint (with the shipped vocabulary) instead of starting from random weights: "
        "compares the precisions past the masked LM's early plateau",
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--report", action="store_true", help="only write the table and figure from finished runs")
    args = ap.parse_args()
    if not args.report:
        if args.device == "cpu" and not cpu_bf16_instructions():
            sys.exit("this CPU has no bf16 instructions (AVX-512 BF16 or AMX): torch would emulate bf16, ~60x slower")
        if not (args.data / "corpus").is_dir():
            sys.exit(f"{args.data}/corpus not found: pass --data pointing at the shared data folder")
        tokens = parse_count(args.tokens)
        run_both(args.data, args.out, tokens, args.parallel, args.threads, args.seed, args.device, args.init_from)
    report(args.out, args.data, args.threads, args.seed)


if __name__ == "__main__":
    main()
