"""BERT's successors: the papers' claims (RoBERTa, ALBERT, SpanBERT, ELECTRA) beside our suite at equal
tokens, each variant's pretraining run as it stands, and its run as a command or a job."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertlab.ablations import successors as succ
from bertlab.app_pages import page_titled
from bertlab.errors import BertLabError
from bertlab.formatting import format_duration
from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import JobSpec
from bertlab.jobs.view import estimate_caption, format_count, format_gb
from bertlab.storage.runfolder import REPO_ROOT
from pages.common import concept, setup_page, show_error
from pages.common.admin import job_access_field

PAGE = setup_page(__file__)
st.title(PAGE.heading)
registry = JobRegistry()

try:
    variants = succ.suite_variants()
except BertLabError as exc:
    show_error(exc)
    st.stop()

st.subheader("In short")
st.markdown(
    "After BERT, four papers each changed one part of it and beat it on its own benchmarks. This page puts their "
    "claims beside a suite of ours that changes the same parts of one small model, on the same text."
)
ours = {v.key for v in variants}  # in the order they came out, BERT first
st.markdown("\n".join(f"- {text}" for key, text in succ.IN_SHORT.items() if key in ours))

st.subheader("The papers' claims")
st.table(pd.DataFrame(succ.claim_rows()), hide_index=True)
st.caption("Sources: " + " ".join(sorted(set(c.citation for c in succ.CLAIMS))))
with st.expander("What each number was measured on"):
    st.markdown("\n".join(f"- **{c.variant}, {c.source}**: {c.note}" for c in succ.CLAIMS if c.note))

budgets = sorted({v.max_tokens for v in variants})
budget = f"{budgets[0] / 1e6:.0f}M each" if len(budgets) == 1 else "budgets differ: " + ", ".join(map(str, budgets))
sizes = ", ".join(sorted({v.size for v in variants}))
st.subheader(f"Ours, at equal tokens ({budget}, {sizes} size)")
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
    frame = pd.concat(
        [
            pd.DataFrame({"tokens (M)": [t / 1e6 for t, _ in c], v: [a * 100 for _, a in c]}).set_index("tokens (M)")
            for v, c in curves.items()
        ],
        axis=1,
    )
    st.markdown("**Held-out masked-LM accuracy (%) against input tokens**")
    st.line_chart(frame, x_label="input tokens (M)", y_label="masked-LM accuracy (%)")
st.info(
    "The comparison itself, fine-tuning every variant on SST-2, MRPC, QNLI, RTE and SQuAD with three seeds each, "
    "and a verdict per claim (agree / no clear difference / disagree), comes when the five pretraining runs "
    "finish. Until then this page shows the runs as they go; nothing here is a verdict yet.",
    icon=":material/hourglass_top:",
)

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
