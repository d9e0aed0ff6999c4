"""Command line: `bertlab fill-mask | nsp | info | pretrain | finetune | jobs ...`.

Each subcommand parses arguments, calls the package, and prints text or `--json`. Errors the
user can fix exit with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict

from bertlab import __version__
from bertlab.errors import BertLabError

log = logging.getLogger(__name__)


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="checkpoint folder or Hub id (default: the shipped model)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")


def _load(args):
    from bertlab.inference import load_model

    return load_model(args.model, device=args.device)


# --- fill-mask ---------------------------------------------------------------------------
def _fill_mask_args(p):
    _add_model_args(p)
    p.add_argument("text", nargs="+", help="text with one or more [MASK]; several texts run as a batch")
    p.add_argument("--top-k", type=int, default=5)


def _fill_mask(args) -> int:
    lm = _load(args)
    results = lm.fill_mask(args.text, top_k=args.top_k)
    if args.json:
        payload = [[[{"token": c.token, "score": c.score} for c in m.candidates] for m in r.masks] for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload))
        return 0
    for r in results:
        if len(results) > 1:
            print(r.text)
        if r.truncated:
            print(f"(input truncated: {r.num_dropped} tokens cut)")
        for n, m in enumerate(r.masks, 1):
            print(f"[MASK] #{n}:")
            for c in m.candidates:
                print(f"  {c.score:7.2%}  {c.word}" + (f"  ({c.token})" if c.word != c.token else ""))
        if len(r.masks) > 1:
            print(f"joint fill: {r.joint_text}")
    return 0


# --- nsp -----------------------------------------------------------------------------------
def _nsp_args(p):
    _add_model_args(p)
    p.add_argument("sentence_a")
    p.add_argument("sentence_b")


def _nsp(args) -> int:
    lm = _load(args)
    r = lm.next_sentence(args.sentence_a, args.sentence_b)
    if args.json:
        print(json.dumps({"is_next_prob": r.is_next_prob, "is_next": r.is_next, "truncated": r.truncated}))
    else:
        print(f"P(IsNext) = {r.is_next_prob:.2%}  ->  {'IsNext' if r.is_next else 'NotNext'}")
    return 0


# --- info ----------------------------------------------------------------------------------
def _info_args(p):
    _add_model_args(p)


def _info(args) -> int:
    lm = _load(args)
    data = {
        "path": lm.path,
        "config": asdict(lm.config),
        "parameters": lm.num_parameters(),
        "vocab_size": len(lm.tokenizer),
        "lowercase": lm.tokenizer.lowercase,
        "has_nsp_head": lm.has_nsp,
        "card": lm.card,
    }
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        c = lm.config
        print(f"model       {lm.path}")
        print(f"size        L={c.num_layers} H={c.hidden_size} A={c.num_heads} (intermediate {c.intermediate_size})")
        print(f"parameters  {data['parameters']:,}")
        print(f"vocabulary  {data['vocab_size']:,} WordPiece tokens ({'uncased' if lm.tokenizer.lowercase else 'cased'})")
        print(f"attention   {c.attention_direction};  NSP head: {'yes' if lm.has_nsp else 'no'}")
        for k, v in (lm.card.get("metrics") or {}).items():
            print(f"{k:<11} {v}")
    return 0


BUILTIN = {
    "fill-mask": ("top-k answers for every [MASK]", _fill_mask_args, _fill_mask),
    "nsp": ("P(IsNext) that sentence B follows sentence A", _nsp_args, _nsp),
    "info": ("config, parameter count and vocabulary of a model", _info_args, _info),
}


def _extensions() -> dict:
    """Subcommands owned by other modules (pretrain, finetune, jobs), imported lazily."""
    out = {}
    for module in ("bertlab.pretrain", "bertlab.finetune", "bertlab.jobs"):
        try:
            mod = __import__(module, fromlist=["CLI_COMMANDS"])
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            log.warning("bertlab: %s needs %s, which is not installed; its commands are unavailable", module, exc.name)
            continue
        except Exception as exc:  # a broken extension must not take fill-mask / nsp / info down with it
            log.warning("bertlab: %s failed to import (%s: %s); its commands are unavailable", module, type(exc).__name__, exc)
            continue
        out.update(getattr(mod, "CLI_COMMANDS", {}))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertlab", description="BERT Lab: train, probe and take apart BERT.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("--version", action="version", version=f"bertlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_args, run) in {**BUILTIN, **_extensions()}.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_args(p)
        p.set_defaults(run=run)
    return parser


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        return int(args.run(args) or 0)
    except BertLabError as exc:
        print(f"bertlab {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # unreadable files, full disk: the user's to fix, not a bug to trace
        print(f"bertlab {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bertlab {args.command}: interrupted", file=sys.stderr)
        return 130
