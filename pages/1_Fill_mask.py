"""Fill-mask: the masked-LM head's top-k answers for every [MASK], and where the answer forms; for an
ELECTRA discriminator (or a pair folder's discriminator half), which tokens were replaced."""

from __future__ import annotations

import dataclasses
import time

import streamlit as st

from bertlab.errors import BertLabError
from bertlab.explore import (
    FACT_PROBE,
    FILL_MASK_EXAMPLES,
    embedding_row_note,
    independent_text,
    input_notes,
    mask_words,
    maskable_words,
    model_limits,
)
from bertlab.figures.answers import answer_trajectory_figure, layer_predictions_figure, probability_bar
from bertlab.inference import MAX_MASKS, text_cap
from bertlab.storage.model_card import pretrained_length
from pages.common import concept, require_model, setup_page, show_error, show_figure, show_notes
from pages.common.replaced import discriminator_of, replaced_token_section

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = require_model(needs=("mlm",), unless=("rtd",))
discriminator = discriminator_of(lm)  # ELECTRA: the model itself, or a pair folder's discriminator half
if discriminator is lm:
    st.info(
        "This model is an ELECTRA **discriminator**: it has no masked-LM head, so it cannot fill a [MASK]. "
        "It says, for every token, whether the token was replaced; that is what this page shows for it. "
        "To fill masks, open the pair folder it came from (its generator answers) or another pretrained model.",
        icon=":material/info:",
    )
    replaced_token_section(lm, discriminator)
    st.stop()
if discriminator is not None:
    with st.expander(
        "**ELECTRA pair**: the fill-mask answers below come from its generator. Open this for its "
        "discriminator: which tokens were replaced?",
        icon=":material/swap_horiz:",
    ):
        replaced_token_section(lm, discriminator)

TYPE, CLICK = "Type [MASK] yourself", "Click words to mask them"


def _use_example() -> None:
    st.session_state["fm_text"] = st.session_state["fm_example"]
    st.session_state["fm_mode"] = TYPE


def _typed() -> None:
    st.session_state["fm_example"] = None  # the picker must not keep naming an example the user edited


controls, explain = st.columns([3, 2], gap="large")
with explain:
    concept(
        "**Masked language model** (paper §3.1, task #1). BERT chooses 15% of the input tokens (80% of them "
        "shown as `[MASK]`, 10% as a random word, 10% unchanged, so that it cannot rely on seeing `[MASK]`) "
        "and learns to predict each one from the words on **both** sides, which a left-to-right language "
        "model cannot do. The MLM head turns the last layer's vector at the mask into a probability for "
        "every piece in its vocabulary (BERT's WordPieces; RoBERTa's byte-level BPE pieces). With several masks, each is answered **independently** (the "
        "others stay masked) and **jointly** (fill the surest one, read again, repeat)."
    )
with controls:
    mode = (
        st.segmented_control("How to mask", [TYPE, CLICK], default=TYPE, key="fm_mode", label_visibility="collapsed")
        or TYPE
    )
    if mode == TYPE:
        st.selectbox(
            "Try an example",
            FILL_MASK_EXAMPLES,
            index=None,
            key="fm_example",
            on_change=_use_example,
            placeholder="Pick a ready sentence…",
        )
        text = st.text_area(
            "Sentence with one or more [MASK]",
            value=FILL_MASK_EXAMPLES[0],
            key="fm_text",
            help=f"Up to {MAX_MASKS} [MASK]s per sentence: the joint fill reads the sentence again for every mask, "
            "so a cap keeps one request from tying up the machine. [mask] in lowercase works too.",
            height=90,
            on_change=_typed,
            persist_state="session",  # the sentence stays while the user visits other pages
            max_chars=text_cap(lm.max_length),  # a long-input model reads a chapter
        )
        masked = text
    else:
        text = st.text_area(
            "Sentence (click words below to mask them)",
            value="The man went to the store to buy a gallon of milk.",
            key="fm_click_text",
            persist_state="session",
            height=90,
            max_chars=text_cap(lm.max_length),
        )
        words = maskable_words(text)
        picked = st.pills(
            "Words to mask",
            [w.index for w in words],
            selection_mode="multi",
            format_func=lambda i: next(w.text for w in words if w.index == i),
            key=f"fm_pills_{hash(text)}",
            wrap=True,
        )
        whole = st.checkbox("Whole-word masking: one [MASK] per piece of the word", value=True, key="fm_whole")
        masked = mask_words(text, picked or [], lm.tokenizer, whole_word=whole)
        if picked:
            st.markdown(f"The model reads: `{masked}`")
    c1, c2 = st.columns(2)
    top_k = c1.slider("Answers per mask (top-k)", 1, 20, 8, key="fm_topk")
    whole_words = c2.toggle(
        "Whole words",
        value=True,
        key="fm_words",
        help="Answers that continue a word (WordPiece's '##ing', a byte-level piece without a leading space) are "
        "shown joined to the pieces of the same word, e.g. 'playing'; a piece proposed after a word typed on its "
        "own is shown as a piece, e.g. 'is + ##s'.",
    )

