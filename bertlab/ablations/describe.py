"""An ablation result set in words: how it was made (`describe_spec`: its models, pretraining budget and
fine-tuning recipe, the columns re-run or pooled later), what each row's model is (`what_rows_are`), and
its authors' reading cut into the parts the Ablations page shows (`split_reading`).

Reads the suite spec and record beside a results CSV (bertlab.ablations.results). Torch-free: imports
bertlab.ablations.tables only.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertlab.ablations.tables import DEFAULT_GRID, FEATURE_LR, TABLES


def what_rows_are(meta: dict) -> dict[str, str]:
    """variant -> what our model is, in a few words ('tiny, 4.0M tokens'), from the cards recorded
    beside the results (`models` in <table>.json); for an older set without them, from its suite's
    size and budget ('tiny, 8 min'). Rows that share a model (+ BiLSTM) get its words too."""
    spec = meta.get("spec") or {}
    models = meta.get("models") or {}
    table = TABLES.get(str(spec.get("table") or meta.get("table")))
    out = {}
    for key, card in models.items():
        tokens = card.get("total_tokens") or card.get("tokens")
        size = "" if table is not None and table.shape_grid else str(card.get("size", "?"))  # the shape names it
        # a test suite's 20k tokens are not '0.0M'
        amount = "" if not tokens else f"{tokens / 1e6:.1f}M" if tokens >= 100_000 else f"{tokens / 1e3:.0f}k"
        out[key] = ", ".join(x for x in (size, f"{amount} tokens" if amount else "") if x)
    if table is not None and table.pretrains:
        fallback = f"{spec.get('size', '?')}, {pretraining_budget(spec).removeprefix('for ').removeprefix('on ')}"
        for v in table.variants(tuple(tuple(g) for g in spec.get("grid") or ())):
            out.setdefault(v.key, out.get(v.shares or "", fallback))
    return out


def pretraining_budget(spec: dict) -> str:
    """Each variant's pretraining budget as the suite ran it ("for 8 min", "on 4M tokens"): its budget_tokens or
    budget_s, unless an override
    (`--set train.max_time_s=0 --set train.max_tokens=4000000`, the last one wins) replaced it."""
    tokens = float(spec.get("budget_tokens") or 0)
    budget = {"max_time_s": 0.0 if tokens else float(spec.get("budget_s") or 0), "max_steps": 0.0, "max_tokens": tokens}
    for override in spec.get("overrides") or ():
        key, _, value = str(override).partition("=")
        if key.strip().removeprefix("train.") in budget:
            try:
                budget[key.strip().removeprefix("train.")] = float(value)
            except ValueError:
                continue
    parts = []
    if budget["max_time_s"]:
        parts.append(f"for {budget['max_time_s'] / 60:.0f} min")
    if budget["max_tokens"]:
        parts.append(f"on {budget['max_tokens'] / 1e6:g}M tokens")
    if budget["max_steps"]:
        parts.append(f"for {budget['max_steps']:.0f} steps")
    return " or ".join(parts) + (" (whichever came first)" if len(parts) > 1 else "")


def _model_tokens(models: dict | None) -> str:
    """' after 52.9M tokens of pretraining' for the one model a record's rows fine-tuned, '' when unknown."""
    totals = {m.get("total_tokens") or m.get("tokens") for m in (models or {}).values() if isinstance(m, dict)}
    totals.discard(None)
    return f" after {totals.pop() / 1e6:.1f}M tokens of pretraining" if len(totals) == 1 else ""


