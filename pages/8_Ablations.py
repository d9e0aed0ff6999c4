"""Ablations: the paper's Tables 5-8, ours beside them with a verdict per row; launch a suite and watch it fill in."""

from __future__ import annotations

import io
import re
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import streamlit as st

from bertlab.ablations import comparison, describe, estimate, planning, results, reuse
from bertlab.ablations import paper as paper_tables
from bertlab.ablations import suites as ab
from bertlab.ablations import tables as table_specs
from bertlab.ablations.view import (
    agreement,
    agreement_text,
    comparison_by_task,
    curves_figure,
    paper_rows,
    pretraining_note,
    results_figure,
    size_order_text,
    verdict_rows,
)
from bertlab.app_pages import page_titled
from bertlab.data.corpus import NAMED_SOURCES
from bertlab.errors import BertLabError, InputError
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import FINETUNE_TASKS, check_path_allowed
from bertlab.storage.runfolder import REPO_ROOT
from pages.common import concept, fitted, setup_page, show_error, show_figure
from pages.common.admin import job_access_field

PAGE = setup_page(__file__)
st.title(PAGE.heading)

COMMITTED = results.results_root()
DATA_DEFAULT = REPO_ROOT.parent / "shared" / "data"
registry = JobRegistry()

st.markdown(
    "Section 5 of the BERT paper takes the model apart: which pre-training task matters (Table 5), how size "
    "helps (Table 6), whether frozen features do as well as fine-tuning (Table 7) and whether the 80/10/10 "
    "masking mix matters (Table 8). Here are the paper's numbers, ours beside them, and the commands to run "
    "the same comparison yourself."
)
TABLES = {t.key: t.title for t in paper_tables.PAPER.values()}
table = (
    st.segmented_control("Table", list(TABLES), format_func=TABLES.get, default="table5", key="abl_table") or "table5"
)
paper = paper_tables.PAPER[table]
table_spec = table_specs.TABLES[table]
suggested = planning.suggested_spec(table)  # the suite this page offers: its launch form and commands


# a cell's leading list or heading mark ("+ BiLSTM"), which st.table, reading its cells as markdown, would draw
_BLOCK_MARK = re.compile(r"^(\s*)([-+*>]|#{1,6})(?=\s|$)")


