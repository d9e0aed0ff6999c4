"""bertlab.figures.attention and attention_grid on long inputs: the windows, compact heatmaps, colour scales,
and the P(IsNext) change written beside the head-ablation view (bertlab.figures.head_ablation).

A 512-token input used to make a 128 MB head grid and a 6 MB heatmap that froze the browser.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from bertlab.errors import InputError
from bertlab.figures import attention as AF
from bertlab.figures import attention_grid as AG
from bertlab.figures import head_ablation as HA

T_LONG = 512


def long_input(layers: int = 4, heads: int = 4, T: int = T_LONG) -> tuple[np.ndarray, list[str]]:
    """(L, A, T, T) maps like a trained model's on a long input: two heads put everything on [CLS],
    the others spread their attention (weights near 1/T)."""
    rng = np.random.default_rng(0)
    att = rng.random((layers, heads, T, T)) ** 4
    att[0, :2] = 0.0
    att[0, :2, :, 0] = 1.0  # every token -> [CLS]
    att /= att.sum(-1, keepdims=True)
    words = ["the", "cat", "sat", "on", "the", "mat", "."]
    tokens = ["[CLS]"] + [words[i % len(words)] for i in range(T - 3)] + ["[SEP]", "[SEP]"]
    tokens[T // 2] = "[SEP]"
    return att, tokens


def test_token_window_clamps_and_describes_itself():
    w = AF.token_window(T_LONG)
    assert (w.start, w.stop, w.size) == (0, AF.WINDOW_TOKENS, AF.WINDOW_TOKENS)
    assert w.describe() == f"tokens 0–{AF.WINDOW_TOKENS - 1} of {T_LONG}" and not w.is_whole
    end = AF.token_window(T_LONG, start=10_000)  # moved back so that the window stays full
    assert (end.start, end.stop) == (T_LONG - AF.WINDOW_TOKENS, T_LONG)
    short = AF.token_window(12, start=5)
    assert short.is_whole and short.describe() == "all 12 tokens"
    att, tokens = long_input(1, 1, 100)
    mid = AF.token_window(100, start=20, size=10)
    assert mid.tokens(tokens) == tokens[20:30]
    np.testing.assert_array_equal(mid.maps(att), att[..., 20:30, 20:30])
    with pytest.raises(InputError):
        AF.token_window(10, size=0)


def test_a_512_token_head_grid_stays_small_and_fast():
    att, tokens = long_input()
    started = time.perf_counter()
    fig = AG.head_grid(att, tokens)
    size = len(fig.to_json())
    assert time.perf_counter() - started < 2.0  # was 8 s (3 s to build, 5 s to JSON)
    assert size < 1_000_000  # was 128 MB
    hm = fig.data[0]
    n = AF.WINDOW_TOKENS
    assert np.asarray(hm.z).shape == (4 * (n + 1) - 1, 4 * (n + 1) - 1)  # each tile: the first 64 tokens
    assert hm.customdata is None and "weight" in hm.hovertemplate  # no string per cell
    later = AG.head_grid(att, tokens, window=AF.token_window(T_LONG, start=100))
    np.testing.assert_allclose(np.asarray(later.data[0].z)[:n, :n], att[0, 0, 100 : 100 + n, 100 : 100 + n], rtol=1e-6)
    assert "tokens 0–63 of 512" in AG.head_grid(att, tokens, title="Every head").layout.title.text


def test_per_head_scale_keeps_spread_heads_visible():
    att, tokens = long_input()
    window = AF.token_window(T_LONG)
    assert AG.suggested_grid_scale(window.maps(att)) == "per_head"  # one scale: 14 of 16 heads near white
    short = np.full((2, 2, 5, 5), 0.1)
    for k, peak in enumerate((1.0, 0.5, 0.4, 0.3)):  # a 21-token input's heads peak at 0.3 to 1 on bertlab-mini
        short[k // 2, k % 2, :, k] = peak
    assert AG.suggested_grid_scale(short) == "shared"  # heads of a short input compare on one scale
    assert AG.suggested_grid_scale(np.zeros((1, 2, 3, 3))) == "shared"  # every head off
    fig = AG.head_grid(att, tokens, scale="per_head", off=[(3, 3)])
    z = np.asarray(fig.data[0].z, dtype=float)
    step = AF.WINDOW_TOKENS + 1
    for layer, head in ((0, 0), (1, 2), (3, 2)):
        tile = z[layer * step : layer * step + step - 1, head * step : head * step + step - 1]
        assert np.nanmax(tile) == pytest.approx(1.0)  # each head reaches the top of the scale
    assert np.isnan(z[3 * step :, 3 * step :]).all()  # a head switched off stays empty
    assert fig.data[0].zmax == 1.0 and fig.data[0].colorbar.tickformat == ".0%"
    small = AG.head_grid(np.random.default_rng(1).random((1, 2, 3, 3)), ["[CLS]", "a", "[SEP]"], scale="per_head")
    assert small.data[0].customdata[0][0].startswith("L1-H1: [CLS] → [CLS] (")  # the raw weight in the hover
    with pytest.raises(InputError, match="shared"):
        AG.head_grid(att, tokens, scale="per_head", zmax=1.0)
    with pytest.raises(InputError, match="scale"):
        AG.head_grid(att, tokens, scale="own")


def test_a_512_token_heatmap_is_compact_with_thinned_ticks():
    att, tokens = long_input(1, 1)
    fig = AF.attention_heatmap(tokens, att[0, 0], window=AF.token_window(T_LONG, start=64))
    assert len(fig.to_json()) < 2_000_000  # was 6 MB: float64 and a 'the → cat' string per cell
    hm = fig.data[0]
    assert hm.customdata is None and "token %{y}" in hm.hovertemplate
    np.testing.assert_allclose(np.asarray(hm.z), att[0, 0], rtol=1e-6)  # every token, in float32
    ticks = list(fig.layout.xaxis.ticktext)
    assert len(ticks) <= AF.MAX_TICK_LABELS + 3  # plus the [CLS] / [SEP]s, always named
    assert ticks[0] == "[CLS] (0)" and f"[SEP] ({T_LONG // 2})" in ticks and f"[SEP] ({T_LONG - 2})" in ticks
    positions = list(fig.layout.xaxis.tickvals)
    assert min(np.diff(positions)) >= 10  # every 20th token: no two names overlap
    assert list(fig.layout.xaxis.tickvals) == list(fig.layout.yaxis.tickvals)
    (outline,) = fig.layout.shapes  # the window the lines view shows
    assert (outline.x0, outline.x1) == (63.5, 127.5)


def test_a_long_heads_heatmap_is_capped_at_a_percentile_and_hovers_true_weights():
    """A 300-token head spreads its attention (weights near 1/300) with one cell at 0.9: scaled to
    that cell the map was all but white. Its colours now stop at the 99th percentile weight."""
    T = 300
    att, tokens = long_input(1, 4, T)
    spread = att[0, 2].copy()
    spread[5] *= 0.1 / spread[5].sum()
    spread[5, 0] = 0.9  # one token puts 0.9 on [CLS]; the row still sums to 1
    cap = AF.heatmap_cap(spread)
    assert cap == pytest.approx(np.percentile(spread, AF.CAP_PERCENTILE))
    assert 1 / T < cap < 0.05  # a few times uniform, far under the 0.9
    fig = AF.attention_heatmap(tokens, spread, title="L1-H3")
    hm = fig.data[0]
    assert hm.zmax == pytest.approx(cap)  # was 0.9: every other cell under 4% of the scale
    np.testing.assert_allclose(np.asarray(hm.z), spread, rtol=1e-6)  # the true weights, which the hover shows
    assert "%{z:.3f}" in hm.hovertemplate
    assert "99th percentile" in hm.colorbar.title.text
    assert hm.colorbar.ticktext[-1] == f"≥ {cap:.2g}" and hm.colorbar.tickvals[-1] == pytest.approx(cap)
    marked = AF.attention_heatmap(tokens, spread, mark_uniform=True).data[0].colorbar  # capped, 1/T still marked
    assert list(marked.ticktext) == ["0", "uniform 1/300", f"≥ {cap:.2g}"]
    # where the head's attention sits on a few cells, the uncapped scale shows them: no cap
    assert AF.heatmap_cap(att[0, 0]) is None  # every token -> [CLS]: 99% of the cells are 0
    assert AF.attention_heatmap(tokens, att[0, 0]).data[0].zmax == pytest.approx(1.0)
    # a head that looks everywhere alike stays pale on the 0.05 floor; a given zmax is kept as given
    assert AF.attention_heatmap(tokens, np.full((T, T), 1 / T)).data[0].zmax == 0.05
    compared = AF.attention_heatmap(tokens, spread, zmax=1.0, mark_uniform=True).data[0]
    assert compared.zmax == 1.0 and "uniform 1/300" in compared.colorbar.ticktext
    assert AF.heatmap_cap(np.zeros((T, T))) is None  # a head switched off


def test_a_short_inputs_heatmap_keeps_its_scale_to_the_strongest_weight():
    """On bertlab-mini's 21-token default input every head's 99th percentile is 0.45-1 of its
    strongest weight: short inputs look exactly as before."""
    rng = np.random.default_rng(2)
    tokens = ["[CLS]"] + ["the", "cat", "sat", "on", "the", "mat", "."] * 2 + ["[SEP]"] * 5
    T = len(tokens)
    logits = rng.normal(size=(T, T)) * 2
    logits[:, -1] += 3  # a head that leans on [SEP]
    m = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert AF.heatmap_cap(m) is None
    hm = AF.attention_heatmap(tokens, m).data[0]
    assert hm.zmax == pytest.approx(m.max()) and hm.colorbar.title.text == "weight"
    assert hm.colorbar.tickvals is None  # plotly's own ticks, as before


def test_lines_view_draws_a_window_at_real_positions():
    att, tokens = long_input(1, 1)
    m = np.zeros((T_LONG, T_LONG))
    m[:, T_LONG - 1] = 1.0  # every token -> the last [SEP], outside the window
    m[100, 101] = m[100, T_LONG - 1] = 0.5
    window = AF.token_window(T_LONG, start=90, size=20)
    fig = AF.attention_lines(tokens, m, title="L1-H1", window=window)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert [y for t in lines for y in t.y if y is not None] == [100.0, 101.0]  # only weights inside the window
    words = [t for t in fig.data if t.mode == "text"]
    assert list(words[0].text) == tokens[90:110] and list(words[0].y) == list(range(90, 110))
    assert f"({T_LONG - 1})" in words[0].hovertext[0]  # strongest over the whole input
    assert tuple(fig.layout.yaxis.range) == (109.5, 89.5)  # no empty band above the first token
    assert "tokens 90–109 of 512" in fig.layout.title.text
    default = AF.attention_lines(tokens, att[0, 0])
    assert len(default.data[-1].text) == AF.WINDOW_TOKENS and default.layout.height < 1000  # was 11,324 px


@pytest.mark.parametrize(
    ("before", "after", "shown"),
    [
        (0.99751, 0.99746, ("99.8%", "99.7%", "-0.1 points", "auto")),  # was '99.7%' with '↓ -0.0 points'
        (0.99762, 0.99751, ("99.8%", "99.8%", "±0.0 points", "off")),  # a change that does not show
        (0.99741, 0.99760, ("99.7%", "99.8%", "+0.1 points", "auto")),
        (0.5, 0.25, ("50.0%", "25.0%", "-25.0 points", "auto")),
        (0.123, 0.123, ("12.3%", "12.3%", "±0.0 points", "off")),
    ],
)
def test_the_change_in_p_is_next_agrees_with_the_rounded_numbers(before, after, shown):
    change = HA.probability_change(before, after)
    assert (change.before, change.after, change.delta, change.arrow) == shown
    if change.arrow == "auto":
        assert float(change.delta.split()[0]) == pytest.approx(float(change.after[:-1]) - float(change.before[:-1]))
    assert (change.odds == "") == (0.01 <= before <= 0.99 and 0.01 <= after <= 0.99)  # else log-odds too


def test_a_sure_answers_change_is_given_in_log_odds_too():
    """The default pair reads 100.0% with any heads off: the log-odds say whether the heads moved it."""
    change = HA.probability_change(0.9998, 0.9990)
    assert (change.before, change.after, change.delta) == ("100.0%", "99.9%", "-0.1 points")
    assert change.odds == "log-odds 8.52 → 6.91 (−1.61)"
    assert HA.probability_change(1.0, 1.0).odds == "log-odds 20.72 → 20.72 (+0.00)"  # a float32 1.0: no inf