if not masked.strip():
    st.warning(
        "The sentence is empty: "
        + (
            "type a sentence, then click words to mask them."
            if mode == CLICK
            else "type a sentence with [MASK] where a word should go."
        ),
        icon=":material/edit_note:",
    )
    st.stop()
if "[mask]" not in masked.lower():
    if mode == CLICK:
        st.info("Click one or more words above to mask them.", icon=":material/touch_app:")
    else:
        st.warning(
            "There is no [MASK] in the sentence. Write [MASK] (with the brackets) where the model should "
            "guess a word, or switch to “Click words to mask them”.",
            icon=":material/edit_note:",
        )
    st.stop()

show_notes(input_notes(lm.tokenizer, lm.max_length, masked, pretrained=pretrained_length(lm.card)))
try:
    started = time.perf_counter()
    result = lm.fill_mask(masked, top_k=top_k, joint=True)
    elapsed = time.perf_counter() - started
except BertLabError as exc:
    show_error(exc)
    st.stop()

st.caption(
    f"Answered in {elapsed * 1000:.0f} ms on {lm.device.type.upper()} · input of {len(result.tokens)} tokens: "
    + " ".join(f"`{t}`" for t in lm.tokenizer.readable_tokens(result.tokens[:80]))
    + (" …" if len(result.tokens) > 80 else "")
)

n = len(result.masks)
if n > 1:
    st.subheader("All masks together")
    a, b = st.columns(2)
    with a, st.container(border=True):
        st.markdown("**Independently**: each mask's best guess, the other masks still hidden")
        st.markdown(f"> {independent_text(lm.tokenizer, lm.max_length, result)}")
    with b, st.container(border=True):
        order = " → ".join(f"#{i + 1} `{result.joint[i].piece}`" for i in result.joint_order)
        st.markdown("**Jointly**: surest mask first, then read again")
        st.markdown(f"> {result.joint_text}")
        st.caption(f"Filled in this order: {order}")

st.subheader("Top answers" + (" for each mask" if n > 1 else ""))
try:
    fact = lm.fill_mask(FACT_PROBE[0], top_k=4).masks[0].candidates
except BertLabError:  # a model whose vocabulary cannot spell the probe: the card's numbers still stand
    fact = []
st.info(
    "**What it can and cannot do.** " + model_limits(lm.card, lm.num_parameters(), [c.word for c in fact]),
    icon=":material/info:",
)
containers = st.tabs([f"[MASK] #{i + 1}" for i in range(n)]) if n > 3 else st.columns(n) if n > 1 else [st.container()]
for i, (m, box) in enumerate(zip(result.masks, containers, strict=False)):
    with box:
        label = f"[MASK] #{i + 1} (token {m.position})" if n > 1 else f"[MASK] (token {m.position})"
        # one view: the bars carry the rank (order), the word and its probability; the toggle above
        # shows the raw pieces instead of whole words
        show_figure(
            probability_bar(m.candidates, whole_words, title=label),
            f"fill-mask-{i + 1}",
            key=f"fm_bar_{i}",
            export=(n == 1),
        )

st.subheader("Layer by layer: where does the answer form?")
st.markdown(
    "The masked-LM head is applied to the output of **every** layer at the mask, not only the last. "
    "Early layers mostly echo the input or guess common words; the answer usually appears in the upper layers."
)
which = 0
if n > 1:
    which = st.selectbox("Which mask", list(range(n)), format_func=lambda i: f"[MASK] #{i + 1}", key="fm_layer_mask")
position = result.masks[which].position
try:
    # one pass: the 200 most likely tokens per layer; the heatmap shows the first few
    deep = lm.layer_predictions(masked, position=position, top_k=200)
except BertLabError as exc:
    show_error(exc)
    st.stop()
# the embeddings row (layer 0) holds no context: the same flat guess for any sentence, so it is
# left out of the heatmap and said in words (explore.embedding_row_note)
guesses = [dataclasses.replace(g, candidates=g.candidates[: min(top_k, 10)]) for g in deep if g.layer > 0]
final = result.masks[which].candidates[0]
show_figure(
    layer_predictions_figure(guesses, whole_words, title="Top guesses read out of each layer (top row = the answer)"),
    "layer-predictions",
    key="fm_layers",
)
st.caption(embedding_row_note(deep[0], len(lm.tokenizer)))
g1, g2 = st.columns([3, 2], gap="large")
with g1:
    show_figure(
        answer_trajectory_figure(deep, final.token_id, final.word if whole_words else final.piece),
        "answer-by-layer",
        key="fm_traj",
    )
with g2:
    st.markdown(
        f"The line follows the model's final answer **{final.word if whole_words else final.piece}** down through "
        "the layers. Where it jumps is where the network worked the answer out; a point at 0% means the word "
        "is not among that layer's 200 most likely tokens."
    )
