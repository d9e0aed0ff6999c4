"""The four interpretation pages under AppTest on a tiny random model: each runs clean, draws its
figures, shows results saved beside the model, and answers bad input with a plain message."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from bertlab.app_pages import page_titled  # noqa: E402
from bertlab.interpret.probing import ProbeResult  # noqa: E402
from bertlab.interpret.saved import write_result  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 90
WHY, LAYERS, HEADS, COMPARE = (
    page_titled(t).file for t in ("Why it answered", "What each layer knows", "Which heads matter", "Compare models")
)


@pytest.fixture
def model(monkeypatch, tiny_checkpoint, tmp_path) -> Path:
    """A copy of the tiny checkpoint (results get saved beside it) as the app's model."""
    path = tmp_path / "tiny"
    shutil.copytree(tiny_checkpoint, path)
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_MODEL", str(path))
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    return path


def open_page(page: str) -> AppTest:
    """Run the home page, then switch to `page` the way the sidebar links do."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    at.switch_page(page).run()
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def text(at: AppTest) -> str:
    return " ".join(str(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.warning, *at.subheader])


def test_why_it_answered(model):
    at = open_page(WHY)
    assert_clean(at)
    assert any("Why P(" in s.value for s in at.subheader)
    assert "The scores add up" in text(at) or "did not converge" in text(at)
    assert len(at.get("plotly_chart")) == 4  # bars, raw, rollout, flow
    at.text_input(key="why_text").set_value("no mask at all").run()
    assert_clean(at)
    assert "[MASK]" in " ".join(w.value for w in at.warning)
    at.radio(key="why_kind").set_value("Next sentence: P(IsNext)").run()
    assert_clean(at)
    assert any("P(IsNext)" in s.value for s in at.subheader)
    at.radio(key="why_kind").set_value("A fine-tuned model's answer").run()
    assert_clean(at)
    assert "No fine-tuned model" in text(at)


def test_why_it_answered_browses_a_dev_sets_answers_and_explains_one(model, sst2_run, tmp_path):
    """A fine-tuned classifier's answers to its dev file (as LIT's data table): accuracy against the
    commonest label, the confusion matrix, its mistakes surest first, filters; the example picked is the
    one explained. A missing file is a plain message."""
    from bertlab.finetune.answers import answer_file
    from bertlab.finetune.predict import load_finetuned

    shutil.copytree(sst2_run, tmp_path / "runs" / sst2_run.name)
    at = open_page(WHY)
    at.radio(key="why_kind").set_value("A fine-tuned model's answer").run()
    at.radio(key="why_ft_source").set_value("Pick one from a labelled file").run()
    assert_clean(at)
    dev = at.text_input(key="why_ft_file").value
    assert dev == str(sst2_run.parent / "dev.tsv")  # the file it was scored on in training
    want = answer_file(load_finetuned(tmp_path / "runs" / sst2_run.name / "model", device="cpu"), dev)
    assert "Its answers to dev.tsv (8 examples)" in [s.value for s in at.subheader]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Accuracy"] == f"{want.accuracy:.1%}" and metrics["Always answering 0"] == "50.0%"
    assert metrics["Mistakes"] == str(want.mistakes)
    assert "why_confusion" in [c.key for c in at.get("plotly_chart")]
    assert at.selectbox(key="why_gold").format_func("1") == "1 (positive)"  # what SST-2's 1 means
    at.radio(key="why_pick").set_value("all").run()
    at.selectbox(key="why_gold").set_value("1").run()
    at.text_input(key="why_search").set_value("bird").run()
    assert_clean(at)
    picked = at.selectbox(key="why_example")
    assert len(picked.options) == 2 and all("bird" in o for o in picked.options)
    assert any(s.value.startswith("Why ") for s in at.subheader)  # the picked example is explained
    assert "bird" in " ".join(str(h.value) for h in at.markdown if "<span" in str(h.value))
    assert "2 examples match." in text(at)
    # gold 1 and an answer: one cell of the confusion matrix (both 'bird' sentences get the same answer)
    at.selectbox(key="why_answered").set_value(want.answers[2].predicted).run()
    assert "2 examples match." in text(at)
    at.selectbox(key="why_answered").set_value("1" if want.answers[2].predicted == "0" else "0").run()
    assert "No example matches." in text(at)
    at.selectbox(key="why_answered").set_value("").run()
    assert "These answers (CSV)" in [b.label for b in at.get("download_button")]
    at.text_input(key="why_search").set_value("zebra").run()
    assert "No example matches." in text(at)
    at.text_input(key="why_ft_file").set_value(str(tmp_path / "missing.tsv")).run()
    assert not at.exception and "no such file" in " ".join(w.value for w in at.warning)
    at.text_input(key="why_ft_file").set_value(str(tmp_path)).run()
    assert "is a folder: give a file in it (its dev set is dev.tsv)" in " ".join(w.value for w in at.warning)
    at.text_input(key="why_ft_file").set_value("  ").run()
    assert not at.exception and "Type the path of a labelled file" in " ".join(w.value for w in at.warning)


def open_tab(at: AppTest, tab: str) -> AppTest:
    """What each layer knows with `tab` open (only the open tab is computed)."""
    at.session_state["layers_tab"] = tab
    return at.run()


def test_what_each_layer_knows(model):
    at = open_page(LAYERS)
    assert_clean(at)
    # only the open tab is computed: the first visit does not read the corpus for nearest words
    assert [c.key for c in at.get("plotly_chart")] == ["ctx_pca", "ctx_sim"]
    at.text_input(key="ctx_word").set_value("zebra").run()
    assert "does not contain" in " ".join(w.value for w in at.warning)
    open_tab(at, "Probing classifiers")
    assert_clean(at)
    assert not at.get("plotly_chart")  # no probe results yet: the command that makes them
    assert "bertlab jobs submit interpret probe" in " ".join(c.value for c in at.code)
    result = ProbeResult("upos", "tiny", ["A"], [0, 1, 2], [0.5, 0.8, 0.7], [0.4, 0.7, 0.6], 0.3, 1.0, 100, 50, 2.0)
    write_result(model, "probe", "upos", result.to_dict())
    at = open_tab(open_page(LAYERS), "Probing classifiers")
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1
    assert "Centre of gravity 1.00" in text(at)


def test_a_link_opens_the_probing_tab(model):
    """The Jobs page links a finished probe to ?tab=probing: the page opens there, and only once."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.query_params["tab"] = "probing"
    at.switch_page(LAYERS).run()
    assert_clean(at)
    assert "bertlab jobs submit interpret probe" in " ".join(c.value for c in at.code)  # the probing tab's
    assert not at.get("plotly_chart") and "tab" not in at.query_params


