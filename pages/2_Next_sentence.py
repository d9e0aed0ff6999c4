"""Next sentence prediction: P(IsNext) for sentences A and B (for ALBERT, its sentence-order head's
P(in order)), and the input as in the paper's Figure 2."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from bertlab.errors import BertLabError
from bertlab.explore import NSP_EXAMPLES, UNRELATED_SENTENCES, input_notes
from bertlab.figures.answers import nsp_figure
from bertlab.figures.diagrams import FIGURE2_ENDS, figure2_columns, input_embeddings_figure
from bertlab.inference import MAX_TEXT_CHARS
from bertlab.storage.model_card import nsp_on_unseen_text, pretrained_length
from pages.common import concept, heads_in_words, require_model, setup_page, show_error, show_figure, show_notes

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = require_model()

EXAMPLES = {label: (a, b, truth) for label, a, b, truth in NSP_EXAMPLES}


def _use_example() -> None:
    label = st.session_state.get("nsp_example")
    if label in EXAMPLES:
        a, b, _ = EXAMPLES[label]
        st.session_state["nsp_a"], st.session_state["nsp_b"] = a, b


def _typed() -> None:
    # the user's own pair: the ready-example picker must not keep naming the example they edited
    st.session_state["nsp_example"] = None


def _sentence_order(text_a: str, text_b: str) -> None:
    """ALBERT's view: P(in order) for A then B, and for the same pair swapped (does it read the order?)."""
    try:
        started = time.perf_counter()
        ordered, swapped = lm.sentence_order([text_a, text_b], [text_b, text_a])
        elapsed = time.perf_counter() - started
    except BertLabError as exc:
        show_error(exc)
        st.stop()
    p = ordered.in_order_prob
    verdict = "In order: A comes before B" if ordered.in_order else "Swapped: B comes before A"
    m1, m2 = st.columns([1, 3], gap="large")
    with m1:
        st.metric("P(in order)", f"{p:.1%}", border=True)
    with m2:
        st.markdown(f"### Are A and B in order? The model says **{verdict}**")
        truth = EXAMPLES.get(st.session_state.get("nsp_example") or "")
        if truth and truth[2] and truth[0] == text_a and truth[1] == text_b:  # an IsNext pair: B follows A
            st.markdown(
                (":green[:material/check_circle: Right]" if ordered.in_order else ":red[:material/cancel: Wrong]")
                + ": in this pair B follows A in the text."
            )
        st.caption(f"Answered in {elapsed * 1000:.0f} ms on {lm.device.type.upper()} (both orders).")
    show_figure(nsp_figure(p, labels=("In order", "Swapped")), "sop", key="sop_bar", export=False)
    q = swapped.in_order_prob
    st.markdown(
        f"**Is it reading the order?** The same two sentences the other way round, B then A: P(in order) **{q:.1%}**."
    )
    st.caption(
        "It tells the two orders apart: one reads as in order, the other as swapped."
        if ordered.in_order != swapped.in_order
        else "It gives both orders the same answer, so on this pair it is not reading the order."
    )


if "nsp_a" not in st.session_state:
    st.session_state["nsp_a"], st.session_state["nsp_b"] = NSP_EXAMPLES[0][1], NSP_EXAMPLES[0][2]

SENTENCE_ORDER = lm.has_sop and not lm.has_nsp  # ALBERT: its sentence-pair head asks "are A and B in order?"
controls, explain = st.columns([3, 2], gap="large")
with explain:
    if SENTENCE_ORDER:
        concept(
            "**Sentence order prediction** (ALBERT, Lan et al. 2019, §4.2). ALBERT replaced NSP with SOP: B is "
            "always the segment that follows A in the same document, and half of the time the two are **swapped**. "
            "NSP's random B from another document can be told apart by its topic alone; a swapped pair cannot, "
            "so SOP has to learn how sentences follow each other. In the paper a model trained on SOP solves NSP "
            "at 78.9%, while one trained on NSP solves SOP at 52.0%, barely above chance. The input is the same "
            "`[CLS] A [SEP] B [SEP]` with segments A and B (Figure 2 below)."
        )
    else:
        concept(
            "**Next sentence prediction** (paper §3.1, task #2). In pretraining, half of the time sentence B "
            "really follows A in the text (**IsNext**) and half of the time B is a random sentence from another "
            "document (**NotNext**). The final vector of `[CLS]`, called *C*, goes through the pooler and a "
            "two-way classifier. The input is one sequence `[CLS] A [SEP] B [SEP]`; each token's vector is the "
            "sum of a **token**, a **segment** (A or B) and a **position** embedding (§3, Input/Output Representations, Figure 2)."
        )
with controls:
    st.selectbox(
        "Ready examples",
        list(EXAMPLES),
        index=None,
        key="nsp_example",
        on_change=_use_example,
        placeholder="Pick a pair (an IsNext pair is in order)…"
        if SENTENCE_ORDER
        else "Pick an IsNext or NotNext pair…",
    )
    text_a = st.text_area(
        "Sentence A", key="nsp_a", height=80, on_change=_typed, persist_state="session", max_chars=MAX_TEXT_CHARS
    )
    text_b = st.text_area(
        "Sentence B", key="nsp_b", height=80, on_change=_typed, persist_state="session", max_chars=MAX_TEXT_CHARS
    )

