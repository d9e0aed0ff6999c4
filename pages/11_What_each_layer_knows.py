"""What each layer knows: one word in several sentences layer by layer (Ethayarajh 2019), a word's
nearest words in a corpus at every layer (as exBERT searches one), the feed-forward neurons as a
few factors (as ecco's), and linear probes per layer (Tenney et al. 2019) read from results saved
beside the model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bertlab.data.corpus import CORPUS_CREDIT, read_gensim_wikipedia
from bertlab.errors import BertLabError, InputError
from bertlab.explore import input_notes
from bertlab.inference import MAX_TEXT_CHARS
from bertlab.interpret.answer_views import shaded_tokens_html
from bertlab.interpret.args import probe_args
from bertlab.interpret.contextual import BANK_EXAMPLE, MAX_SENTENCES, contextual_word, parse_sense_lines
from bertlab.interpret.layer_views import (
    factor_heading,
    factors_figure,
    index_caption,
    layer0_note,
    nearest_notes,
    neighbour_lines,
    neighbours_figure,
    neighbours_reading,
    pca_caption,
    pca_figure,
    pieces_note,
    probe_figure,
    probe_summary,
    sense_note,
    similarity_figure,
)
from bertlab.interpret.neighbours import (
    MAX_INDEX_MB,
    MAX_K,
    build_index,
    corpus_sample,
    nearest_words,
    sentence_words,
    sentences_that_fit,
    unique_sentences,
)
from bertlab.interpret.neurons import MAX_FACTORS, ffn_activations, neuron_factors
from bertlab.interpret.probing import ProbeResult
from bertlab.interpret.saved import read_results, result_path
from bertlab.jobs.spec import JobSpec, default_task_data
from bertlab.storage.model_card import pretrained_length
from bertlab.storage.modelfolder import folder_stamp
from pages.common import (
    code_version,
    concept,
    forget_on_change,
    require_model,
    setup_page,
    show_error,
    show_figure,
    show_notes,
    shown_half,
)
from pages.common.jobs import jobs_allowed, run_as_job_button

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = shown_half(require_model(), "discriminator")  # an ELECTRA pair: every view reads the encoder


def _explained(text: str):
    """The controls' column, with `text` explaining the tab beside it."""
    controls, explain = st.columns([3, 2], gap="large")
    with explain:
        concept(text)
    return controls


# Only the open tab is computed (on_change="rerun" + .open): reading the corpus for nearest words
# (~15 s on a first visit) waits until that tab is opened. A link may open one (?tab=probing: the Jobs
# page's link to a finished probe's result), once.
TABS = {
    "contextual": "Contextual vs static",
    "nearest": "Nearest in a corpus",
    "neurons": "Feed-forward neurons",
    "probing": "Probing classifiers",
}
if (wanted := st.query_params.get("tab")) in TABS:
    st.session_state["layers_tab"] = TABS[wanted]
    del st.query_params["tab"]
contextual_tab, nearest_tab, neurons_tab, probe_tab = st.tabs(list(TABS.values()), key="layers_tab", on_change="rerun")