def test_probing_says_when_a_probe_is_no_better_than_the_commonest_tag(model):
    # the committed NER probe: 92.08% at best, always answering O 91.81%, layer 1 +0.13 points over layer 0
    (model / "interpret").mkdir(exist_ok=True)
    for task in ("ner", "upos"):
        shutil.copy(REPO / "results" / "interpret" / f"probe-{task}.json", model / "interpret" / f"probe-{task}.json")
    at = open_tab(open_page(LAYERS), "Probing classifiers")
    assert_clean(at)
    said = text(at)
    assert "**ner: no better than always answering the commonest tag (O)**" in said
    assert "ner: best at layer" not in said and said.count("Centre of gravity") == 1  # upos only
    assert "Centre of gravity 1.00" in said and "macro-F1 is only 0.10–0.12" in said


def test_the_contextual_tab_leaves_unlabelled_sentences_out_and_explains_layer_0(model):
    at = open_page(LAYERS)
    assert_clean(at)
    said = text(at)
    assert "Layer 0 is not context" in said  # the bank example: same position, same layer-0 vector
    at.text_input(key="ctx_word").set_value("the").run()
    at.text_area(key="ctx_lines").set_value("x: the cat sat\nx: the dog sat\nthe bird sang\nthe tree").run()
    assert_clean(at)
    assert "Sentences 3 and 4 have no sense" in " ".join(i.value for i in at.info)


