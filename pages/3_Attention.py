"""Attention: every head's attention map, all heads at once, per-head statistics, bertviz, head ablation."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertlab.attention import (
    FULL_MAP_LIMIT,
    HEAD_STATS,
    SAMPLE_PAIRS,
    all_heads,
    average_head_statistics,
    compare_ablation,
    head_label,
    head_statistics,
    long_attention,
    make_head_mask,
)
from bertlab.errors import BertLabError
from bertlab.explore import answer_changes, input_notes
from bertlab.figures.answers import answer_change_figure
from bertlab.figures.attention import (
    WINDOW_TOKENS,
    TokenWindow,
    attention_heatmap,
    attention_lines,
    bertviz_html,
    heatmap_cap_note,
    token_window,
)
from bertlab.figures.attention_grid import head_grid, suggested_grid_scale
from bertlab.figures.head_ablation import probability_change
from bertlab.figures.head_stats import stat_heatmap, stats_overview
from bertlab.figures.long_inputs import long_attention_figure
from bertlab.formatting import human_bytes
from bertlab.inference import text_cap
from bertlab.storage.model_card import pretrained_length
from pages.common import (
    chosen_model,
    concept,
    require_model,
    setup_page,
    show_error,
    show_figure,
    show_notes,
    shown_half,
)

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = shown_half(require_model(), "discriminator")  # an ELECTRA pair: the model that fine-tunes
L, A = lm.config.num_layers, lm.config.num_heads
LABELS = [head_label(layer, head) for layer, head in all_heads(L, A)]
# heads pruned from the weights (bertlab compress prune): gone, so drawn as removed and not offered to switch off
REMOVED = [(layer, head) for layer, heads in lm.config.pruned_heads for head in heads]
OFFERED = [lab for lab, pair in zip(LABELS, all_heads(L, A), strict=True) if pair not in REMOVED]
OFF_KEY = f"att_off_{L}x{A}"  # heads switched off, per model shape
GRID_SCALES = {  # the grid's colour scale: None = bertlab's suggestion for this input
    "automatic": None,
    "one scale for every head": "shared",
    "each head to its own strongest weight": "per_head",
}


@st.cache_data(show_spinner="Averaging over the sample sentences…", max_entries=16)
def sample_stats(model_key: str, off: tuple[tuple[int, int], ...], _lm):
    mask = make_head_mask(L, A, off) if off else None
    return average_head_statistics(_lm, SAMPLE_PAIRS, head_mask=mask)


def pick_window(num_tokens: int) -> TokenWindow:
    """The tokens the lines view and the head grid draw: all of a short input, a slider's window of a long one."""
    if num_tokens <= WINDOW_TOKENS:
        return token_window(num_tokens)
    start = st.slider(
        f"Tokens shown ({WINDOW_TOKENS} of {num_tokens} at a time)",
        0,
        num_tokens - WINDOW_TOKENS,
        0,
        key="att_window",  # one window for both tabs: only the open tab draws this slider
        persist_state="page",
        format="from token %d",
        help="Long inputs are drawn a window at a time: every line and tile of 512 tokens would not be readable "
        "and would freeze the browser.",
    )
    return token_window(num_tokens, start)


def draw_long_input(lm, text_a: str, text_b: str | None) -> None:
    """A windowed model on a long text: every head's map averaged over tiles (the token views need the T x T map)."""
    st.info(
        f"This text is longer than {FULL_MAP_LIMIT:,} tokens and the model reads it with a sparse pattern, so "
        "each head's map is drawn averaged over tiles of tokens, as the model computes it; the token-by-token "
        "views, head statistics and switching heads off work up to that length. "
        + ("Sentence B is left out here. " if text_b else "")
        + "The Long inputs page compares patterns and their cost.",
        icon=":material/width_wide:",
    )
    try:
        att = long_attention(lm, text_a)
    except BertLabError as exc:
        show_error(exc)
        return
    a, b = st.columns(2)
    layer = a.selectbox("Layer", range(L), format_func=lambda i: f"layer {i + 1}", key="att_long_layer")
    head = b.selectbox("Head", range(A), format_func=lambda i: f"head {i + 1}", key="att_long_head")
    mine, full = att.picture.map_bytes(lm.config)
    st.caption(f"{att.length:,} tokens: {human_bytes(mine)} of maps here; full attention's: {human_bytes(full)}.")
    show_figure(long_attention_figure(att, layer, head), "attention_long")


