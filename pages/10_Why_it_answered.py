"""Why it answered: which input tokens made the model say it (gradient x input, integrated
gradients), and attention rollout and flow beside the raw attention. Logic in bertlab.interpret."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bertlab.app_pages import page_titled
from bertlab.errors import BertLabError, NoGradientsError
from bertlab.explore import input_notes
from bertlab.finetune.answers import CLASSIFIERS, answer_file, training_accuracy
from bertlab.finetune.predict import load_finetuned
from bertlab.finetune.tasks import get_task, label_text
from bertlab.inference import MAX_TEXT_CHARS, text_cap
from bertlab.interpret.answer_views import (
    answer_label,
    answer_rows,
    attribution_figure,
    baseline_reading,
    capped_maps_note,
    confusion_figure,
    flow_figure,
    raw_and_rollout_figures,
    shaded_tokens_html,
)
from bertlab.interpret.attribution import MAX_IG_STEPS, attribute
from bertlab.interpret.rollout import MAX_FLOW_EDGES, attention_maps
from bertlab.interpret.targets import InOrder, IsNext, MaskedWord, TaskLabel
from bertlab.jobs.spec import check_path_allowed, default_task_data
from bertlab.storage.catalog import find_run_checkpoints, is_finetuned
from bertlab.storage.model_card import pretrained_length
from bertlab.storage.modelfolder import folder_stamp
from bertlab.storage.runfolder import REPO_ROOT
from pages.common import (
    code_version,
    concept,
    forget_on_change,
    require_model,
    setup_page,
    show_error,
    show_figure,
    show_notes,
)
from pages.common.admin import current_access
from pages.common.compressed import offer_original

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = require_model()

MASK, TASK = "A [MASK] answer", "A fine-tuned model's answer"
# the sentence-pair head the model has: BERT's next sentence, ALBERT's sentence order (NSP where it has neither:
# the answer then says what it has)
PAIR, PAIR_TARGET = (
    ("Sentence order: P(in order)", InOrder())
    if lm.has_sop and not lm.has_nsp
    else ("Next sentence: P(IsNext)", IsNext())
)


@st.cache_resource(show_spinner="Loading the fine-tuned model…", max_entries=2)
def _finetuned(path: str, code: int, stamp: float = 0.0):  # code: see code_version; stamp: folder_stamp
    return load_finetuned(path, device="cpu")


@st.cache_data(show_spinner="Answering every example of the file…", max_entries=4)
def _answers(model_path: str, file: str, stamps: tuple[float, float], code: int):  # the model's and file's times
    return answer_file(_finetuned(model_path, code, stamps[0]), file)


def _dev_file(model) -> str:
    """The dev file it was scored on in training, where that is a file here; else its task's dev set."""
    dev = str(model.card.get("dev_data") or "")
    if dev and Path(dev).is_file():
        return dev
    return str(Path(default_task_data(model.task)) / get_task(model.task).dev_file)


TYPED, FROM_FILE = "Type a text", "Pick one from a labelled file"
SHOWN = 2000  # answers listed and offered to explain at once (SST-2's dev set is 872)
METRIC_NAMES = {"f1": "F1", "matthews": "Matthews correlation"}
PICKS = {"mistakes": "mistakes, surest first", "unsure": "least sure first", "all": "all, in file order"}


controls, explain = st.columns([3, 2], gap="large")
with explain:
    concept(
        "**Attribution** asks which input words moved the answer. **Gradient × input** multiplies each "
        "word's embedding by how sensitive the answer is to it: one backward pass, but only a local slope. "
        "**Integrated gradients** (Sundararajan et al. 2017) averages that slope along the path from a "
        "*baseline* (every word replaced by `[PAD]`) to the sentence; its scores **add up** to "
        "p(sentence) − p(baseline), which is checked below. Green raised the answer, red lowered it. "
        "**Attention rollout** and **flow** (Abnar & Zuidema 2020) follow attention through all layers, "
        "counting the residual connection; raw attention shows one layer only."
    )
