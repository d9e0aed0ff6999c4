"""The interpretation pages' second views in a real browser (recipe and fixtures: tests/test_browser.py):
the probing tab, and explaining P(IsNext). Screenshots go to $BERTLAB_SCREENSHOTS."""

from __future__ import annotations

import pytest
from test_browser import _check_clean, _screenshot, _wait_idle, browser, browser_model, page, server, shots  # noqa: F401

from bertlab.app_pages import page_titled

pytestmark = pytest.mark.browser
LAYERS, WHY = page_titled("What each layer knows"), page_titled("Why it answered")


def test_probing_tab(server, page, shots):  # noqa: F811
    page.goto(f"{server}/{LAYERS.url_path}", timeout=60_000)
    page.get_by_role("heading", name=LAYERS.heading).first.wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_role("tab", name="Probing classifiers").click()
    _wait_idle(page)
    # saved results draw a figure; without them the page shows the command that makes them
    page.locator("text=/centre of gravity|python -m bertlab.interpret probe/").first.wait_for(timeout=30_000)
    _check_clean(page, "What each layer knows (probing)")
    _screenshot(page, shots / "What_each_layer_knows-probing.png")


def test_why_it_answered_nsp(server, page, shots):  # noqa: F811
    page.goto(f"{server}/{WHY.url_path}", timeout=60_000)
    page.get_by_role("heading", name=WHY.heading).first.wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_text("Next sentence: P(IsNext)").click()
    _wait_idle(page)
    page.get_by_role("heading", name="Why P(IsNext)").first.wait_for(timeout=60_000)
    _wait_idle(page)
    _check_clean(page, "Why it answered (NSP)")
    assert page.locator(".js-plotly-plot").count() >= 3
    _screenshot(page, shots / "Why_it_answered-nsp.png")
