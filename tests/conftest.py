"""Tiny configs, vocabularies and checkpoints that tests build for themselves (no network, no ../shared),
and the runs folders, corpora and fake run folders the job tests share."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bertlab.config import BertConfig
from bertlab.jobs.spec import JobSpec, pretrain_args

torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _no_scheduling_settings_from_the_shell(monkeypatch):
    """The queue's slot settings a developer may have exported ($BERTLAB_JOBS_PER_GPU, $BERTLAB_CPU_SLOTS)
    must not change what the scheduling tests expect."""
    monkeypatch.delenv("BERTLAB_JOBS_PER_GPU", raising=False)
    monkeypatch.delenv("BERTLAB_CPU_SLOTS", raising=False)


WORDS = (
    "the a an cat dog sat on mat rug ran to park house in of and was is he she it they "
    "big small red blue quick brown fox jumps over lazy river tree bird sang sky sun day night "
    "paris france london england capital city man woman king queen walk walked walking play played"
).split()
PUNCT = list(".,!?;:'\"()-")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

SAMPLE_TEXT = [
    "The cat sat on the mat. It was a big cat.",
    "The dog ran to the park. He played in the park all day.",
    "Paris is the capital of France. London is the capital of England.",
    "The quick brown fox jumps over the lazy dog.",
    "The bird sang in the tree. The sun was in the sky.",
]


def write_vocab(path: Path) -> Path:
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces = ["##" + ch for ch in letters] + ["##s", "##ed", "##ing"]
    tokens = SPECIALS + PUNCT + letters + WORDS + sorted(set(pieces))
    seen, out = set(), []
    for t in tokens:
        if t not in seen:
            seen.add(t)
            out.append(t)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory) -> Path:
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt")


@pytest.fixture(scope="session")
def tokenizer(vocab_file):
    from bertlab.tokenizer import BertTokenizer

    return BertTokenizer.from_vocab(vocab_file)


def tiny_config(vocab_size: int, **kw) -> BertConfig:
    base = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    base.update(kw)
    return BertConfig(**base)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A random-weight tiny BertForPreTraining saved in our format."""
    from bertlab.model import BertForPreTraining
    from bertlab.storage.checkpoint import save_checkpoint

    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(len(tokenizer)))
    d = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_checkpoint(d, model, tokenizer)
    return d


@pytest.fixture(scope="session")
def tiny_electra_pair(tmp_path_factory, tokenizer) -> Path:
    """A random-weight tiny ELECTRA pair folder (generator/ and discriminator/), as a run exports it."""
    import dataclasses

    from bertlab.models.electra import ElectraConfig, ElectraPair
    from bertlab.storage.checkpoint import save_checkpoint

    torch.manual_seed(0)
    fields = dataclasses.asdict(tiny_config(len(tokenizer), initializer_range=0.2))
    pair = ElectraPair(ElectraConfig(**fields, embedding_size=16, generator_size=0.5, role="pair"))
    return save_checkpoint(tmp_path_factory.mktemp("electra") / "pair", pair, tokenizer)


@pytest.fixture(scope="session")
def tiny_albert_checkpoint(tmp_path_factory, tokenizer) -> Path:
    """A random-weight tiny ALBERT with the sentence-order head (no NSP), saved in our format."""
    import dataclasses

    from bertlab.models import albert
    from bertlab.storage.checkpoint import save_checkpoint

    torch.manual_seed(0)
    fields = dataclasses.asdict(tiny_config(len(tokenizer), initializer_range=0.2)) | {"use_nsp_head": False}
    model = albert.build(albert.AlbertConfig(**fields, embedding_size=16))
    return save_checkpoint(tmp_path_factory.mktemp("albert") / "albert", model, tokenizer)


