"""Compare two models on one sentence: fill-mask answers, attributions and attention rollout side by side."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertlab.errors import BertLabError
from bertlab.explore import input_notes, notes_of_two
from bertlab.figures.answers import percent
from bertlab.inference import MAX_TEXT_CHARS, load_model
from bertlab.interpret.answer_views import raw_and_rollout_figures, shaded_tokens_html
from bertlab.interpret.compare import compare_models
from bertlab.storage.catalog import find_checkpoints, snapshot_entries
from bertlab.storage.model_card import pretrained_length
from bertlab.tokenizer import mask_any_case
from pages.common import (
    chosen_model,
    code_version,
    concept,
    require_model,
    setup_page,
    show_error,
    show_figure,
    show_notes,
)

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = require_model(needs=("mlm",))


@st.cache_resource(show_spinner="Loading the second model…", max_entries=2)
def _second(path: str, code: int):  # code: see code_version
    return load_model(path, device="auto")


current = chosen_model()
entries = [e for e in find_checkpoints(include_finetuned=False) if e.exists]
entries += [s for e in entries for s in snapshot_entries(e)]  # a run's model at earlier steps
others = [e.path for e in entries if e.path != current]
labels = {e.path: e.label for e in entries}

controls, explain = st.columns([3, 2], gap="large")
with explain:
    concept(
        "Put two models on the same sentence: the shipped model and a snapshot of a run, a model before and "
        "after more pretraining, ours and one of Google's. Each answers the `[MASK]`, each answer is explained "
        "by **integrated gradients** (which words raised it, green, or lowered it, red), and each model's "
        "**attention rollout** shows where information flowed. Each model reads the sentence with its own "
        "vocabulary, so the tokens may differ."
    )
with controls:
    st.markdown(f"**Model A** (the sidebar): {labels.get(current, current)}")
    if not others:
        st.info(
            "Only one model is available, so it is compared with itself. Train a model on the **Train** page, or "
            "pick another folder in the sidebar, to compare two.",
            icon=":material/info:",
        )
    path_b = st.selectbox(
        "Model B", others or [current], format_func=lambda p: labels.get(p, p), key="cmp_b", disabled=not others
    )
    text = st.text_input(
        "Sentence with a [MASK]",
        "The man went to the [MASK] to buy some milk.",
        key="cmp_text",
        max_chars=MAX_TEXT_CHARS,
    )

try:
    other = lm if path_b == current else _second(path_b, code_version())
    show_notes(
        notes_of_two(
            *(input_notes(m.tokenizer, m.max_length, text, pretrained=pretrained_length(m.card)) for m in (lm, other))
        )
    )
    with st.spinner("Reading the sentence with both models…"):
        result = compare_models(lm, other, text, names=("A", "B"), steps=32)
except BertLabError as exc:
    show_error(exc)
    st.stop()

if mask_any_case(text).count("[MASK]") > 1:
    st.caption("Only the first [MASK] is compared; the others stay masked while both models read the sentence.")
a_top = result.left.fill_mask.masks[0].candidates[0].word
b_top = result.right.fill_mask.masks[0].candidates[0].word
if result.agree:
    st.success(f"Both models answer **{a_top}**.", icon=":material/check_circle:")
else:
    st.info(f"Model A answers **{a_top}**, model B **{b_top}**.", icon=":material/compare_arrows:")

columns = st.columns(2, gap="large")
for side, col, path in ((result.left, columns[0], current), (result.right, columns[1], path_b)):
    with col:
        st.subheader(f"Model {side.name}")
        st.caption(labels.get(path, path))
        st.dataframe(
            pd.DataFrame(
                [{"answer": c.word, "probability": percent(c.score)} for c in side.fill_mask.masks[0].candidates]
            ),
            hide_index=True,
            width="stretch",
        )
        st.markdown(f"**Why {side.attribution.target}** (integrated gradients)")
        st.markdown(
            shaded_tokens_html(side.attribution.pieces, side.attribution.integrated_gradients), unsafe_allow_html=True
        )
        if not side.attribution.converged:
            st.caption(f"Not converged in {side.attribution.steps} steps: read as rough.")
        L = side.attention.rollout.shape[0]
        _, rollout = raw_and_rollout_figures(side.attention, L - 1)
        show_figure(rollout, f"rollout-{side.name}", key=f"cmp_roll_{side.name}")
