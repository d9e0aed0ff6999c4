"""Time to quality: bertlab's pretraining vs Hugging Face `transformers` masked-LM pretraining.

    python -m bench.bench_time_to_quality --data ../shared/data --budget-s 1200 --threads 2
    python -m bench.bench_time_to_quality ... --hf-variants paper        # one HF run only
    python -m bench.bench_time_to_quality ... --report                   # rescore finished runs, no training

The same text, model size (mini: L4/H256/A4/FF1024, the shipped 8192-token vocabulary), wall-clock
training budget and CPU threads for every run; runs go one after another, each in its own process
(with tcmalloc preloaded for all when /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 exists).

- bertlab: `bertlab pretrain --config configs/default-model.yaml` (the shipped model's recipe, at
  the ablation suites' peak lr of 1e-3: `SUITE_RECIPE`) at the budget, keeping fp16 snapshots at
  log-spaced steps.
- HF, as a user following the docs / run_mlm.py would: `BertForMaskedLM`, the training documents'
  sentences tokenized and cut into 128-token blocks ([CLS] ... [SEP] each, run_mlm's group_texts),
  `DataCollatorForLanguageModeling(mlm_probability=0.15)` and `Trainer` (batch 32, weight decay
  0.01, linear decay, warm-up 1%). A callback stops training when its training seconds reach the
  budget and saves fp16 snapshots at sqrt(2)-spaced seconds. The linear decay is set by max_steps,
  so max_steps is estimated from a short timed Trainer run on a throwaway model (the budget over
  the median step time) to make the decay end near the budget, as bertlab's time budget does.
  Variants (`--hf-variants`, see `hf_variants`): `defaults` (TrainingArguments' own: lr 5e-5, batch
  8, no warm-up) and `best` (lr 1e-4, bf16 where the CPU has bf16 instructions, `--hf-compile`) by
  default; `paper` (lr 1e-4, betas 0.9/0.999: Devlin et al.) and `recipe`
  (bertlab's peak lr 1.5e-3 -- or `--hf-lr` -- and betas 0.9/0.98), which separates the speed of
  the implementation from the recipe.

Both train on exactly the same documents: bertlab's held-out documents (`split_heldout`) are left
out of HF's text. Every snapshot of every run is scored by one function here (`score`): masked-token
accuracy and cross-entropy at the masked positions of the same held-out instances (bertlab's
`eval_data`: 128 tokens, 15% masked, 80/10/10, static), each model loaded as
`transformers.BertForMaskedLM`. HF never trained on segment B, so it reads the instances with
token_type_ids 0 (bertlab with its segment ids); tokens, masks and labels are identical.
The labelled task sets under --data are never read.

Writes, under --out (default bench/results/time_to_quality): runs/ (the run folders), results.json
(config, commit, hardware, curves as {system, train_s, tokens, mlm_acc, mlm_loss}, summary, ratios)
and curves.png (held-out MLM accuracy vs training seconds; needs matplotlib).
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from bertlab.ablations.planning import SUITE_RECIPE
from bertlab.atomic import read_json, write_json_atomic
from bertlab.data.corpus import load_corpus
from bertlab.data.pretraining_data import InstanceStore, collate, split_heldout
from bertlab.storage.runfolder import read_status, snapshot_dir, snapshot_root
from bertlab.training.pretrain import prepare_data, prepare_tokenizer
from bertlab.training.pretrain_config import load_config_file

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results" / "time_to_quality"
CONFIG = REPO / "configs" / "default-model.yaml"
SHIPPED = REPO / "checkpoints" / "bertlab-mini"
TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")
BLOCK = 128  # HF's training sequence length, [CLS] and [SEP] included
HF_MODEL = dict(
    hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024, max_position_embeddings=512
)  # bertlab's "mini" preset


# --------------------------------------------------------------------------------------
# What every run shares
# --------------------------------------------------------------------------------------
def bertlab_overrides(data_dir: Path, budget_s: float, threads: int, eval_instances: int, seed: int) -> list[str]:
    """The `key=value` overrides of the bertlab run; the held-out set is rebuilt from the same ones."""
    corpus = data_dir.resolve() / "corpus"
    return [
        f"vocab={SHIPPED / 'vocab.txt'}",
        f"corpus=[default, {corpus}/gutenberg, {corpus}/wikitext-2-raw]",
        f"train.max_time_s={budget_s}",
        f"train.num_threads={threads}",
        "train.snapshots=true",
        f"train.seed={seed}",
        f"eval_instances={eval_instances}",
        "name=ttq-bertlab",
        # evaluations and checkpoints only where snapshots need them: wall time, not training time
        "train.eval_every=0",
        "train.save_every=0",
        "train.save_every_s=0",
        *SUITE_RECIPE,  # lr 1e-3: at the recipe's 1.5e-3 a 600-s run (30 s of warm-up) sat on the unigram guess
    ]


def run_env(threads: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads))
    if TCMALLOC.is_file():
        env["LD_PRELOAD"] = str(TCMALLOC)
    return env


def hf_tokenizer():
    """The shipped vocabulary as a transformers tokenizer (BertTokenizerFast(vocab_file=...) ignores
    the file in transformers 5)."""
    import transformers

    return transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(SHIPPED / "tokenizer.json"),
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def shared_data(cfg, run_dir: Path):
    """bertlab's held-out store and its data config, and the training documents (held-out ones left out)."""
    corpus = load_corpus(cfg.corpus, cfg.corpus_format)
    tokenizer = prepare_tokenizer(cfg, run_dir, corpus.documents)  # the run's own vocab.txt
    _, heldout, _ = prepare_data(cfg, corpus, tokenizer)  # cache hits after the bertlab run
    train_idx, _ = split_heldout(len(corpus.documents), cfg.data, cfg.train.seed)
    return heldout, cfg.heldout_data(), [corpus.documents[i] for i in train_idx]


