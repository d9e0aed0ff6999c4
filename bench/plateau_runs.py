"""Held-out curves of pretraining runs side by side: which recipes leave the masked-LM plateau, and when.

A record of the recipe search behind the ablation suites (bertlab.ablations.planning.SUITE_RECIPE): each
run's held-out masked-token accuracy at fixed token marks, read from its own metrics.jsonl, as a
Markdown table and a PNG of the curves, with what differs between the runs in words.

    python bench/plateau_runs.py --out bench/results/plateau \\
        "MLM + NSP, linear 1.5e-3, 64->128=RUNS/t5pilot-mlm_nsp-lr15-..." \\
        "MLM + NSP, wsd 1.5e-3, 64->128=RUNS/t5wsd-mlm_nsp-..."

Each argument is LABEL=RUN_DIR, or LABEL=RUN_DIR@M for a run that continued another after M million
tokens (its curve is drawn from there). Runs may be unfinished: a row stops at the last evaluation.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bertlab.ablations.comparison import PLATEAU_EXIT
from bertlab.storage.runfolder import read_metrics, read_run_config

MARKS_M = (1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 24, 28, 32, 36, 40)  # millions of tokens seen


def held_out(run_dir: Path, offset: float = 0.0) -> list[tuple[int, float]]:
    """(tokens seen, held-out masked-token accuracy %) at each evaluation of the run (plus `offset`
    tokens seen before it, for a run that continued another)."""
    return [
        (int(m["tokens"] + offset), 100.0 * float(m["mlm_acc"]))
        for m in read_metrics(run_dir)
        if m.get("split") == "eval" and "tokens" in m and "mlm_acc" in m
    ]


def at_mark(curve: list[tuple[int, float]], mark: float) -> float | None:
    """The last evaluation at or before `mark` tokens, if one is within 10% of it."""
    before = [acc for tokens, acc in curve if tokens <= mark * 1.02]
    last = max((t for t, _ in curve if t <= mark * 1.02), default=0)
    return before[-1] if before and last >= 0.9 * mark else None


def recipe_line(run_dir: Path) -> str:
    rc = read_run_config(run_dir) or {}
    cfg = rc.get("config") or {}
    train, data, phase2 = cfg.get("train") or {}, cfg.get("data") or {}, cfg.get("phase2") or {}
    seq = f"{data.get('max_seq_length')}" + (f"->{phase2.get('max_seq_length')}" if phase2 else "")
    init = f", from {Path(cfg['init_from']).parent.parent.name}" if cfg.get("init_from") else ""
    shape = (cfg.get("model_overrides") or {}) and rc.get("model_config") or {}
    size = f", L{shape['num_layers']}-H{shape['hidden_size']}-A{shape['num_heads']}" if shape else ""
    where = f", on {train['device']}" if train.get("device") not in (None, "auto", "cpu") else ""
    return (
        f"{data.get('objective')}, lr {train.get('learning_rate')} {train.get('schedule')}, warm-up "
        f"{train.get('warmup')}, seq {seq}, budget {train.get('max_tokens') or train.get('max_steps')}{init}{size}{where}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="LABEL=RUN_DIR")
    p.add_argument("--out", required=True, help="folder for plateau.md, plateau.json and plateau.png")
    p.add_argument(
        "--marks", default=",".join(map(str, MARKS_M)), help="the table's columns: millions of tokens, comma-separated"
    )
    args = p.parse_args(argv)
    try:
        marks = tuple(float(m) for m in args.marks.split(",") if m.strip())
    except ValueError:
        p.error(f"--marks {args.marks!r}: write millions of tokens, comma-separated (e.g. 1,2,4,8)")
    runs, offsets = [], {}
    for entry in args.runs:
        label, _, path = entry.rpartition("=")
        path, _, after = path.partition("@")
        if not label or not Path(path).is_dir():
            p.error(f"{entry!r}: write LABEL=RUN_DIR[@M] with an existing run folder")
        runs.append((label, Path(path)))
        offsets[label] = float(after or 0) * 1e6
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    curves = {label: held_out(run, offsets[label]) for label, run in runs}
    lines = [
        f"Held-out masked-token accuracy (%) by millions of tokens seen; a model has left the plateau "
        f"past {PLATEAU_EXIT:.0f}%.\n",
        "| run | " + " | ".join(f"{m:g}M" for m in marks) + " |",
        "|---|" + "---|" * len(marks),
    ]
    for label, _ in runs:
        cells = [at_mark(curves[label], m * 1e6) for m in marks]
        lines.append(f"| {label} | " + " | ".join("" if c is None else f"{c:.1f}" for c in cells) + " |")
    lines += ["", "Recipes (from each run's run_config.json):", ""]
    lines += [f"- **{label}** (`{run.name}`): {recipe_line(run)}" for label, run in runs]
    (out / "plateau.md").write_text("\n".join(lines) + "\n")
    (out / "plateau.json").write_text(
        json.dumps({label: {"run": run.name, "curve": curves[label]} for label, run in runs}, indent=1)
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no plateau.png")
    else:
        fig, ax = plt.subplots(figsize=(13, 6))
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)  # up to 20 runs, each its own colour
        for label, run in runs:
            curve = curves[label]
            on_gpu = ((read_run_config(run) or {}).get("config") or {}).get("train", {}).get("device") == "cuda"
            style = "--" if on_gpu else "-"  # GPU runs (bf16) dashed, CPU runs (fp32) solid
            ax.plot([t / 1e6 for t, _ in curve], [a for _, a in curve], style, marker=".", label=label)
        ax.axhline(PLATEAU_EXIT, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel("tokens seen (millions)")
        ax.set_ylabel("held-out masked-token accuracy (%)")
        ax.set_title("Which recipes leave the masked-LM plateau (solid: CPU, fp32; dashed: GPU, bf16)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the plot, not over it
        fig.tight_layout()
        fig.savefig(out / "plateau.png", dpi=110)
    print((out / "plateau.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
