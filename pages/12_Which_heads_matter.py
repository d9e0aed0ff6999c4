"""Which heads matter: head importance (Michel et al. 2019) and the accuracy as heads are pruned,
least important first or at random; with no fine-tuned run, the study committed in results/interpret/.
Logic in bertlab.interpret.heads."""

from __future__ import annotations

import shlex
from pathlib import Path

import streamlit as st

from bertlab.errors import BertLabError, NoGradientsError
from bertlab.interpret.args import heads_args
from bertlab.interpret.contextual import SAMPLE_SENTENCES
from bertlab.interpret.head_views import importance_figure, pruning_figure, recipe_for
from bertlab.interpret.heads import MAX_PAGE_EXAMPLES, HeadStudy, MaskedSentences, study_heads
from bertlab.interpret.saved import read_results
from bertlab.interpret.targets import gradients_refusal
from bertlab.jobs.spec import DEFAULT_TASK_DATA, JobSpec, default_task_data
from bertlab.storage.catalog import find_run_checkpoints, finetuned_task, is_finetuned
from bertlab.storage.runfolder import REPO_ROOT
from pages.common import (
    chosen_model,
    concept,
    heads_in_words,
    require_model,
    setup_page,
    show_error,
    show_figure,
    shown_half,
)
from pages.common.compressed import offer_original
from pages.common.jobs import jobs_allowed, run_as_job_button

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = shown_half(require_model(), "generator")  # an ELECTRA pair: the built-in study needs its masked LM

SIDEBAR, TUNED = "The model in the sidebar (masked LM)", "A fine-tuned classifier (saved results)"
COMMITTED = REPO_ROOT / "results"  # results/interpret/heads-<task>.json, committed with the repository


@st.cache_data(show_spinner="Measuring every head on the built-in sentences…", max_entries=8)
def _sample_study(path: str, num_layers: int, num_heads: int) -> dict:
    # keyed by the model; the model itself comes from the cached loader
    data = MaskedSentences(list(SAMPLE_SENTENCES)[:MAX_PAGE_EXAMPLES], seed=0)
    return study_heads(lm, data, "mlm-sample", points=9, random_orders=3).to_dict()


def show_study(study: HeadStudy, key: str, removed: list[tuple[int, int]] | None = None) -> None:
    removed = removed or []  # heads pruned from the model's weights: drawn as removed, not as unimportant
    metric = "masked-word accuracy" if study.task.startswith("mlm") else "accuracy"
    left, right = st.columns(2, gap="large")
    with left:
        show_figure(
            importance_figure(study.importance, "Importance of each head", removed),
            f"importance-{key}",
            key=f"imp_{key}",
        )
    with right:
        show_figure(
            pruning_figure(study.pruning, metric, f"{metric.capitalize()} as heads are pruned"),
            f"pruning-{key}",
            key=f"prune_{key}",
        )
    curve = study.pruning
    half = min(range(len(curve.pruned)), key=lambda i: abs(curve.share[i] - 0.5))
    st.caption(
        f"On {study.examples} examples ({study.data.get('file', 'built-in sentences')}); the whole model scores "
        f"{study.accuracy:.1%}. With {curve.share[half]:.0%} of the heads pruned: {curve.by_importance[half]:.1%} "
        f"least important first, {curve.random[half]:.1%} in random order (mean of {curve.random_orders}). "
        f"Took {study.seconds:.1f} s."
    )


def show_committed(task: str, study: HeadStudy) -> None:
    """A head study committed with the repository, labelled as such, with the commands that made it."""
    name = f"heads-{task}.json"
    readme = COMMITTED / "interpret" / "README.md"
    recipe = recipe_for(readme.read_text(encoding="utf-8"), name) if readme.is_file() else ""
    st.markdown(
        f"**Committed with the repository** (`results/interpret/{name}`), not one of your runs: head importance and "
        f"pruning of `{study.model}`, measured on {study.examples} examples of {study.data.get('file', 'its data')}. "
        "How it was made"
        + (" (from `results/interpret/README.md`):" if recipe else ": see `results/interpret/README.md`.")
    )
    if recipe:
        st.code(recipe, language="bash")
    show_study(study, f"committed-{task}")


controls, explain = st.columns([3, 2], gap="large")
with explain:
    concept(
        "Michel et al. (2019) put a gate ξ on every head's output and ask how much the loss would change if "
        "the gate closed: the **importance** of a head is the mean |∂ loss / ∂ ξ| over examples, normalised "
        "per layer. Then they **prune** heads, least important first, and watch the accuracy: in their models "
        "many heads can go before it falls, far more than in a **random** order. On a small model that may hold "
        "only for the first few: importance is measured once, with every head present, and heads that look "
        "unimportant alone can be the ones the rest lean on once others are gone (compare the two curves). "
        "The Attention page switches heads off by hand; this makes it a measurement."
    )