def hf_blocks(documents: list[list[str]]) -> np.ndarray:
    """run_mlm's group_texts: every sentence's tokens concatenated, cut into [CLS] + 126 + [SEP]."""
    tok = hf_tokenizer()
    ids = tok([s for d in documents for s in d], add_special_tokens=False)["input_ids"]
    flat = np.fromiter((t for s in ids for t in s), dtype=np.int32)
    body = BLOCK - 2
    n = len(flat) // body
    blocks = np.empty((n, BLOCK), dtype=np.int32)  # (N, 128)
    blocks[:, 0], blocks[:, -1] = tok.cls_token_id, tok.sep_token_id
    blocks[:, 1:-1] = flat[: n * body].reshape(n, body)
    return blocks


# --------------------------------------------------------------------------------------
# The runs (each in its own process)
# --------------------------------------------------------------------------------------
def run_bertlab(run_dir: Path, overrides: list[str], threads: int) -> None:
    cmd = [
        sys.executable,
        "-m",
        "bertlab",
        "pretrain",
        "--config",
        str(CONFIG),
        "--run-dir",
        str(run_dir),
        "--no-progress",
        *overrides,
    ]
    launch("bertlab", cmd, run_dir, threads)


def run_hf(run_dir: Path, spec: dict, threads: int) -> None:
    run_dir.mkdir(parents=True)
    write_json_atomic(run_dir / "spec.json", spec)
    launch(
        run_dir.name,
        [sys.executable, "-m", "bench.bench_time_to_quality", "--hf-worker", str(run_dir)],
        run_dir,
        threads,
    )


def launch(name: str, cmd: list[str], run_dir: Path, threads: int) -> None:
    log = run_dir.parent / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%H:%M:%S')} start {name} (log: {log})", flush=True)
    with open(log, "w") as f:
        code = subprocess.run(cmd, cwd=REPO, env=run_env(threads), stdout=f, stderr=subprocess.STDOUT).returncode
    if code != 0:
        sys.exit(f"{name} failed (exit {code}); see {log}")
    print(f"{time.strftime('%H:%M:%S')} end {name}", flush=True)


