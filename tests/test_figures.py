"""bertlab.figures.answers, attention, attention_grid and head_stats: what each figure draws, from hand-made inputs,
plus export."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from bertlab.attention import head_statistics
from bertlab.errors import InputError
from bertlab.figures import answers as F
from bertlab.figures import attention as AF
from bertlab.figures import attention_grid as AG
from bertlab.figures import head_stats as HS
from bertlab.inference import Candidate, Inspection, LayerGuess

TOKENS = ["[CLS]", "the", "cat", "the", "[SEP]"]


def cands(*pairs) -> list[Candidate]:
    return [Candidate(tok, i, score, tok.lstrip("#"), tok) for i, (tok, score) in enumerate(pairs)]


def uniform(L=2, A=3, T=len(TOKENS)) -> np.ndarray:
    return np.full((L, A, T, T), 1.0 / T)


def annotation_texts(fig: go.Figure) -> list[str]:
    return [a.text for a in fig.layout.annotations if a.text]


def test_percent():
    assert [F.percent(p) for p in (0.5, 0.05, 0.0012, 0.00001)] == ["50%", "5.0%", "0.12%", "<0.01%"]
    assert [F.percent(p) for p in (0.0010, 0.00085, 0.0008)] == ["0.10%", "0.085%", "0.080%"]  # two digits each


def test_probability_bar_most_likely_on_top():
    fig = F.probability_bar(cands(("paris", 0.6), ("lyon", 0.3), ("paris", 0.1)), title="t")
    bar = fig.data[0]
    assert list(bar.x) == [0.1, 0.3, 0.6]  # reversed: plotly draws the first category at the bottom
    assert bar.y[-1] == "paris" and len(set(bar.y)) == 3  # a repeated word stays a separate bar
    assert bar.text[-1] == "60%"
    assert fig.layout.title.text == "t"


def test_layer_predictions_and_trajectory():
    guesses = [
        LayerGuess(0, cands(("the", 0.2), ("a", 0.1))),
        LayerGuess(1, cands(("a", 0.3), ("mat", 0.2))),
        LayerGuess(2, cands(("mat", 0.9), ("rug", 0.05))),
    ]
    guesses[1].candidates[1].token_id = 7
    guesses[2].candidates[0].token_id = 7
    fig = F.layer_predictions_figure(guesses)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (3, 2) and z[2, 0] == pytest.approx(0.9)
    assert list(fig.layout.yaxis.ticktext) == ["embeddings", "layer 1", "layer 2"]
    assert F.answer_by_layer(guesses, 7) == [None, 0.2, 0.9]
    line = F.answer_trajectory_figure(guesses, 7, "mat").data[0]
    assert list(line.y) == [0.0, 0.2, 0.9] and list(line.x) == [0, 1, 2]
    with pytest.raises(InputError):
        F.layer_predictions_figure([])


def test_attention_heatmap_keeps_repeated_tokens():
    m = np.eye(len(TOKENS))
    fig = AF.attention_heatmap(TOKENS, m, title="L1-H1")
    hm = fig.data[0]
    np.testing.assert_array_equal(np.asarray(hm.z), m)
    assert list(fig.layout.xaxis.ticktext) == TOKENS  # both "the"s, in order (numeric axis)
    assert list(fig.layout.xaxis.tickvals) == list(range(len(TOKENS)))
    assert hm.customdata[1][2] == "the → cat"
    with pytest.raises(InputError, match="shape"):
        AF.attention_heatmap(TOKENS, np.eye(3))


def test_attention_lines_skips_small_weights():
    m = np.zeros((len(TOKENS), len(TOKENS)))
    m[:, 0] = 1.0  # every token -> [CLS]
    fig = AF.attention_lines(TOKENS, m)
    lines = [t for t in fig.data if t.mode == "lines"]
    segments = sum(list(t.x).count(None) for t in lines)
    assert segments == len(TOKENS)  # one line per token, none for the zero weights
    texts = [t for t in fig.data if t.mode == "text"]
    assert list(texts[0].text) == TOKENS


def test_head_grid_tiles_every_head():
    att = np.random.default_rng(0).random((2, 3, 5, 5))
    fig = AG.head_grid(att, TOKENS, off=[(1, 2)])
    z = np.asarray(fig.data[0].z, dtype=float)
    step = 6
    assert z.shape == (2 * step - 1, 3 * step - 1)
    np.testing.assert_allclose(z[step : step + 5, 0:5], att[1, 0])  # layer 2, head 1
    assert np.isnan(z[5, :]).all()  # the gap between layers
    assert np.isnan(z[step : step + 5, 2 * step : 2 * step + 5]).all()  # the head switched off
    assert len(fig.layout.shapes) == 2  # its cross
    assert [a.text for a in fig.layout.annotations if a.text.startswith("head")] == ["head 1", "head 2", "head 3"]
    assert list(fig.layout.xaxis.ticktext) == TOKENS * 3  # tiles this big name their tokens, under every head
    # and every layer's rows (only layer 1's were named: Watch it learn's grid had unlabelled rows)
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert list(fig.layout.yaxis.ticktext) == TOKENS * 2
    assert fig.data[0].customdata[0][0] == "L1-H1: [CLS] → [CLS]"


def test_stat_figures():
    att = uniform()
    att[1, 2] = 0.0  # a head switched off
    stats = head_statistics(att, TOKENS)
    fig = HS.stat_heatmap(stats, "sep")
    assert np.asarray(fig.data[0].z).shape == (2, 3)
    assert fig.data[0].text[1][2] == "off" and fig.data[0].text[0][0] == "20%"  # 1 [SEP] of 5 tokens
    overview = HS.stats_overview(stats)
    assert len(overview.data) == 7
    assert list(overview.layout.xaxis.tickvals) == [1, 2, 3] and overview.layout.xaxis.title.text == "head"
    assert list(overview.layout.xaxis7.tickvals) == [1, 2, 3]  # every panel numbers its heads
    with pytest.raises(InputError, match="unknown statistic"):
        HS.stat_heatmap(stats, "nope")


def test_nsp_and_comparison_figures():
    fig = F.nsp_figure(0.8)
    assert [t.x[0] for t in fig.data] == [0.8, pytest.approx(0.2)]
    from bertlab.explore import answer_changes

    rows = [
        {"token": "mat", "all heads": 0.5, "heads off": 0.2},
        {"token": "floor", "all heads": 0.1, "heads off": 0.05},
        {"token": "rug", "all heads": float("nan"), "heads off": 0.3},
    ]
    changes = answer_changes(rows, show=1)  # the top answer, and the word that rose into the top with heads off
    assert [(c.word, c.rank_before, c.rank_after) for c in changes] == [("mat", 1, 2), ("rug", None, 1)]
    assert changes[0].sentence(2) == "**mat**: 50.0% (answer 1) with all heads → 20.0% (answer 2) with 2 heads off"
    fig = F.answer_change_figure(changes, focus="mat")
    assert list(fig.data[0].x) == [0.5, None] and list(fig.data[1].x) == [0.2, 0.3]  # one row per word
    assert list(fig.layout.yaxis.ticktext) == ["<b>mat</b>", "rug"] and len(fig.layout.annotations) == 1  # arrow
    # each number on its dot's outer side: the two of one row never print over each other
    assert list(fig.data[0].textposition) == ["middle right", "middle left"]  # mat fell: all heads is the larger
    assert list(fig.data[1].textposition) == ["middle left", "middle right"]
    near_zero = answer_changes([{"token": "mat", "all heads": 0.5, "heads off": 0.01}], show=1)
    assert list(F.answer_change_figure(near_zero).data[1].textposition) == ["bottom center"]  # not over the words


def test_export(monkeypatch):
    fig = F.nsp_figure(0.5)
    page = F.to_html(fig)
    assert "<html>" in page and '<script src="https://cdn.plot.ly' not in page  # plotly.js inlined: opens offline
    config = F.plotly_config("fig", "svg")
    assert config["toImageButtonOptions"]["format"] == "svg" and config["toImageButtonOptions"]["filename"] == "fig"
    assert F.plotly_config("fig", "gif")["toImageButtonOptions"]["format"] == "png"
    monkeypatch.setattr(F, "image_export_available", lambda: False)
    with pytest.raises(InputError, match="kaleido"):
        F.to_image(fig, "png")
    with pytest.raises(InputError, match="png"):
        F.to_image(fig, "gif")


def test_bertviz_html():
    pytest.importorskip("bertviz")
    T = len(TOKENS)
    ins = Inspection(
        text="the cat",
        text_b="the",
        tokens=TOKENS,
        token_ids=list(range(T)),
        segment_ids=[0, 0, 0, 1, 1],
        position_ids=list(range(T)),
        word_ids=[None, 0, 1, 0, None],
        attentions=uniform().astype(np.float32),
        hidden_states=np.zeros((3, T, 4), dtype=np.float32),
    )
    for view in ("head", "model"):
        out = AF.bertviz_html(ins, view)
        assert isinstance(out, str) and "cat" in out and len(out) > 1000
    with pytest.raises(InputError, match="view"):
        AF.bertviz_html(ins, "neuron")


def test_learning_curve_marks_the_step_and_where_a_later_stage_begins():
    from bertlab.figures.answers import learning_curve_figure

    curve = [
        {"step": 10, "tokens": 1_000, "mlm_acc": 0.05, "nsp_acc": 0.5},
        {"step": 20, "tokens": 2_000, "mlm_acc": 0.10, "nsp_acc": 0.6},
        {"step": 30, "tokens": 3_000, "mlm_acc": 0.12, "nsp_acc": 0.7, "stage": 2},
    ]
    fig = learning_curve_figure(curve, marker_step=20)
    lines = {(s.x0, s.line.dash) for s in fig.layout.shapes}
    assert lines == {(2_000, "dash"), (3_000, "dot")}
    assert "stage 2 starts" in {a.text for a in fig.layout.annotations}
    assert len(learning_curve_figure(curve[:2]).layout.shapes) == 0  # one stage, no marker: no lines


def test_stage_labels_that_start_close_together_do_not_overlap():
    """The shipped model's stages 3 and 4 start at 53M and 85M tokens: on a log axis over 4 decades
    their labels sat on top of each other. A label too close to the one before goes in a row of its own."""
    from bertlab.figures.answers import learning_curve_figure

    starts = {1: 10, 2: 20_000_000, 3: 52_900_000, 4: 85_400_000}
    curve = [{"step": i, "tokens": t, "mlm_acc": 0.1, "stage": s} for i, (s, t) in enumerate(starts.items())]
    curve.append({"step": 9, "tokens": 172_700_000, "mlm_acc": 0.35, "stage": 4})
    labels = {a.text: a for a in learning_curve_figure(curve).layout.annotations if a.text.endswith("starts")}
    assert set(labels) == {"stage 2 starts", "stage 3 starts", "stage 4 starts"}
    rows = {name: (a.yanchor, a.yshift or 0) for name, a in labels.items()}
    assert len(set(rows.values())) == 3  # 0.4 and 0.2 decades apart on a 7-decade axis: a row each
    assert rows["stage 2 starts"] == ("bottom", 0)  # the first just above the plot
    # the others stacked above it, never inside the plot, where they sat on the NSP curve at 80%
    assert {r for _, r in rows.values()} == {0, 15, 30} and {a for a, _ in rows.values()} == {"bottom"}
    assert learning_curve_figure(curve).layout.margin.t >= 12 + 15 * 3  # every row has room above the plot
    spread = [{"step": i, "tokens": 10**i, "mlm_acc": 0.1, "stage": i} for i in range(1, 6)]
    assert {(a.yanchor, a.yshift or 0) for a in learning_curve_figure(spread).layout.annotations} == {("bottom", 0)}
    backwards = [{"step": i, "tokens": 10 ** (6 - i), "mlm_acc": 0.1, "stage": i} for i in range(1, 6)]
    assert {(a.yanchor, a.yshift or 0) for a in learning_curve_figure(backwards).layout.annotations} == {("bottom", 0)}


def test_watch_it_learn_maps_share_one_scale_with_the_uniform_level_marked():
    """Issue 25: step 10's near-uniform head must not look as dark as a trained one."""
    import numpy as np

    from bertlab.figures.attention import attention_heatmap
    from bertlab.figures.attention_grid import head_grid

    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    uniform = np.full((5, 5), 0.2)
    fig = attention_heatmap(tokens, uniform, zmax=1.0, mark_uniform=True)
    assert fig.data[0].zmax == 1.0 and "uniform 1/5" in fig.data[0].colorbar.ticktext
    assert attention_heatmap(tokens, uniform).data[0].zmax == 0.2  # the Attention page's own-head scale
    grid = head_grid(np.full((2, 2, 5, 5), 0.2), tokens, title="Every head", zmax=1.0, mark_uniform=True)
    assert grid.data[0].zmax == 1.0 and "uniform 1/5" in grid.data[0].colorbar.ticktext
    assert list(grid.layout.yaxis.ticktext) == tokens * 2  # the small maps name their tokens, every layer's
    assert grid.layout.margin.t > 40  # the head names sit below the title, not on it


def test_head_statistics_have_colour_scales_and_the_stage_line_a_label():
    import numpy as np

    from bertlab.attention import HEAD_STATS, HeadStats
    from bertlab.figures.answers import learning_curve_figure
    from bertlab.figures.head_stats import stats_overview

    stats = HeadStats({name: np.random.default_rng(0).random((2, 3)) for name in HEAD_STATS}, num_inputs=1)
    bars = [t for t in stats_overview(stats).data if t.showscale]
    assert len(bars) == 2  # one for the shares, one for the entropy
    curve = [
        {"step": 10, "tokens": 1000, "mlm_acc": 0.01, "stage": 1},
        {"step": 20, "tokens": 2000, "mlm_acc": 0.05, "stage": 2},
    ]
    assert any(a.text == "stage 2 starts" for a in learning_curve_figure(curve).layout.annotations)
