"""Jobs: every run with its state, live curves, log and controls; try a finished model."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import streamlit as st

from bertlab.app_pages import page_titled
from bertlab.errors import BertLabError
from bertlab.figures.answers import probability_bar
from bertlab.finetune.tasks import label_text
from bertlab.hardware import gpu_stats
from bertlab.inference import MAX_TEXT_CHARS
from bertlab.jobs.curves import curves_figure
from bertlab.jobs.metric_lines import chance_levels
from bertlab.jobs.predictions import answer_html, probabilities_figure, tags_html
from bertlab.jobs.progress import caught_up
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.states import (
    can_cancel,
    can_delete,
    can_resume,
    can_try,
    expects_metrics,
    interrupted_text,
    is_waiting,
    job_heading,
    job_label,
    log_expanded,
    progress_fraction,
    result_link_params,
    result_page,
    state_messages,
    uses_gpu_now,
)
from bertlab.jobs.view import jobs_table, jobs_table_widths, live_numbers
from bertlab.storage.modelfolder import folder_stamp
from bertlab.storage.runfolder import model_dir as run_model_dir
from bertlab.training.history import has_history
from pages.common import code_version, setup_page, show_error, show_figure
from pages.common.admin import job_access_field

PAGE = setup_page(__file__)
st.title(PAGE.heading)
access = job_access_field()  # loopback: open; shared: the admin token of whoever started the app

registry = JobRegistry()
st.caption(
    f"Runs folder: `{registry.root}` ("
    + ("from $BERTLAB_RUNS" if os.environ.get("BERTLAB_RUNS") else "set $BERTLAB_RUNS to move it")
    + "); the `bertlab` command uses the same one."
)
PICK = "jobs_pick"


def _jobs():
    try:
        return registry.list()
    except OSError as exc:
        st.error(f"Cannot read the runs folder {registry.root}: {exc}")
        st.stop()


jobs = _jobs()
if not jobs:
    st.info(f"No runs yet in `{registry.root}`. Launch one on the Train page.")
    st.page_link(page_titled("Train").file, label="Train", icon=page_titled("Train").icon)
    st.stop()

interrupted = [j for j in jobs if j.interrupted]
if interrupted:
    box = st.container(border=True)
    box.warning(interrupted_text(interrupted), icon=":material/restart_alt:")
    if access.allowed and box.button(f"Resume all {len(interrupted)}", icon=":material/play_arrow:"):
        try:
            registry.resume_interrupted()
        except BertLabError as exc:
            show_error(exc)
        else:
            st.rerun()

ids = [j.id for j in jobs]
focus = st.session_state.pop("jobs_focus", None)  # set by the Train page after a launch
if focus in ids:
    st.session_state[PICK] = focus
if st.session_state.get(PICK) not in ids:
    st.session_state[PICK] = ids[0]
by_id = {j.id: j for j in jobs}
st.selectbox("Run", ids, key=PICK, format_func=lambda i: job_label(by_id[i]))
something_runs = any(is_waiting(j) for j in jobs)  # a cancelled job still saving counts too
DRAW = {"error": st.error, "warning": st.warning, "info": st.info}


def _runs_table(now) -> None:
    running = {j.id: registry.metrics(j.id) for j in now if j.state == "running"}  # their ETAs at their recent pace
    rows = jobs_table(now, metrics=running)
    # the columns that fit the page, each as wide as its longest value (an ETA that appears mid-run
    # too): none is cut, and the table needs no sideways scrolling
    px = jobs_table_widths(rows)
    config = {
        name: st.column_config.Column(width=w, alignment="right" if name == "loss" else None) for name, w in px.items()
    }
    if "progress" in px:
        config["progress"] = st.column_config.ProgressColumn(
            "progress", min_value=0.0, max_value=1.0, format="percent", width=px["progress"]
        )
    with st.expander(f"All runs ({len(now)})", expanded=len(now) > 1):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", column_config=config, column_order=list(px))


def _state(job, metrics) -> None:
    """The run's heading, numbers, progress and what its state means."""
    job = caught_up(job, metrics)  # status.json's step can lag the metric lines the curves draw
    st.subheader(job_heading(job))
    st.caption(f"`{job.run_dir}`" + (f" · `{job.command}`" if job.command else ""))
    numbers = live_numbers(job, metrics)
    per_row = max(1, min(5, len(numbers)))  # six in a row cut values ("7 min 2…"): wrap to a second row
    for start in range(0, len(numbers), per_row):
        for col, (label, value) in zip(
            st.columns(per_row), numbers[start : start + per_row], strict=False
        ):  # a last row may be short
            col.metric(label, value)
    fraction = progress_fraction(job)
    if fraction is not None:
        st.progress(fraction)
    for message in state_messages(job):
        DRAW[message.level](message.text, icon=message.icon)