def hf_worker(run_dir: Path) -> None:
    """Train one HF variant as spec.json says; writes snapshots/step-*/ and result.json."""
    import transformers
    from transformers import TrainerCallback

    spec = read_json(run_dir / "spec.json")
    torch.set_num_threads(spec["threads"])
    transformers.logging.disable_progress_bar()
    blocks = np.load(spec["blocks"])  # (N, 128)

    class Blocks(torch.utils.data.Dataset):
        def __len__(self):
            return len(blocks)

        def __getitem__(self, i):
            return {"input_ids": blocks[i].tolist()}

    dataset = Blocks()
    collator = transformers.DataCollatorForLanguageModeling(hf_tokenizer(), mlm_probability=0.15, seed=spec["seed"])

    def new_model():
        torch.manual_seed(spec["seed"])
        return transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=spec["vocab_size"], **HF_MODEL))

    def trainer(model, max_steps: int, callback: TrainerCallback):
        args = transformers.TrainingArguments(
            output_dir=str(run_dir / "trainer"),
            per_device_train_batch_size=spec["batch_size"],
            learning_rate=spec["lr"],
            adam_beta1=spec["betas"][0],
            adam_beta2=spec["betas"][1],
            warmup_steps=spec["warmup"],
            weight_decay=spec["weight_decay"],
            lr_scheduler_type="linear",
            bf16=spec["bf16"],
            torch_compile=spec["torch_compile"],
            max_steps=max_steps,
            use_cpu=True,
            dataloader_num_workers=0,
            report_to=[],
            save_strategy="no",
            logging_steps=50,
            seed=spec["seed"],
            disable_tqdm=True,
        )
        return transformers.Trainer(
            model=model, args=args, train_dataset=dataset, data_collator=collator, callbacks=[callback]
        )

    class StepTimer(TrainerCallback):
        """Times the steps after two warm-up steps: 10 of them, or fewer (3 at least) past 5% of the budget."""

        def __init__(self):
            self.ends: list[float] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())
            timed = len(self.ends) - 2
            if timed >= 10 or (timed >= 3 and self.ends[-1] - self.ends[1] > 0.05 * spec["budget_s"]):
                control.should_training_stop = True

    class BudgetAndSnapshots(TrainerCallback):
        """Stops at the budget of training seconds; saves fp16 snapshots (like bertlab's) at sqrt(2)-spaced
        seconds, the saving time left out of the training time."""

        def __init__(self):
            first = min(30.0, spec["budget_s"] / 8)
            self.points = [first * 2 ** (k / 2) for k in range(40) if first * 2 ** (k / 2) < spec["budget_s"]]
            self.last = (0, 0.0)

        def on_train_begin(self, args, state, control, **kwargs):
            self.start, self.paused = time.perf_counter(), 0.0

        def on_step_end(self, args, state, control, model=None, **kwargs):
            train_s = time.perf_counter() - self.start - self.paused
            self.last = (state.global_step, train_s)
            if train_s >= spec["budget_s"]:
                control.should_training_stop = True
            elif self.points and train_s >= self.points[0]:
                self.points = [p for p in self.points if p > train_s]
                self.snapshot(model)

        def on_train_end(self, args, state, control, model=None, **kwargs):
            self.snapshot(model)

        def snapshot(self, model) -> None:
            t0 = time.perf_counter()
            step, train_s = self.last
            out = snapshot_dir(run_dir, step)
            copy.deepcopy(model).half().save_pretrained(out)
            write_json_atomic(
                out / "model_card.json",
                {"steps": step, "tokens": step * spec["batch_size"] * BLOCK, "train_time_s": round(train_s, 1)},
            )
            self.paused += time.perf_counter() - t0

    timer = StepTimer()
    trainer(new_model(), 10**6, timer).train()
    step_s = statistics.median(b - a for a, b in zip(timer.ends[1:], timer.ends[2:], strict=False))
    max_steps = max(10, int(spec["budget_s"] / step_s))
    print(f"timed {len(timer.ends) - 2} steps: median {step_s:.2f} s/step -> max_steps {max_steps}", flush=True)
    budget = BudgetAndSnapshots()
    run = trainer(new_model(), max_steps, budget)
    run.train()
    write_json_atomic(
        run_dir / "result.json",
        {
            "estimated_step_s": round(step_s, 3),
            "max_steps": max_steps,
            "steps": budget.last[0],
            "train_time_s": round(budget.last[1], 1),
            "log_history": run.state.log_history,
        },
    )


