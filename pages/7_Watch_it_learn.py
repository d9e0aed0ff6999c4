"""Watch it learn: a slider over training steps showing the learning curve, fill-mask answers,
attention maps and head statistics of the model as it was at each snapshot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from bertlab.attention import HEAD_STATS, HeadStats, head_label
from bertlab.errors import BertLabError
from bertlab.figures.answers import learning_curve_figure, percent
from bertlab.figures.attention import attention_heatmap
from bertlab.figures.attention_grid import head_grid
from bertlab.figures.head_stats import stats_overview
from bertlab.storage.catalog import runs_root, shipped_model_path
from bertlab.training.history import (
    build_history,
    fill_mask_table,
    has_history,
    history_for,
    history_stamp,
    load_history,
    piece_answers,
    save_history,
)
from pages.common import chosen_model, concept, setup_page, show_error, show_figure

PAGE = setup_page(__file__)
st.title(PAGE.heading)


def sources() -> dict[str, str]:
    """label -> folder: the chosen model and the shipped one when they have a history, and every
    run that kept snapshots (newest first)."""
    out: dict[str, str] = {}
    for path, label in ((chosen_model(), "The chosen model"), (str(shipped_model_path()), "The shipped model")):
        if Path(path).is_dir() and has_history(path) and path not in out.values():
            out[f"{label} ({Path(path).name})"] = path
    root = runs_root()
    if root.is_dir():
        runs = sorted(
            (p for p in root.iterdir() if p.is_dir() and has_history(p)), key=lambda p: p.stat().st_mtime, reverse=True
        )
        for p in runs:
            out[f"Run {p.name}"] = str(p)
    return out


@st.cache_data(show_spinner=False, max_entries=8)
def cached_history(path: str, stamp: float):
    return load_history(path)


found = sources()
wanted = st.query_params.get("run")
if wanted and not any(Path(p).name == wanted for p in found.values()):
    st.warning(f"Run `{wanted}` kept no snapshots (or is not under {runs_root()}); pick another source below.")
if not found:
    st.info(
        "No model here has a learning history yet. Start a pretraining run on the **Train** page with "
        "*Keep snapshots* on, then come back: every snapshot becomes a step on the slider."
    )
    st.stop()

labels = list(found)
start = next((i for i, p in enumerate(found.values()) if wanted and Path(p).name == wanted), 0)
left, right = st.columns([3, 2], gap="large")
with left:
    label = st.selectbox("Whose training to watch", labels, index=start, key="wil_source")
with right:
    concept(
        "While a model pretrains, it keeps small copies of itself at steps 10, 20, 30, 50, 70, 100, 200 … "
        "Slide through them: in its first steps the answers are random word pieces; within a few dozen steps "
        "it answers the most common tokens (*,*, *.*, *the*) whatever the sentence, and stays there for a long "
        "time (the shipped model until about step 5,000 of its first stage); only then do the answers start to "
        "fit the context. Attention starts nearly uniform (every token gets about 1/n of it, marked "
        "on the colour bar, and the same colours mean the same weight at every step); heads "
        "that look at the previous or next token, at [SEP] or at [CLS] form as the loss falls "
        "(Clark et al. 2019 call them positional and 'no-op' heads)."
    )
folder = found[label]

history = None
try:
    history = history_for(folder)
    if history is None:
        bar = st.progress(0.0, text="Asking every snapshot about the probe sentences…")
        built = build_history(folder, progress=lambda i, n: bar.progress(i / n, text=f"Snapshot {i} of {n}…"))
        save_history(built, folder)
        bar.empty()
    history = cached_history(folder, history_stamp(folder))
except BertLabError as exc:
    show_error(exc)
    st.stop()
if not history.snapshots:
    st.info("This history holds no snapshots yet.")
    st.stop()


def step_label(step: int) -> str:
    s = history.at(step)
    tokens = f"{s.tokens / 1e6:.1f}M" if s.tokens >= 1e6 else f"{s.tokens / 1e3:.0f}k"
    stage = f" · stage {s.stage}" if history.snapshots[-1].stage > 1 else ""
    return f"step {step:,} · {tokens} tokens{stage}"


steps = history.steps
step = st.select_slider("Training step", options=steps, value=steps[-1], format_func=step_label, key="wil_step")
snap = history.at(step)

m = snap.metrics
c1, c2, c3, c4 = st.columns(4)
c1.metric("Held-out masked-LM accuracy", f"{m['mlm_acc']:.1%}" if "mlm_acc" in m else "–")
c2.metric("Masked-LM perplexity", f"{m['mlm_perplexity']:,.0f}" if "mlm_perplexity" in m else "–")
c3.metric("NSP accuracy", f"{m['nsp_acc']:.1%}" if "nsp_acc" in m else "–")
c4.metric("Input tokens seen", f"{snap.tokens:,}")

if history.curve:
    show_figure(
        learning_curve_figure(history.curve, marker_step=step, title="How it learned (held-out documents)"),
        "learning-curve",
        key="wil_curve",
    )

st.subheader("What it fills in")
st.table(pd.DataFrame(fill_mask_table(history, step, percent)).set_index("sentence"))  # wraps long answers
notes = []
if pieces := piece_answers(history, step):
    notes.append(
        "*word + ##piece*: the model proposed a piece that would continue the word before the [MASK] "
        f"(*{pieces[0]}*), shown beside that word rather than glued to it."
    )
if history.coarse_probabilities:  # format 1: cannot be probed again without the snapshots
    notes.append(
        "This history stored each probability to four decimal places, so a last digit here can be "
        "one off the Fill mask page's."
    )
if notes:
    st.caption(" ".join(notes))
if snap.nsp:
    pairs = history.probes.pairs
    st.markdown("**Does B follow A?** P(IsNext) at this step")
    st.table(
        pd.DataFrame(
            [
                {"A": a, "B": b, "really follows": "yes" if real else "no", "P(IsNext)": percent(p)}
                for (a, b, real), p in zip(pairs, snap.nsp, strict=False)
            ]
        ).set_index("A")
    )

st.subheader("Where it looks")
sentences = list(history.probes.attention)
a1, a2, a3 = st.columns([3, 1, 1])
which = a1.selectbox("Sentence", range(len(sentences)), format_func=lambda i: sentences[i], key="wil_sentence")
tokens, maps = snap.attention_maps(which)
L, A = maps.shape[:2]
layer = a2.number_input("Layer", 1, L, 1, key="wil_layer")
head = a3.number_input("Head", 1, A, 1, key="wil_head")
g1, g2 = st.columns([2, 3])
with g1:  # one colour scale (0 to 1) at every step, 1/n marked: a near-uniform head looks pale, as it is
    show_figure(
        attention_heatmap(
            tokens,
            maps[layer - 1, head - 1],
            title=f"Head {head_label(layer - 1, head - 1)}",
            zmax=1.0,
            mark_uniform=True,
        ),
        "attention-head",
        key="wil_head_fig",
    )
with g2:
    st.caption(
        "Each small map below is one head drawn like the big one: a row per token attending, a column per "
        "token attended to. Same colours as the big map; 1/n is what a head that has learned nothing gives."
    )
# every head, full width: tiles big enough to name their tokens
show_figure(
    head_grid(maps, tokens, title="Every head at this step", zmax=1.0, mark_uniform=True),
    "attention-heads",
    key="wil_grid",
)

st.subheader("What kind of heads it has")
stats = HeadStats(
    {name: snap.stats_array(name) for name in HEAD_STATS if name in snap.head_stats}, num_inputs=len(sentences)
)
show_figure(
    stats_overview(stats, title="Clark et al.'s statistics per head (averaged over the probe sentences)"),
    "head-statistics",
    key="wil_stats",
)
first = history.snapshots[0]
if first.step != snap.step and "prev" in first.head_stats:
    grew = {
        name: float(np.nanmax(snap.stats_array(name)) - np.nanmax(first.stats_array(name)))
        for name in ("prev", "next", "sep", "cls")
    }
    name, delta = max(grew.items(), key=lambda kv: kv[1])
    if abs(delta) >= 0.005:  # a change that rounds to +0% says nothing
        st.caption(
            f"Since step {first.step:,}, the strongest '{HEAD_STATS[name][0]}' head went from "
            f"{np.nanmax(first.stats_array(name)):.0%} to {np.nanmax(snap.stats_array(name)):.0%} "
            f"of its attention ({delta:+.0%}), the largest change among the positional and [SEP]/[CLS] statistics."
        )