def _curves(job, metrics) -> None:
    """The learning curves, the link to its snapshots, and the GPUs' load while it trains."""
    fig = curves_figure(metrics, chance=chance_levels(job))
    if fig is not None:
        show_figure(fig, f"{job.id}-curves", key=f"curves-{job.id}", export=False)
    elif expects_metrics(job):
        st.caption("No metrics written yet.")
    if has_history(job.run_dir):
        st.page_link(
            page_titled("Watch it learn").file,
            label="Watch it learn: its answers and heads at every snapshot",
            icon=page_titled("Watch it learn").icon,
            query_params={"run": Path(job.run_dir).name},
        )
    shown_on = result_page(job)  # an interpret study: no curve, its result beside its model
    if shown_on:
        st.page_link(
            page_titled(shown_on).file,
            label=f"{shown_on}: its result, saved beside the model",
            icon=page_titled(shown_on).icon,
            query_params=result_link_params(job),  # the probing tab, not the page's first
        )
        st.caption(f"Saved in `{job.status.get('result')}` (linked as `{job.run_dir}/result.json`).")
    stats = gpu_stats() if uses_gpu_now(job) else []
    if stats:
        st.caption(
            " · ".join(
                f"GPU {g.index} ({g.name}): {g.utilization_pct:.0f}% busy, "
                f"{g.memory_used_gb:.1f} / {g.memory_total_gb:.0f} GB"
                for g in stats
            )
        )


@st.fragment(run_every=2.0 if something_runs else None)
def live() -> None:
    """Redrawn every 2 s while a job is queued or running (only this part of the page)."""
    now = _jobs()
    if something_runs and not any(is_waiting(j) for j in now):
        st.rerun()  # the last job ended: redraw the whole page once (and stop refreshing)
    job = next((j for j in now if j.id == st.session_state.get(PICK)), None)
    _runs_table(now)
    if job is None:
        st.warning("This run is gone (deleted?). Pick another one.")
        return
    metrics = registry.metrics(job.id)
    _state(job, metrics)
    _curves(job, metrics)
    if not access.allowed:
        # not drawn at all (not only disabled): a forged click on a button this run never drew is dropped
        st.caption(":material/lock: Read-only: cancelling, resuming and deleting need the admin token (above).")
    else:
        _controls(job)
    if not job.managed:
        st.caption("Started outside the job registry (no job.json): it cannot be cancelled from here.")
    log_tail = registry.log_tail(job.id, lines=40)
    with st.expander("Log (last 40 lines)", expanded=log_expanded(job)):
        st.code(log_tail or "(empty)", language=None)


def _controls(job) -> None:
    """Cancel, Resume and Delete for one run."""
    c1, c2, c3, _ = st.columns([1, 1, 1, 3])
    try:
        if c1.button(
            "Cancel",
            key=f"cancel-{job.id}",
            disabled=not can_cancel(job),
            icon=":material/stop:",
            help="Stop it: the trainer saves a checkpoint first, so Resume continues from there.",
        ):
            registry.cancel(job.id)
            st.rerun()
        if c2.button(
            "Resume",
            key=f"resume-{job.id}",
            disabled=not can_resume(job),
            icon=":material/play_arrow:",
            help="Queue it again, continuing from its last checkpoint.",
        ):
            registry.resume(job.id)
            st.rerun()
        with c3.popover("Delete", icon=":material/delete:", disabled=not can_delete(job)):
            st.write(f"Delete `{job.run_dir}` and everything in it?")
            if st.button("Yes, delete", key=f"delete-{job.id}", type="primary"):
                registry.delete(job.id)
                st.session_state.pop(PICK, None)
                st.rerun()
    except BertLabError as exc:
        st.warning(str(exc), icon=":material/front_hand:")


live()


