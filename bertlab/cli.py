"""Command line: `bertlab fill-mask | nsp | info | pretrain | export | finetune | jobs | interpret | ablate ...`.

Each subcommand parses arguments, calls the package, and prints text or `--json`. Errors the
user can fix exit with status 2 and one line on stderr, never a traceback.

Start-up stays cheap: `COMMANDS` names each subcommand's help and a function that imports the
module that owns it, so a module is imported (with torch, for most) only to build and run the one
subcommand being called; each owner exposes `add_args(parser)` and `run(args)`.
fill-mask, nsp and info live here and import torch inside their run functions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

from bertlab import __version__
from bertlab.errors import BertLabError, InputError
from bertlab.formatting import one_line, printable
from bertlab.storage.runfolder import runs_root

if TYPE_CHECKING:
    from bertlab.inference import FillMaskResult

AddArgs = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


def _add_model_args(p: argparse.ArgumentParser, json_help: str = "print JSON for scripts") -> None:
    p.add_argument("--model", default=None, help="checkpoint folder or Hub id (default: the shipped model)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--json", action="store_true", help=json_help)


def check_argv_text(label: str, text: str) -> None:
    """Refuse text from the command line that was not valid UTF-8, before any model loads: Python
    hands each undecodable byte over as a lone surrogate (U+DC80..U+DCFF), which would otherwise
    fail deep inside the tokenizer."""
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            what = f"byte 0x{ord(ch) - 0xDC00:02x}" if "\udc80" <= ch <= "\udcff" else f"'\\u{ord(ch):04x}'"
            raise InputError(
                f"{label} is not valid UTF-8 ({what} at character {i}); "
                "give the text in UTF-8 (check the terminal's or the script's encoding)"
            )


def _load(args):
    from bertlab.inference import load_model  # deferred: torch, for the commands that load a model

    return load_model(args.model, device=args.device)


# --- fill-mask ---------------------------------------------------------------------------
FILL_MASK_JSON_HELP = (
    "print JSON: a list with one object per text, whether one text or several are given: "
    '{"text", "masks": [{"candidates": [{"word", "token", "score"}, ...]}, ...], "joint_text", "truncated", '
    '"num_masks_dropped"}; masks in text order, candidates best first; word is the whole word a WordPiece '
    "token makes, joint_text the text with every [MASK] filled jointly, num_masks_dropped the [MASK]s in "
    "the part of a long text that was cut off (not answered)"
)


def _fill_mask_args(p):
    _add_model_args(p, json_help=FILL_MASK_JSON_HELP)
    p.add_argument("text", nargs="+", help="text with one or more [MASK]; several texts run as a batch")
    p.add_argument("--top-k", type=int, default=5, help="answers to show for each [MASK] (default 5)")


def fill_mask_json(results: Sequence[FillMaskResult]) -> list[dict]:
    """`FillMaskResult`s as the `--json` shape documented in FILL_MASK_JSON_HELP (the API's names)."""
    return [
        {
            "text": r.text,
            "masks": [
                {"candidates": [{"word": c.word, "token": c.token, "score": c.score} for c in m.candidates]}
                for m in r.masks
            ],
            "joint_text": r.joint_text,
            "truncated": r.truncated,
            "num_masks_dropped": r.num_masks_dropped,
        }
        for r in results
    ]


def truncation_note(num_dropped: int, num_masks_dropped: int = 0) -> str:
    """The line that says a text was cut to fit the model, and what was lost with it."""
    masks = ""
    if num_masks_dropped:
        s = "" if num_masks_dropped == 1 else "s"
        masks = f"; {num_masks_dropped} [MASK]{s} in the cut-off part not answered: shorten the text"
    return f"(input truncated: {num_dropped} tokens cut{masks})"


def _fill_mask(args) -> int:
    for n, text in enumerate(args.text, 1):
        check_argv_text(f"text {n}" if len(args.text) > 1 else "text", text)
    lm = _load(args)
    results = lm.fill_mask(args.text, top_k=args.top_k)
    if args.json:
        print(json.dumps(fill_mask_json(results)))
        return 0
    for r in results:
        if len(results) > 1:
            print(printable(r.text))
        if r.truncated:
            print(truncation_note(r.num_dropped, r.num_masks_dropped))
        for n, m in enumerate(r.masks, 1):
            print(f"[MASK] #{n}:")
            for c in m.candidates:
                print(
                    f"  {c.score:7.2%}  {printable(c.word)}"
                    + (f"  ({printable(c.token)})" if c.word != c.token else "")
                )
        if len(r.masks) > 1:
            print(f"joint fill: {printable(r.joint_text)}")
    return 0


# --- nsp -----------------------------------------------------------------------------------
def _nsp_args(p):
    _add_model_args(p)
    p.add_argument("sentence_a", help="the first sentence (A)")
    p.add_argument("sentence_b", help="the sentence that may or may not follow A (B)")


def _nsp(args) -> int:
    check_argv_text("sentence A", args.sentence_a)
    check_argv_text("sentence B", args.sentence_b)
    lm = _load(args)
    r = lm.next_sentence(args.sentence_a, args.sentence_b)
    if args.json:
        print(json.dumps({"is_next_prob": r.is_next_prob, "is_next": r.is_next, "truncated": r.truncated}))
    else:
        if r.truncated:
            print(truncation_note(r.num_dropped))
        print(f"P(IsNext) = {r.is_next_prob:.2%}  ->  {'IsNext' if r.is_next else 'NotNext'}")
    return 0


# --- info ----------------------------------------------------------------------------------
def _info_args(p):
    _add_model_args(p)


def _info(args) -> int:
    from bertlab.finetune.predict import is_finetuned_config, load_finetuned  # deferred: torch
    from bertlab.inference import load_model  # deferred: torch
    from bertlab.storage.checkpoint import default_model_path, load_config, resolve  # deferred: torch, as in _load

    directory = resolve(default_model_path() if args.model is None else args.model)
    _, raw = load_config(directory)
    if is_finetuned_config(raw):
        fm = load_finetuned(directory, device=args.device)
        model, tokenizer, card, has_nsp, setup = fm.model, fm.tokenizer, fm.card, False, fm.setup
        path = fm.path
    else:
        lm = load_model(directory, device=args.device)
        model, tokenizer, card, has_nsp, setup = lm.model, lm.tokenizer, lm.card, lm.has_nsp, None
        path = lm.path
    runs = runs_root()
    config = model.config
    data = {
        "path": path,
        "config": asdict(config),
        "parameters": model.num_parameters(),
        "vocab_size": len(tokenizer),
        "lowercase": tokenizer.lowercase,
        "has_nsp_head": has_nsp,
        # the task head of a fine-tuned model (config.json's bertlab.finetune); None for a pretrained one
        "finetune": setup.to_dict() if setup else None,
        "card": card,
        "runs_dir": str(runs),  # where runs go and the app's Jobs page looks ($BERTLAB_RUNS, else runs/)
    }
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    c = config
    if setup is None:
        head = f"masked LM, pretrained (bertlab fill-mask{', bertlab nsp' if has_nsp else ''})"
    else:
        labels = ", ".join(setup.labels[:10]) + (", ..." if len(setup.labels) > 10 else "")
        head = f"fine-tuned for {setup.task} ({setup.shape}){'; labels ' + labels if labels else ''}; no masked-LM head"
    rows = [
        ("model", str(path)),
        ("size", f"L={c.num_layers} H={c.hidden_size} A={c.num_heads} (intermediate {c.intermediate_size})"),
        ("parameters", f"{data['parameters']:,}"),
        ("vocabulary", f"{data['vocab_size']:,} WordPiece tokens ({'uncased' if tokenizer.lowercase else 'cased'})"),
        ("attention", f"{c.attention_direction};  NSP head: {'yes' if has_nsp else 'no'}"),
        ("head", head),
    ]
    metrics = card.get("metrics")
    rows += [(str(k), str(v)) for k, v in (metrics.items() if isinstance(metrics, dict) else ())]
    moved = "from $BERTLAB_RUNS" if os.environ.get("BERTLAB_RUNS") else "set $BERTLAB_RUNS to move it"
    rows.append(("runs", f"{runs}  ({moved})"))
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(printable(f"{label:<{width}}  {value}"))
    return 0


BUILTIN = {
    "fill-mask": ("top-k answers for every [MASK]", _fill_mask_args, _fill_mask),
    "nsp": ("P(IsNext) that sentence B follows sentence A", _nsp_args, _nsp),
    "info": ("config, parameter count and vocabulary of a model", _info_args, _info),
}


# Subcommands owned by other modules, each imported (with torch, for most) only when it is the one
# being run: name -> (help, a function that imports the module and returns its (add_args, run)).
# The help is written here so that `bertlab --help` imports none of them.
def _pretrain() -> tuple[AddArgs, Run]:
    from bertlab.training import pretrain  # deferred, as each command below: torch

    return pretrain.add_args, pretrain.run


def _export() -> tuple[AddArgs, Run]:
    from bertlab.training import export  # deferred: torch

    return export.add_args, export.run


def _finetune() -> tuple[AddArgs, Run]:
    from bertlab.finetune.args import add_args  # deferred: as every command, loaded when it runs
    from bertlab.jobs.finetune_grid import run_cli  # deferred: torch (the recipe, behind the grid's flags)

    return add_args, run_cli


def _jobs() -> tuple[AddArgs, Run]:
    from bertlab.jobs import cli as jobs_cli  # deferred: the job registry and estimates, not needed for --help

    return jobs_cli.add_args, jobs_cli.run


def _interpret() -> tuple[AddArgs, Run]:
    from bertlab.interpret import cli as interpret_cli  # deferred: torch

    return interpret_cli.add_args, interpret_cli.run


def _ablate() -> tuple[AddArgs, Run]:
    from bertlab.ablations import cli as ablations_cli  # deferred: not needed for --help

    return ablations_cli.add_args, ablations_cli.run


def _compress() -> tuple[AddArgs, Run]:
    from bertlab.compress import cli as compress_cli  # deferred: torch

    return compress_cli.add_args, compress_cli.run


COMMANDS = {
    "pretrain": ("pretrain a BERT from raw text (MLM + NSP, or an ablation)", _pretrain),
    "export": ("copy a finished run's model into a checkpoint folder with its model card", _export),
    "finetune": ("fine-tune BERT on a task (GLUE, tagging, SQuAD)", _finetune),
    "jobs": ("background training jobs: list, submit, show, cancel, resume, delete, estimate, tick", _jobs),
    "interpret": ("probe each layer or study the heads of a model; saved beside it (a job too)", _interpret),
    "ablate": ("the paper's ablations (Tables 5-8) as job suites: run, status, collect, report", _ablate),
    "compress": ("make a model smaller: quantize (int8, bf16, fp16) or prune, measured before and after", _compress),
}


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand in `argv`: its first word that is not an option (bertlab's own options take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _add_args_and_run(name: str) -> tuple[AddArgs, Run]:
    if name in BUILTIN:
        return BUILTIN[name][1:]
    return COMMANDS[name][1]()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser for `argv` (default: sys.argv[1:]).

    Every subcommand is listed with its help; only the one `argv` calls gets its own arguments
    (importing its module), so `bertlab --help` and `bertlab jobs list` do not import torch."""
    argv = sys.argv[1:] if argv is None else argv
    command = _command_in(argv)
    parser = argparse.ArgumentParser(prog="bertlab", description="BERT Lab: train, probe and take apart BERT.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("--version", action="version", version=f"bertlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    helps = {name: help_text for name, (help_text, *_) in {**BUILTIN, **COMMANDS}.items()}
    for name, help_text in helps.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            add_args, run = _add_args_and_run(name)
            add_args(p)
            p.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        code = int(args.run(args) or 0)
        sys.stdout.flush()  # a reader that left (`| head`) shows here, not at interpreter exit
        return code
    except BrokenPipeError:  # `bertlab jobs show ID | head`: the reader has what it wanted; no error line
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command stopped by SIGPIPE
    except BertLabError as exc:
        print(f"bertlab {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # unreadable files, full disk: the user's to fix, not a bug to trace
        print(f"bertlab {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bertlab {args.command}: interrupted", file=sys.stderr)
        return 130