controls, explain = st.columns([3, 2], gap="large")
with explain:
    concept(
        "**Self-attention** (Vaswani et al. 2017; BERT §3). In every layer each of the **A** heads lets every "
        "token build its next vector as a weighted average of all tokens' vectors; the weights (a row of the "
        "map below) sum to 1. Clark et al. 2019 found heads that attend to the **previous or next token**, to "
        "**[SEP]** (a 'no-op' when a head has nothing to do), to **[CLS]** and to punctuation, and heads that "
        "track syntax. Switching heads off (**head mask**) shows which ones the answers rely on."
    )
with controls:
    text_a = st.text_area(
        "Sentence A",
        value="The cat sat on the mat because it was warm.",
        key="att_a",
        height=70,
        persist_state="session",
        max_chars=text_cap(lm.max_length),
    )
    text_b = st.text_input(
        "Sentence B (optional)",
        value="It fell asleep in the sun.",
        key="att_b",
        persist_state="session",
        max_chars=text_cap(lm.max_length),
    )

if not text_a.strip():
    st.warning("Sentence A is empty: type a sentence to see its attention.", icon=":material/edit_note:")
    st.stop()
text_b = text_b if text_b.strip() else None
show_notes(input_notes(lm.tokenizer, lm.max_length, text_a, text_b, pretrained_length(lm.card)))

off = [lab for lab in st.session_state.get(OFF_KEY, []) if lab in OFFERED]
if OFF_KEY in st.session_state:  # heads switched off on another model of this shape may be removed from this one
    st.session_state[OFF_KEY] = off
off_pairs = [divmod(LABELS.index(lab), A) for lab in off]
head_mask = make_head_mask(L, A, off_pairs) if off_pairs else None
if lm.config.sparse and len(lm.tokenizer.encode(text_a, text_b, max_length=lm.max_length)) > FULL_MAP_LIMIT:
    draw_long_input(lm, text_a, text_b)
    st.stop()
try:
    ins = lm.inspect(text_a, text_b, head_mask=head_mask)
except BertLabError as exc:
    show_error(exc)
    st.stop()
stats_here = head_statistics(ins.attentions, ins.tokens)
tokens = lm.tokenizer.readable_tokens(ins.tokens)  # as drawn: RoBERTa's 'Ġmat' reads '␣mat
if off:
    st.info(
        f"{len(off)} head(s) switched off on this page: {', '.join(off)}. Change this in “Switch heads off”.",
        icon=":material/power_off:",
    )

# Only the open tab is computed (on_change="rerun" + .open): one interaction stays fast.
tab_one, tab_all, tab_stats, tab_off, tab_viz = st.tabs(
    ["One head", "All heads", "Head statistics", "Switch heads off", "bertviz"], key="att_tab", on_change="rerun"
)

# --- one head ----------------------------------------------------------------------------
with tab_one:
    if tab_one.open:
        c1, c2 = st.columns(2)
        layer = c1.slider("Layer", 1, L, 1, key="att_layer", persist_state="page") - 1
        head = c2.slider("Head", 1, A, 1, key="att_head", persist_state="page") - 1
        is_off = (layer, head) in off_pairs
        name = head_label(layer, head)
        window = pick_window(len(tokens))
        if not window.is_whole:
            st.caption(
                f"The lines view shows **{window.describe()}** (positions count from 0, the [CLS]); the heatmap "
                f"shows all {len(tokens)}, with these outlined in orange. Move the slider to see other tokens; "
                "lines to tokens outside the window are not drawn."
            )
        weights = ins.attentions[layer, head]
        h1, h2 = st.columns([3, 2], gap="large")
        with h1:
            show_figure(
                attention_heatmap(
                    tokens, weights, title=f"{name}: each row attends to the columns", off=is_off, window=window
                ),
                f"attention-{name}",
                key="att_heat",
            )
            if note := heatmap_cap_note(weights, len(tokens)):
                st.caption(note)
        with h2:
            show_figure(
                attention_lines(
                    tokens,
                    weights,
                    title=f"{name} as lines (left attends to right)",
                    window=window,
                ),
                f"attention-lines-{name}",
                key="att_lines",
            )
        summary = ", ".join(
            f"{HEAD_STATS[k][0]} {stats_here.values[k][layer, head]:.0%}"
            for k in ("cls", "sep", "punct", "prev", "next", "self")
        )
        if not is_off:
            st.caption(
                f"{name} on this input: {summary}; entropy {stats_here.values['entropy'][layer, head]:.2f} bits."
            )