def test_nearest_words_in_a_corpus(model):
    """The tab opens on the Wikipedia sample (the default corpus) and a typed corpus works as well: the
    figure, the reading at the layer picked, one line a neighbour; a blank sentence is a plain message."""
    at = open_tab(open_page(LAYERS), "Nearest in a corpus")
    assert_clean(at)
    assert "nn_fig" in [c.key for c in at.get("plotly_chart")]
    assert "1,000 sentences" in text(at) and "Wikipedia" in text(at)
    assert at.selectbox(key="nn_word").format_func(at.selectbox(key="nn_word").value) == "born (word 3)"
    at.radio(key="nn_source").set_value("Sentences I type").run()
    at.text_area(key="nn_typed").set_value("the cat sat here .\na cat ran off .\nthe dog sat down .").run()
    at.text_input(key="nn_sentence").set_value("the cat slept .").run()
    at.selectbox(key="nn_word").set_value(1).run()
    at.slider(key="nn_k").set_value(4).run()
    at.select_slider(key="nn_layer").set_value(0).run()
    assert_clean(at)
    said = text(at)
    assert "3 sentences, 15 words, under 0.1 MB of vectors" in said
    assert "At the embeddings (layer 0), **" in said and "of the 4** nearest words are <i>cat</i> itself" in said
    (lines,) = [m.value for m in at.markdown if m.value.startswith("1. `")]
    assert len(lines.splitlines()) == 4 and "<b>cat</b>" in lines
    # a new sentence: the word picked is one of its own (the picker kept 'word 2' of the old one)
    at.text_input(key="nn_sentence").set_value("dogs ran off today .").run()
    assert at.selectbox(key="nn_word").value == 0
    # a corpus of blank lines: a plain message, no progress bar left behind
    at.text_area(key="nn_typed").set_value("\n  \n").run()
    assert not at.exception and "Type some sentences for the corpus, one a line" in " ".join(
        w.value for w in at.warning
    )
    assert not at.get("progress")
    at.text_input(key="nn_sentence").set_value("   ").run()
    assert not at.exception and "Type a sentence, then pick one of its words." in text(at)


def test_feed_forward_neurons_as_factors(model):
    """The neurons tab: the factors figure, one shaded row a factor named by its strongest tokens, the
    fit; fewer layers and more factors follow the controls; no layer or no text is a plain message."""
    at = open_tab(open_page(LAYERS), "Feed-forward neurons")
    assert_clean(at)
    assert "ffn_fig" in [c.key for c in at.get("plotly_chart")]
    rows = [m.value for m in at.markdown if m.value.startswith("**factor ")]
    assert len(rows) == 6 and all("<span" in r and "neurons L" in r for r in rows)
    assert "The 6 factors reproduce " in text(at) and "[CLS]" not in " ".join(rows)
    width = json.loads((model / "config.json").read_text())["intermediate_size"]  # not always 4 x hidden
    assert f"activations of {2 * width:,} neurons" in text(at)
    at.multiselect(key="ffn_layers").set_value([2]).run()
    at.slider(key="ffn_k").set_value(3).run()
    at.toggle(key="ffn_special").set_value(True).run()
    assert_clean(at)
    rows = [m.value for m in at.markdown if m.value.startswith("**factor ")]
    assert len(rows) == 3 and all("neurons L2 #" in r for r in rows) and "[CLS]" in " ".join(rows)
    at.multiselect(key="ffn_layers").set_value([]).run()
    assert "Pick at least one layer." in text(at)
    at.text_area(key="ffn_text").set_value("  ").run()
    assert not at.exception and "Type a text to see its neurons." in text(at)


def test_which_heads_matter(model):
    at = open_page(HEADS)
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2  # importance and pruning on the built-in sentences
    assert "least important first" in text(at)
    at.radio(key="heads_source").set_value("A fine-tuned classifier (saved results)").run()
    assert_clean(at)
    # no fine-tuned run: the head study committed with the repository (SST-2, 872 dev examples), labelled so
    said = text(at)
    assert "No fine-tuned model was found among your runs, so here is the head study committed" in said
    assert "Committed with the repository** (`results/interpret/heads-sst2.json`)" in said
    assert "On 872 examples (dev.tsv); the whole model scores 77.2%" in said
    assert "bertlab finetune --task sst2" in " ".join(c.value for c in at.code)
    assert len(at.get("plotly_chart")) == 2


