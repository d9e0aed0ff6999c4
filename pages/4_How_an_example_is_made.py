"""How a pretraining example is made: segments A and B, IsNext/NotNext, and the 15% chosen for the masked LM."""

from __future__ import annotations

import dataclasses
import time

import pandas as pd
import streamlit as st

from bertlab.data.data_config import DataConfig, max_predictions_for
from bertlab.data.explain import explain_text
from bertlab.errors import BertLabError
from bertlab.explore import chosen_count_text, unknown_note
from bertlab.figures.diagrams import example_html, legend_html
from pages.common import concept, require_model, setup_page, show_error, show_notes

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = require_model()

DEFAULT_TEXT = (
    "The man went to the store. He bought a gallon of milk. On the way home he met an old friend. "
    "They talked about the weather and the football match. Then he walked home in the rain.\n\n"
    "Penguins are flightless birds. They live almost only in the southern hemisphere. "
    "Their wings have become flippers for swimming. Most penguins eat fish, squid and krill."
)

controls, explain = st.columns([3, 2], gap="large")
with explain:
    concept(
        "**Pretraining data** (paper §3.1 and Appendix A.1). Two spans of text become one input "
        "`[CLS] A [SEP] B [SEP]`: half of the time B is the text that really follows A (**IsNext**), half of "
        "the time it comes from another document (**NotNext**). Then **15%** of the tokens are chosen for "
        "the masked LM; of those, 80% become `[MASK]`, 10% a **random** token and 10% stay **unchanged**, so "
        "the model cannot rely on seeing `[MASK]`, which never appears when it is fine-tuned."
    )
with controls:
    text = st.text_area(
        "Your text (a blank line separates documents)",
        help="A NotNext example takes its B from another of your documents; with only one document, "
        "from a few built-in texts.",
        value=DEFAULT_TEXT,
        height=170,
        key="ex_text",
        persist_state="session",
    )
    c1, c2, c3 = st.columns(3)
    masked_lm_prob = c1.slider("Share chosen for the masked LM", 0.05, 0.5, 0.15, 0.01, key="ex_mlm")
    max_seq_length = c2.select_slider("Max sequence length", [16, 32, 64, 128, 256], value=64, key="ex_len")
    seed = c3.number_input(
        "Seed",
        min_value=0,
        max_value=10**6,
        value=0,
        step=1,
        key="ex_seed",
        help="The same seed gives the same examples; change it to roll the dice again.",
    )
    c4, c5 = st.columns(2)
    whole_word = c4.checkbox(
        "Whole-word masking",
        value=False,
        key="ex_wwm",
        help="Choose all WordPiece pieces of a word together (BERT's later 'whole word masking').",
    )
    short_seq_prob = c5.slider(
        "Chance of a short example",
        0.0,
        1.0,
        0.1,
        0.05,
        key="ex_short",
        help="Google's script sometimes makes a shorter example so the model sees short inputs too.",
    )

if not text.strip():
    st.warning(
        "The text is empty: type a few sentences (a blank line separates documents).", icon=":material/edit_note:"
    )
    st.stop()

try:
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    wanted = dict(
        masked_lm_prob=masked_lm_prob,
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        whole_word_mask=whole_word,
        max_predictions_per_seq=max_predictions_for(max_seq_length, masked_lm_prob),  # the cap follows the length
    )
    config = DataConfig(**{k: v for k, v in wanted.items() if k in fields})
    started = time.perf_counter()
    instances = explain_text(text, lm.tokenizer, config, seed=int(seed))
    elapsed = time.perf_counter() - started
except BertLabError as exc:
    show_error(exc)
    st.stop()
except ValueError as exc:  # a config the data module refuses, said plainly
    st.warning(f"These settings cannot make examples: {exc}", icon=":material/edit_note:")
    st.stop()

# characters the vocabulary lacks: said, as on every page that reads a text (they are [UNK] in the examples)
unknown = unknown_note(
    lm.tokenizer,
    text,
    then="in the examples below, where an [UNK] can be chosen for the masked LM like any other token, as in "
    "Google's script: the model learns to predict 'unknown' there",
)
show_notes([unknown] if unknown else [])
if not instances:
    st.warning(
        "No example could be made from this text: it is too short. Type a few more sentences.",
        icon=":material/edit_note:",
    )
    st.stop()

st.caption(
    f"{len(instances)} example(s) made in {elapsed * 1000:.0f} ms with the chosen model's vocabulary "
    f"({len(lm.tokenizer):,} tokens)."
)


def _label(i: int) -> str:
    inst = instances[i]
    return f"Example {i + 1}: {'IsNext' if inst.is_next else 'NotNext'}, {len(inst.tokens)} tokens"


index = (
    st.selectbox("Example", list(range(len(instances))), format_func=_label, key="ex_index")
    if len(instances) > 1
    else 0
)
index = min(index, len(instances) - 1)
inst = instances[index]
# as a learner reads them: RoBERTa's 'Ġmat' reads '␣mat' (the tokenizer's own rule; WordPiece's as they are)
tokens, original_tokens = lm.tokenizer.readable_tokens(inst.tokens), lm.tokenizer.readable_tokens(inst.original_tokens)

kinds = inst.kinds
n_chosen = sum(1 for k in kinds if k)
counts = {k: sum(1 for x in kinds if x == k) for k in ("mask", "random", "keep")}

h1, h2 = st.columns([1, 3], gap="large")
with h1:
    st.metric("Next sentence label", "IsNext" if inst.is_next else "NotNext", border=True)
with h2:
    st.markdown(f"**Why:** {inst.reason}")
    st.markdown(
        f"Segment **A** is tokens 1-{inst.a_end - 1} and ends at the first `{lm.tokenizer.sep_token}` (position "
        f"{inst.a_end}); segment **B** runs from position {inst.a_end + 1} to the last `{lm.tokenizer.sep_token}`."
    )

st.subheader("The example, token by token")
st.html(legend_html())
st.html(example_html(tokens, original_tokens, kinds, inst.segment_ids))
st.markdown(
    f"**{n_chosen}** tokens were chosen for prediction: {chosen_count_text(len(inst.tokens), n_chosen, config)}. "
    f"Of the {n_chosen}, **{counts['mask']}** became `[MASK]`, **{counts['random']}** a random token, "
    f"**{counts['keep']}** stayed as they were. "
    "The model must predict the original token (small grey text) at every chosen position, including the unchanged ones."
)

with st.expander("As a table"):
    st.dataframe(
        pd.DataFrame(
            {
                "position": list(range(len(inst.tokens))),
                "input token": tokens,
                "original": original_tokens,
                "chosen as": [k or "" for k in kinds],
                "segment": ["A" if s == 0 else "B" for s in inst.segment_ids],
            }
        ),
        hide_index=True,
        width="stretch",
    )