def describe_spec(
    spec: dict,
    recipe_changes: list[str] | tuple[str, ...] = (),
    merged: list[dict] | tuple[dict, ...] = (),
    models: dict | None = None,
    pooled: list[dict] | tuple[dict, ...] = (),
) -> str:
    """One line on how a result set was made, from its suite spec, what its pretraining changed in the base
    recipe (`recipe_changes` of its suite record: KEY=VALUE overrides) and the columns re-run later by
    other suites (`merged` of its record, see bertlab.ablations.merge), each said with its own recipe, and
    only for the columns no later re-run replaced.
    `models` (the record's): a table that probes one pretrained model names it with how far it had trained,
    which stays true when the shipped model trains on. `pooled` (the record's, see bertlab.ablations.merge):
    the sets of the same recipe pretrained again whose rows joined these."""
    parts = []
    table = TABLES.get(str(spec.get("table")))
    if table is not None and not table.pretrains:
        trained = _model_tokens(models)
        parts.append(
            f"model {spec.get('model') or ('bertlab-mini' if trained else 'the shipped bertlab-mini')}{trained}"
        )
    else:
        rows = (
            f"{len(spec.get('grid') or DEFAULT_GRID)} shapes"
            if table is not None and table.shape_grid
            else f"{spec.get('size', '?')} models"
        )
        parts.append(
            f"{rows} pretrained {pretraining_budget(spec)} each with the shipped model's recipe"
            + (f" (changed: {', '.join(recipe_changes)})" if recipe_changes else "")
        )
    # column -> the re-run that makes it now (the last one merged for it); the set's own spec makes the rest
    maker = {str(c): i for i, m in enumerate(merged) for c in m.get("columns") or ()}
    both = table is not None and table.feature_columns  # a task makes two columns: TASK and TASK-feature
    tasks = [
        t
        for t in spec.get("tasks") or (table.default_tasks if table is not None else ())
        if not ({t, f"{t}-feature"} if both else {t}) <= maker.keys()
    ]
    features = table is not None and table.has_frozen_features
    if tasks or not merged:  # a set whose every column was re-run later says only how the re-runs were made
        parts.append(_finetuning_text(spec, tasks, features))
    for i, m in enumerate(merged):  # each re-run for the columns it still makes: a later one replaced the rest
        columns = list(
            dict.fromkeys(str(c).removesuffix("-feature") for c in m.get("columns") or () if maker[str(c)] == i)
        )
        if not columns:
            continue
        parts.append(
            f"{', '.join(columns)} re-run later (suite {m.get('id', '?')}"
            + (", runs started by hand and adopted" if m.get("adopted") else "")
            + "): "
            + _finetuning_text(m.get("spec") or {}, columns, features)
        )
    for p in pooled:
        columns = [str(c) for c in p.get("columns") or () if c != "pretraining"]
        how = (
            "and seed: the two differ only through the arithmetic of the hardware, which over thousands of steps "
            "makes other models"
            if p.get("same_seed")
            else "and another seed"
        )
        parts.append(
            f"every model pretrained a second time with the same recipe {how} (set {p.get('id', '?')}, on "
            f"{p.get('hardware') or 'another machine'}): the pretraining scores and {', '.join(columns)} pool both "
            "runs' seeds, so their spread includes how much the pretraining run varies"
        )
    said = "; ".join(parts) + "."
    return said[:1].upper() + said[1:]


def _finetuning_text(spec: dict, tasks: list[str], features: bool) -> str:
    """How a suite fine-tuned `tasks`: train and dev examples, epochs and rates (a task's own recipe where it
    has one; `features`: and its frozen-feature runs'), seeds."""
    n = f"up to {spec['max_train_examples']}" if spec.get("max_train_examples") else "all the"
    scored = f"up to {spec['max_eval_examples']}" if spec.get("max_eval_examples") else "all the"
    lr = spec.get("finetune_lr")
    own = [(task, epochs, rate) for task, epochs, rate in spec.get("task_recipes") or () if task in tasks]
    base_tasks = {t.removesuffix("-feature") for t in tasks}  # a frozen-feature column (Table 8) is its task's
    feature_lr = spec.get("feature_lr", FEATURE_LR)
    own_rates = [(t, r) for t, r in spec.get("task_feature_lrs") or () if t in base_tasks and r != feature_lr]
    rates = ", ".join(f"{r:g} for {t}" for t, r in own_rates)
    if len(own_rates) < len(base_tasks):
        rates += f", else {feature_lr:g}" if own_rates else f"{feature_lr:g}"
    frozen = f" (frozen features: {spec.get('epochs', '?')} epochs at {rates})" if features else ""
    if tasks and len(own) == len(tasks):  # every task its own recipe: the suite's epochs only set the features'
        general = frozen
    else:
        general = (
            f" for {spec.get('epochs', '?')} epochs"
            + (f" at learning rate {lr:g}" if isinstance(lr, (int, float)) else "")
            + frozen
        )
    return (
        f"fine-tuned on {n} train examples{general}"
        + "".join(f"; for {task} {epochs:g} epochs at {rate:g}" for task, epochs, rate in own)
        + f", {spec.get('seeds', '?')} seed{'' if spec.get('seeds') == 1 else 's'} each, scored on {scored} dev examples"
    )


FINDINGS = ("Where we agree", "Where we do not", "Why")  # the leads of a reading's findings paragraphs


@dataclass(frozen=True)
class Reading:
    """A reading in the three parts the page shows: `short`, what the table teaches in one paragraph (its
    "**In short:**" paragraph, else its first and a side set's "**What it shows:**"); `findings`, where it agrees with the paper, where not and why;
    `method`, the rest (budget, commands, tables, side studies), in the order written."""

    short: str
    findings: str
    method: str


def split_reading(note: str) -> Reading:
    """A reading (results_note) cut into its parts by the bold lead of each paragraph."""
    paragraphs = [p.strip() for p in note.split("\n\n") if p.strip()]

    def lead(paragraph: str) -> str:  # "**Where we agree with the paper** (6 of 12): ..." -> "Where we agree ..."
        return paragraph[2:].split("**")[0].split(":")[0].strip() if paragraph.startswith("**") else ""

    # its "In short" paragraph; a reading written before those: its first, and what a side set shows
    found = [i for i, p in enumerate(paragraphs) if lead(p) == "In short"]
    shown = found[:1] or [0, *(i for i, p in enumerate(paragraphs) if i and lead(p) == "What it shows")]
    rest = [p for i, p in enumerate(paragraphs) if i not in shown]
    return Reading(
        short="\n\n".join(paragraphs[i] for i in shown) if paragraphs else "",
        findings="\n\n".join(p for p in rest if lead(p).startswith(FINDINGS)),
        method="\n\n".join(p for p in rest if not lead(p).startswith(FINDINGS)),
    )