def test_compare_models(model):
    at = open_page(COMPARE)
    assert_clean(at)
    # model B is checkpoints/bertlab-mini where it is built here, else the tiny model itself
    said = text(at) + " ".join(s.value for s in at.success)
    assert "Both models answer" in said or "Model A answers" in said
    assert [s.value for s in at.subheader] == ["Model A", "Model B"]
    assert len(at.get("plotly_chart")) == 2
    # an untrained model's small probabilities keep their digits (every answer read "0.0%")
    shown = [p for df in at.dataframe for p in df.value["probability"]]
    assert shown and "0.0%" not in shown and all(p.endswith("%") for p in shown)
    at.text_input(key="cmp_text").set_value("nothing to answer").run()
    assert_clean(at)
    assert "[MASK]" in " ".join(w.value for w in at.warning)


def _tuned_model(model: Path, runs: Path, task: str) -> Path:
    """A run folder whose model says it was fine-tuned on `task` (the page reads only its config here)."""
    import json

    tuned = runs / f"finetune-{task}" / "model"
    shutil.copytree(model, tuned)
    config = json.loads((tuned / "config.json").read_text())
    config["bertlab"] = {**config.get("bertlab", {}), "finetune": {"task": task, "shape": "single"}}
    (tuned / "config.json").write_text(json.dumps(config))
    return tuned


def test_which_heads_matter_runs_a_head_study_as_a_job(model, tmp_path, monkeypatch):
    from bertlab.interpret.args import heads_args
    from bertlab.jobs.registry import JobRegistry

    runs = tmp_path / "runs"
    tuned = _tuned_model(model, runs, "sst2")
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\nthe cat sat\t1\n", encoding="utf-8")
    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])  # queued only: no process starts here
    at = open_page(HEADS)
    at.radio(key="heads_source").set_value("A fine-tuned classifier (saved results)").run()
    assert_clean(at)
    assert at.text_input(key="heads_job_data").value.endswith("SST-2/dev.tsv")
    at.text_input(key="heads_job_data").set_value(str(dev)).run()
    # the terminal line reads the file in the form (it printed a placeholder DATA/glue/SST-2/dev.tsv)
    (line,) = [c.value for c in at.code if str(tuned) in c.value]
    assert shlex.split(line)[3:] == [*heads_args(str(tuned), "sst2", data=str(dev)), "--max-examples", "1000"]
    at.button(key="heads_job_run").click().run()
    assert_clean(at)
    (job,) = JobRegistry(runs).list(start_queued=False)
    assert job.kind == "interpret" and job.state == "queued"
    assert job.job["args"] == list(heads_args(str(tuned), "sst2", data=str(dev)))
    assert "is queued" in " ".join(s.value for s in at.success)
    # the runs come first; the committed study stays one click away
    assert "The head study committed with the repository (sst2)" in [e.label for e in at.expander]


def test_which_heads_matter_says_why_a_tagger_has_no_head_study(model, tmp_path):
    _tuned_model(model, tmp_path / "runs", "upos")
    at = open_page(HEADS)
    at.radio(key="heads_source").set_value("A fine-tuned classifier (saved results)").run()
    assert_clean(at)
    assert "fine-tuned on upos" in " ".join(i.value for i in at.info)
    assert not [b for b in at.button if b.key == "heads_job_run"]


def test_the_pages_keep_working_when_the_package_is_imported_again(model, monkeypatch):
    """Streamlit unloads every watched module when a source file changes (a `git pull` with the app open) and
    the next run imports them again: a model cached before was an instance of the old classes, and the four
    pages refused it ("Expected a model from bertlab.inference.load_model ..., got LoadedModel")."""
    import sys

    def ours(name: str) -> bool:
        return name == "bertlab" or name.startswith(("bertlab.", "pages"))

    at = open_page(WHY)
    assert_clean(at)
    before = {n for n in sys.modules if ours(n)}
    for name in before:
        monkeypatch.delitem(sys.modules, name)  # as Streamlit does; put back after the test
    try:
        for page in (WHY, COMPARE):
            at.switch_page(page).run()
            assert_clean(at)
            assert "Expected a model" not in text(at)
    finally:  # and the modules first imported here go, or later tests would meet their classes
        for name in [n for n in sys.modules if ours(n) and n not in before]:
            del sys.modules[name]
