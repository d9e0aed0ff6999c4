"""The Attention page's one-head heatmap on the shipped model, under AppTest: on a 300-token input
its colours stop at the head's 99th percentile weight and a caption says so; the 21-token default
input is drawn as before, to the head's strongest weight, with no caption.

With 300 tokens most weights are near 1/300 while one cell holds 0.54: scaled to that cell, the map
was all but white in the browser.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from bertlab.app_pages import page_titled  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "checkpoints" / "bertlab-mini"
TIMEOUT = 90  # seconds per run: a first model load on 2 busy cores
PARAGRAPH = (
    "The history of the city goes back many centuries, when a small village grew up beside the river and "
    "traders came from far away to sell wool, salt and grain. Over time the village became a market town, "
    "and a stone bridge was built so that carts could cross in every season. "
)
LONG_A = (PARAGRAPH * 5).strip()  # 320 tokens with the default sentence B


@pytest.fixture
def app(monkeypatch, tmp_path) -> AppTest:
    if not (SHIPPED / "model.safetensors").exists():
        pytest.skip(f"{SHIPPED} has not been built")
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_MODEL", str(SHIPPED))
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page(page_titled("Attention").file).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def heatmap(at: AppTest) -> dict:
    """The one-head heatmap's trace, as plotly JSON, with its weights `z` as a (T, T) array."""
    (trace,) = (t for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"] if t["type"] == "heatmap")
    z = trace["z"]  # plotly sends numpy arrays as {'dtype': 'f4', 'bdata': base64, 'shape': 'T, T'}
    shape = tuple(int(n) for n in z["shape"].split(","))
    trace["z"] = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape).astype(float)
    return trace


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


def test_one_head_heatmap_caps_a_long_input_and_keeps_a_short_one(app):
    at = app
    short = heatmap(at)
    assert short["zmax"] == pytest.approx(np.max(short["z"]), rel=1e-3)  # to L1-H1's strongest weight
    assert short["colorbar"]["title"]["text"] == "weight" and "Colours stop at" not in captions(at)
    at.text_area(key="att_a").set_value(LONG_A).run()
    assert not at.exception, [e.value for e in at.exception]
    long = heatmap(at)
    z = long["z"]
    assert z.shape == (320, 320) and long["zmax"] < 0.1 * z.max()  # was z.max(): the map all but white
    assert long["zmax"] == pytest.approx(np.percentile(z, 99), rel=1e-3)
    assert "99th percentile" in long["colorbar"]["title"]["text"]
    assert f"Colours stop at **{long['zmax']:.2g}**" in captions(at)
    assert "%{z:.3f}" in long["hovertemplate"]  # the hover reads z: the true weight, not the capped colour