with controls:
    forget_on_change("why_kind", PAIR)  # the pair choice is named for the model's head
    kind = st.radio("Explain", [MASK, PAIR, TASK], horizontal=True, key="why_kind")
    steps = st.slider(
        "Integrated-gradients steps to start with",
        8,
        MAX_IG_STEPS,
        32,
        step=8,
        key="why_steps",
        help=f"If the scores do not add up (within 5%), the steps are doubled, up to {MAX_IG_STEPS}: each step is one "
        "forward and backward pass, so the cap keeps one request from tying up the machine.",
    )
    text_b = None
    model, target, model_name = lm, None, "the model in the sidebar"
    if kind == MASK:
        text = st.text_input(
            "Sentence with a [MASK]",
            "The capital of France is [MASK].",
            key="why_text",
            max_chars=text_cap(lm.max_length),  # a long-input model reads a chapter
        )
    elif kind == PAIR:
        text = st.text_input("Sentence A", "The cat sat on the mat.", key="why_a", max_chars=MAX_TEXT_CHARS)
        text_b = st.text_input("Sentence B", "It was warm in the sun.", key="why_b", max_chars=MAX_TEXT_CHARS)
        target = PAIR_TARGET
    else:
        tuned = [e for e in find_run_checkpoints() if is_finetuned(e.path)]
        if not tuned:
            st.info(
                "No fine-tuned model was found among the runs. Fine-tune one on the **Train** page "
                "(e.g. SST-2), then come back to see which words decided its label.",
                icon=":material/info:",
            )
            st.stop()
        path = st.selectbox("Fine-tuned model", [e.path for e in tuned], format_func=lambda p: p, key="why_tuned")
        try:
            model = _finetuned(path, code_version(), folder_stamp(path))  # a rewritten model is loaded again
        except BertLabError as exc:
            show_error(exc)
            st.stop()
        model_name = f"{path} ({model.task})"
        source = TYPED
        if model.task_shape in CLASSIFIERS:
            source = st.radio("The example", [TYPED, FROM_FILE], horizontal=True, key="why_ft_source")
        if source == FROM_FILE:
            forget_on_change("why_ft_file", path)  # another model: its own dev set, not the last model's file
            labelled = st.text_input(
                "Labelled file (the task's format; its dev set to start)",
                _dev_file(model),
                key="why_ft_file",
                help="Every example is answered once (cached); a shared app reads only files under its data folders.",
            )
        else:
            text = st.text_input(
                "Text (the question, for question answering)",
                "a gripping, funny film",
                key="why_ft",
                max_chars=MAX_TEXT_CHARS,
            )
            if model.task_shape in ("pair", "regression", "qa"):
                text_b = st.text_input(
                    "Second text (the context, for question answering)", key="why_ft_b", max_chars=MAX_TEXT_CHARS
                )

if kind == TASK and source == FROM_FILE:  # browse its answers (as LIT's data table), then explain one
    if not labelled.strip():
        st.warning("Type the path of a labelled file (the task's dev set, for one).", icon=":material/edit_note:")
        st.stop()
    try:
        # one resolved path, checked and read (a relative one checked against the repository but read from
        # where the app was started passed the check)
        file = Path(labelled.strip()).expanduser().resolve()
        if current_access().shared:
            check_path_allowed(str(file), cwd=REPO_ROOT)
        stamps = (folder_stamp(path), file.stat().st_mtime if file.is_file() else 0.0)
        answers = _answers(path, str(file), stamps, code_version())
    except BertLabError as exc:
        show_error(exc)
        st.stop()
    st.subheader(f"Its answers to {file.name} ({len(answers.answers):,} examples)")
    top, floor = answers.majority()
    scores = answers.scores()
    main = next(iter(scores))  # the task's own measure first: MRPC's F1, CoLA's Matthews correlation
    cols = st.columns(4 if main != "accuracy" else 3)
    m1, m2, m3 = cols[-3:]
    if main != "accuracy":
        cols[0].metric(
            METRIC_NAMES.get(main, main),
            f"{scores[main]:.3f}" if main == "matthews" else f"{scores[main]:.1%}",
            border=True,
        )
    m1.metric("Accuracy", f"{answers.accuracy:.1%}", border=True)
    m2.metric(
        f"Always answering {top}", f"{floor:.1%}", border=True, help="The commonest gold label: the floor to beat."
    )
    m3.metric("Mistakes", f"{answers.mistakes:,}", border=True)
    if (reported := training_accuracy(model, file)) is not None and f"{reported:.1%}" != f"{answers.accuracy:.1%}":
        st.caption(
            f"Training reported {reported:.1%} on this file: it evaluated in its training precision (bf16 where the "
            "CPU or GPU has it), here every example runs in full precision, and an answer near 50% can fall the "
            "other way."
        )
    left, right = st.columns([2, 3], gap="large")
    with left:
        show_figure(confusion_figure(answers, "Gold label against its answer"), "confusion", key="why_confusion")
        if description := get_task(model.task).description:
            st.caption(description)
    with right:
        which = st.radio(
            "Show",
            list(PICKS),
            format_func=PICKS.__getitem__,
            horizontal=True,
            key="why_pick",
        )
        f1, f2, f3 = st.columns(3)
        named = lambda x: label_text(model.task, x) if x else "any"  # noqa: E731 ('1 (positive)')
        gold = f1.selectbox("Gold label", ["", *answers.labels], format_func=named, key="why_gold")
        answered = f2.selectbox(  # with the gold label: one cell of the confusion matrix
            "Its answer", ["", *answers.labels], format_func=named, key="why_answered"
        )
        search = f3.text_input("Text holds", "", key="why_search", max_chars=100)
        rows = answers.pick(which, gold=gold, search=search, answered=answered)
        if not rows:
            st.info("No example matches.", icon=":material/filter_alt_off:")
            st.stop()
        shown = pd.DataFrame(answer_rows(rows[:SHOWN]))
        st.dataframe(shown, hide_index=True, height=min(300, 38 + 35 * len(rows)), width="stretch")
        st.caption(
            f"{len(rows):,} example{'s' if len(rows) != 1 else ''} match"
            + (f"; the first {SHOWN:,} are listed (search to reach the others)." if len(rows) > SHOWN else ".")
        )
        st.download_button(
            "These answers (CSV)",
            pd.DataFrame(answer_rows(rows)).to_csv(index=False),
            file_name=f"{model.task}-answers.csv",
            mime="text/csv",
            icon=":material/download:",
            on_click="ignore",
        )
        chosen = st.selectbox("Explain this one", rows[:SHOWN], format_func=answer_label, key="why_example")
    text, text_b = chosen.text_a, chosen.text_b
    if chosen.truncated:
        st.caption("This example is longer than the model reads: its end was cut, as in training.")


