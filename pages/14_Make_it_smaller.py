"""Make it smaller: quantize or prune a model (the sidebar's, or a fine-tuned classifier) into a new
folder and see it beside the original; the committed pruning curves and quantization tables;
distillation; the papers' claims beside ours. Logic in bertlab.compress (lab, study, views)."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path

import pandas as pd
import streamlit as st

from bertlab.compress.lab import (
    DEFAULT_HELD_OUT,
    METHOD_KEYS,
    answers_side_by_side,
    comparison_rows,
    default_out,
    method,
    probe_text,
    read_record,
    run_method,
)
from bertlab.compress.measure import RECORD_FILE
from bertlab.compress.source import CLASSIFIER, PRETRAINING
from bertlab.compress.study import read_csv, read_curve
from bertlab.compress.views import bench_table, claims_rows, curve_figure, results_table
from bertlab.errors import BertLabError
from bertlab.finetune.predict import load_finetuned
from bertlab.inference import MAX_TEXT_CHARS, load_model
from bertlab.jobs import spec as job_spec
from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.storage.catalog import find_run_checkpoints, is_finetuned
from bertlab.storage.modelfolder import folder_stamp
from bertlab.storage.runfolder import REPO_ROOT, runs_root
from pages.common import chosen_model, code_version, concept, forget_on_change, require_model, setup_page, show_figure
from pages.common.admin import current_access
from pages.common.jobs import jobs_allowed, run_as_job_button

log = logging.getLogger(__name__)
PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = require_model()

COMMITTED = REPO_ROOT / "results" / "compression"
SIDEBAR, TUNED = "The model in the sidebar", "A fine-tuned classifier (your runs)"
RESULT_KEY = "small_result"  # the folder this session last made
ESTIMATED = "small_estimated"  # the distillation arguments last estimated


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def _open(path: str, kind: str, stamp: float, code: int):  # stamp: folder_stamp; code: see code_version
    return load_finetuned(path, device="cpu") if kind == CLASSIFIER else load_model(path, device="cpu")


@st.cache_data(show_spinner="Estimating the distillation…", max_entries=8)
def _distill_estimate(args: tuple[str, ...]) -> str:
    return estimate_spec(job_spec.JobSpec("distill", list(args)), cwd=REPO_ROOT, measure=False).summary()


def _fail(exc: BaseException) -> None:
    """A one-line message: the package's for an input the user can fix, the type for anything else."""
    if isinstance(exc, BertLabError):
        st.error(str(exc)[0].upper() + str(exc)[1:], icon=":material/front_hand:")
    else:
        log.exception("compression failed", exc_info=exc)
        st.error(f"Something went wrong ({type(exc).__name__}: {exc}). Try another model or setting.")


controls, explain = st.columns([3, 2], gap="large")
with explain:
    concept(
        "BERT is big and slow to serve. Three answers followed it: **distillation** (a smaller student "
        "trained to copy the model: DistilBERT), **quantization** (weights in 8 bits instead of 32: Q8BERT, "
        "PyTorch's dynamic int8) and **pruning** (remove the heads that matter least: Michel et al. 2019; or "
        "zero the smallest weights). Each writes a new model folder that opens where the original opened; "
        "here you see what it buys (size, speed) and what it costs (accuracy) on this machine."
    )
with controls:
    source = st.radio("Model", [SIDEBAR, TUNED], horizontal=True, key="small_source")
    held_out, dev = "", ""
    if source == SIDEBAR:
        model_path, kind = chosen_model(), PRETRAINING
        st.markdown(f"**{model_path}** (pick another in the sidebar)")
        if lm.halves:  # an ELECTRA pair folder: a model in each half, compressed one at a time
            half = st.radio(
                "Which half",
                list(lm.halves),
                horizontal=True,
                key="small_half",
                help="A pair folder holds two models (ELECTRA's generator and discriminator); each is compressed "
                "into a folder of its own.",
            )
            model_path = lm.halves[half]
        held_out = st.text_input(
            "Held-out text to score masked-word accuracy on (a sentence or paragraph a line; empty: none)",
            str(DEFAULT_HELD_OUT) if DEFAULT_HELD_OUT.is_file() else "",
            key="small_held_out",
            help="The first 500 lines; WikiText's ' = Title = ' lines are skipped. Every model is asked the same words.",
        )
    else:
        tuned = [e.path for e in find_run_checkpoints() if is_finetuned(e.path)]
        if not tuned:
            st.info(
                "No fine-tuned model was found among the runs. Fine-tune one on the **Train** page (e.g. SST-2), "
                "then come back; the committed results below include an SST-2 classifier.",
                icon=":material/info:",
            )
            model_path, kind = None, CLASSIFIER
        else:
            model_path, kind = st.selectbox("Fine-tuned model", tuned, key="small_tuned"), CLASSIFIER
            card_dev = str(_open(model_path, kind, folder_stamp(model_path), code_version()).card.get("dev_data") or "")
            forget_on_change("small_dev", model_path)
            dev = st.text_input("Its dev file (the task's format), to score accuracy on", card_dev, key="small_dev")
    key = st.selectbox("Method", METHOD_KEYS, format_func=lambda k: method(k).label, key="small_method")
    chosen = method(key)
    st.caption(chosen.explains)
    share = (
        st.slider(chosen.share, 0.05, 0.95, chosen.default_share, 0.05, key=f"small_share_{key}")
        if chosen.share
        else None
    )
    suggested = str(default_out(runs_root(), model_path or "model", key, share))
    forget_on_change("small_out", (model_path, key, share))
    out = st.text_input("New folder for the smaller copy", suggested, key="small_out")