def static_table(rows: list[dict]) -> None:
    """A static table: its cells wrap, so each is read whole at any width, and the page scrolls, not the table."""
    plain = [{k: _BLOCK_MARK.sub(r"\1\\\2", v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
    st.table(pd.DataFrame(plain), hide_index=True)


left, right = st.columns([3, 2], gap="large")
with left:
    st.subheader(f"The paper: {paper.question}")
    # whole (every column in view: the text below quotes them), each number as printed (84.4, 91.0, 5.84)
    static_table([{k: "—" if v is None else str(v) for k, v in r.items()} for r in paper_rows(table)])
    st.markdown(f"**What the paper found.** {paper_tables.PAPER_FINDINGS[table]}")
    st.caption(f"{paper.note} Source: {paper_tables.CITATION}")
with right:
    compared = (
        "Each of our shapes is compared with our smallest (the first row), and a bigger one *reproduces* the "
        "paper's finding when it is better beyond its noise (the larger standard deviation over seeds); a shape of "
        "the same size with other heads is shown, not judged."
        if table_specs.TABLES[table].shape_grid
        else "Each of our rows is compared with the table's baseline row "
        f"(*{paper_tables.our_label(table, paper.baseline)}*), and so is the paper's. A difference is *clear* when "
        "it is beyond its noise (ours: the larger standard deviation over seeds; the paper's one run a row: half a "
        "point). A direction is *reproduced* when both differences are clear and have the same sign, or when "
        "neither is clear; a clear difference on one side and none on the other is not reproduced, whatever "
        "its sign."
    )
    concept(
        f"**How to read a verdict.** {compared} Our models are small next to BERT-base (the mini model most "
        "tables use has 3.1M encoder weights against its 85M; Table 6's shapes 0.4M to 25M) and saw a thousandth "
        "of its text or less, so expect wide error bars, not the paper's absolute numbers."
    )

# --------------------------------------------------------------------------------------
# Our results: the committed set, or a suite from the runs folder
# --------------------------------------------------------------------------------------
st.subheader("Ours")
st.caption(table_spec.how_rows_are_made)
sources: dict[str, str] = {}
main_set = results.results_files(COMMITTED).get(table)
# the table's main result set first, then the same table run another way (e.g. another learning rate)
shipped = {
    f"committed:{p.name}": p for p in ([main_set] if main_set else []) + results.other_result_sets(COMMITTED, table)
}
for key, path in shipped.items():
    sources[key] = (
        f"The result set shipped with BERT Lab ({path.name})"
        if path == main_set
        else f"Also shipped: {results.result_set_label(path)}"
    )
try:
    suites = [s for s in ab.list_suites(registry) if s.get("table") == table]
except OSError as exc:
    suites = []
    st.warning(f"Cannot read the runs folder {registry.root}: {exc}")
for s in suites:
    sources[s["id"]] = f"Suite {s['id']} (your runs)"
if not sources:
    st.info(
        "No results yet for this table: none shipped and no suite of yours. Launch one below, or from a "
        f"terminal, at equal tokens:\n\n`{planning.command(suggested)}`"
    )
    rows: list[dict] = []
    record = None
else:
    launched = st.session_state.pop(f"abl_launched_{table}", None)  # a suite launched below, last run
    if launched in sources:  # shown now: set before the box is drawn (a drawn widget's key cannot be set)
        st.session_state[f"abl_source_{table}"] = launched
    pick = st.selectbox("Results", list(sources), format_func=sources.get, key=f"abl_source_{table}")
    record, runs_now, committed = None, [], shipped.get(pick)
    try:
        if committed is not None:
            rows = results.read_results(committed)
        else:
            record = next(s for s in suites if s["id"] == pick)
            runs_now = ab.suite_runs(record, registry)  # each job's state now: missing rows, the progress
            rows = results.collect(record, registry)
    except BertLabError as exc:
        show_error(exc)
        rows = []
shipped_meta = results.results_meta(committed.with_suffix(".json")) if sources and committed is not None else {}

if sources:  # how the set was made, its budget first, while a suite has nothing finished too
    made = record if record is not None else shipped_meta
    if made.get("spec"):
        st.caption(
            describe.describe_spec(
                made["spec"],
                made.get("recipe_changes") or (),
                made.get("merged") or (),
                made.get("models"),
                made.get("pooled") or (),
            )
        )
if rows:
    if record is None:
        meta = shipped_meta
    else:
        meta = {"spec": record.get("spec", {}), "models": results.model_records(record, registry)}
    what = describe.what_rows_are(meta)  # "tiny, 4.0M tokens": our rows are not BERT-base
    notes = [
        paper_tables.DATA_NOTES[t]
        for t in dict.fromkeys(r["task"].removesuffix("-feature") for r in rows)
        if t in paper_tables.DATA_NOTES
    ]
    for note in notes:
        st.caption(f"⚠ {note}.")
    static_table(comparison_by_task(table, rows, what))  # a row a variant needs three columns a task: too wide
    if any(r["task"] == "pretraining" for r in rows):
        st.caption(pretraining_note(table))
    states = (meta.get("runs") or []) if record is None else [asdict(r) for r in runs_now]
    for variant, why in results.rows_without_results(rows, states).items():
        st.caption(f"No results for {paper_tables.our_label(table, variant)}: {why}.")
    if plateau := comparison.still_on_plateau(rows, meta):
        st.warning(comparison.plateau_text(table, plateau), icon=":material/trending_flat:")
    show_figure(results_figure(table, rows), f"bertlab-{table}", key=f"fig-{table}")
    # the committed set comes with its authors' reading of it (where it agrees, where not, why)
    note = results.results_note(committed) if record is None else ""
    agree = agreement(table, rows)
    if agree["compared"]:
        st.markdown(
            f"**Direction reproduced in {agree['reproduced']} of {agree['compared']} comparisons** "
            "with a paper column. " + agreement_text(table, rows) + ("" if note else " " + paper_tables.WHY_DIFFERENT)
        )
    if table_spec.shape_grid and (order := size_order_text(table, rows)):
        st.markdown(
            "**Monotone in size?** A shape counts against it when it is clearly worse (beyond the seeds' spread) "
            "than one with fewer weights; a rank correlation of +1 (perplexity: −1) means always better when "
            "bigger. " + order
        )
    if note:  # a paragraph to take away; the full reasoning and the method a click away
        reading = describe.split_reading(note)
        st.markdown("#### What this table teaches\n\n" + reading.short)
        if reading.findings:
            with st.expander("Where we agree with the paper, where not, and why"):
                st.markdown(reading.findings)
        if reading.method:
            with st.expander("How these numbers were made"):
                st.markdown(reading.method)
    with st.expander("Every verdict"):
        static_table(verdict_rows(comparison.verdicts(table, rows), table, what))  # whole sentences, wrapped
    buf = io.StringIO()
    pd.DataFrame(rows).to_csv(buf, index=False)
    st.download_button(
        "Results (CSV, one row per run and metric)",
        buf.getvalue(),
        file_name=f"{table}.csv",
        mime="text/csv",
        icon=":material/download:",
        on_click="ignore",
    )
elif sources:
    st.info("No finished runs in these results yet.")


def _switch_note(spec: dict) -> str:
    """Where the curves step up: the recipe's move to longer sequences (empty when it has none)."""
    try:
        switch = planning.sequence_switch(planning.SuiteSpec.from_dict(spec)) if spec else None
    except (BertLabError, TypeError, ValueError):
        switch = None
    if switch is None:
        return ""
    at, short, long, heldout = switch
    where = f"after {at * spec['budget_tokens'] / 1e6:.0f}M tokens" if spec.get("budget_tokens") else "part-way"
    return (
        f" The step {where} is where pretraining moves from {short}- to {long}-token sequences for its last "
        f"{1 - at:.0%} (the paper's two phases: 128, then 512 tokens)"
        + (
            f"; the held-out text is scored in {heldout}-token sequences, whose later positions a model has barely "
            "used before."
            if heldout > short
            else "."
        )
    )


if sources and table_spec.pretrains:
    if record is not None:
        curves, spec_of = results.pretraining_curves(record, registry), record.get("spec") or {}
    else:
        meta = shipped_meta
        curves, spec_of = meta.get("curves") or {}, meta.get("spec") or {}
    grid_of = spec_of.get("grid") or ()
    if curves:
        st.markdown("#### How each row's pretraining went")
        show_figure(
            curves_figure(table, curves, tuple(tuple(g) for g in grid_of)),
            f"bertlab-{table}-curves",
            key=f"curves-{table}",
        )
        st.caption(
            "Held-out masked-token accuracy at each evaluation (a left-to-right row: next-word accuracy, dotted). "
            f"Below {comparison.PLATEAU_EXIT:.0f}% a masked-LM model has learned little beyond how common each word "
            "is. "
            + (
                "Every row is pretrained on the same number of tokens, so their speed decides nothing."
                if spec_of.get("budget_tokens")
                else "Every row is pretrained for the same time, so a faster one sees more tokens."
            )
            + _switch_note(spec_of)
        )


# --------------------------------------------------------------------------------------
# Progress of a suite from the runs folder
# --------------------------------------------------------------------------------------
def _progress(record: dict) -> None:
    runs = ab.suite_runs(record, registry)
    done = sum(r.state == "finished" for r in runs)
    # the fragment refreshes itself only: when a run has finished since, redraw the whole page so that
    # its results join the table and the figures above
    seen = st.session_state.get(f"abl_done_{record['id']}")
    st.session_state[f"abl_done_{record['id']}"] = done
    if seen is not None and done != seen:
        st.rerun(scope="app")
    st.progress(done / max(1, len(runs)), text=f"{done} of {len(runs)} runs finished")
    matrix = [
        {**row, "variant": paper_tables.our_label(table, row["variant"])} for row in ab.progress_matrix(record, runs)
    ]
    st.dataframe(pd.DataFrame(matrix), hide_index=True, column_config=fitted(matrix))
    failed = [r for r in runs if r.state in ("failed", "missing")]
    for r in failed[:5]:
        st.warning(
            f"{r.job}: {r.state}" + (f" ({r.error})" if r.error else "") + " — resume or delete it on the Jobs page."
        )
    if done == len(runs):
        st.success("All runs finished.")


if record is not None:
    st.subheader("Progress: variant × task × seed")
    st.caption("Runs finished of all seeds, then one mark per seed: ✓ finished, ▶ running, · queued, ✗ failed.")
    busy = any(r.state in ("queued", "waiting", "preparing", "running") for r in runs_now)
    st.fragment(_progress, run_every=3.0 if busy else None)(record)
    st.page_link(
        page_titled("Jobs").file, label="Every run of the suite is on the Jobs page", icon=page_titled("Jobs").icon
    )

# --------------------------------------------------------------------------------------
# Launch a suite
# --------------------------------------------------------------------------------------
st.subheader("Run this table yourself")
access = job_access_field()  # loopback: open; shared: the admin token of whoever started the app
with st.form(f"abl_launch_{table}"):
    c1, c2, c3 = st.columns(3)
    default_tasks = list(suggested.tasks or table_spec.default_tasks)  # the committed set's
    tasks = c1.multiselect("Tasks", [t for t in FINETUNE_TASKS if t != "mnli"], default=default_tasks)
    seeds = c1.number_input("Seeds (fine-tuning restarts)", 1, 20, suggested.seeds)
    if not table_spec.pretrains:
        model = c2.text_input("Pretrained model to probe (folder; empty = the shipped model)", "")
        size, minutes, millions, grid, settings, reuse_runs, corpus = "tiny", 0.0, 0.0, "", "", False, ""
    else:
        model = ""
        size = c2.selectbox(
            "Model size", ["tiny", "mini", "small", "medium", "base", "large"], index=1, disabled=table_spec.shape_grid
        )
        millions = c2.number_input(
            "Pretraining tokens per variant (millions; equal tokens)",
            0.0,
            100_000.0,
            suggested.budget_tokens / 1e6,
            step=5.0,
            help="Every variant sees the same number of tokens, so a faster variant gets no more training. "
            "0 = equal wall-clock instead (the minutes below).",
        )
        minutes = c2.number_input("…or minutes per variant (when tokens is 0)", 1.0, 24 * 60.0, 10.0, step=1.0)
        grid = (
            c2.text_input(
                "Grid: layers/hidden/heads, comma-separated",
                ", ".join(f"{a}/{b}/{c}" for a, b, c in suggested.grid or table_specs.DEFAULT_GRID),
            )
            if table_spec.shape_grid
            else ""
        )
        corpus = c2.text_input(
            "Pretraining corpus (comma-separated)",
            suggested.corpus,
            help="'default' (gensim's Wikipedia sample), text files or folders. The committed sets pretrained on "
            "the sample, twelve public-domain books and WikiText-2 (this workspace's ../shared/data/corpus); "
            "'default' alone needs nothing else.",
        )
        settings = c2.text_area(
            "Pretraining settings (KEY=VALUE, one per line)",
            "\n".join(suggested.overrides),
            help="`bertlab pretrain` settings for every variant on top of the shipped model's recipe, e.g. "
            "train.batch_size=128 (in Table 8's committed runs, at batch 128 and 1e-3, the mixes without unchanged "
            "tokens passed 20% by 72M tokens; at batch 32 and 1.5e-3 they stayed on the unigram guess or diverged).",
        )
        reuse_runs = c2.checkbox(
            "Reuse matching pretraining runs",
            value=True,
            help="A row whose exact pretraining (every setting but the name) already ran, runs or can resume in "
            "the runs folder uses that job instead of pretraining again; e.g. Table 5's MLM + NSP run serves as "
            "Table 8's 80/10/10 row and Table 6's 4/256/4 row.",
        )
    # the committed set's fine-tuning (planning.suggested_spec), so the defaults reproduce it
    examples = c3.number_input(
        "Train examples per run (0 = all)", 0, 10_000_000, suggested.max_train_examples, step=500
    )
    dev_examples = c3.number_input("Dev examples scored per run (0 = all)", 0, 10_000_000, suggested.max_eval_examples)
    epochs = c3.number_input(
        "Epochs",
        0.5,
        20.0,
        float(suggested.epochs),
        step=0.5,
        help="Fine-tuning passes over the train examples; the frozen-feature taggers' too (a task's own recipe "
        "below replaces it for that task's fine-tuning runs).",
    )
    feature_lr, feature_lrs = suggested.feature_lr, planning.task_feature_lrs_text(suggested.task_feature_lrs)
    if table_spec.has_frozen_features:
        feature_lr = c3.number_input(
            "Frozen-feature taggers' learning rate",
            1e-5,
            1e-1,
            float(suggested.feature_lr),
            step=1e-4,
            format="%g",
            help="The rate of the BiLSTM taggers trained on frozen features (the paper gives none); Table 7's "
            "reading says how much it moved them on the shipped model.",
        )
        feature_lrs = c3.text_input(
            "A task's own taggers' learning rate (TASK=LR, comma-separated)",
            feature_lrs,
            help="Replaces the rate above for that task's frozen-feature taggers, as the paper chose a recipe "
            "per task; Table 7's reading gives the rates tried on the shipped model for each task.",
        )
    recipes = c3.text_input(
        "A task's own epochs/learning rate (TASK=EPOCHS/LR, comma-separated)",
        planning.task_recipes_text(suggested.task_recipes),
        help="Replaces the epochs above and the learning rate (1e-4) for that task's fine-tuning runs, as the "
        "paper chose a recipe per task. MRPC's 3,668 pairs give only 230 steps at 2 epochs and 1e-4, which "
        "left Table 5's mini models near the majority guess; at those settings Table 8's UPOS fine-tuning "
        "ended below its frozen features.",
    )
    data = c3.text_input("Task data folder (holds glue/, ud_en_ewt/, wnut17/, squad/)", str(DATA_DEFAULT))
    b1, b2 = st.columns([1, 4])
    estimate_only = b1.form_submit_button("Estimate", icon=":material/timer:")
    launch = (
        b2.form_submit_button("Launch", type="primary", icon=":material/play_arrow:", disabled=not access.allowed)
        and access.allowed
    )  # a forged click on the disabled button launches nothing

if launch or estimate_only:
    try:
        spec = planning.SuiteSpec(
            table=table,
            tasks=tuple(tasks),
            seeds=int(seeds),
            size=size,
            budget_s=float(minutes) * 60,
            budget_tokens=int(millions * 1e6),
            grid=planning.parse_grid(grid) if grid else (),
            model=model.strip(),
            data=data.strip(),
            corpus=corpus.strip(),
            max_train_examples=int(examples),
            max_eval_examples=int(dev_examples),
            epochs=float(epochs),
            feature_lr=float(feature_lr),
            task_recipes=planning.parse_task_recipes(recipes),
            task_feature_lrs=planning.parse_task_feature_lrs(feature_lrs),
            overrides=planning.parse_overrides(settings),
            threads=suggested.threads,  # as the command the page prints: one thread a job, two jobs at a time
        )
        if access.shared:  # whoever reaches a shared app must not make it read any server file, even to estimate
            for path in (spec.data, spec.model, *spec.corpus.split(",")):
                if path.strip() and path.strip() not in NAMED_SOURCES:
                    check_path_allowed(path.strip(), cwd=REPO_ROOT)
        if not tasks:
            raise InputError("pick at least one task")
        if not Path(spec.data).expanduser().is_dir():
            raise InputError(f"the data folder {spec.data} does not exist")
        if reuse_runs:
            spec = reuse.with_matching_reuse(spec, registry)
        est = estimate.estimate_suite(spec, registry=registry)
        if estimate_only:
            st.info(f"This suite makes {est.text}.", icon=":material/timer:")
            each = est.rows()
            st.dataframe(pd.DataFrame(each), hide_index=True, column_config=fitted(each))
            st.caption(
                "Each run's time is the Train page's estimate of the same job (its real model and token counts, "
                "throughput from an earlier run or timed here now), plus its start-up and end ('start + end': "
                "from earlier jobs of the same kind and data, else a measured default). "
                f"The same suite from a terminal: `{planning.command(spec)}`"
            )
            st.stop()
        suite_dir = ab.launch(spec, registry)
        reused = "".join(f" {v} reuses job {j}." for v, j in spec.reuse)
        st.success(f"Suite {suite_dir.name} queued: {est.text}.{reused}")
        st.session_state[f"abl_launched_{table}"] = suite_dir.name  # picked under Results on the rerun
        st.rerun()
    except BertLabError as exc:
        show_error(exc)
st.caption(
    "Each run is an ordinary job (queued, resumable, on the Jobs page). The same suite from a terminal: "
    f"`{planning.command(suggested)}`; `bertlab ablate estimate {table} ...` lists each run and its "
    f"time. Runs go to `{registry.root}`."
)
