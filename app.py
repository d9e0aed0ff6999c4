"""BERT Lab, home page: what the app is, a picture of BERT, and the chosen model's card.

Run with `streamlit run app.py`. The pages in pages/ share the model picked in the sidebar.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from bertlab.app_pages import APP_PAGES, page_titled
from bertlab.config import preset
from bertlab.figures.answers import learning_curve_figure
from bertlab.figures.diagrams import architecture_figure
from bertlab.storage.catalog import model_card, read_readme, shipped_model_path
from bertlab.storage.model_card import model_card_markdown, unseen_rows
from bertlab.training.history import has_history
from pages.common import concept, load_chosen_model, setup_page, show_figure
from pages.common.admin import announce

PAGE = setup_page(__file__)
announce()  # a shared app: its admin token made and printed to the console once per server process


def _same_path(a, b) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


st.title(PAGE.heading)
st.markdown(
    "See how **BERT** (Devlin et al. 2018) works by taking it apart. Ask it to fill in a `[MASK]`, "
    "to tell whether one sentence follows another, look at what each attention head looks at, "
    "switch heads off, and watch how a pretraining example is made. Every page works offline on a CPU "
    "with a small model; pick the model in the sidebar."
)

lm, problem = load_chosen_model()
if problem:
    st.warning(problem, icon=":material/warning:")
if lm is not None and _same_path(lm.path, shipped_model_path()):
    acc = ((lm.card or {}).get("metrics") or {}).get("mlm_acc")
    score = f"; {acc:.0%} of held-out masked words right" if isinstance(acc, (int, float)) else ""
    st.info(
        "You are looking at **bertlab-mini**, a small BERT that this project pretrained with its own trainer "
        f"(L={lm.config.num_layers}, H={lm.config.hidden_size}, A={lm.config.num_heads}{score}). It is "
        "here to be taken apart and to show how BERT learns, not to answer well. For Google's trained "
        "BERTs, open **Google's BERTs** in the sidebar (bert-base-uncased, bert-large and 24 small BERTs, "
        "one click when online) or type a checkpoint folder under *Another folder or Hub id*.",
        icon=":material/info:",
    )

left, right = st.columns([5, 4], gap="large")
with left:
    st.subheader("What BERT is")
    concept(
        "BERT is a stack of **L** identical Transformer **encoder** layers of width **H**, each with "
        "**A** self-attention heads. Every token looks at every other token in both directions at once. "
        "It is pretrained on two tasks: the **masked LM** (15% of the tokens are chosen and predicted: 80% of "
        "them shown as `[MASK]`, 10% as a random word, 10% unchanged) and "
        "**next sentence prediction** (does sentence B follow sentence A?). The input is "
        "`[CLS] A [SEP] B [SEP]`; the vector of `[CLS]` (called *C*) feeds the NSP head, and each token's "
        "output *T*ᵢ feeds the masked-LM head."
    )
    st.subheader("Pages")
    for page in APP_PAGES[1:]:
        st.page_link(page.file, label=page.blurb, icon=page.icon)
with right:
    config = lm.config if lm is not None else preset("mini")
    caption = "the chosen model" if lm is not None else "a mini BERT (no model loaded)"
    st.subheader("The architecture")
    show_figure(architecture_figure(config), "bert-architecture", key="arch", export=False)
    st.caption(f"Drawn for {caption}. BERT-base is L=12, H=768, A=12; BERT-large L=24, H=1024, A=16.")

if lm is not None:
    card = model_card(
        lm.config,
        lm.card,
        path=lm.path,
        num_parameters=lm.num_parameters(),
        vocab_size=len(lm.tokenizer),
        lowercase=lm.tokenizer.lowercase,
        has_nsp=lm.has_nsp,
        sample_tokens=[
            lm.tokenizer.id_to_token[i] for i in range(2000, len(lm.tokenizer), max(1, len(lm.tokenizer) // 12))
        ][:10],
    )
    st.divider()
    st.subheader(f"Model card: {card.title}")
    if card.description:
        st.markdown(card.description)

    def table(rows: list[tuple[str, str]]) -> None:
        st.markdown("\n".join(f"- **{label}**: {value}" for label, value in rows))

    c1, c2 = st.columns(2, gap="medium")
    with c1, st.container(border=True):
        st.markdown("**Size**")
        table(card.sizes)
    with c2, st.container(border=True):
        st.markdown("**Vocabulary**")
        table(card.vocabulary)
        st.markdown("**Held-out metrics**")
        if card.metrics:
            table(card.metrics)
        else:
            st.caption("No metrics recorded in this checkpoint's model_card.json.")
    with st.container(border=True):
        st.markdown("**Training**")
        half = (len(card.training) + 1) // 2  # two columns of rows, so no card stands half empty
        t1, t2 = st.columns(2, gap="medium")
        with t1:
            table(card.training[:half])
        with t2:
            table(card.training[half:])
    curve = (lm.card or {}).get("learning_curve") or []
    if curve:
        st.markdown("**How it learned**: held-out accuracy as pretraining went on")
        show_figure(learning_curve_figure(curve), "learning-curve", key="home_curve")
        if has_history(lm.path):
            st.page_link(
                page_titled("Watch it learn").file,
                label="Watch it learn: its answers and attention heads at every step",
                icon=page_titled("Watch it learn").icon,
            )
    unseen = (lm.card or {}).get("unseen_english") or {}
    if unseen.get("domains"):
        st.markdown("**On English it has not seen** " + str(unseen.get("data", "")))
        st.dataframe(unseen_rows(unseen), hide_index=True)
    # the card rendered now (plain words, commands a user can run), else the checkpoint's own README
    readme = model_card_markdown(lm.card) if lm.card else read_readme(lm.path)
    if readme:
        with st.expander("The full model card (README.md in the checkpoint)"):
            st.markdown(readme)
