"""The "Make it smaller" page under AppTest on a tiny random model and a tiny SST-2 run: a method
runs into a folder and the two models are shown side by side; bad input is one message, never a
traceback; the gradient pages refuse the int8 copy and switch to its source with one click."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from bertlab.app_pages import page_titled  # noqa: E402
from bertlab.compress.quantize import quantize  # noqa: E402
from tests.conftest import SAMPLE_TEXT  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 120
SMALLER, WHY, HEADS = (page_titled(t).file for t in ("Make it smaller", "Why it answered", "Which heads matter"))


@pytest.fixture
def app(monkeypatch, tiny_checkpoint, tmp_path) -> Path:
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_MODEL", str(tiny_checkpoint))
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    held = tmp_path / "held.txt"
    held.write_text("\n".join(SAMPLE_TEXT) + "\n", encoding="utf-8")
    return tmp_path


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run(timeout=TIMEOUT)
    assert not at.exception, at.exception
    at.switch_page(page).run(timeout=TIMEOUT)
    return at


def clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run(timeout=TIMEOUT)
    return at


def test_int8_of_the_sidebar_model_side_by_side(app):
    at = open_page(SMALLER)
    clean(at)
    assert not at.error
    at.text_input(key="small_held_out").set_value(str(app / "held.txt")).run(timeout=TIMEOUT)
    out = at.text_input(key="small_out").value
    assert out == str(app / "runs" / "tiny-int8" / "model")  # listed with the runs, as its source is
    click(at, "Make it smaller")
    clean(at)
    assert not at.error, [e.value for e in at.error]
    assert (Path(out) / "compression.json").is_file()
    assert "Before and after: quantize (int8-dynamic)" in [s.value for s in at.subheader]
    metrics = {m.label: m for m in at.metric}
    assert "Weights on disk" in metrics and "Accuracy" in metrics
    tables = [d.value for d in at.dataframe]
    comparison = next(t for t in tables if "" in t.columns and "change" in t.columns)
    assert "held-out masked-LM accuracy" in list(comparison[""])
    answers = next(t for t in tables if "rank" in t.columns)
    assert len(answers) == 5 and answers["before"].str.contains("%").all()
    at.text_input(key="small_probe_pretraining").set_value("no mask here").run(timeout=TIMEOUT)
    clean(at)
    assert any("[MASK]" in e.value for e in at.error)
    # the same folder again: refused in one line, the copy left as it was
    click(at, "Make it smaller")
    clean(at)
    assert any("already holds a model" in e.value for e in at.error)


def test_bad_input_is_one_message(app):
    at = open_page(SMALLER)
    at.text_input(key="small_held_out").set_value(str(app / "missing.txt")).run(timeout=TIMEOUT)
    at.selectbox(key="small_method").set_value("heads").run(timeout=TIMEOUT)
    at.slider(key="small_share_heads").set_value(0.95).run(timeout=TIMEOUT)
    click(at, "Make it smaller")
    clean(at)
    errors = " ".join(e.value for e in at.error)
    assert "no such file" in errors or "each layer keeps at least one" in errors
    assert not any(Path(app / "runs").glob("*/model/config.json"))


def test_a_fine_tuned_classifier_pruned_with_its_dev_accuracy(app, sst2_run):
    shutil.copytree(sst2_run, app / "runs" / sst2_run.name)
    at = open_page(SMALLER)
    at.radio(key="small_source").set_value("A fine-tuned classifier (your runs)").run(timeout=TIMEOUT)
    clean(at)
    assert at.text_input(key="small_dev").value == str(sst2_run.parent / "dev.tsv")  # from its card
    at.selectbox(key="small_method").set_value("heads").run(timeout=TIMEOUT)
    assert at.text_input(key="small_out").value.endswith(f"{sst2_run.name}-heads50/model")
    click(at, "Make it smaller")
    clean(at)
    assert not at.error, [e.value for e in at.error]
    comparison = next(d.value for d in at.dataframe if "change" in d.value.columns)
    assert "dev accuracy" in list(comparison[""])
    answers = next(d.value for d in at.dataframe if "class" in d.value.columns)
    assert sorted(answers["class"]) == ["0", "1"]


def test_gradient_pages_refuse_int8_and_offer_the_source(app, tiny_checkpoint, monkeypatch):
    out = app / "runs" / "tiny-int8" / "model"
    quantize(tiny_checkpoint, out, repeats=1, threads=(1,))
    monkeypatch.setenv("BERTLAB_MODEL", str(out))
    at = open_page(WHY)
    clean(at)
    assert any("dynamic int8 copy" in w.value for w in at.warning)
    click(at, f"Use the original model ({tiny_checkpoint})")
    clean(at)
    assert not any("dynamic int8 copy" in w.value for w in at.warning)
    assert any(s.value.startswith("Why ") for s in at.subheader)
    at = open_page(HEADS)
    clean(at)
    assert any("dynamic int8 copy" in w.value for w in at.warning)
    assert any(b.label.startswith("Use the original model") for b in at.button)


def test_head_grid_and_head_mask_show_pruned_heads_as_removed(app, tiny_checkpoint, monkeypatch):
    from bertlab.compress.prune import prune
    from bertlab.figures.attention_grid import head_grid
    from bertlab.inference import load_model

    out = app / "runs" / "tiny-heads" / "model"
    prune(tiny_checkpoint, out, heads=0.25, order=[(0, 1), (1, 3)], repeats=1, threads=(1,))
    pruned = load_model(out)
    ins = pruned.inspect("the cat sat on the mat")
    fig = head_grid(ins.attentions, ins.tokens, off=[(0, 0)], removed=[(0, 1), (1, 3)])
    assert [a.text for a in fig.layout.annotations].count("removed") == 2
    assert (
        sum(s.type == "rect" for s in fig.layout.shapes) == 2 and sum(s.type == "line" for s in fig.layout.shapes) == 2
    )
    monkeypatch.setenv("BERTLAB_MODEL", str(out))
    at = open_page(page_titled("Attention").file)
    at.session_state["att_off_2x4"] = ["L1-H2", "L1-H1"]  # off on the unpruned model; L1-H2 is gone in this one
    at.run(timeout=TIMEOUT)
    clean(at)
    assert at.session_state["att_off_2x4"] == ["L1-H1"]


def test_importance_figure_marks_removed_heads():
    import numpy as np

    from bertlab.interpret.head_views import importance_figure

    fig = importance_figure(np.ones((2, 4)), removed=[(0, 1)])
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isfinite(np.delete(z.ravel(), 1)).all()
    assert fig.data[0].text[0][1] == "removed"


def test_committed_tables_and_claims_read_the_csvs(tmp_path):
    from bertlab.compress.study import RECORD_COLUMNS, CurvePoint, read_csv, read_curve, write_csv
    from bertlab.compress.views import claims_rows, results_table

    def row(scheme, before, after, vs_fp32):
        return dict(zip(RECORD_COLUMNS, ["quantize", scheme, 100, 1.0, vs_fp32, 0.7, 1, 2, None, None, 1, None,
                                         before, after, "mlm_accuracy"], strict=True))  # fmt: skip

    write_csv(tmp_path / "lm.csv", [row("int8-dynamic", 0.2168, 0.2169, 0.358)], RECORD_COLUMNS)
    write_csv(tmp_path / "cls.csv", [row("int8-dynamic", 0.7913, 0.7844, 0.564)], RECORD_COLUMNS)
    points = [CurvePoint("heads", s, 10, q, "dev_accuracy") for s, q in ((0.0, 0.79), (0.375, 0.77), (0.5, 0.76))]
    write_csv(tmp_path / "curve.csv", [p.__dict__ for p in points])
    lm, cls, curve = read_csv(tmp_path / "lm.csv"), read_csv(tmp_path / "cls.csv"), read_curve(tmp_path / "curve.csv")
    assert curve == points and read_csv(tmp_path / "missing.csv") == []
    assert results_table(lm)[0]["held-out masked-LM accuracy"] == "21.7%"
    distill = [
        {"model": "teacher", "parameters": 100.0, "sst2_dev_mean": 0.8, "cpu_ms_1t_p50": 4.0},
        {"model": "student", "parameters": 70.0, "sst2_dev_mean": 0.78, "cpu_ms_1t_p50": 2.5},
    ]
    ours = {r["paper"].split()[0]: r["ours"] for r in claims_rows(lm, cls, curve, curve, distill)}
    assert ours["DistilBERT"].startswith("2-layer student: 30% fewer parameters, SST-2 78.0% against 80.0% (97.5%")
    assert "1.60x faster" in ours["DistilBERT"]
    assert "SST-2 79.1% → 78.4%, 0.56x fp32" in ours["PyTorch's"]
    assert "2.8x smaller than fp32" in ours["Q8BERT"] and "79.0% → 77.0% with 37.5%" in ours["Michel"]


def test_why_it_answered_offers_an_int8_classifiers_source(app, sst2_run):
    source = app / "runs" / sst2_run.name
    shutil.copytree(sst2_run, source)
    quantize(source / "model", app / "runs" / "sst2-int8" / "model", repeats=1, threads=(1,))
    at = open_page(WHY)
    at.radio(key="why_kind").set_value("A fine-tuned model's answer").run(timeout=TIMEOUT)
    at.selectbox(key="why_tuned").set_value(str(app / "runs" / "sst2-int8" / "model")).run(timeout=TIMEOUT)
    clean(at)
    assert any("dynamic int8 copy" in w.value for w in at.warning)
    click(at, f"Use the original model ({source / 'model'})")
    clean(at)
    assert at.selectbox(key="why_tuned").value == str(source / "model")
    assert any(s.value.startswith("Why ") for s in at.subheader)


def test_distillation_launches_as_a_job_with_an_estimate(app):
    at = open_page(SMALLER)
    clean(at)
    assert not any(c.value.startswith("Estimate: ") for c in at.caption)  # asked for: it can take seconds
    click(at, "Estimate its time and memory")
    clean(at)
    assert any(c.value.startswith("Estimate: ") and "parameters" in c.value for c in at.caption)
    assert any(b.label == "Run it as a job" for b in at.button)
    assert any("bertlab compress distill --teacher" in c.value for c in at.code)


def test_which_heads_matter_refuses_a_study_of_an_int8_classifier(app, sst2_run):
    source = app / "runs" / sst2_run.name
    shutil.copytree(sst2_run, source)
    quantize(source / "model", app / "runs" / "sst2-int8" / "model", repeats=1, threads=(1,))
    at = open_page(HEADS)
    at.radio(key="heads_source").set_value("A fine-tuned classifier (saved results)").run(timeout=TIMEOUT)
    at.selectbox(key="heads_tuned").set_value(str(app / "runs" / "sst2-int8" / "model")).run(timeout=TIMEOUT)
    clean(at)
    assert any("dynamic int8 copy" in w.value for w in at.warning)
    assert not any(b.label == "Run it as a job" for b in at.button)
    click(at, f"Use the original model ({source / 'model'})")
    assert at.selectbox(key="heads_tuned").value == str(source / "model")
    assert any(b.label == "Run it as a job" for b in at.button)
