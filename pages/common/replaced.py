"""The replaced-token view of an ELECTRA discriminator, shown on the Fill-mask page: type a sentence, or
let the generator corrupt one, and see P(replaced) for every token. The computation is
bertlab.interpret.replaced's, the figure bertlab.figures.answers'."""

from __future__ import annotations

import streamlit as st

from bertlab.errors import BertLabError
from bertlab.figures.answers import replaced_tokens_figure
from bertlab.inference import MAX_TEXT_CHARS, LoadedModel
from bertlab.interpret.replaced import MASK_PROB, ReplacedTokens, corrupt_and_detect, detect_replaced
from pages.common import concept, load_half, show_error, show_figure

TYPED, CORRUPTED = "Type a sentence", "Let the generator corrupt one"
EXAMPLE = "The cat sat on the mat and the dog ran to the park."


def discriminator_of(lm: LoadedModel) -> LoadedModel | None:
    """The model that detects replaced tokens: `lm` itself (a discriminator folder), a pair folder's
    discriminator half, or None (no "rtd" head anywhere)."""
    if "rtd" in lm.heads:
        return lm
    return load_half(lm, "discriminator")


def _marked_sentence(result: ReplacedTokens) -> str:
    """The tokens read, the replaced ones in orange with the token they replaced, those the
    discriminator calls replaced underlined by a ⚑."""
    out = []
    for i, token in enumerate(result.tokens):
        if result.special[i]:
            continue
        word = f":orange[**{token}**] ~~{result.original_tokens[i]}~~" if result.replaced[i] else f"`{token}`"
        out.append(word + (" ⚑" if result.flagged[i] else ""))
    return " ".join(out)


def replaced_token_section(lm: LoadedModel, discriminator: LoadedModel) -> None:
    """Draw the view; `lm` is the chosen model (a pair's generator or the discriminator itself)."""
    generator = lm if lm is not discriminator and lm.has_mlm else None
    concept(
        "**Replaced-token detection** (ELECTRA, Clark et al. 2020). A small **generator** (a masked LM) fills "
        f"{MASK_PROB:.0%} of the tokens with words **sampled** from its guesses; the **discriminator** reads the "
        "result and says for **every** token whether it was replaced. It learns from all the tokens, not only "
        "the 15% a masked LM is asked about, which is why ELECTRA learns more from the same compute."
    )
    if generator is not None:
        st.caption(
            "This is an ELECTRA **pair** folder: the fill-mask answers on this page come from its **generator** "
            "(the masked LM); this view uses its **discriminator** (`discriminator/`), the model that fine-tunes."
        )
    modes = [TYPED, CORRUPTED] if generator is not None else [TYPED]
    mode = st.segmented_control("Sentence", modes, default=TYPED, key="rtd_mode") or TYPED
    if generator is None:
        st.caption(
            "To let a generator corrupt a sentence, open the pair folder this discriminator came from "
            "(its generator/ half fills the masks)."
        )
    text = st.text_area(
        "Sentence" + (" to corrupt" if mode == CORRUPTED else " (put in a word that does not belong)"),
        value=EXAMPLE,
        key="rtd_text",
        height=80,
        max_chars=MAX_TEXT_CHARS,
    )
    seed = 0
    if mode == CORRUPTED:
        seed = int(
            st.number_input(
                "Corruption (seed)",
                min_value=0,
                value=0,
                step=1,
                key="rtd_seed",
                help="Which tokens are masked and which samples the generator draws; step it for another corruption.",
            )
        )
    try:
        if mode == CORRUPTED:
            result = corrupt_and_detect(generator, discriminator, text, seed=seed)
        else:
            result = detect_replaced(discriminator, text)
    except BertLabError as exc:
        show_error(exc)
        return
    counted = int((~result.special).sum())
    m1, m2, m3 = st.columns(3)
    m1.metric("Tokens called replaced", f"{int(result.flagged.sum())} of {counted}", border=True)
    if result.accuracy is not None:
        m2.metric("Really replaced", f"{int(result.replaced.sum())} of {int(result.masked.sum())} masked", border=True)
        m3.metric("Discriminator right on", f"{result.accuracy:.0%} of tokens", border=True)
    st.markdown("**What the discriminator read:** " + _marked_sentence(result))
    st.caption(
        "Orange: a token the generator put in (crossed out: the one it replaced). ⚑: the discriminator says "
        "P(replaced) ≥ 50%. A sample equal to the original word is not a replacement, as in ELECTRA's training."
        if result.accuracy is not None
        else "⚑: the discriminator says P(replaced) ≥ 50%. Nothing was corrupted here: every token is the "
        "sentence's own, so a high bar marks a word the discriminator finds out of place."
    )
    show_figure(
        replaced_tokens_figure(
            result.tokens,
            result.p_replaced,
            result.replaced,
            result.original_tokens,
            result.special,
            title="P(replaced) for every token",
        ),
        "replaced-tokens",
        key="rtd_bar",
    )