with controls:
    source = st.radio("Model", [SIDEBAR, TUNED], horizontal=True, key="heads_source")

if source == SIDEBAR:
    saved = {k: HeadStudy.from_dict(v) for k, v in read_results(lm.path, "heads").items()} if lm.path else {}
    for task, study in saved.items():
        st.subheader(f"Saved: {task}")
        show_study(study, task)
    st.subheader("On the built-in sentences")
    st.caption(
        f"{min(len(SAMPLE_SENTENCES), MAX_PAGE_EXAMPLES)} everyday sentences (at most {MAX_PAGE_EXAMPLES} here, so it "
        "runs while you wait), 15% of their words masked; the score is how many masked words the model gets right."
    )
    if not lm.has_mlm:  # the study masks words and scores the masked LM's answers
        st.info(
            f"The built-in study scores a masked LM's answers, and the model picked has {heads_in_words(lm)}. "
            "Pick a model with a masked LM in the sidebar (an ELECTRA pair folder's generator has one), or measure "
            "a fine-tuned classifier's heads (above).",
            icon=":material/info:",
        )
        st.stop()
    try:
        study = HeadStudy.from_dict(_sample_study(chosen_model(), lm.config.num_layers, lm.config.num_heads))
    except NoGradientsError as exc:  # a dynamic int8 copy: offer the float model it was made from
        offer_original(exc, key="heads_use_original")
        st.stop()
    except BertLabError as exc:
        show_error(exc)
        st.stop()
    show_study(study, "sample", [(layer, head) for layer, heads in lm.config.pruned_heads for head in heads])
else:
    tuned = [e for e in find_run_checkpoints() if is_finetuned(e.path)]
    committed = {task: HeadStudy.from_dict(data) for task, data in read_results(COMMITTED, "heads").items()}
    if not tuned:
        st.info(
            "No fine-tuned model was found among your runs"
            + (", so here is the head study committed with the repository. " if committed else ". ")
            + "To measure your own: fine-tune a classifier (e.g. SST-2) on the **Train** page, then measure its "
            "heads with the command at the end of this page.",
            icon=":material/info:",
        )
        path = None
        for task, study in committed.items():
            st.subheader(f"Committed result: {task}")
            show_committed(task, study)
    else:
        path = st.selectbox("Fine-tuned model", [e.path for e in tuned], key="heads_tuned")
        studies = read_results(path, "heads")
        for task, data in studies.items():
            st.subheader(f"Saved: {task}")
            show_study(HeadStudy.from_dict(data), task)
        if not studies:
            st.info("No head study is saved beside this model yet.", icon=":material/info:")
        for task, study in committed.items():
            with st.expander(f"The head study committed with the repository ({task})"):
                show_committed(task, study)
    st.markdown(
        "Head importance on a labelled set takes minutes, so it runs as a job and is saved beside the model; "
        "this page shows it when it has finished."
    )
    task = finetuned_task(path) if path else None
    data = None  # the form's labelled file, where it offers one
    refusal = gradients_refusal(path) if path else None
    if refusal is not None:  # a dynamic int8 copy: its head study would fail; offer the model it was made from
        offer_original(refusal, "heads_tuned", key="heads_tuned_original")
    elif path and not DEFAULT_TASK_DATA.get(task or "", "").startswith("glue/"):
        st.info(
            f"Head studies read labelled GLUE sentences; this model was fine-tuned on {task or 'an unknown task'}.",
            icon=":material/info:",
        )
    elif path and task and jobs_allowed():
        data = st.text_input(
            f"Labelled {task.upper()} sentences (GLUE format)",
            str(Path(default_task_data(task)) / "dev.tsv"),
            key="heads_job_data",
        )
        run_as_job_button(
            "heads_job_run",
            lambda: JobSpec("interpret", heads_args(path, task, data=data)),
            (data,),
        )
    st.caption("The same from a terminal:")
    # the form's own file where there is one (a placeholder DATA/ path did not paste)
    shown = data or str(Path(default_task_data(task or "sst2")) / "dev.tsv")
    line = shlex.join(
        ["python", "-m", "bertlab.interpret", *heads_args(path or "runs/RUN/model", task or "sst2", data=shown)]
    )
    st.code(line + " --max-examples 1000", language="bash", wrap_lines=True)