# --- all heads ---------------------------------------------------------------------------
with tab_all:
    if tab_all.open:
        st.markdown(
            f"All {L * A} heads at once: one small map per head, rows = layers, columns = heads. "
            "Look for vertical stripes (everyone attends to one token such as [SEP] or [CLS]) and diagonals "
            "(previous / next token)."
        )
        window = pick_window(len(tokens))
        if not window.is_whole:
            st.caption(
                f"Each map shows the weights among **{window.describe()}** (positions count from 0, the [CLS]). "
                "Move the slider to see other tokens."
            )
        choice = st.radio(
            "Colour scale", list(GRID_SCALES), horizontal=True, key="att_grid_scale", persist_state="page"
        )
        scale = GRID_SCALES[choice] or suggested_grid_scale(window.maps(ins.attentions))
        if scale == "per_head":
            automatic = (
                "Automatic: one scale would leave most heads white on this input, so " if choice == "automatic" else ""
            )
            st.caption(
                automatic
                + "each map runs from white (0) to its own strongest weight: heads that spread their attention "
                "stay visible, but a dark tile is not a strong head: compare heads with “one scale for every head”."
            )
        else:
            st.caption(
                ("Automatic: " if choice == "automatic" else "")
                + "one colour scale for every head, from white (0) to the strongest weight of any head shown, "
                "so the same colour means the same weight in every map."
            )
        show_figure(
            head_grid(ins.attentions, tokens, off=off_pairs, scale=scale, window=window, removed=REMOVED),
            "all-heads",
            key="att_grid",
        )

# --- statistics --------------------------------------------------------------------------
with tab_stats:
    if tab_stats.open:
        scope = st.radio(
            "Statistics over",
            ["this input", f"a sample of {len(SAMPLE_PAIRS)} sentence pairs"],
            horizontal=True,
            key="att_scope",
            persist_state="page",
        )
        if scope == "this input":
            stats = stats_here
        else:
            stats = sample_stats(lm.path or chosen_model(), tuple(off_pairs), lm)
        st.caption(
            f"Averaged over {stats.num_tokens} tokens of {stats.num_inputs} input(s). Shares are of each token's "
            "attention (0-100%); entropy is in bits. In the spirit of Clark et al. 2019, Figures 2-4."
        )
        show_figure(stats_overview(stats), "head-statistics-overview", key="att_overview")
        s1, s2 = st.columns([3, 2], gap="large")
        with s1:
            which = st.selectbox(
                "Statistic",
                list(HEAD_STATS),
                format_func=lambda k: f"{HEAD_STATS[k][0]}: {HEAD_STATS[k][1]}",
                key="att_stat",
                persist_state="page",
            )
            show_figure(stat_heatmap(stats, which), f"head-stat-{which}", key="att_stat_map")
        with s2:
            st.markdown("**Heads that do it most**")
            top = stats.top_heads(which, k=min(8, L * A))
            st.dataframe(
                pd.DataFrame([{"head": head_label(layer, head), "value": v} for layer, head, v in top]),
                hide_index=True,
                width="stretch",
                # the same units as the map beside it: shares in %, entropy in bits
                column_config={
                    "value": st.column_config.NumberColumn(format="%.2f bits" if which == "entropy" else "percent")
                },
            )
        table = pd.DataFrame(stats.rows())
        st.download_button(
            "All statistics (CSV)",
            table.to_csv(index=False),
            file_name="head-statistics.csv",
            mime="text/csv",
            on_click="ignore",
            key="att_csv",
        )