access = current_access()
command = ["bertlab", "compress", "quantize" if key in ("int8", "bf16", "fp16") else "prune"]
command += ["--model", str(model_path or "runs/RUN/model"), "--out", out]
command += {"int8": ["--scheme", "int8-dynamic"], "bf16": ["--scheme", "bf16"], "fp16": ["--scheme", "fp16"]}.get(
    key, [f"--{key}", str(share)]
)
command += ["--held-out", held_out] if held_out.strip() else []
command += ["--dev", dev] if dev.strip() else []
if model_path and access.allowed and st.button("Make it smaller", type="primary", icon=":material/compress:"):
    with st.status("Making it smaller…", expanded=True) as status:
        try:
            if access.shared:
                for path in (out, held_out, dev):
                    if path.strip():
                        job_spec.check_path_allowed(path.strip(), cwd=REPO_ROOT)
            run_method(
                key,
                model_path,
                out.strip(),
                share,
                held_out.strip() or None,
                dev.strip() or None,
                progress=lambda stage: st.write(stage[0].upper() + stage[1:] + "…"),
            )
        except Exception as exc:  # a broken file can fail anywhere in torch; the page shows one line, never a trace
            status.update(label="Not made", state="error")
            _fail(exc)
        else:
            status.update(label=f"Written to {out.strip()}", state="complete", expanded=False)
            st.session_state[RESULT_KEY] = out.strip()
elif not access.allowed:
    st.caption(f":material/lock: Writing a new model folder needs the admin token (on the Jobs page). {access.reason}")
st.caption("The same from a terminal:")
st.code(shlex.join(command), language="bash", wrap_lines=True)

# ---- before and after -------------------------------------------------------------------------
made = out.strip() if out.strip() and (Path(out.strip()) / RECORD_FILE).is_file() else st.session_state.get(RESULT_KEY)
if made:
    try:
        record = read_record(made)
    except BertLabError as exc:
        _fail(exc)
        st.stop()
    st.subheader(f"Before and after: {record.method} ({record.scheme})")
    st.caption(f"{record.source} → {made}")
    b, a = record.before, record.after
    m1, m2, m3 = st.columns(3)
    m1.metric("Weights on disk", f"{a.weights_bytes / 2**20:.2f} MiB", f"{a.weights_bytes / b.weights_bytes - 1:+.0%}",
              delta_color="inverse", border=True)  # fmt: skip
    last_b, last_a = b.latency[-1], a.latency[-1]
    m2.metric(f"p50, {last_a.threads} thread(s)", f"{last_a.p50_ms:.2f} ms",
              f"{last_b.p50_ms / last_a.p50_ms:.2f}x the speed", delta_color="off", border=True)  # fmt: skip
    quality = [
        (q0, q1) for q0, q1 in ((b.mlm_accuracy, a.mlm_accuracy), (b.dev_accuracy, a.dev_accuracy)) if q1 is not None
    ]
    if quality:
        q0, q1 = quality[0]
        m3.metric("Accuracy", f"{q1:.1%}", f"{(q1 - q0) * 100:+.1f} points", border=True)
    st.dataframe(pd.DataFrame(comparison_rows(record)), hide_index=True, width="stretch")
    st.caption(
        "Timings share this machine's CPU with whatever else runs on it (training jobs): compare the two models "
        "measured together here, not with another day's numbers. "
        + " ".join(n[0].upper() + n[1:] + "." for n in record.notes)
    )
    kind_made = CLASSIFIER if record.kind == CLASSIFIER else PRETRAINING
    try:
        before = _open(record.source, kind_made, folder_stamp(record.source), code_version())
        if kind_made == CLASSIFIER or before.has_mlm:  # an ELECTRA discriminator has no answers to ask for
            text = st.text_input(
                "Ask both the same thing",
                probe_text(kind_made),
                key=f"small_probe_{kind_made}",
                max_chars=MAX_TEXT_CHARS,
            )
            after = _open(made, kind_made, folder_stamp(made), code_version())
            st.dataframe(pd.DataFrame(answers_side_by_side(before, after, text)), hide_index=True, width="stretch")
    except Exception as exc:  # a bad sentence is a BertLabError; anything else is still one line
        _fail(exc)

