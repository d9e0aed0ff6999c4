"""Long inputs: why 512 tokens is a wall for BERT, what a sliding window or BigBird's blocks read instead,
their measured cost against length, and a long model's attention on your own text."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertlab.attention import long_attention
from bertlab.config import BertConfig
from bertlab.errors import BertLabError
from bertlab.figures.long_inputs import cost_figure, long_attention_figure, pattern_figure
from bertlab.formatting import human_bytes
from bertlab.inference import text_cap
from bertlab.patterns.describe import CLAIMS, LONG_SAMPLE, pattern_picture, read_cost_table
from pages.common import concept, require_model, setup_page, show_error, show_figure, shown_half

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = shown_half(require_model(), "discriminator")  # an ELECTRA pair: the model that fine-tunes
c = lm.config

st.subheader("In short")
st.markdown(
    "BERT reads at most 512 tokens: every token attends to every other, so the score matrix of each head in each "
    "layer has n² entries, and time and memory grow with the square of the length. Longformer and BigBird let each "
    "token read a **window** of neighbours plus a few **global** tokens (BigBird adds **random** blocks), so the "
    "cost grows linearly and a model reads 4,096 tokens."
)
st.table(pd.DataFrame([{"Paper": x.paper, "Claim": x.claim, "Where": x.source} for x in CLAIMS]), hide_index=True)

st.subheader("What a pattern reads")
concept(
    "Each tile shows the share of its query-key pairs a pattern computes; white ones are never computed. Full "
    "attention fills the square. A **window** of w tokens is a band along the diagonal; a **global** token "
    "([CLS]) is a full row (it reads every token) and a full column (every token reads it)."
)
left, right = st.columns([1, 2], gap="large")
with left:
    pattern = st.radio("Pattern", ["window", "bigbird", "full"], horizontal=True, key="li_pattern")
    length = st.select_slider("Input length (tokens)", [128, 256, 512, 1024, 2048, 4096], 4096, key="li_len")
    window = st.select_slider("Window (both sides together)", [16, 64, 128, 256, 512], 256, key="li_w")
    block = st.select_slider("BigBird block", [16, 32, 64], 64, key="li_block")
    glob = st.toggle("[CLS] is global", True, key="li_glob")
try:
    shape = dict(num_layers=c.num_layers, num_heads=c.num_heads, hidden_size=c.hidden_size, intermediate_size=8)
    cfg = BertConfig(
        **shape,
        attention_pattern=pattern,
        attention_window=window,
        attention_block=block,
        global_tokens="cls" if glob else "none",
    )
    picture = pattern_picture(cfg, length)
except (BertLabError, ValueError) as exc:
    show_error(exc)
    st.stop()
mine, full = picture.map_bytes(cfg)
with left:
    st.metric("Pairs computed", f"{picture.share:.1%} of n²")
    st.caption(
        f"{picture.pairs:,} query-key pairs of {picture.full_pairs:,}. Attention maps of this model's shape ({c.num_layers} layers x {c.num_heads} heads, float32) at "
        f"{length:,} tokens: **{human_bytes(mine)}** for this pattern, **{human_bytes(full)}** under full attention."
    )
with right:
    show_figure(pattern_figure(picture), "long_inputs_pattern")

st.subheader("What it costs on this machine")
costs = read_cost_table()
if not costs:
    st.info("No cost table yet: run `python bench/bench_long_inputs.py` to measure one.", icon=":material/info:")
else:
    concept(
        "Measured by `bench/bench_long_inputs.py` on one CPU thread (bench/results/long_inputs.md says which "
        "CPU). The dotted lines grow as n and n² from the first point: full attention's explicit score matrix "
        "bends towards n², a window stays near n. PyTorch's fused attention never stores the n² matrix (its memory "
        "grows linearly), but its time still grows as n²."
    )
    precisions = sorted({r["precision"] for r in costs if r.get("precision")})
    a, b = st.columns(2)
    step = a.radio("Work", ["forward pass", "training step"], horizontal=True, key="li_step")
    precision = b.radio("Precision", precisions, horizontal=True, key="li_prec") if precisions else None
    rows = [r for r in costs if precision is None or r.get("precision") == precision]
    kind = "forward" if step == "forward pass" else "train"
    a, b = st.columns(2)
    with a:
        show_figure(cost_figure(rows, f"{kind}_s", "seconds", f"Time of a {step}"), "long_inputs_time")
    with b:
        show_figure(cost_figure(rows, f"{kind}_mb", "MiB", f"Peak memory of a {step}"), "long_inputs_memory")

st.subheader("Your text, through the model in the sidebar")
kind = {"window": "a sliding-window model", "bigbird": "a BigBird-pattern model"}.get(c.attention_pattern)
st.markdown(
    f"The model in the sidebar reads **{lm.max_length:,} tokens** with "
    + (f"{kind}: its maps are averaged over tiles as they are computed." if kind else "full attention.")
)
text = st.text_area(
    "Text", LONG_SAMPLE, height=160, key="li_text", max_chars=text_cap(lm.max_length), persist_state="page"
)
if st.button("Read it", type="primary", key="li_go") or st.session_state.get("li_done"):
    st.session_state["li_done"] = True
    try:
        with st.spinner("Reading the text…"):
            att = long_attention(lm, text)
    except BertLabError as exc:
        show_error(exc)
        st.stop()
    if att.truncated:
        st.warning(f"The text is longer than this model reads: only its first {lm.max_length:,} tokens were read.")
    a, b = st.columns(2)
    layer = a.selectbox("Layer", range(c.num_layers), format_func=lambda i: f"layer {i + 1}", key="li_layer")
    head = b.selectbox("Head", range(c.num_heads), format_func=lambda i: f"head {i + 1}", key="li_head")
    mine, full = att.picture.map_bytes(c)
    st.caption(
        f"{att.length:,} tokens. This model's maps: {human_bytes(mine)} for every head and layer; full attention's "
        f"would be {human_bytes(full)}."
    )
    show_figure(long_attention_figure(att, layer, head), "long_inputs_attention")