with contextual_tab:
    if contextual_tab.open:  # only the open tab is computed
        controls = _explained(
            "A static embedding gives **bank** one vector; BERT gives it a new vector in every sentence. "
            "**Self-similarity** (Ethayarajh 2019) is the mean cosine between the word's vectors in different "
            "sentences: 1 means the layer ignores the context. Every layer's vectors also share a common "
            "direction, so even random words look alike; that is the **anisotropy**, measured on random word "
            "pairs of a sample, and the **adjusted** value subtracts it. Give each sentence a sense "
            "(`river: …`) to compare the same sense with the other one; a sentence without one stays out of "
            "that comparison."
        )
        with controls:
            word = st.text_input("Word", "bank", key="ctx_word", max_chars=MAX_TEXT_CHARS)
            lines = st.text_area(
                f"Sentences that use it, one a line (at most {MAX_SENTENCES}); 'sense: sentence' to name its sense",
                "\n".join(BANK_EXAMPLE),
                height=180,
                key="ctx_lines",
                help=f"Each sentence is one forward pass and every pair is compared, so at most {MAX_SENTENCES} at once.",
                max_chars=MAX_TEXT_CHARS,
            )
        sentences, senses = parse_sense_lines(lines.splitlines())
        try:
            result = contextual_word(lm, word, sentences, senses)
        except BertLabError as exc:
            show_error(exc)
        else:
            L = result.projection.shape[0] - 1
            shown = sorted({0, max(1, L // 4), L // 2, (3 * L) // 4, L}) if L > 4 else list(range(L + 1))
            st.subheader(f"“{result.word}” in {len(sentences)} sentences, layer by layer")
            if pieces := pieces_note(result):
                st.caption(pieces)
            show_figure(pca_figure(result, shown), "contextual-pca", key="ctx_pca")
            st.caption(pca_caption(result, shown))
            show_figure(
                similarity_figure(result, "How contextual each layer is"), "contextual-similarity", key="ctx_sim"
            )
            if unlabelled := sense_note(result):
                st.info(unlabelled, icon=":material/info:")
            st.markdown(layer0_note(result))
            st.dataframe(pd.DataFrame(result.rows()).round(3), hide_index=True, width="stretch")


def _run_as_job(model: str) -> None:
    """The probe as a job on the UPOS data, from this page (the admin token on a shared app)."""
    if not jobs_allowed():
        return
    data = Path(default_task_data("upos"))
    train = st.text_input("Training sentences (CoNLL-U)", str(data / "en_ewt-ud-train.conllu"), key="probe_job_train")
    evaluate = st.text_input("Evaluation sentences (CoNLL-U)", str(data / "en_ewt-ud-dev.conllu"), key="probe_job_eval")
    run_as_job_button(
        "probe_job_run", lambda: JobSpec("interpret", probe_args(model, "upos", train, evaluate)), (train, evaluate)
    )


@st.cache_data(show_spinner="Reading the Wikipedia sample…", max_entries=1)
def _wikipedia_documents() -> list[list[str]]:
    return read_gensim_wikipedia()


# one index per model and corpus, shared by every user of the app (a class reads the same sample)
@st.cache_resource(max_entries=3, show_spinner=False)
def _index(_lm, path: str, stamp: float, code: int, sentences: tuple[str, ...]):  # stamp: folder_stamp
    bar = st.progress(0.0, text=f"Reading {len(sentences):,} sentences with the model…")
    try:
        return build_index(
            _lm,
            sentences,
            progress=lambda done, total: bar.progress(done / total, text=f"Read {done:,} of {total:,} sentences…"),
        )
    finally:  # an error leaves no bar behind
        bar.empty()


NEAREST_EXAMPLE = "She was born in Paris in 1950."
WIKI, MINE = "Wikipedia sample (part of the shipped model's pretraining text)", "Sentences I type"

with nearest_tab:
    if nearest_tab.open:  # only the open tab is computed
        controls = _explained(
            "Pick a word of a sentence; the model reads a corpus, and at every layer the page finds the corpus "
            "words whose vectors are **nearest** to that word's (cosine), as exBERT does. At the embeddings the "
            "nearest words are mostly the word itself; higher up, a contextual model brings in other words used "
            "the same way (*born* near *held*, *published*), and the same word used another way falls behind. "
            "The line below counts how many of the nearest are the word itself, layer by layer. Every layer's "
            "vectors share a common direction (anisotropy), so compare the ranks, not the raw similarities."
        )
        with controls:
            query = st.text_input("Sentence", NEAREST_EXAMPLE, key="nn_sentence", max_chars=MAX_TEXT_CHARS)
            try:
                words = sentence_words(lm, query) if query.strip() else []
            except BertLabError as exc:
                show_error(exc)
                words = []
            if not words:
                st.warning("Type a sentence, then pick one of its words.", icon=":material/edit_note:")
            else:
                labels = [f"{w} (word {i + 1})" for i, (w, _, _) in enumerate(words)]
                default = next((i for i, (w, _, _) in enumerate(words) if w == "born"), 0)
                forget_on_change("nn_word", query)  # a new sentence: a word of its own, not the old one's number
                picked = st.selectbox(
                    "Word", range(len(words)), index=default, format_func=labels.__getitem__, key="nn_word"
                )
                source = st.radio("Corpus", [WIKI, MINE], horizontal=True, key="nn_source")
                fits = sentences_that_fit(lm.model.config.num_layers, lm.model.config.hidden_size)
                c1, c2 = st.columns(2)
                k = c1.slider("Nearest words shown", 1, MAX_K, 10, key="nn_k")
                if source == WIKI:
                    most = max(100, min(5000, fits))
                    n = c2.slider(
                        "Sentences of the sample",
                        100,
                        most,
                        min(1000, most),
                        step=100,
                        key="nn_n",
                        help=f"Read once per model and kept for everyone (at most {MAX_INDEX_MB} MB of vectors: "
                        f"about {fits:,} sentences for this model). 1,000 sentences take ~10 s on a 2-core CPU.",
                    )
                else:
                    typed = st.text_area(
                        "Corpus sentences, one a line",
                        "The river bank was steep and muddy.\nShe paid the money into the bank.\nHe was born in 1950.",
                        height=140,
                        key="nn_typed",
                        max_chars=MAX_TEXT_CHARS * 4,
                    )
        if words:
            show_notes(input_notes(lm.tokenizer, lm.max_length, query, pretrained=pretrained_length(lm.card)))
            try:
                if source == WIKI:
                    corpus = unique_sentences(corpus_sample(_wikipedia_documents(), n))
                else:
                    corpus = unique_sentences(typed.splitlines())
                if not corpus:
                    raise InputError("type some sentences for the corpus, one a line")
                index = _index(lm, lm.path, folder_stamp(lm.path) if lm.path else 0.0, code_version(), corpus)
                result = nearest_words(lm, index, query, picked, k=k)
            except BertLabError as exc:
                show_error(exc)
            else:
                st.caption(index_caption(index) + (f" {CORPUS_CREDIT}" if source == WIKI else ""))
                for note in nearest_notes(result, len(words[picked][1]), k):
                    st.caption(note)
                show_figure(
                    neighbours_figure(result, f"How many of the {result.k} nearest words are “{result.word}” itself"),
                    "nearest-same-word",
                    key="nn_fig",
                )
                L = len(result.layers) - 1
                layer = st.select_slider(
                    "Layer",
                    list(range(L + 1)),
                    value=L,
                    key="nn_layer",
                    format_func=lambda x: "0 (embeddings)" if x == 0 else str(x),
                )
                st.markdown(neighbours_reading(result, layer), unsafe_allow_html=True)
                st.markdown(
                    "\n".join(f"{i + 1}. {line}" for i, line in enumerate(neighbour_lines(result, layer))),
                    unsafe_allow_html=True,  # the word in <b>: '**,**' beside a letter is not bold in markdown
                )

NEURONS_EXAMPLE = (
    "The cat sat on the mat because it was warm. Then it fell asleep in the sun, and the dog barked at 3 o'clock."
)

with neurons_tab:
    if neurons_tab.open:  # only the open tab is computed
        controls = _explained(
            "Each layer's feed-forward block has its own neurons ("
            f"{lm.model.config.intermediate_size:,} a layer here), and each fires more or less at every token. "
            "Too many to read one by one, so the page splits their activations into a few **factors** "
            "(non-negative matrix factorisation, as ecco does): groups of neurons that fire together, and the "
            "tokens they fire on. A factor that lights up every noun, or every punctuation mark, or the words "
            "of a time expression, shows what the neurons keep apart. The **fit** says how much of the "
            "activations the factors reproduce; more factors fit more and split the groups finer."
        )
        with controls:
            ffn_text = st.text_area("Text", NEURONS_EXAMPLE, height=90, key="ffn_text", max_chars=MAX_TEXT_CHARS)
            c1, c2 = st.columns(2)
            k = c1.slider("Factors", 2, MAX_FACTORS, 6, key="ffn_k")
            n_layers = lm.model.config.num_layers
            layers = c2.multiselect(
                "Layers", list(range(1, n_layers + 1)), list(range(1, n_layers + 1)), key="ffn_layers"
            )
            special = st.toggle(
                f"Keep {lm.tokenizer.cls_token} and {lm.tokenizer.sep_token}",
                False,
                key="ffn_special",
                help="They fire far more than the words and can take whole factors to themselves.",
            )
        if not ffn_text.strip():
            st.warning("Type a text to see its neurons.", icon=":material/edit_note:")
        elif not layers:
            st.warning("Pick at least one layer.", icon=":material/edit_note:")
        else:
            # a text past the model's length is cut; past its pretraining length, factors follow untrained positions
            show_notes(input_notes(lm.tokenizer, lm.max_length, ffn_text, pretrained=pretrained_length(lm.card)))
            try:
                factors = neuron_factors(ffn_activations(lm, ffn_text), k=k, layers=layers, special=special)
            except BertLabError as exc:
                show_error(exc)
            else:
                show_figure(
                    factors_figure(
                        factors,
                        f"{k} factors of the feed-forward neurons of layer{'s' if len(factors.layers) > 1 else ''} "
                        + ", ".join(map(str, factors.layers)),
                    ),
                    "neuron-factors",
                    key="ffn_fig",
                )
                st.caption(
                    f"The {k} factors reproduce {factors.fit:.0%} of the activations of "
                    f"{len(factors.layers) * lm.model.config.intermediate_size:,} neurons at {len(factors.tokens)} tokens "
                    "(negative GELU outputs, at most −0.17, counted as 0). Each row is scaled to its own peak; beside "
                    "each factor, “L1 #768 16%” is neuron 768 of layer 1 carrying 16% of the factor's weight."
                )
                for f in range(k):
                    st.markdown(
                        factor_heading(factors, f)
                        + "\n\n"
                        + shaded_tokens_html(factors.pieces, factors.strength[f].tolist()),
                        unsafe_allow_html=True,
                    )

with probe_tab:
    if probe_tab.open:  # only the open tab is computed
        controls = _explained(
            "A **probe** is a linear classifier trained on one layer's frozen vectors to predict a label of each "
            "word: its part of speech (UPOS, from Universal Dependencies English-EWT) or its named-entity tag "
            "(WNUT-17). If a linear probe reads it well, the layer holds it in plain sight. Accuracy alone can "
            "flatter: most WNUT-17 words are tagged O, so always answering O scores about 92%; the chart shows what "
            "each layer adds over that, and the macro-F1, where every tag counts alike. Tenney et al. (2019) "
            "summarise where a skill is learned by its **centre of gravity**: the layer at which, on average, "
            "the accuracy is gained; given here only where the gain is larger than the noise."
        )
        saved = [ProbeResult.from_dict(d) for d in read_results(lm.path, "probe").values()] if lm.path else []
        with controls:
            if not saved:
                st.info(
                    "No probing results are saved beside this model yet. Probing trains a classifier per layer on "
                    "thousands of words, so it runs as a command (a job), not while you wait; the page shows it "
                    "when it is done:",
                    icon=":material/info:",
                )
                st.code(
                    f"bertlab jobs submit interpret probe --model {lm.path or 'MODEL'} --task upos \\\n"
                    "    --train DATA/ud_en_ewt/en_ewt-ud-train.conllu --eval DATA/ud_en_ewt/en_ewt-ud-dev.conllu",
                    language="bash",
                )
                if lm.path:
                    _run_as_job(str(lm.path))
            for r in saved:
                st.markdown(probe_summary(r))
        if saved:
            show_figure(probe_figure(saved, "What a linear probe reads from each layer"), "probing", key="probe_fig")
            st.caption(
                "Left: each layer's probe accuracy minus that of always answering the commonest tag, in points; 0 means "
                "the probe is no better than that baseline. The bars are ± two standard errors of the accuracy on the "
                "evaluation words, a rough noise floor. Right: macro-F1, the mean of each tag's F1, which stays "
                "low for a probe that mostly answers the commonest tag. A diamond marks a centre of gravity."
            )
            for r in saved:
                st.caption(f"{r.task}: saved in `{result_path(lm.path, 'probe', r.task)}`")
                st.dataframe(pd.DataFrame(r.rows()), hide_index=True, width="stretch")