# ---- committed results --------------------------------------------------------------------------
st.header("Measured here: the shipped model and an SST-2 classifier")
st.caption("Committed in `results/compression/` (how they were made: its README.md).")
for tab, name, what in zip(
    st.tabs(["Shipped model (masked LM)", "SST-2 classifier"]),
    ("shipped", "sst2"),
    ("masked-LM accuracy on WikiText-2 test", "SST-2 dev accuracy"),
    strict=True,
):
    with tab:
        rows, points = read_csv(COMMITTED / f"{name}.csv"), read_curve(COMMITTED / f"curve-{name}.csv")
        if not rows:
            st.info(f"No committed results for {name} yet.", icon=":material/info:")
            continue
        st.dataframe(pd.DataFrame(results_table(rows)), hide_index=True, width="stretch")
        if points:
            show_figure(curve_figure(points, f"Pruning curve: {what}"), f"pruning-curve-{name}", key=f"curve_{name}")

bench = read_csv(REPO_ROOT / "bench" / "results" / "compression" / "compression.csv")
if bench:
    st.subheader("Speed, side by side in one run")
    st.dataframe(pd.DataFrame(bench_table(bench)), hide_index=True, width="stretch")
    st.caption(
        "`bench/bench_compression.py`: the shipped model's fill-mask of one sentence, every copy timed in turn "
        "round after round (so load hits all alike), with the machine's training runs paused; its CPU, flags "
        "and load are in `bench/results/compression/`. The tables above were timed beside training runs, so "
        "their speeds are not shown."
    )

# ---- the papers ---------------------------------------------------------------------------------
st.header("The papers' claims, and what answers them here")
st.table(
    pd.DataFrame(
        claims_rows(
            read_csv(COMMITTED / "shipped.csv"),
            read_csv(COMMITTED / "sst2.csv"),
            read_curve(COMMITTED / "curve-shipped.csv"),
            read_curve(COMMITTED / "curve-sst2.csv"),
            read_csv(COMMITTED / "distill" / "summary.csv"),
        )
    )
)
st.caption(
    "Ours: the committed results (results/compression/) of a 4-layer model; quantization and pruning are post-training."
)

# ---- distillation ---------------------------------------------------------------------------------
st.header("Distillation")
distill_readme = COMMITTED / "distill" / "README.md"
if "distill" in job_spec.KINDS:
    st.markdown(
        "A student keeps N of the model's layers (evenly spaced) and learns to copy its answers (DistilBERT's "
        "soft targets, masked-LM loss and hidden-state cosine). It trains as a job on the Jobs page."
    )
    layers = st.number_input(
        "Student layers", 1, max(1, lm.config.num_layers - 1), max(1, lm.config.num_layers // 2), key="small_layers"
    )
    minutes = st.number_input("Training time (minutes)", 1, 600, 30, key="small_minutes")
    args = ["--teacher", chosen_model(), "--layers", str(layers), "--config", "configs/compress/distill-mini.yaml"]
    args += [f"train.max_time_s={int(minutes) * 60}"]
    # the estimate reads the corpus config and can take seconds on a busy machine: asked for, then cached
    if st.button("Estimate its time and memory", key="small_estimate") or st.session_state.get(ESTIMATED) == args:
        st.session_state[ESTIMATED] = args
        try:
            st.caption(f"Estimate: {_distill_estimate(tuple(args))}")
        except BertLabError as exc:
            st.caption(f"No estimate: {exc}")
    if jobs_allowed():
        run_as_job_button("small_distill", lambda: job_spec.JobSpec("distill", args))
    st.code(shlex.join(["bertlab", "compress", "distill", *args]), language="bash", wrap_lines=True)
else:
    st.markdown("Distillation runs from a terminal (it trains for a while):")
    st.code(
        "bertlab compress distill --teacher checkpoints/bertlab-mini --layers 2 --out runs/mini-l2/model \\\n"
        "    --config configs/compress/distill-mini.yaml train.max_time_s=1800",
        language="bash",
    )
if distill_readme.is_file():
    with st.expander("The committed distillation results (results/compression/distill/)"):
        st.markdown(distill_readme.read_text(encoding="utf-8"))