@pytest.fixture(scope="session")
def tiny_distilbert_checkpoint(tmp_path_factory, vocab_file, tokenizer) -> Path:
    """A random-weight tiny DistilBERT (masked LM only) as transformers saves it, with our WordPiece vocab.txt:
    bertlab opens DistilBERT folders but does not write them."""
    import shutil

    transformers = pytest.importorskip("transformers")
    config = transformers.DistilBertConfig(
        vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("distilbert") / "distilbert"
    transformers.DistilBertForMaskedLM(config).save_pretrained(folder)
    shutil.copy(vocab_file, folder / "vocab.txt")
    return folder


# --------------------------------------------------------------------------------------
# Jobs: runs folders, a corpus, fake run folders
# --------------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parent.parent
CORPUS_WORDS = (
    "the a cat dog sat on mat ran to park house in big small red blue quick brown fox jumps over lazy "
    "river tree bird sang sky sun day night"
).split()


def write_corpus(path: Path, documents: int = 30) -> Path:
    """A Google-format corpus: one sentence a line, a blank line between documents."""
    rng = random.Random(0)
    docs = []
    for _ in range(documents):
        docs.append(
            "\n".join(
                " ".join(rng.choice(CORPUS_WORDS) for _ in range(rng.randint(5, 12))).capitalize() + "."
                for _ in range(8)
            )
        )
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def tiny_spec(corpus: Path, cache: Path, steps: int, name: str = "") -> JobSpec:
    """A one-layer H=32 pretraining: a few seconds of training on 2 cores, most of a job is start-up."""
    overrides = (
        f"corpus={corpus}",
        "model_overrides={num_layers: 1, hidden_size: 32, num_heads: 2, intermediate_size: 64}",
        "vocab_size=200",
        "data.dupe_factor=1",
        "train.eval_every=0",
        "train.log_every=1",
        "train.save_every=0",
        "eval_instances=16",
        f"cache_dir={cache}",
        "train.num_threads=1",
    )
    args = pretrain_args("configs/tiny.yaml", max_steps=steps, batch_size=8, max_seq_length=32, overrides=overrides)
    return JobSpec("pretrain", args, device="cpu", name=name)


def wait_for(predicate, timeout: float = 120.0, every: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def log_of(job) -> str:
    return (job.run_dir / "log.txt").read_text(errors="replace") if (job.run_dir / "log.txt").is_file() else ""


@pytest.fixture(scope="module")
def job_data(tmp_path_factory):
    """A small corpus and a data cache folder for tiny pretraining jobs."""
    d = tmp_path_factory.mktemp("jobs-data")
    return write_corpus(d / "corpus.txt"), d / "cache"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """An empty runs folder of this test's own ($BERTLAB_RUNS), run from the repository."""
    root = tmp_path / "runs"
    monkeypatch.setenv("BERTLAB_RUNS", str(root))
    monkeypatch.chdir(REPO)
    return root


def fake_launched_job(root: Path, name: str, pid: int, state: str = "running", log: str = "") -> Path:
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "job.json").write_text(
        json.dumps(
            {
                "kind": "pretrain",
                "args": [],
                "device": "cpu",
                "num_gpus": 1,
                "cwd": str(REPO),
                "command": "bertlab pretrain",
                "submitted": time.time(),
                "phase": "launched",
                "pid": pid,
                "child_pid": pid,
                "attempts": 1,
            }
        )
    )
    (run_dir / "status.json").write_text(json.dumps({"state": state, "step": 7, "pid": pid}))
    (run_dir / "log.txt").write_text(log)
    return run_dir


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture(scope="session")
def sst2_run(tmp_path_factory, tiny_checkpoint):
    """A real fine-tuned SST-2 run (two steps on eight sentences) from the tiny checkpoint, scored on its dev.tsv."""
    finetune = pytest.importorskip("bertlab.finetune")
    from bertlab.training.trainer import TrainConfig

    d = tmp_path_factory.mktemp("sst2")
    rows = ["the cat sat on the mat\t1", "the dog ran to the park\t0", "a big red bird sang\t1", "the lazy fox\t0"] * 2
    for name in ("train.tsv", "dev.tsv"):
        (d / name).write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    cfg = finetune.FinetuneConfig(
        task="sst2",
        data=str(d),
        model=str(tiny_checkpoint),
        max_seq_length=32,
        train=TrainConfig(max_steps=2, batch_size=4, eval_every=0, save_every=0, log_every=1),
    )
    run = d / "finetune-sst2-run"
    assert finetune.run_finetuning(cfg, run, progress_bar=False).state == "finished"
    return run
