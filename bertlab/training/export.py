"""Export: a finished pretraining run as a checkpoint folder to ship, with its model card.

`export_run(run_dir, out_dir)` copies the run's final model (float16 by default) and writes its card
(model_card.json and README.md): the run's held-out learning curve (`learning_curve`), counted on
from the earlier stage's totals when the run continued another model, its stop/resume history, and
the learning history of its snapshots (with the earlier model's before it) for the Watch it learn
page. `add_args` / `run` are `bertlab export`.

Imports bertlab.storage.checkpoint, history, model_card, runfolder and errors; never streamlit.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from bertlab.errors import InputError
from bertlab.storage.checkpoint import load_pretraining_model, save_checkpoint
from bertlab.storage.model_card import model_card_markdown
from bertlab.storage.modelfolder import is_model_folder
from bertlab.storage.runfolder import EARLIER_HISTORY_FILE, is_run_dir, model_dir, read_metrics, read_run_config
from bertlab.training.history import (
    build_history,
    continue_history,
    continue_points,
    has_history,
    history_for,
    load_history,
    save_history,
)


def learning_curve(run_dir: str | Path) -> list[dict]:
    """The held-out evaluations of a run: step, tokens, training seconds and metrics, for its card."""
    records = read_metrics(run_dir)
    cfg = (read_run_config(run_dir) or {}).get("config", {}).get("train", {})
    seconds: dict[int, float] = {}
    for r in records:  # older runs' eval records lack train_s: take it from the train line of that step
        if r.get("split") == "train" and cfg.get("max_time_s"):
            seconds[r["step"]] = r.get("progress", 0.0) * cfg["max_time_s"]
    curve = []
    for r in records:
        if r.get("split") != "eval":
            continue
        point = {"step": r["step"], "tokens": r["tokens"], "train_s": r.get("train_s", seconds.get(r["step"]))}
        point.update({k: round(r[k], 4) for k in ("mlm_acc", "mlm_loss", "nsp_acc") if k in r})
        curve.append(point)
    return curve


def check_export_target(run_dir: str | Path, out_dir: str | Path) -> None:
    """Refuse an export that would destroy something: `out_dir` is replaced whole, so it must be a new
    folder or an earlier export (a model folder), and neither the run nor inside it."""
    if not str(out_dir).strip():
        raise InputError("give the folder to write the model to, e.g. checkpoints/my-model")
    run, out = Path(run_dir).resolve(), Path(out_dir).expanduser().resolve()
    if out == run or run in out.parents or out in run.parents:
        raise InputError(f"{out_dir} is the run {run_dir} or holds it or lies inside it; export to a folder of its own")
    if is_run_dir(out.parent):  # e.g. another run's model/: it would lose its final model
        raise InputError(f"{out_dir} lies inside the run folder {out.parent}; export to a folder of its own")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out_dir} is a file; give a folder to write the model to")
    if out.is_dir() and any(out.iterdir()) and not is_model_folder(out):
        raise InputError(
            f"{out_dir} already holds files and is not a model folder; the export replaces the folder whole, "
            "so give a new folder (or an earlier export, to replace that model)"
        )


def export_run(
    run_dir: str | Path,
    out_dir: str | Path,
    fp16: bool = True,
    metrics_note: str = "",
    history: list[str] | None = None,
) -> Path:
    """Copy a finished run's model into `out_dir` (optionally float16) with README.md model card.

    `history`: lines about the run's stops and resumes, kept in the card."""
    run_dir = Path(run_dir)
    if not model_dir(run_dir).is_dir():
        raise InputError(f"{run_dir}: no finished model in it (model/ is missing); finish or resume the run first")
    check_export_target(run_dir, out_dir)
    model, tokenizer, info = load_pretraining_model(model_dir(run_dir), whole=True)  # both halves of a pair
    card = dict(info["card"])
    if metrics_note:
        card["metrics_note"] = metrics_note
    card["learning_curve"] = learning_curve(run_dir)
    if history:
        card["history"] = list(card.get("history", [])) + list(history)
    out = Path(out_dir)
    parent = card.get("init_card") or {}
    offset = {  # the earlier stages' totals: this run's steps, tokens and seconds count on from them
        "step": parent.get("total_steps", parent.get("steps")),
        "tokens": parent.get("total_tokens", parent.get("tokens")),
        "train_s": parent.get("total_train_time_s", parent.get("train_time_s")),
    }
    if parent.get("learning_curve"):
        card["learning_curve"] = continue_points(parent["learning_curve"], card["learning_curve"], offset)
        card["init_card"] = {k: v for k, v in parent.items() if k != "learning_curve"}  # now in the curve
    if card.get("init_from") and Path(card["init_from"]).resolve() == out.resolve():
        card["init_from_replaced"] = True  # the card must not read as if the model started from itself
    save_checkpoint(
        out,
        model,
        tokenizer,
        model.config,
        extra_config={"objective": card.get("objective")},
        extra_files={"model_card.json": card, "README.md": model_card_markdown(card).encode("utf-8")},
        dtype=torch.float16 if fp16 else None,
    )
    if has_history(run_dir):  # the run kept snapshots: its learning history travels with the model
        history = history_for(run_dir)
        if history is None:
            history = build_history(run_dir)
            save_history(history, run_dir)
        earlier = run_dir / EARLIER_HISTORY_FILE
        if earlier.is_file():  # and the history of the model it continued from, before it
            history = continue_history(load_history(earlier), history, offset)
        save_history(history, out)
    return out


def add_args(p: argparse.ArgumentParser) -> None:
    """The arguments of `bertlab export`."""
    p.add_argument("run_dir", help="a finished pretraining run folder")
    p.add_argument("out_dir", help="where to write the checkpoint (e.g. checkpoints/my-model)")
    p.add_argument("--fp32", action="store_true", help="keep float32 weights (default: float16, half the size)")
    p.add_argument("--note", default="", help="a sentence added under the metrics in the model card")
    p.add_argument("--history", action="append", default=[], help="a line about a stop/resume (repeatable)")


def run(args: argparse.Namespace) -> int:
    """`bertlab export`: write the checkpoint and say where and how big (and what an earlier export
    there lost: it is replaced whole)."""
    target = Path(args.out_dir)  # export_run checks the target before anything is written
    replaced = is_model_folder(target)
    studies = replaced and (target / "interpret").is_dir()
    out = export_run(args.run_dir, args.out_dir, fp16=not args.fp32, metrics_note=args.note, history=args.history)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file()) / 2**20
    print(f"wrote {out} ({size:.1f} MB)" + (", replacing the model that was there" if replaced else ""))
    if studies:
        print("its interpret studies were made on the model it replaced and went with it: run them again")
    return 0