if not text.strip() or (text_b is not None and not text_b.strip()):
    st.warning("Type the sentence(s) to explain.", icon=":material/edit_note:")
    st.stop()

if kind == MASK:
    try:
        answers = lm.fill_mask(text, top_k=5, joint=False).masks[0].candidates
    except BertLabError as exc:
        show_error(exc)
        if "rtd" in lm.heads:  # an ELECTRA discriminator: its own view is on Fill-mask
            fill_mask = page_titled("Fill-mask")
            st.page_link(fill_mask.file, label="Which tokens it takes for replaced: Fill-mask", icon=fill_mask.icon)
        st.stop()
    token = st.selectbox(
        "Which answer to explain",
        [c.token for c in answers],
        format_func=lambda t: next(f"{c.piece} ({c.score:.1%})" for c in answers if c.token == t),
        key="why_answer",
        help="The model's five best answers for the first [MASK]; the explanation is for the one picked.",
    )
    target = MaskedWord(token)
if kind != TASK:
    show_notes(input_notes(lm.tokenizer, lm.max_length, text, text_b, pretrained_length(lm.card)))
elif model.task_shape == "tagging":
    target = TaskLabel(position=1)

try:
    with st.spinner("Integrating gradients…"):
        result = attribute(model, text, text_b, target=target, steps=steps)
except NoGradientsError as exc:  # a dynamic int8 copy: offer the float model it was made from
    offer_original(exc, "why_tuned" if kind == TASK else None, key="why_use_original")
    st.stop()
except BertLabError as exc:
    show_error(exc)
    st.stop()

st.subheader(f"Why {result.target}")
m1, m2, m3, m4 = st.columns(4)
m1.metric("Prediction", f"{result.prediction:.3f}", border=True)
m2.metric("Baseline ([PAD] words)", f"{result.baseline_prediction:.3f}", border=True)
m3.metric("Sum of integrated gradients", f"{result.integrated_gradients.sum():.3f}", border=True)
m4.metric("Steps used", result.steps, border=True)
if result.converged:
    st.caption(
        f"The scores add up: their sum differs from prediction − baseline = {result.difference:.4f} by "
        f"{abs(result.delta):.1e} (completeness holds within 5%). Explained for {model_name}."
    )
else:
    st.warning(
        f"Integrated gradients did not converge within {result.steps} steps: the scores miss prediction − baseline "
        f"by {abs(result.delta):.3g}. Read them as rough.",
        icon=":material/warning:",
    )
if reading := baseline_reading(result):
    st.info(reading, icon=":material/balance:")
st.markdown("**Integrated gradients**")
st.markdown(shaded_tokens_html(result.pieces, result.integrated_gradients), unsafe_allow_html=True)
st.markdown("**Gradient × input**")
st.markdown(shaded_tokens_html(result.pieces, result.gradient_x_input), unsafe_allow_html=True)
show_figure(attribution_figure(result), "attribution", key="why_bars")
with st.expander("The scores as a table"):
    st.dataframe(pd.DataFrame(result.rows()), hide_index=True, width="stretch")

if kind == TASK:
    st.stop()

st.subheader("Attention rollout and flow")
try:
    # flow into the token the answer is read at: the [MASK] (RoBERTa's <mask>), or [CLS] for a sentence pair
    mask = lm.tokenizer.mask_token
    into = result.tokens.index(mask) if kind == MASK and mask in result.tokens else 0
    maps = attention_maps(lm, text, text_b, position=into)
except BertLabError as exc:
    show_error(exc)
    st.stop()
L = maps.raw.shape[0]
layer = st.slider("Layer", 1, L, L, key="why_layer") - 1
left, right = st.columns(2, gap="large")
raw_fig, roll_fig = raw_and_rollout_figures(maps, layer)
with left:
    show_figure(raw_fig, "raw-attention", key="why_raw")
with right:
    show_figure(roll_fig, "rollout", key="why_rollout")
if note := capped_maps_note(maps, layer):
    st.caption(note)
show_figure(flow_figure(maps), "flow", key="why_flow")
if maps.flow is None:
    st.info(maps.flow_note, icon=":material/info:")
else:
    st.caption(
        f"Flow took {maps.flow_seconds:.2f} s ({len(maps.tokens)} tokens × {L} layers; it is skipped above "
        f"{MAX_FLOW_EDGES:,} edges, tokens² × layers, to stay interactive)."
    )
