"""The Attention and Next sentence pages on inputs longer than their figures draw, under AppTest.

A 512-token input made the Attention page freeze the browser (a 128 MB head grid) and Figure 2
on the Next sentence page 8,000 px tall. Here a tiny random model with 160 positions stands in,
and the shipped model where what it learned matters (the one-head heatmap's colour scale).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")
from conftest import tiny_config  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from bertlab.app_pages import page_titled  # noqa: E402
from bertlab.figures.attention import WINDOW_TOKENS  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 60  # seconds per run: a first model load on 2 busy cores
NSP, ATTENTION = (page_titled(t).file for t in ("Next sentence", "Attention"))
LONG_A = "the cat sat on the mat . " * 40  # well over 160 tokens: cut to the model's 160


@pytest.fixture(scope="module")
def long_checkpoint(tmp_path_factory, tokenizer) -> Path:
    import torch

    from bertlab.model import BertForPreTraining
    from bertlab.storage.checkpoint import save_checkpoint

    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(len(tokenizer), max_position_embeddings=160))
    folder = tmp_path_factory.mktemp("ckpt") / "long"
    save_checkpoint(folder, model, tokenizer)
    return folder


def start_app(monkeypatch, tmp_path, model: Path) -> AppTest:
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_MODEL", str(model))
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def app(monkeypatch, long_checkpoint, tmp_path) -> AppTest:
    return start_app(monkeypatch, tmp_path, long_checkpoint)


def chart_sizes(at: AppTest) -> list[int]:
    return [len(chart.proto.spec) for chart in at.get("plotly_chart")]


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


def test_attention_page_draws_a_window_of_a_long_input(app):
    at = app
    at.switch_page(ATTENTION).run()
    at.text_area(key="att_a").set_value(LONG_A).run()
    assert not at.exception, [e.value for e in at.exception]
    window = at.slider(key="att_window")
    assert window.value == 0 and window.max == 160 - WINDOW_TOKENS
    assert f"tokens 0–{WINDOW_TOKENS - 1} of 160" in captions(at)
    assert max(chart_sizes(at)) < 600_000  # heatmap and lines, float32 and no per-cell hover strings
    window.set_value(50).run()
    assert f"tokens 50–{50 + WINDOW_TOKENS - 1} of 160" in captions(at)
    at.session_state["att_tab"] = "All heads"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="att_window").value == 50  # one window for both tabs
    assert f"tokens 50–{50 + WINDOW_TOKENS - 1} of 160" in captions(at)
    assert "Automatic" in captions(at)  # the caption says which colour scale is in use
    (size,) = chart_sizes(at)
    assert size < 600_000
    at.radio(key="att_grid_scale").set_value("each head to its own strongest weight").run()
    assert "its own strongest weight" in captions(at) and not at.exception


def test_ablation_delta_is_the_difference_of_the_numbers_shown(app):
    at = app
    at.switch_page(ATTENTION).run()
    at.session_state["att_tab"] = "Switch heads off"
    at.run()
    at.button(key="att_btn_layer").click().run()  # switch off layer 1
    assert not at.exception, [e.value for e in at.exception]
    (metric,) = [m for m in at.metric if m.label == "P(IsNext) with the heads off"]
    base = next(c.value for c in at.caption if c.value.startswith("All heads on: "))
    before = float(base.removeprefix("All heads on: ").split("%")[0])
    after = float(metric.value.removesuffix("%"))
    points = round(after - before, 1)
    assert metric.delta == ("±0.0 points" if points == 0 else f"{points:+.1f} points")


def test_figure_2_of_a_long_pair_leaves_the_middle_out(app):
    at = app
    at.switch_page(NSP).run()
    at.text_area(key="nsp_a").input("the cat sat . " * 40)
    at.text_area(key="nsp_b").input("the dog ran . " * 40).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "tokens are left out of the drawing" in captions(at)
    assert "of 160 tokens" in captions(at)


TOWN = (
    "The history of the city goes back many centuries, when a small village grew up beside the river and "
    "traders came from far away to sell wool, salt and grain. Over time the village became a market town, "
    "and a stone bridge was built so that carts could cross in every season. "
)
LONG_TEXT = (TOWN * 5).strip()  # 320 tokens with the default sentence B


def heatmap(at: AppTest) -> dict:
    """The one-head heatmap's trace, as plotly JSON, with its weights `z` as a (T, T) array."""
    (trace,) = (t for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"] if t["type"] == "heatmap")
    z = trace["z"]  # plotly 6 sends numpy arrays as {'dtype': 'f4', 'bdata': base64, 'shape': 'T, T'}
    if isinstance(z, dict):
        shape = tuple(int(n) for n in z["shape"].split(","))
        trace["z"] = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape).astype(float)
    else:  # plotly 5 (requirements allow >= 5.20): nested lists
        trace["z"] = np.asarray(z, dtype=float)
    return trace


def test_one_head_heatmap_caps_a_long_input_and_keeps_a_short_one(monkeypatch, tmp_path):
    """On the shipped model (a random one attends near-uniformly): 320 tokens, most weights near
    1/320 and one cell at 0.54, were all but white on a scale up to the strongest weight."""
    at = start_app(monkeypatch, tmp_path, REPO / "checkpoints" / "bertlab-mini")
    at.switch_page(ATTENTION).run()
    short = heatmap(at)
    assert short["zmax"] == pytest.approx(np.max(short["z"]), rel=1e-3)  # to L1-H1's strongest weight
    assert short["colorbar"]["title"]["text"] == "weight" and "Colours stop at" not in captions(at)
    at.text_area(key="att_a").set_value(LONG_TEXT).run()
    assert not at.exception, [e.value for e in at.exception]
    long = heatmap(at)
    z = long["z"]
    assert z.shape == (320, 320) and long["zmax"] < 0.1 * z.max()  # was z.max(): the map all but white
    assert long["zmax"] == pytest.approx(np.percentile(z, 99), rel=1e-3)
    assert "99th percentile" in long["colorbar"]["title"]["text"]
    assert f"Colours stop at **{long['zmax']:.2g}**" in captions(at)
    assert "%{z:.3f}" in long["hovertemplate"]  # the hover reads z: the true weight, not the capped colour
