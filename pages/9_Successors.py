"""BERT's successors: the papers' claims (RoBERTa, ALBERT, SpanBERT, ELECTRA) beside our suite at equal
tokens, each variant's pretraining run as it stands, and its run as a command or a job."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertlab.ablations import estimate as suite_estimate
from bertlab.ablations import results as suite_results
from bertlab.ablations import successors as succ
from bertlab.ablations import successors_record as record_files
from bertlab.ablations import successors_verdicts as sv
from bertlab.ablations import suites as ab
from bertlab.app_pages import page_titled
from bertlab.errors import BertLabError
from bertlab.figures.successors import curves_figure
from bertlab.formatting import format_duration
from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import JobSpec
from bertlab.jobs.view import estimate_caption, format_count, format_gb
from bertlab.storage.runfolder import REPO_ROOT
from pages.common import concept, fitted, setup_page, show_error, show_figure
from pages.common.admin import job_access_field

PAGE = setup_page(__file__)
st.title(PAGE.heading)
registry = JobRegistry()

try:
    variants = succ.suite_variants()
except BertLabError as exc:
    show_error(exc)
    st.stop()

RESULTS = record_files.RECORD_DIR  # results/successors: the fine-tuning CSV and the pretraining record
try:
    finetuned = suite_results.read_results(RESULTS / "successors.csv") if (RESULTS / "successors.csv").is_file() else []
except BertLabError as exc:
    show_error(exc)
    finetuned = []
try:
    record = record_files.read_record()
except BertLabError as exc:
    show_error(exc)
    record = record_files.SuccessorsRecord((), ())
parameters, pair_accuracy = sv.record_inputs(record)
electra_row = record.row("electra")
verdicts = sv.claim_verdicts(finetuned, parameters, pair_accuracy, electra_row.rtd_auc if electra_row else None)

st.subheader("In short")
st.markdown(
    "After BERT, four papers each changed one part of it and beat it on its own benchmarks. This page puts their "
    "claims beside a suite of ours that changes the same parts of one small model, on the same text. "
    + sv.in_short(verdicts)
)
ours = {v.key for v in variants}  # in the order they came out, BERT first
st.markdown("\n".join(f"- {text}" for key, text in succ.IN_SHORT.items() if key in ours))

st.subheader("The papers' claims")
st.table(pd.DataFrame(succ.claim_rows()), hide_index=True)
st.caption("Sources: " + " ".join(sorted(set(c.citation for c in succ.CLAIMS))))
with st.expander("What each number was measured on"):
    st.markdown("\n".join(f"- **{c.variant}, {c.source}**: {c.note}" for c in succ.CLAIMS if c.note))

st.subheader("Our verdicts")
concept(
    "Each claim read against our suite (the tables below). A difference counts as clear when it is larger than its "
    "noise, the larger of the two rows' spread (std) over fine-tuning seeds, as the Ablations page reads the "
    "paper's tables; 'not measured yet' says which runs are missing, and 'not tested: the run failed' marks a claim "
    "whose row's pretraining did not learn its objective (what it measured stays in its why)."
)
st.table(pd.DataFrame([v.row() for v in verdicts]), hide_index=True)

st.subheader("Fine-tuning: each row on five tasks")
table = sv.finetune_rows(finetuned)
if table:
    st.dataframe(pd.DataFrame(table), hide_index=True, column_config=fitted(table))
    st.caption(
        "Mean ± std over fine-tuning seeds, and in brackets the difference from BERT's row. Every row is fine-tuned "
        "the same way: Table 5's recipe (SST-2 and QNLI 2 epochs, MRPC and RTE 4, SQuAD 3 on 128-token windows, all "
        "at 3e-4, batch 32, up to 8,000 training examples; QNLI and SQuAD train on 80% of their dev set and are "
        "scored on the rest). MRPC is read on accuracy: calling every pair a paraphrase already scores F1 81. "
        f"From `{RESULTS.relative_to(REPO_ROOT).as_posix()}/successors.csv`; its README tells how each row was made."
    )
else:
    st.info("No fine-tuning results are committed yet.", icon=":material/hourglass_top:")

st.subheader("Pretraining: what each row cost and reached")
cost = sv.pretraining_rows(record)
if cost:
    st.dataframe(pd.DataFrame(cost), hide_index=True, column_config=fitted(cost))
    st.caption(
        "Parameters and size of the model that fine-tunes (an ELECTRA pair's discriminator; its generator apart), "
        "counted from the saved weights. Held-out accuracies at the run's last evaluation, on 128-token text it never "
        "trained on, 15% of tokens masked. The pair head columns score a sentence-pair head on held-out next-sentence "
        "and sentence-order pairs, the ALBERT paper's test both ways (IsNext read as 'in order'). Latency: one "
        "fill-mask sentence on one CPU thread, measured with no training beside it (an ELECTRA pair answers with its "
        f"generator). From `{RESULTS.relative_to(REPO_ROOT).as_posix()}/pretraining.csv` and `curves.csv`."
    )
    for tab, x in zip(
        st.tabs(["against input tokens", "against training minutes"]), ("tokens", "train_s"), strict=True
    ):
        with tab:
            by_row = {label: record.curve(key, "mlm_acc", x=x) for key, label in sv.LABELS.items()}
            show_figure(curves_figure(by_row, x), f"bertlab-successors-curves-{x}", key=f"succ-curves-{x}")
    st.caption(
        "Every row read the same text for the same number of input tokens; the minutes differ with what a step "
        "costs (ELECTRA runs a generator too) and with what else ran on the machine. ELECTRA's curve is its "
        "generator's, a quarter of the others' width."
    )
else:
    st.info("No pretraining record is committed yet.", icon=":material/hourglass_top:")

budgets = sorted({v.max_tokens for v in variants})
budget = f"{budgets[0] / 1e6:.0f}M each" if len(budgets) == 1 else "budgets differ: " + ", ".join(map(str, budgets))
sizes = ", ".join(sorted({v.size for v in variants}))
st.subheader(f"The suite in your runs folder ({budget}, {sizes} size)")
concept(
    "Each variant changes only what its paper changes against our baseline (BERT, masked LM + NSP), and every "
    "one reads the same text for the same number of input tokens. The run column reads the runs folder "
    f"(`{registry.root}`): a folder named after the config's run name shows its progress and its held-out "
    "masked-LM accuracy so far, with its own task's beside it (NSP, sentence order, replaced-token detection). "
    "ELECTRA's masked-LM accuracy is its generator's, which is a quarter of the others' width."
)
try:
    rows = succ.suite_rows(variants, registry.root)
except OSError as exc:
    st.warning(f"Cannot read the runs folder {registry.root}: {exc}")
    rows = succ.suite_rows(variants, REPO_ROOT / "no-runs-folder")
st.table(pd.DataFrame(rows), hide_index=True)

curves = {v.key: run.curve for v in variants if (run := succ.run_progress(registry.root, v)) and run.curve}
if curves:
    st.markdown("**Your runs' held-out masked-LM accuracy against input tokens**")
    show_figure(curves_figure(curves), "bertlab-successors-your-runs", key="succ-curves-runs")
# --------------------------------------------------------------------------------------
# Run this yourself
# --------------------------------------------------------------------------------------
st.subheader("Run this yourself")
st.markdown("Each variant from a terminal, into `runs/`:")
st.code("\n".join(succ.pretrain_command(v) for v in variants), language="bash", wrap_lines=True)

access = job_access_field()  # loopback: open; shared: the admin token of whoever started the app
if access.allowed:
    by_key = {v.key: v for v in variants}
    pick = st.selectbox(
        "Queue one as a job",
        list(by_key),
        index=None,
        placeholder="Pick a variant to see its estimate",
        format_func=lambda k: f"{k}: {by_key[k].family} · {by_key[k].objective}",
        key="succ_pick",
    )
    if pick is not None:
        spec = JobSpec("pretrain", succ.job_args(by_key[pick]))  # its folder: <run name>-<time>, as the table reads
        try:
            with st.spinner("Counting the corpus's tokens and timing a few training steps of this model…"):
                est = estimate_spec(spec, cwd=REPO_ROOT, runs_dir=registry.root)
        except BertLabError as exc:
            show_error(exc)
            est = None
        if est is not None:
            m1, m2, m3 = st.columns(3)
            m1.metric("Parameters", format_count(est.parameters))
            m2.metric("Memory", format_gb(est.total_gb))
            m3.metric("Time", format_duration(est.total_s) if est.total_s is not None else "?")
            st.caption(estimate_caption(est))
            for note in est.notes:  # clauses of the estimate's summary, as the Train page shows them
                if note != est.problem:
                    (st.warning if note in est.warnings else st.caption)(note[:1].upper() + note[1:])
            twins = registry.same_jobs(spec, cwd=REPO_ROOT)
            if twins:  # the suite's run already queued or running: a second copy repeats it exactly
                st.warning(
                    f"The same job is already {twins[0].state}: **{twins[0].id}**. A second copy would repeat it "
                    "exactly (the same settings, data and seed).",
                    icon=":material/content_copy:",
                )
            if est.problem:
                st.error(est.problem, icon=":material/front_hand:")
            elif st.button("Queue it", type="primary", key="succ_launch", icon=":material/rocket_launch:"):
                try:
                    job = registry.submit(spec, cwd=REPO_ROOT)
                except BertLabError as exc:
                    st.error(str(exc), icon=":material/front_hand:")
                else:
                    st.session_state["jobs_focus"] = job.id
                    jobs = page_titled("Jobs")
                    st.success(f"Job **{job.id}** is {job.state}. Its folder: `{job.run_dir}`")
                    st.page_link(jobs.file, label="Watch it on the Jobs page", icon=jobs.icon)
else:
    st.caption("Queuing a variant as a job needs the admin token of this shared app (the field above).")

# --------------------------------------------------------------------------------------
# Fine-tune the finished rows: the comparison as a suite of jobs
# --------------------------------------------------------------------------------------
st.markdown("**Then fine-tune every finished row**, three seeds of each task, as a suite of jobs:")
ft_spec = succ.finetune_spec(variants, registry.root)
if not ft_spec.row_models:
    st.caption("No variant's pretraining has finished in the runs folder yet; the rows join as they finish.")
else:
    st.code(succ.finetune_command(variants, registry.root), language="bash", wrap_lines=True)
    left_out = [v.key for v in variants if v.key not in dict(ft_spec.row_models)]
    st.caption(
        "Rows: "
        + ", ".join(dict(ft_spec.row_models))
        + (f"; not finished yet: {', '.join(left_out)}" if left_out else "")
    )
    if access.allowed:
        b1, b2 = st.columns([1, 4])
        if b1.button("Estimate", key="succ_ft_estimate", icon=":material/timer:"):
            try:
                with st.spinner("Timing a training step of each distinct fine-tuning job…"):
                    est = suite_estimate.estimate_suite(ft_spec, registry=registry)
            except BertLabError as exc:
                show_error(exc)
            else:
                st.info(f"This suite makes {est.text}.", icon=":material/timer:")
        if b2.button("Queue the fine-tuning suite", type="primary", key="succ_ft_launch", icon=":material/play_arrow:"):
            try:
                with st.spinner("Checking every job and estimating the suite…"):
                    suite_dir = ab.launch(ft_spec, registry)
            except BertLabError as exc:
                show_error(exc)
            else:
                st.success(f"Suite {suite_dir.name} queued; its progress is below and on the Jobs page.")

ours = [s for s in ab.list_suites(registry) if s.get("table") == "successors"]
if ours:
    record = ours[0]  # the newest

    def _progress(record: dict) -> None:
        runs = ab.suite_runs(record, registry)
        done = sum(r.state == "finished" for r in runs)
        st.progress(done / max(1, len(runs)), text=f"Suite {record['id']}: {done} of {len(runs)} runs finished")
        matrix = ab.progress_matrix(record, runs)
        st.dataframe(pd.DataFrame(matrix), hide_index=True, column_config=fitted(matrix))
        if done == len(runs):
            st.caption(
                f"Every run has finished: `bertlab ablate collect {record['id']} --out results/successors` writes "
                "the table's CSV, which this page reads."
            )

    busy = any(r.state in ("queued", "waiting", "preparing", "running") for r in ab.suite_runs(record, registry))
    st.caption("Runs finished of all seeds, then one mark per seed: ✓ finished, ▶ running, · queued, ✗ failed.")
    st.fragment(_progress, run_every=3.0 if busy else None)(record)