# --- ablation ----------------------------------------------------------------------------
with tab_off:
    if tab_off.open:
        st.markdown(
            "Switch heads off (their output is multiplied by 0, as in Michel et al. 2019) and compare the "
            "fill-mask and next-sentence answers with all heads on."
        )

        def _preset(labels: list[str]) -> None:
            st.session_state[OFF_KEY] = [lab for lab in labels if lab in OFFERED]  # a removed head cannot be off

        p1, p2, p3, p4 = st.columns(4)
        layer_pick = p1.selectbox(
            "Whole layer",
            list(range(1, L + 1)),
            key="att_layer_off",
            persist_state="page",
            format_func=lambda x: f"layer {x}",
        )
        p1.button(
            "Switch off this layer",
            on_click=_preset,
            args=([head_label(layer_pick - 1, h) for h in range(A)],),
            key="att_btn_layer",
        )
        sep_heads = [head_label(layer, head) for layer, head, _ in stats_here.top_heads("sep", k=min(3, L * A))]
        p2.button("Off: 3 heads most on [SEP]", on_click=_preset, args=(sep_heads,), key="att_btn_sep")
        prev_heads = [head_label(layer, head) for layer, head, _ in stats_here.top_heads("prev", k=min(3, L * A))]
        p3.button("Off: 3 previous-token heads", on_click=_preset, args=(prev_heads,), key="att_btn_prev")
        p4.button("All heads on", on_click=_preset, args=([],), key="att_btn_clear")
        if REMOVED:
            st.caption(
                f"{len(REMOVED)} of this model's {L * A} heads were pruned (removed from its weights): they are "
                "gone, not switched off, so they are not offered here and the grid draws them grey."
            )
        st.multiselect(
            "Heads switched off (layer-head, counted from 1)",
            OFFERED,
            key=OFF_KEY,
            persist_state="session",  # kept while the user visits other pages
            placeholder="Choose heads, e.g. L1-H2",
        )

        mask_text = st.text_input(
            "Fill-mask sentence",
            value="The cat sat on the [MASK].",
            key="att_mask_text",
            persist_state="page",
            max_chars=text_cap(lm.max_length),
        )
        if "[mask]" not in mask_text.lower():
            st.warning("Write [MASK] in the fill-mask sentence to compare its answers.", icon=":material/edit_note:")
            mask_text = None
        if not off_pairs:
            st.info("All heads are on. Switch some off above to see what changes.", icon=":material/touch_app:")
        else:
            try:
                # many candidates, so a word that fell out of the top answers still has its probability
                cmp = compare_ablation(lm, head_mask, mask_text=mask_text, text_a=text_a, text_b=text_b, top_k=200)
            except BertLabError as exc:
                show_error(exc)
                cmp = None
            if cmp is not None:
                for note in cmp.notes:
                    st.info(note)
                r1, r2 = st.columns([3, 2], gap="large")
                with r1:
                    if cmp.fill_base is not None:
                        changes = answer_changes(cmp.fill_rows(0), show=6)
                        words = [c.word for c in changes]
                        focus = st.selectbox(
                            "The word you care about", words, key="att_focus_word", help="default: the top answer"
                        )
                        chosen = next(c for c in changes if c.word == focus)
                        st.markdown("First [MASK]: " + chosen.sentence(len(off_pairs)))
                        show_figure(
                            answer_change_figure(changes, focus=focus, title="Each answer: all heads → heads off"),
                            "ablation-fill-mask",
                            key="att_cmp_bar",
                        )
                with r2:
                    if cmp.nsp_base is not None:
                        change = probability_change(cmp.nsp_base.is_next_prob, cmp.nsp_ablated.is_next_prob)
                        st.metric(
                            "P(IsNext) with the heads off",
                            change.after,
                            delta=change.delta,
                            delta_color="off",
                            delta_arrow=change.arrow,
                            border=True,
                        )
                        st.caption(f"All heads on: {change.before} for sentence A → B above.")
                        if change.odds:  # a sure answer barely moves in percent: its evidence may still have
                            st.caption(
                                f"The model is sure of this pair, so its probability hardly moves; its evidence, "
                                f"the {change.odds}, shows what the heads did. For a bigger swing, try a pair it is "
                                "less sure of (the Next sentence page has some)."
                            )
                    elif text_b is None:
                        st.caption("Type a sentence B above to compare next-sentence answers too.")

# --- bertviz -----------------------------------------------------------------------------
with tab_viz:
    if tab_viz.open:
        st.markdown(
            "[bertviz](https://github.com/jessevig/bertviz)'s interactive views. They load d3, jQuery and require.js "
            "from the web: **offline they stay blank**; the “One head” and “All heads” tabs show the same attention "
            "without the internet."
        )
        view = st.radio("View", ["head view", "model view"], horizontal=True, key="att_viz_view", persist_state="page")
        if st.toggle("Show bertviz", value=False, key="att_viz_on"):
            try:
                page = bertviz_html(ins, "head" if view == "head view" else "model")
            except BertLabError as exc:
                show_error(exc)
            else:
                st.iframe(page, height=max(450, 25 * len(tokens) + 150) if view == "head view" else 900)
                st.caption("Blank? You are offline, or the browser blocks scripts from the web. Use the tabs above.")
        else:
            st.caption("Off by default: the views are large and need the internet.")
