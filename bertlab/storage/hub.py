"""Google's released BERTs on the Hugging Face Hub: the list, what is cached here, and downloads.

Owns: `GOOGLE_BERTS` (bert-base/large and the 24 small BERTs of Turc et al. 2019, each with its
shape, parameter count and download size), `hub_cache_dir`, `cached_models` (Hub ids whose
config, vocabulary and weights are in the local Hugging Face cache, found without the network),
`cached_snapshot` (one repo's cached folder), `is_online`, and `download` (one weights file, never both .bin and .safetensors, with a progress
callback), which leaves the files in the usual Hugging Face cache.

Imports bertlab.config (shapes), bertlab.models.registry (which model types open), bertlab.storage.modelfolder
(file names) and huggingface_hub (only inside
download); torch-free.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from bertlab.config import BertConfig, parameter_count
from bertlab.errors import CheckpointError
from bertlab.models.registry import known_model_types, model_type_of
from bertlab.storage.modelfolder import CONFIG_FILE, VOCAB_FILE, WEIGHTS_FILES, is_model_folder

# vocab.json + merges.txt: a byte-level BPE's (RoBERTa's), which tokenizer.json also holds;
# spiece.model: a SentencePiece model's (ALBERT's), read when a repo has no tokenizer.json
OTHER_FILES = (
    CONFIG_FILE,
    VOCAB_FILE,
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
    "spiece.model",
)
BASE_VOCAB = {True: 30522, False: 28996}  # uncased / cased WordPiece vocabularies


@dataclass(frozen=True)
class HubModel:
    """One of Google's BERT checkpoints on the Hub, or one of BERT's successors."""

    repo_id: str
    layers: int
    hidden: int
    heads: int
    uncased: bool = True
    note: str = ""
    family: str = "BERT"
    known_parameters: int = 0  # a successor's, from its model card (BERT's are worked out from the shape)
    opens: bool = True  # False: BERT Lab cannot read it yet (`note` says why), so it is not offered for download

    @property
    def parameters(self) -> int:
        if self.known_parameters:
            return self.known_parameters
        cfg = BertConfig(
            vocab_size=BASE_VOCAB[self.uncased],
            hidden_size=self.hidden,
            num_layers=self.layers,
            num_heads=self.heads,
            intermediate_size=4 * self.hidden,
        )
        return parameter_count(cfg)

    @property
    def download_mb(self) -> float:
        """fp32 weights, as the Hub serves them."""
        return self.parameters * 4 / 1e6

    @property
    def label(self) -> str:
        size = f"{self.download_mb / 1000:.1f} GB" if self.download_mb >= 1000 else f"{self.download_mb:.0f} MB"
        return (
            f"{self.repo_id}: L={self.layers} H={self.hidden} A={self.heads}, "
            f"{self.parameters / 1e6:.0f}M parameters, {size} download" + (f" ({self.note})" if self.note else "")
        )


GOOGLE_BERTS: tuple[HubModel, ...] = (
    HubModel("google-bert/bert-base-uncased", 12, 768, 12, note="BERT-base, the paper's"),
    HubModel("google-bert/bert-base-cased", 12, 768, 12, uncased=False, note="BERT-base, cased"),
    HubModel("google-bert/bert-large-uncased", 24, 1024, 16, note="BERT-large"),
    *(
        HubModel(
            f"google/bert_uncased_L-{layers}_H-{hidden}_A-{hidden // 64}",
            layers,
            hidden,
            hidden // 64,
            note="a small BERT (Turc et al. 2019)",
        )
        for layers in (2, 4, 6, 8, 10, 12)
        for hidden in (128, 256, 512, 768)
    ),
)
# BERT's successors (#54), as their authors released them. Parameter counts are their model cards'.
SUCCESSORS: tuple[HubModel, ...] = (
    HubModel(
        "roberta-base",
        12,
        768,
        12,
        uncased=False,
        family="RoBERTa",
        known_parameters=125_000_000,
        note="RoBERTa-base (Liu et al. 2019): no NSP, longer training, byte-level BPE",
    ),
    HubModel(
        "distilbert-base-uncased",
        6,
        768,
        12,
        family="DistilBERT",
        known_parameters=66_000_000,
        note="DistilBERT (Sanh et al. 2019): 6 layers distilled from BERT-base",
    ),
    HubModel(
        "google/electra-small-discriminator",
        12,
        256,
        4,
        family="ELECTRA",
        known_parameters=13_500_000,
        note="ELECTRA-Small's discriminator (Clark et al. 2020): replaced-token detection, no masked LM",
    ),
    HubModel(
        "google/electra-small-generator",
        12,
        256,
        4,
        family="ELECTRA",
        known_parameters=13_500_000,
        note="ELECTRA-Small's generator: a masked LM, as wide as its discriminator in this release",
    ),
    HubModel(
        "SpanBERT/spanbert-base-cased",
        12,
        768,
        12,
        uncased=False,
        family="BERT",
        known_parameters=108_000_000,
        note="SpanBERT (Joshi et al. 2019): released without its masked-LM and span-boundary heads, so it "
        "serves only the pages that need no masked LM",
    ),
    HubModel(
        "albert-base-v2",
        12,
        768,
        12,
        family="ALBERT",
        known_parameters=11_700_000,
        note="ALBERT-base v2 (Lan et al. 2019): shared layers, factorised embeddings, a SentencePiece tokenizer",
    ),
)
ALIASES = {
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-base-cased": "google-bert/bert-base-cased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
}


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def _snapshot_ok(snapshot: Path) -> bool:
    return is_model_folder(snapshot) and any(
        (snapshot / f).is_file() for f in (VOCAB_FILE, "tokenizer.json", "spiece.model")
    )


def cached_models(cache: str | Path | None = None) -> dict[str, Path]:
    """Hub id -> snapshot folder of every model complete in the local cache that a registered family
    opens (no network).

    A model counts when one snapshot holds config.json, weights and a vocabulary, and its config's
    model_type is one that bertlab.models.registry knows ("bert", or none, is BERT)."""
    root = Path(cache).expanduser() if cache else hub_cache_dir()
    out: dict[str, Path] = {}
    if not root.is_dir():
        return out
    for repo in sorted(root.glob("models--*")):
        parts = repo.name.split("--")[1:]
        if len(parts) < 2:
            continue
        repo_id = f"{parts[0]}/{'--'.join(parts[1:])}"
        snaps = (
            sorted((repo / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime, reverse=True)
            if (repo / "snapshots").is_dir()
            else []
        )
        for snap in snaps:
            if not _snapshot_ok(snap):
                continue
            try:
                model_type = model_type_of(json.loads((snap / CONFIG_FILE).read_text()))
            except (OSError, ValueError, AttributeError):
                continue
            if model_type in known_model_types():
                out[repo_id] = snap
                break
    return out


def cached_snapshot(repo_id: str, cache: str | Path | None = None) -> Path | None:
    """The complete snapshot of `repo_id` (or of its google-bert/ alias) in the local cache, or
    None; no network. `refs/main`'s snapshot is preferred, then the newest complete one."""
    root = Path(cache).expanduser() if cache else hub_cache_dir()
    for rid in dict.fromkeys((repo_id, ALIASES.get(repo_id, repo_id))):
        repo = root / ("models--" + rid.replace("/", "--"))
        if not (repo / "snapshots").is_dir():
            continue
        snaps = sorted((repo / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime, reverse=True)
        try:
            main = (repo / "refs" / "main").read_text().strip()
        except OSError:
            main = ""
        snaps.sort(key=lambda p: p.name != main)  # stable: refs/main first, then newest first
        for snap in snaps:
            if _snapshot_ok(snap):
                return snap
    return None


def is_online(host: str = "huggingface.co", timeout_s: float = 1.5) -> bool:
    """False under HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, else whether the Hub answers a TCP connect."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return False
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def download(repo_id: str, progress: Callable[[float, str], None] | None = None) -> Path:
    """Fetch a Hub BERT into the Hugging Face cache: config, vocabulary and ONE weights file
    (safetensors when the repo has it). `progress(fraction, text)` is called as bytes arrive.
    Returns the snapshot folder. Raises CheckpointError with a plain message when it cannot."""
    repo_id = ALIASES.get(repo_id, repo_id)
    try:
        from huggingface_hub import HfApi, hf_hub_download
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - ships with transformers
        raise CheckpointError("downloading needs huggingface_hub (pip install huggingface_hub)") from exc
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    if not is_online(host):  # offline, the Hub client retries for ~40 s before it gives up
        raise CheckpointError(
            f"{repo_id}: not a local folder, and the Hugging Face Hub ({host}) cannot be reached. "
            "Give a local checkpoint folder, or connect to download it."
        )
    try:
        files = set(HfApi().list_repo_files(repo_id))
    except Exception as exc:  # network errors, unknown repo
        raise CheckpointError(
            f"{repo_id}: the Hugging Face Hub could not list it ({type(exc).__name__}); "
            "are you online, and is the id right?"
        ) from exc
    weights = next((w for w in WEIGHTS_FILES if w in files), None)
    if weights is None or CONFIG_FILE not in files:
        raise CheckpointError(f"{repo_id}: no config.json with model.safetensors or pytorch_model.bin on the Hub")
    wanted = [f for f in OTHER_FILES if f in files] + [weights]
    done = [0]

    class _Bar(tqdm):  # huggingface_hub reports bytes through a tqdm class; forward them
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = False
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            super().update(n)
            if progress and self.total:
                share = (done[0] + min(1.0, self.n / self.total)) / len(wanted)
                progress(share, f"{self.desc or 'downloading'}: {self.n / 1e6:.0f} of {self.total / 1e6:.0f} MB")

    snapshot = None
    try:
        for f in wanted:
            # cache_dir read now: huggingface_hub reads $HF_HUB_CACHE once, at import
            path = hf_hub_download(repo_id, f, tqdm_class=_Bar, cache_dir=hub_cache_dir())
            snapshot = Path(path).parent
            done[0] += 1
            if progress:
                progress(done[0] / len(wanted), f"{f} done")
    except Exception as exc:
        raise CheckpointError(f"{repo_id}: download failed ({type(exc).__name__}: {str(exc)[:200]})") from exc
    return snapshot