# --------------------------------------------------------------------------------------
# One scorer for every model
# --------------------------------------------------------------------------------------
@torch.no_grad()
def score(
    model_dir: Path, store: InstanceStore, eval_data, n: int, token_types: bool, pad_id: int = 0, batch_size: int = 64
) -> dict[str, float]:
    """Masked-token accuracy and mean cross-entropy at the masked positions of the first `n` held-out
    instances, the model loaded as transformers.BertForMaskedLM in float32.

    token_types: feed the instances' segment ids (0 for A, 1 for B); False feeds zeros (a model
    never trained on segment B)."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    model = transformers.BertForMaskedLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    correct, loss_sum, count = 0, 0.0, 0
    for start in range(0, min(n, len(store)), batch_size):
        b = collate([store[i] for i in range(start, min(n, len(store), start + batch_size))], eval_data, pad_id)
        types = b["token_type_ids"] if token_types else torch.zeros_like(b["token_type_ids"])
        hidden = model.bert(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=types
        ).last_hidden_state  # (B, T, H)
        chosen = b["mlm_labels"] != -100  # (B, T)
        logits = model.cls(hidden[chosen])  # (M, V): the head only where it is scored; same numbers
        labels = b["mlm_labels"][chosen]  # (M,)
        loss_sum += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
        correct += int((logits.argmax(-1) == labels).sum())
        count += labels.numel()
    return {"mlm_acc": correct / count, "mlm_loss": loss_sum / count}


def score_run(system: str, run_dir: Path, store, eval_data, n: int, token_types: bool) -> list[dict]:
    """Every snapshot of a run (bertlab's and ours both carry model_card.json) scored with `score`."""
    points = []
    for snap in sorted(snapshot_root(run_dir).glob("step-*")):
        card = read_json(snap / "model_card.json")
        point = {
            "system": system,
            "step": card["steps"],
            "train_s": card["train_time_s"],
            "tokens": card["tokens"],
            **{k: round(v, 4) for k, v in score(snap, store, eval_data, n, token_types).items()},
        }
        if "mlm_acc" in card.get("metrics", {}):  # bertlab's own score of the fp32 weights: a check on ours
            point["self_reported_mlm_acc"] = card["metrics"]["mlm_acc"]
        points.append(point)
    return points


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------
def time_to_reach(curve: list[dict], acc: float) -> float | None:
    """Training seconds at which a curve first reaches `acc` (linear between scored points), or None.
    A level the first scored point already reaches counts at that point's time (an upper bound)."""
    prev = None
    for p in curve:
        if p["mlm_acc"] >= acc:
            if prev is None:
                return p["train_s"]
            frac = (acc - prev["mlm_acc"]) / (p["mlm_acc"] - prev["mlm_acc"])
            return prev["train_s"] + frac * (p["train_s"] - prev["train_s"])
        prev = p
    return None


def compare(ours: list[dict], theirs: list[dict], name: str) -> tuple[list[str], dict]:
    """Sentences and numbers: how long each needs to reach the other's final accuracy.

    factor = (seconds the other took to its own final) / (seconds this one took to it); when this
    one never gets there, it would need more than its whole budget, so the other is at least
    (this one's budget) / (the other's seconds) faster."""
    lines, out = [], {"system": name}
    for a, b, a_name, b_name in ((ours, theirs, "bertlab", name), (theirs, ours, name, "bertlab")):
        target, a_total = b[-1]["mlm_acc"], a[-1]["train_s"]
        b_took, a_took = time_to_reach(b, target), time_to_reach(a, target)
        key = f"{a_name}_to_{b_name}_final"
        if a_took is not None:
            factor = b_took / max(a_took, 1e-9)
            speed = f"{factor:.1f}x faster" if factor >= 1 else f"{1 / factor:.1f}x slower"
            lines.append(
                f"{a_name} reaches {b_name}'s final {target:.1%} after {a_took:.0f} s of its {a_total:.0f} s "
                f"({b_name} needed {b_took:.0f} s): {speed} to that quality"
            )
            out[key] = {
                "acc": round(target, 4),
                "seconds": round(a_took, 1),
                f"{b_name}_seconds": round(b_took, 1),
                "factor": round(factor, 2),
            }
        else:
            factor = a_total / max(b_took, 1e-9)
            lines.append(
                f"{a_name} never reaches {b_name}'s final {target:.1%} in its {a_total:.0f} s (best "
                f"{max(p['mlm_acc'] for p in a):.1%}; {b_name} needed {b_took:.0f} s): {b_name} is "
                f">= {factor:.1f}x faster to that quality"
            )
            out[key] = {
                "acc": round(target, 4),
                "seconds": None,
                f"{b_name}_seconds": round(b_took, 1),
                f"{b_name}_factor_at_least": round(factor, 2),
            }
    return lines, out


def figure(curves: dict[str, list[dict]], path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import ScalarFormatter
    except ImportError:
        print("matplotlib is not installed: no figure (pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, pts in curves.items():
        ax.plot(
            [p["train_s"] for p in pts],
            [100 * p["mlm_acc"] for p in pts],
            marker="o",
            ms=3,
            label=system,
            color="black" if system == "bertlab" else None,
        )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("training seconds (log scale)")
    ax.set_ylabel("held-out MLM accuracy (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


def commit() -> str:
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def hf_variants(recipe_lr: float, recipe_betas: list[float], compile_best: bool) -> dict[str, dict]:
    """The HF runs, as TrainingArguments settings.

    defaults: TrainingArguments' own defaults (lr 5e-5, batch 8, no warm-up, no weight decay), read
    from the installed transformers. best: what helps on this machine -- the paper's lr 1e-4 (better
    than bertlab's 1.5e-3 for HF in our runs), batch 32, warm-up 1%, weight decay 0.01, bf16 only
    where the CPU has bf16 instructions (emulated bf16 ran ~60x slower than fp32), torch_compile
    when asked. paper and recipe: the earlier pair (fp32 eager, batch 32)."""
    import dataclasses

    import transformers

    from bertlab.hardware import cpu_bf16_instructions

    d = {f.name: f.default for f in dataclasses.fields(transformers.TrainingArguments)}
    tuned = {"batch_size": 32, "warmup": 0.01, "weight_decay": 0.01, "bf16": False, "torch_compile": False}
    paper = {**tuned, "lr": 1e-4, "betas": [0.9, 0.999]}
    return {
        "defaults": {
            "lr": d["learning_rate"],
            "betas": [d["adam_beta1"], d["adam_beta2"]],
            "batch_size": d["per_device_train_batch_size"],
            "warmup": d["warmup_steps"],
            "weight_decay": d["weight_decay"],
            "bf16": d["bf16"],
            "torch_compile": d["torch_compile"],
        },
        "best": {**paper, "bf16": cpu_bf16_instructions() is not None, "torch_compile": compile_best},
        "paper": paper,
        "recipe": {**tuned, "lr": recipe_lr, "betas": recipe_betas},
    }


def run_hf_variants(train_docs, variants: dict, run_dirs: dict[str, Path], settings: dict) -> None:
    """Each HF variant, one after another, on bertlab's training documents; kept when finished with the same spec."""
    blocks_path = run_dirs["bertlab"].parent / "hf_blocks.npy"
    if not blocks_path.is_file():
        np.save(blocks_path, hf_blocks(train_docs))
    for system, run_dir in run_dirs.items():
        if system == "bertlab":
            continue
        spec = {**settings, **variants[system[3:]], "blocks": str(blocks_path), "vocab_size": len(hf_tokenizer())}
        if not (run_dir / "result.json").is_file() or read_json(run_dir / "spec.json") != spec:
            shutil.rmtree(run_dir, ignore_errors=True)
            run_hf(run_dir, spec, settings["threads"])


def report(out: Path, curves: dict[str, list[dict]], run_dirs: dict[str, Path], config: dict, hardware: str) -> None:
    """The table, the time-to-quality sentences, results.json and curves.png."""
    import transformers

    print(
        f"\nbudget {config['budget_s']:.0f} s, {hardware}, {config['eval_instances']} held-out instances; torch {torch.__version__}, transformers {transformers.__version__}"
    )
    print(f"{'system':<11} {'steps':>7} {'tokens':>11} {'tokens/s':>9} {'train s':>8} {'MLM acc':>8} {'MLM loss':>9}")
    summary, notes = {}, []
    for s, pts in curves.items():
        last = pts[-1]
        summary[s] = {k: last[k] for k in ("step", "tokens", "train_s", "mlm_acc", "mlm_loss")}
        summary[s]["tokens_per_s"] = round(last["tokens"] / max(last["train_s"], 1e-9), 1)
        print(
            f"{s:<11} {last['step']:>7,} {last['tokens']:>11,} {summary[s]['tokens_per_s']:>9,.0f} "
            f"{last['train_s']:>8.0f} {last['mlm_acc']:>8.1%} {last['mlm_loss']:>9.3f}"
        )
        if s != "bertlab":
            result, spec = read_json(run_dirs[s] / "result.json") or {}, read_json(run_dirs[s] / "spec.json")
            summary[s].update(
                {k: result.get(k) for k in ("estimated_step_s", "max_steps")}, lr=spec["lr"], betas=spec["betas"]
            )
            summary[s].update(
                {k: spec.get(k) for k in ("batch_size", "warmup", "weight_decay", "bf16", "torch_compile")}
            )
            notes.append(
                f"{s}: lr {spec['lr']:g}, betas {tuple(spec['betas'])}, batch {spec.get('batch_size', 32)}, "
                f"warm-up {spec.get('warmup', 0.01)}, weight decay {spec.get('weight_decay', 0.01)}, "
                f"bf16 {spec.get('bf16', False)}, torch_compile {spec.get('torch_compile', False)}; "
                f"linear decay over max_steps "
                f"{result.get('max_steps')} ({result.get('estimated_step_s')} s/step timed at the start); "
                f"ran {last['step']} steps"
            )
    print("\n".join(notes))
    checks = [abs(p["mlm_acc"] - p["self_reported_mlm_acc"]) for p in curves["bertlab"] if "self_reported_mlm_acc" in p]
    if checks:
        print(
            f"(scorer check: bertlab's own held-out accuracy differs from ours by at most {max(checks):.2%}; "
            "its snapshots are fp16)"
        )
    ratios = []
    for s in curves:
        if s != "bertlab":
            lines, numbers = compare(curves["bertlab"], curves[s], s)
            ratios.append(numbers)
            print("\n".join(lines))
    write_json_atomic(
        out / "results.json",
        {
            "config": config,
            "commit": commit(),
            "hardware": hardware,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "curves": [p for pts in curves.values() for p in pts],
            "summary": summary,
            "ratios": ratios,
        },
    )
    print(f"results: {out / 'results.json'}")
    figure(
        curves,
        out / "curves.png",
        f"held-out MLM accuracy, {config['budget_s']:.0f} s budget, {config['threads']} thread(s) ({commit()})",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="the shared data folder")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--budget-s", type=float, default=1200.0, help="training seconds per run (scoring excluded)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of every run")
    ap.add_argument("--eval-instances", type=int, default=1000, help="held-out instances scored per snapshot")
    ap.add_argument(
        "--hf-variants",
        default="defaults,best",
        help="defaults (TrainingArguments' own), best (paper lr, bf16 where native), paper, recipe (bertlab's)",
    )
    ap.add_argument(
        "--hf-compile",
        action="store_true",
        help="torch_compile=True in the best variant (off by default: on an AVX2-only CPU bench_train_step "
        "measured transformers compiled at 0.56x its eager speed)",
    )
    ap.add_argument("--hf-lr", type=float, default=None, help="peak lr of the recipe variant (default: bertlab's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", action="store_true", help="score and report the finished runs only")
    ap.add_argument("--hf-worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hf_worker:
        return hf_worker(args.hf_worker)
    try:
        import accelerate  # noqa: F401  (transformers' Trainer needs it)
    except ImportError:
        sys.exit("transformers' Trainer needs accelerate: pip install 'accelerate>=1.1.0'")
    if not (args.data / "corpus").is_dir():
        sys.exit(f"{args.data}/corpus not found: pass --data pointing at the shared data folder")
    torch.set_num_threads(args.threads)
    settings = {"budget_s": args.budget_s, "threads": args.threads, "seed": args.seed}
    saved = read_json(args.out / "settings.json")
    if args.report and saved:
        settings = saved
    elif saved and saved != settings:
        sys.exit(f"{args.out} holds runs made with {saved}; delete its runs/ or choose another --out")
    overrides = bertlab_overrides(
        args.data, settings["budget_s"], settings["threads"], args.eval_instances, settings["seed"]
    )
    cfg = load_config_file(CONFIG, overrides)
    variants = hf_variants(args.hf_lr or cfg.train.learning_rate, list(cfg.train.adam_betas), args.hf_compile)
    names = args.hf_variants.split(",")
    if unknown := set(names) - set(variants):
        sys.exit(f"unknown --hf-variants {sorted(unknown)}; known: {', '.join(variants)}")
    runs = args.out / "runs"
    run_dirs = {"bertlab": runs / "bertlab", **{f"hf-{n}": runs / f"hf-{n}" for n in names}}
    if not args.report:  # finished runs made with the same settings are kept; unfinished ones start again
        args.out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(args.out / "settings.json", settings)
        if read_status(run_dirs["bertlab"]).get("state") != "finished":
            shutil.rmtree(run_dirs["bertlab"], ignore_errors=True)
            run_bertlab(run_dirs["bertlab"], overrides, settings["threads"])
    elif not snapshot_root(run_dirs["bertlab"]).is_dir():
        sys.exit(f"no finished bertlab run under {runs}: run without --report first")
    store, eval_data, train_docs = shared_data(cfg, run_dirs["bertlab"])
    if not args.report:
        run_hf_variants(train_docs, variants, run_dirs, settings)

    n = min(args.eval_instances, len(store))
    print(f"{time.strftime('%H:%M:%S')} scoring every snapshot on {n} held-out instances", flush=True)
    curves = {
        s: score_run(s, d, store, eval_data, n, token_types=(s == "bertlab"))
        for s, d in run_dirs.items()
        if snapshot_root(d).is_dir()
    }
    if len(curves) < 2:
        sys.exit(f"no finished HF run under {runs}: run without --report first")
    hardware = f"{platform.machine()} CPU, {os.cpu_count()} cores, {settings['threads']} thread(s) per run"
    config = {
        **settings,
        "eval_instances": n,
        "bertlab_config": str(CONFIG.relative_to(REPO)),
        "bertlab_overrides": overrides,
        "hf_model": HF_MODEL,
        "tcmalloc": TCMALLOC.is_file(),
    }
    report(args.out, curves, run_dirs, config, hardware)


if __name__ == "__main__":
    main()
