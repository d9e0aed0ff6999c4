"""The interpretation pages' second views in a real browser (recipe and fixtures: tests/test_browser.py):
What each layer knows' tabs (nearest words in a corpus, feed-forward neuron factors, probing), explaining
P(IsNext), and a fine-tuned classifier's answers to its dev file. Screenshots go to $BERTLAB_SCREENSHOTS."""

from __future__ import annotations

import shutil

import pytest
from test_browser import (  # noqa: F401
    _check_clean,
    _screenshot,
    _wait_idle,
    browser,
    browser_model,
    page,
    runs,
    server,
    shots,
)

from bertlab.app_pages import page_titled

pytestmark = pytest.mark.browser
LAYERS, WHY = page_titled("What each layer knows"), page_titled("Why it answered")


def _layers_tab(page, server: str, tab: str) -> None:  # noqa: F811
    """What each layer knows, with one of its tabs open."""
    page.goto(f"{server}/{LAYERS.url_path}", timeout=60_000)
    page.get_by_role("heading", name=LAYERS.heading).first.wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_role("tab", name=tab).click()
    _wait_idle(page)


def test_probing_tab(server, page, shots):  # noqa: F811
    _layers_tab(page, server, "Probing classifiers")
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
    # plotly draws in the browser after the script run ends: wait for the third figure, not a count at once
    # (a CI run under load counted 0 right after the heading appeared)
    page.locator(".js-plotly-plot").nth(2).wait_for(timeout=60_000)
    _screenshot(page, shots / "Why_it_answered-nsp.png")


def test_nearest_words_in_a_corpus(server, page, shots):  # noqa: F811
    """What each layer knows, "Nearest in a corpus": the default sentence's word against the Wikipedia
    sample, read once with a progress bar, then the figure, the reading and the neighbours in context."""
    _layers_tab(page, server, "Nearest in a corpus")
    page.get_by_text("MB of vectors").first.wait_for(timeout=120_000)  # the index: ~10 s on 2 cores
    _wait_idle(page)
    _check_clean(page, "What each layer knows (nearest)")
    assert page.get_by_text("1,000 sentences").count() >= 1
    _screenshot(page, shots / "What_each_layer_knows-nearest.png")


def test_feed_forward_neuron_factors(server, page, shots):  # noqa: F811
    """What each layer knows, "Feed-forward neurons": the factors figure and a shaded row a factor."""
    _layers_tab(page, server, "Feed-forward neurons")
    page.get_by_text("of the activations of").first.wait_for(timeout=60_000)
    _check_clean(page, "What each layer knows (neurons)")
    _screenshot(page, shots / "What_each_layer_knows-neurons.png")


def test_why_it_answered_browses_a_dev_set(server, page, shots, runs, sst2_run):  # noqa: F811
    """Why it answered, a fine-tuned classifier's answers to its dev file: the confusion matrix, the
    table of its mistakes and the one picked, explained below."""
    if not (runs / sst2_run.name).exists():
        shutil.copytree(sst2_run, runs / sst2_run.name)
    page.goto(f"{server}/{WHY.url_path}", timeout=60_000)
    _wait_idle(page)
    page.get_by_text("A fine-tuned model's answer", exact=True).click()
    _wait_idle(page)
    page.get_by_text("Pick one from a labelled file", exact=True).click()
    _wait_idle(page)
    page.get_by_text("Its answers to dev.tsv").first.wait_for(timeout=60_000)
    page.get_by_text("Integrated gradients", exact=True).first.wait_for(timeout=60_000)
    _wait_idle(page)
    _check_clean(page, "Why it answered (dev set)")
    _screenshot(page, shots / "Why_it_answered-dev-set.png")
