"""bertlab.interpret.probing (+ saved and the `probe` command) on tiny models and tiny files written here."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from interpret_models import pretrained

from bertlab.errors import InputError
from bertlab.finetune.data import TaggingExample
from bertlab.interpret import cli
from bertlab.interpret.probing import (
    ProbeConfig,
    ProbeResult,
    centre_of_gravity,
    macro_f1,
    probe_layers,
    train_probe,
    word_features,
)
from bertlab.interpret.saved import read_results, result_path, write_result
from bertlab.storage.runfolder import REPO_ROOT

TAG_OF = {"cat": "NOUN", "dog": "NOUN", "park": "NOUN", "the": "DET", "a": "DET", "sat": "VERB", "ran": "VERB"}


def sentences(n: int, seed: int) -> list[TaggingExample]:
    rng = np.random.default_rng(seed)
    words = list(TAG_OF)
    out = []
    for _ in range(n):
        ws = [words[i] for i in rng.integers(0, len(words), size=5)]
        out.append(TaggingExample(ws, [TAG_OF[w] for w in ws]))
    return out


def test_a_probe_on_a_layer_that_copies_the_labels_scores_100_percent():
    rng = np.random.default_rng(0)
    y_train, y_eval = rng.integers(0, 5, 300), rng.integers(0, 5, 100)
    copy = np.eye(5)  # the layer's vector of a word is its label, one-hot
    noise = rng.normal(size=(400, 3))  # plus directions that carry nothing
    x_train = np.hstack([copy[y_train], noise[:300]])
    x_eval = np.hstack([copy[y_eval], noise[300:]])
    predicted = train_probe(x_train, y_train, x_eval, y_eval, 5)
    assert (predicted == y_eval).mean() == 1.0


def test_probe_layers_on_a_model_whose_embeddings_tell_the_tag(tokenizer):
    # each word has one tag, and the embeddings output is (almost) a function of the word: layer 0 copies the labels
    lm = pretrained(tokenizer)
    result = probe_layers(lm, sentences(60, 0), sentences(20, 1), ProbeConfig("toy", max_iter=200))
    assert result.layers == [0, 1, 2]
    assert result.accuracy[0] == 1.0
    assert result.labels == ["DET", "NOUN", "VERB"]
    assert result.train_words == 300 and result.eval_words == 100
    assert 0 < result.majority < 1
    assert result.rows()[0] == {  # in points, one decimal, as the chart beside it (it read 65.9491 beside 0.9195)
        "layer": 0,
        "accuracy (%)": 100.0,
        "over commonest tag (points)": round(100 * (1.0 - result.majority), 1),
        "macro F1 (%)": 100.0,
    }
    assert result.majority_label == "NOUN"  # the commonest training tag, kept with the result


def test_word_features_take_each_words_first_piece(tokenizer):
    lm = pretrained(tokenizer)
    ex = [TaggingExample(["walking", "cat"], ["VERB", "NOUN"])]  # 'walking' is 'walk ##ing'
    x, y = word_features(lm, ex, {"NOUN": 0, "VERB": 1})
    assert x.shape == (lm.config.num_layers + 1, 2, lm.config.hidden_size) and y.tolist() == [1, 0]
    ins = lm.inspect("walking cat")
    np.testing.assert_allclose(x[:, 0], ins.hidden_states[:, 1], atol=1e-5)
    with pytest.raises(InputError, match="not in the label set"):
        word_features(lm, ex, {"NOUN": 0})


def test_centre_of_gravity_and_f1():
    assert centre_of_gravity([0.5, 1.0, 1.0]) == pytest.approx(1.0)
    assert centre_of_gravity([0.5, 0.5, 1.0]) == pytest.approx(2.0)
    assert centre_of_gravity([0.5, 0.7, 0.6, 0.9]) == pytest.approx((1 * 0.2 + 3 * 0.2) / 0.4)  # a dip gains nothing
    assert centre_of_gravity([0.9, 0.8]) is None
    assert macro_f1(np.array([0, 0, 1]), np.array([0, 1, 1])) == pytest.approx((2 / 3 + 2 / 3) / 2)


def test_results_are_saved_beside_the_model(tmp_path):
    result = ProbeResult("upos", "m", ["A"], [0, 1], [0.5, 0.9], [0.4, 0.8], 0.3, 1.0, 10, 5, 1.5)
    path = write_result(tmp_path, "probe", "upos", result.to_dict())
    assert path == result_path(tmp_path, "probe", "upos") == tmp_path / "interpret" / "probe-upos.json"
    assert ProbeResult.from_dict(read_results(tmp_path, "probe")["upos"]) == result
    assert read_results(tmp_path / "nowhere", "probe") == {}
    with pytest.raises(InputError):
        result_path(tmp_path, "probe", "../up")


def test_the_probe_command(tmp_path, tiny_checkpoint, capsys):
    model = tmp_path / "model"
    shutil.copytree(tiny_checkpoint, model)
    lines = []
    for k, ex in enumerate(sentences(12, 2)):
        lines += [f"# sent_id = {k}"] + [
            f"{i + 1}\t{w}\t{w}\t{t}\t_\t_\t0\t_\t_\t_" for i, (w, t) in enumerate(zip(ex.words, ex.tags, strict=True))
        ]
        lines.append("")
    (tmp_path / "train.conllu").write_text("\n".join(lines), encoding="utf-8")
    args = ["probe", "--model", str(model), "--task", "upos", "--train", str(tmp_path / "train.conllu")]
    args += ["--eval", str(tmp_path / "train.conllu"), "--copy-to", str(tmp_path / "results")]
    assert cli.main(args) == 0
    saved = read_results(model, "probe")["upos"]
    assert len(saved["accuracy"]) == 3 and saved["data"] == {"train": "train.conllu", "eval": "train.conllu"}
    assert (tmp_path / "results" / "probe-upos.json").is_file()
    args[6] = str(tmp_path / "missing.conllu")
    assert cli.main(args) == 2
    assert "missing.conllu" in capsys.readouterr().err


def committed(task: str) -> ProbeResult:
    """The probe result committed with the repository (the shipped model; see results/interpret/README.md)."""
    return ProbeResult.from_dict(read_results(REPO_ROOT / "results", "probe")[task])


def test_a_probe_no_better_than_the_commonest_tag_gets_no_centre_of_gravity():
    ner, upos = committed("ner"), committed("upos")
    # NER: 92.08% at best where always answering O scores 91.81%; layer 1 gains 0.13 points over layer 0
    assert ner.commonest_tag == "O" and ner.centre_of_gravity == 1.0
    assert ner.noise_floor == pytest.approx(2 * np.sqrt(0.92078 * 0.07922 / 7864), rel=1e-3)
    assert not ner.beats_majority and ner.reported_centre_of_gravity is None
    assert ner.gain_over_majority[1] == pytest.approx(0.9207782 - 0.9181078, abs=1e-6)
    # UPOS: 85% against 16%, and layer 1 gains 3.4 points over the embeddings: a centre of gravity
    assert upos.beats_majority and upos.reported_centre_of_gravity == 1.0 and upos.commonest_tag == "NOUN"
    flat = ProbeResult("t", "m", ["A", "B"], [0, 1, 2], [0.5, 0.8, 0.8005], [0.4, 0.7, 0.7], 0.3, 1.0, 10, 10_000, 1.0)
    assert flat.beats_majority and flat.reported_centre_of_gravity == 1.0
    same = ProbeResult("t", "m", ["A", "B"], [0, 1, 2], [0.8, 0.8005, 0.8], [0.7] * 3, 0.3, 1.0, 10, 10_000, 1.0)
    assert same.beats_majority and same.reported_centre_of_gravity is None  # the embeddings already hold it


def test_the_probing_figure_shows_the_gain_over_the_commonest_tag_without_colliding_labels():
    from bertlab.interpret.layer_views import probe_figure

    ner, upos = committed("ner"), committed("upos")
    fig = probe_figure([upos, ner], "title")
    # no text inside the plot: only the two panel titles (the centre of gravity is a marker named in the legend)
    assert [a.text for a in fig.layout.annotations] == [
        "Accuracy above always answering the commonest tag",
        "Macro-F1 (every tag counts alike)",
    ]
    assert not fig.layout.shapes
    by_name = {t.name: t for t in fig.data}
    assert "ner: no better than the commonest tag" in by_name and "upos" in by_name
    np.testing.assert_allclose(
        by_name["ner: no better than the commonest tag"].y, np.array(ner.gain_over_majority) * 100
    )
    flat = max(abs(y) for y in by_name["ner: no better than the commonest tag"].y)
    assert flat < ner.noise_floor * 100  # flat at zero: every layer within the noise (0.27 < 0.61 points)
    assert by_name["ner macro-F1"].y == tuple(ner.macro_f1) and by_name["ner macro-F1"].xaxis == "x2"
    cogs = [t.name for t in fig.data if "centre of gravity" in (t.name or "")]
    assert cogs == ["upos centre of gravity 1.00"]


def test_the_probing_summary_says_when_a_probe_reads_nothing():
    from bertlab.interpret.layer_views import probe_summary

    ner, upos = probe_summary(committed("ner")), probe_summary(committed("upos"))
    assert "no better than always answering the commonest tag (O)" in ner and "91.8%" in ner
    assert "0.10–0.12" in ner and "centre of gravity 1.00" not in ner.casefold()
    assert "Centre of gravity 1.00" in upos and "above always answering the commonest tag" in upos
    # macro-F1 above the all-O guess's (0.957 / 13 tags): it finds a few entity tags, so no 'reads nothing'
    assert "would score about 0.07" in ner and "adds nothing to the accuracy" in ner and "reads no" not in ner


def test_no_within_the_noise_for_a_gain_that_is_not():
    """A probe whose later layers gain 40 points over layer 0 but whose centre of gravity is not
    reported must not be said to gain 'within the noise'."""
    from bertlab.interpret.layer_views import probe_summary

    r = committed("upos")
    r.layers, r.accuracy, r.macro_f1 = [0, 4, 8], [0.4, 0.8, 0.7], [0.3, 0.6, 0.5]
    r.centre_of_gravity = None
    assert "within the noise" not in probe_summary(r)