# --------------------------------------------------------------------------------------
# Try it: a finished run's model
# --------------------------------------------------------------------------------------
@st.cache_resource(show_spinner="Loading the fine-tuned model…", max_entries=2)
def _finetuned(path: str, stamp: float, code: int):  # code: see pages.common.code_version
    from bertlab.finetune.predict import load_finetuned

    return load_finetuned(path, device="cpu")


@st.cache_resource(show_spinner="Loading the model…", max_entries=2)
def _pretrained(path: str, stamp: float, code: int):
    from bertlab.inference import load_model

    return load_model(path, device="cpu")


job = by_id.get(st.session_state.get(PICK))
if job is not None and can_try(job):
    st.divider()
    st.subheader("Try it")
    model_dir = run_model_dir(job.run_dir)
    if job.kind == "pretrain":
        text = st.text_input(
            "A sentence with [MASK]",
            value="The cat sat on the [MASK].",
            key=f"try-mask-{job.id}",
            max_chars=MAX_TEXT_CHARS,
        )
        try:
            lm = _pretrained(str(model_dir), folder_stamp(model_dir), code_version())
            result = lm.fill_mask(text, top_k=5)
            cols = st.columns(min(3, len(result.masks)) or 1)
            for n, (m, col) in enumerate(zip(result.masks, cols * len(result.masks), strict=False)):
                with col:
                    show_figure(
                        probability_bar(m.candidates, title=f"[MASK] #{n + 1}"),
                        f"{job.id}-fill",
                        key=f"try-fill-{job.id}-{n}",
                        export=False,
                    )
            if len(result.masks) > 1:
                st.caption(f"Joint fill: {result.joint_text}")
        except Exception as exc:  # wrong input (no [MASK]) is a BertLabError; anything else is shown plainly
            show_error(exc)
    elif job.kind == "finetune":
        try:
            fm = _finetuned(str(model_dir), folder_stamp(model_dir), code_version())
        except Exception as exc:
            show_error(exc)
            st.stop()
        shape = fm.task_shape
        st.caption(
            f"Task **{fm.task}** ({shape})"
            + (f" · labels: {', '.join(map(str, fm.labels))}" if fm.labels and shape != "qa" else "")
        )
        key = f"try-{job.id}"
        if shape == "qa":
            question = st.text_input(
                "Question", value="Where is the Eiffel Tower?", key=f"{key}-q", max_chars=MAX_TEXT_CHARS
            )
            context = st.text_area(
                "Context",
                value="The Eiffel Tower is a wrought-iron tower in Paris, France. It was built in 1889.",
                key=f"{key}-c",
                height=110,
                max_chars=MAX_TEXT_CHARS,
            )
            inputs = (question, context)
        elif shape in ("pair", "regression"):
            a = st.text_input(
                "Sentence A", value="A man is playing a guitar.", key=f"{key}-a", max_chars=MAX_TEXT_CHARS
            )
            b = st.text_input(
                "Sentence B", value="A person plays an instrument.", key=f"{key}-b", max_chars=MAX_TEXT_CHARS
            )
            inputs = (a, b)
        else:
            inputs = (
                st.text_input(
                    "Sentence",
                    value="A gripping, beautifully made film." if shape == "single" else "Alice moved to Paris in May.",
                    key=f"{key}-s",
                    max_chars=MAX_TEXT_CHARS,
                ),
                None,
            )
        try:
            pred = fm.predict(*inputs)
        except Exception as exc:
            show_error(exc)
        else:
            if shape in ("single", "pair"):
                st.markdown(f"Prediction: **{label_text(fm.task, pred.label)}** ({pred.score:.0%})")
                show_figure(
                    probabilities_figure(pred.probabilities, pred.label, task=fm.task),
                    f"{job.id}-prediction",
                    key=f"{key}-bar",
                    export=False,
                )
            elif shape == "regression":
                st.metric("Predicted score", f"{pred.score:.2f}")
            elif shape == "tagging":
                st.markdown(tags_html(pred.tokens or [], pred.tags or []), unsafe_allow_html=True)
            elif shape == "qa":
                st.markdown(
                    f"Answer: **{pred.answer or '(none)'}**"
                    + (f" ({pred.score:.0%})" if pred.score is not None else "")
                )
                st.markdown(answer_html(inputs[1], pred.answer_start, pred.answer_end), unsafe_allow_html=True)
            if getattr(pred, "truncated", False):
                st.caption("The input was longer than the model reads; part of it was cut.")
