"""Google's BERTs (bertlab.storage.hub): the list, a Hugging Face cache populated offline from a random
checkpoint in the Hub's layout, loading from it, the sidebar picker listing it offline and, online,
offering every checkpoint and downloading one with progress (a fake Hub; no network)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bertlab.inference import load_model
from bertlab.storage import hub

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
    # Home says plainly what the shipped model is and how to switch to Google's
    info = " ".join(str(i.value) for i in at.info)
    assert (
        "this project pretrained with its own trainer" in info
        and "not to answer well" in info
        and "**Google's BERTs**" in info
    )
    picker.set_value(str(snap)).run()
    assert not at.exception and not at.error
    assert not any("this project pretrained" in str(i.value) for i in at.info)  # only said of the shipped model


# --- resolve / download: one weights file, the cache first ------------------------------------------
class FakeHub:
    """Stands in for huggingface_hub's network calls: serves files from local "remote" folders
    and writes them into a cache in the Hub layout, recording each file requested."""

    def __init__(self, remotes: dict[str, Path]):
        self.remotes, self.requested = remotes, []

    def list_repo_files(self, repo_id, **kw):
        return sorted(p.name for p in self.remotes[repo_id].iterdir())

    def hf_hub_download(self, repo_id, filename, *, cache_dir, tqdm_class=None, **kw):
        self.requested.append((repo_id, filename))
        repo = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
        snap = repo / "snapshots" / "c0ffee0000000000000000000000000000000000"
        snap.mkdir(parents=True, exist_ok=True)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(snap.name)
        shutil.copy(self.remotes[repo_id] / filename, snap / filename)
        if tqdm_class is not None:
            bar = tqdm_class(total=(snap / filename).stat().st_size, desc=filename)
            bar.update((snap / filename).stat().st_size)
            bar.close()
        return str(snap / filename)


@pytest.fixture
def fake_hub(tmp_path, tiny_checkpoint, monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    both = tmp_path / "remote-both"
    shutil.copytree(tiny_checkpoint, both)
    shutil.copy(both / "model.safetensors", both / "pytorch_model.bin")  # a name is all that is checked
    (both / "tf_model.h5").write_bytes(b"not fetched")
    bin_only = tmp_path / "remote-bin"
    bin_only.mkdir()
    import torch
    from safetensors.torch import load_file

    torch.save(load_file(tiny_checkpoint / "model.safetensors"), bin_only / "pytorch_model.bin")
    for f in ("config.json", "vocab.txt"):
        shutil.copy(tiny_checkpoint / f, bin_only / f)
    fake = FakeHub({"google/both": both, "google/bin-only": bin_only})

    class Api:
        def list_repo_files(self, repo_id, **kw):
            return fake.list_repo_files(repo_id)

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake.hf_hub_download)
    monkeypatch.setattr(hub, "is_online", lambda host="huggingface.co", timeout_s=1.5: True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    return fake


def test_resolve_fetches_one_weights_file_safetensors_first(fake_hub, tmp_path):
    from bertlab.storage.checkpoint import resolve

    snap = resolve("google/both")
    fetched = [f for _, f in fake_hub.requested]
    assert "model.safetensors" in fetched and "pytorch_model.bin" not in fetched and "tf_model.h5" not in fetched
    names = {p.name for p in snap.iterdir()}
    assert names & {"model.safetensors", "pytorch_model.bin", "tf_model.h5"} == {"model.safetensors"}
    assert {"config.json", "vocab.txt"} <= names
    assert snap.is_relative_to(tmp_path / "hub")  # the usual Hugging Face cache ($HF_HUB_CACHE)
    # cached now: a second resolve needs no network at all
    fake_hub.requested.clear()
    assert resolve("google/both") == snap and fake_hub.requested == []
    assert load_model("google/both", device="cpu").fill_mask("the cat [MASK] .").masks[0].candidates


def test_resolve_fetches_pytorch_model_bin_when_there_is_no_safetensors(fake_hub):
    from bertlab.storage.checkpoint import resolve

    progress = []
    snap = hub.download("google/bin-only", lambda f, text: progress.append(f))
    assert [f for _, f in fake_hub.requested] == ["config.json", "vocab.txt", "pytorch_model.bin"]
    assert progress and progress[-1] == pytest.approx(1.0)
    assert resolve("google/bin-only") == snap and not (snap / "model.safetensors").exists()
    assert load_model("google/bin-only", device="cpu").fill_mask("the cat [MASK] .").masks[0].candidates


def test_resolve_reads_an_offline_cache_without_the_network(tmp_path, tiny_checkpoint, monkeypatch):
    import huggingface_hub

    from bertlab.errors import CheckpointError
    from bertlab.storage.checkpoint import resolve

    snap = fake_hub_cache(tmp_path / "hub", tiny_checkpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*a, **kw):
        raise AssertionError("the network was used")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_network)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    assert resolve("google/bert_uncased_L-2_H-128_A-2") == snap
    assert hub.cached_snapshot("google/bert_uncased_L-2_H-128_A-2") == snap
    with pytest.raises(CheckpointError, match="HF_HUB_OFFLINE"):
        resolve("google/bert_uncased_L-4_H-128_A-2")


def test_a_mistyped_local_path_is_not_sent_to_the_hub(tmp_path, tiny_checkpoint, monkeypatch):
    # (#14) 'checkpoints/typo' looks like a Hub owner/name; offline it spent ~40 s in the Hub
    # client's retries before failing. A path under an existing folder is a folder name.
    from bertlab.errors import CheckpointError
    from bertlab.storage.checkpoint import resolve

    shutil.copytree(tiny_checkpoint, tmp_path / "checkpoints" / "bertlab-mini")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(hub, "download", lambda *a, **kw: pytest.fail("sent to the Hub"))
    with pytest.raises(
        CheckpointError, match=r"checkpoints/bertlab-mnii: no such checkpoint folder .*holds: bertlab-mini"
    ):
        resolve("checkpoints/bertlab-mnii")


def test_download_offline_fails_at_once_with_a_plain_message(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    from bertlab.errors import CheckpointError

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    asked = []
    monkeypatch.setattr(hub, "is_online", lambda host="huggingface.co", timeout_s=1.5: asked.append(host) or False)
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: pytest.fail("the Hub client was used offline"))
    with pytest.raises(CheckpointError, match="cannot be reached. Give a local checkpoint folder"):
        hub.download("someone/some-bert")
    assert asked == ["huggingface.co"]


def test_picker_offers_googles_berts_online_and_downloads_with_progress(request, tmp_path, monkeypatch):
    """Issue 12, online: the sidebar lists the 27 checkpoints with size, parameters and download
    size; "Download and use" reports progress, fetches one weights file into the Hugging Face
    cache and switches the app to it."""
    pytest.importorskip("streamlit")
    import socket
    from contextlib import nullcontext

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    monkeypatch.syspath_prepend(str(REPO))
    import pages.common as common  # imported before fake_hub patches hub.is_online: the page keeps the real one

    fake = request.getfixturevalue("fake_hub")
    repo_id = "google/bert_uncased_L-2_H-128_A-2"
    # every listed successor opens now (ALBERT's SentencePiece too): a stand-in for one that does not
    unread = hub.HubModel(
        "google/bigbird-roberta-base",
        12,
        768,
        12,
        family="BigBird",
        known_parameters=128_000_000,
        opens=False,
        note="BigBird (Zaheer et al. 2020): its SentencePiece tokenizer is not read by BERT Lab yet",
    )
    monkeypatch.setattr(common, "SUCCESSORS", (*hub.SUCCESSORS, unread))
    fake.remotes[repo_id] = fake.remotes["google/both"]
    real_connect = socket.create_connection
    monkeypatch.setattr(  # the Hub "answers" (is_online's TCP check); nothing else is touched
        socket,
        "create_connection",
        lambda address, *a, **kw: nullcontext() if address[0] == "huggingface.co" else real_connect(address, *a, **kw),
    )
    progress: list[tuple[float, str]] = []
    real_download = common.download
    monkeypatch.setattr(
        common, "download", lambda rid, report: real_download(rid, lambda f, t: (progress.append((f, t)), report(f, t)))
    )
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    st.cache_data.clear()  # the page caches "online?" for a minute; other tests ran it offline
    request.addfinalizer(st.cache_data.clear)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    pick = at.sidebar.selectbox(key="bertlab_hub_pick")
    assert len(pick.options) == 27 + len(hub.SUCCESSORS) + 1
    assert any(o.startswith("ALBERT · albert-base-v2: L=12 H=768 A=12") for o in pick.options)
    assert any(o.startswith("RoBERTa · roberta-base: L=12 H=768 A=12, 125M parameters") for o in pick.options)
    assert any(
        o.startswith("google-bert/bert-base-uncased: L=12 H=768 A=12, 110M parameters, 440 MB") for o in pick.options
    )
    assert any(
        o.startswith("google/bert_uncased_L-2_H-128_A-2: L=2 H=128 A=2, 4M parameters, 18 MB") for o in pick.options
    )
    pick.set_value(unread).run()  # a model BERT Lab cannot read is not offered
    assert at.sidebar.button(key="bertlab_hub_go").disabled
    assert any("SentencePiece" in c.value for c in at.sidebar.caption)
    pick.set_value(next(m for m in hub.GOOGLE_BERTS if m.repo_id == repo_id)).run()
    at.sidebar.button(key="bertlab_hub_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    fetched = [f for _, f in fake.requested]
    assert fetched[-1] == "model.safetensors" and "pytorch_model.bin" not in fetched  # one weights file
    assert progress[-1][0] == pytest.approx(1.0) and any("MB" in text for _, text in progress)
    chosen = Path(at.session_state["bertlab_model"])
    assert chosen.is_relative_to(tmp_path / "hub") and chosen == hub.cached_snapshot(repo_id)
    assert f"{repo_id} (Hub, cached)" in " ".join(at.sidebar.selectbox[0].options)
    # on a shared app (not on loopback) a download, possibly gigabytes, needs the admin token
    from streamlit import config

    from pages.common.admin import server_token

    monkeypatch.setenv("BERTLAB_ADMIN_TOKEN", "s3cret-token")
    server_token.clear()
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        at.run()
        assert not at.exception
        assert at.sidebar.button(key="bertlab_hub_go").disabled
        assert any("downloading needs the admin token" in c.value for c in at.sidebar.caption)
    finally:
        config.set_option("server.address", before)
        server_token.clear()
