"""Google's BERTs (bertlab.hub): the list, a Hugging Face cache populated offline from a random
checkpoint in the Hub's layout, loading from it, and the sidebar picker listing it offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bertlab import hub
from bertlab.inference import load_model

REPO = Path(__file__).resolve().parent.parent


def fake_hub_cache(root: Path, checkpoint: Path, repo_id: str = "google/bert_uncased_L-2_H-128_A-2") -> Path:
    """The layout huggingface_hub writes: models--ORG--NAME/{blobs,refs,snapshots/<commit>/FILE}."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snap.name)
    for f in ("config.json", "model.safetensors", "vocab.txt"):
        shutil.copy(checkpoint / f, snap / f)
    return snap


def test_google_berts_are_listed_with_their_sizes():
    ids = [m.repo_id for m in hub.GOOGLE_BERTS]
    assert len(ids) == 3 + 24 and len(set(ids)) == len(ids)
    assert "google-bert/bert-base-uncased" in ids and "google/bert_uncased_L-12_H-768_A-12" in ids
    base = next(m for m in hub.GOOGLE_BERTS if m.repo_id == "google-bert/bert-base-uncased")
    assert 108e6 < base.parameters < 112e6  # BERT-base: 110M
    assert "440 MB download" in base.label
    small = next(m for m in hub.GOOGLE_BERTS if m.repo_id.endswith("L-2_H-128_A-2"))
    assert small.heads == 2 and 4e6 < small.parameters < 5e6  # BERT-tiny: 4.4M


def test_cached_models_are_found_without_the_network(tmp_path, tiny_checkpoint, monkeypatch):
    cache = tmp_path / "hub"
    snap = fake_hub_cache(cache, tiny_checkpoint)
    incomplete = cache / "models--google--other" / "snapshots" / "x"
    incomplete.mkdir(parents=True)
    (incomplete / "config.json").write_text("{}")  # no weights: not listed
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert hub.hub_cache_dir() == cache
    assert hub.cached_models() == {"google/bert_uncased_L-2_H-128_A-2": snap}
    lm = load_model(str(snap))
    assert lm.fill_mask("the cat sat on the [MASK] .").masks[0].candidates


def test_offline_mode_is_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.is_online() is False


def test_picker_lists_the_cache_and_says_offline(tmp_path, tiny_checkpoint, monkeypatch):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    cache = tmp_path / "hub"
    snap = fake_hub_cache(cache, tiny_checkpoint)
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_MODEL", str(tiny_checkpoint))
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    picker = at.sidebar.selectbox[0]
    assert str(snap) in picker.options or any("(Hub, cached)" in o for o in picker.options), picker.options
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "Offline" in captions and "google/bert_uncased_L-2_H-128_A-2" in captions
    picker.set_value(str(snap)).run()
    assert not at.exception and not at.error
