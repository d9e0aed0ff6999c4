"""What each layer knows: one word in several sentences layer by layer (Ethayarajh 2019), and
linear probes per layer (Tenney et al. 2019) read from results saved beside the model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bertlab.errors import BertLabError
from bertlab.inference import MAX_TEXT_CHARS
from bertlab.interpret.args import probe_args
from bertlab.interpret.contextual import BANK_EXAMPLE, MAX_SENTENCES, contextual_word, parse_sense_lines
from bertlab.interpret.probing import ProbeResult
from bertlab.interpret.saved import read_results, result_path
from bertlab.interpret.views import (
    layer0_note,
    pca_caption,
    pca_figure,
    pieces_note,
    probe_figure,
    probe_summary,
    sense_note,
    similarity_figure,
)
from bertlab.jobs.spec import JobSpec, default_task_data
from pages.common import concept, require_model, setup_page, show_error, show_figure
from pages.common.jobs import jobs_allowed, run_as_job_button

PAGE = setup_page(__file__)
st.title(PAGE.heading)
lm = require_model()

contextual_tab, probe_tab = st.tabs(["Contextual vs static", "Probing classifiers"])

with contextual_tab:
    controls, explain = st.columns([3, 2], gap="large")
    with explain:
        concept(
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
        show_figure(similarity_figure(result, "How contextual each layer is"), "contextual-similarity", key="ctx_sim")
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


with probe_tab:
    controls, explain = st.columns([3, 2], gap="large")
    with explain:
        concept(
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