if not text_a.strip() or not text_b.strip():
    st.warning(
        "Type both sentences: " + ("sentence A is empty" if not text_a.strip() else "sentence B is empty") + ".",
        icon=":material/edit_note:",
    )
    st.stop()

show_notes(input_notes(lm.tokenizer, lm.max_length, text_a, text_b, pretrained_length(lm.card)))
encoding = lm.tokenizer.encode(text_a, text_b, max_length=lm.max_length)

if SENTENCE_ORDER:
    _sentence_order(text_a, text_b)
elif not lm.has_nsp:
    st.info(
        f"This {lm.info.get('family', 'model')} checkpoint has no sentence-pair head: no next-sentence prediction "
        f"(NSP, BERT's) and no sentence order prediction (SOP, ALBERT's); it has {heads_in_words(lm)}. It was "
        "trained without a sentence-pair task, as RoBERTa, DistilBERT, ELECTRA and the paper's “No NSP” ablation "
        "were, so it cannot answer here"
        + (" (the Fill-mask page uses its masked LM)" if lm.has_mlm else "")
        + ". The input diagram below still shows how the pair is fed in."
    )
else:
    try:
        started = time.perf_counter()
        result = lm.next_sentence(text_a, text_b)
        elapsed = time.perf_counter() - started
    except BertLabError as exc:
        show_error(exc)
        st.stop()
    p = result.is_next_prob
    verdict = "IsNext: B follows A" if result.is_next else "NotNext: B does not follow A"
    m1, m2 = st.columns([1, 3], gap="large")
    with m1:
        st.metric("P(IsNext)", f"{p:.1%}", border=True)
    with m2:
        st.markdown(f"### The model says **{verdict}**")
        truth = EXAMPLES.get(st.session_state.get("nsp_example") or "")
        if truth and truth[0] == text_a and truth[1] == text_b:
            right = truth[2] == result.is_next
            st.markdown(
                (":green[:material/check_circle: Right]: " if right else ":red[:material/cancel: Wrong]: ")
                + f"this pair is {'IsNext' if truth[2] else 'NotNext'}."
            )
        st.caption(f"Answered in {elapsed * 1000:.0f} ms on {lm.device.type.upper()}.")
    show_figure(nsp_figure(p), "nsp", key="nsp_bar", export=False)
    how_well = nsp_on_unseen_text(lm.card)
    if how_well:
        st.info(
            f"**How far to trust it.** {how_well} It learned NSP on mostly 19th-century books and Wikipedia, "
            "where a random B came from another document in another style; on short plain sentences like these, "
            "its answer says little about whether B follows A.",
            icon=":material/info:",
        )
    st.markdown("**Is it reading B at all?** P(IsNext) for sentence A followed by sentences unrelated to it:")
    try:
        baseline = [(b, lm.next_sentence(text_a, b).is_next_prob) for b in UNRELATED_SENTENCES]
    except BertLabError as exc:
        show_error(exc)
        baseline = []
    if baseline:
        st.table(pd.DataFrame([{"B (unrelated to A)": b, "P(IsNext)": f"{q:.0%}"} for b, q in baseline]))
        high = sum(q >= 0.5 for _, q in baseline)
        st.caption(
            f"{high} of {len(baseline)} unrelated sentences get IsNext. "
            + (
                "When unrelated sentences score as high as yours, the model is not telling whether B follows A."
                if high
                else "It tells these apart from A, so your pair's score means more."
            )
        )

st.subheader("The input, as in the paper's Figure 2")
st.markdown(
    "Each token's input vector is **token embedding + segment embedding + position embedding**. "
    "`[SEP]` ends sentence A and sentence B; every token of A gets segment E<sub>A</sub>, every token of B "
    "gets E<sub>B</sub>.",
    unsafe_allow_html=True,
)
shown = lm.tokenizer.readable_tokens(encoding.tokens)  # RoBERTa's 'Ġmat' reads '␣mat'
show_figure(input_embeddings_figure(shown, encoding.type_ids), "input-embeddings", key="nsp_fig2")
drawn = figure2_columns(encoding.type_ids)
if drawn.left_out:
    st.caption(
        f"{drawn.left_out} of {len(encoding)} tokens are left out of the drawing (the dotted boxes): it shows the "
        f"first and last {FIGURE2_ENDS} tokens of each sentence, counting [CLS] and [SEP], with their real "
        "positions. The table below lists every token."
    )
with st.expander("The same as a table (token ids, segments, positions)"):
    st.dataframe(
        pd.DataFrame(
            {
                "position": list(range(len(encoding))),
                "token": shown,
                "token id": encoding.ids,
                "segment": ["A" if s == 0 else "B" for s in encoding.type_ids],
            }
        ),
        hide_index=True,
        width="stretch",
    )
