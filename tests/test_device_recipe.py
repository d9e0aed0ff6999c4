"""bench/device/: the recipe for a lent GPU machine. `bertlab ablate run --no-estimate` (queue a suite without
timing steps first, still checked), the commit a copy without git records, the bundle prepare.sh builds for
each table (from a tiny stand-in for ../shared, no network), and a rehearsal of a whole call on this CPU:
rehearse.sh's copy of the checkout with nothing beside it, ablate.sh with DEV=cpu on a tiny Table 6, and the
restore of what came back."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_finetune_recipe import write_sst2, write_upos
from test_pretrain import _write_corpus

from bench.device import bundle, pack
from bertlab.ablations import cli, planning
from bertlab.ablations import suites as ab
from bertlab.errors import InputError
from bertlab.jobs.registry import JobRegistry

REPO = Path(__file__).resolve().parent.parent
# the scripts call python3: this Python (a virtual environment's, say), not another on the PATH
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cli.add_args(p)
    return p.parse_args(argv)


def _no_timing(*args, **kwargs):
    raise AssertionError("the suite was estimated (its steps timed) despite --no-estimate")


def test_a_suite_queued_with_no_estimate_times_nothing_and_is_still_checked(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli.estimate, "estimate_suite", _no_timing)
    monkeypatch.setattr(ab, "estimate_suite", _no_timing)
    monkeypatch.setattr(JobRegistry, "_launch", lambda self, job, gpus: None)  # queued, never started
    data = tmp_path / "data"
    write_sst2(data / "glue" / "SST-2")
    runs = tmp_path / "runs"
    base = ["--runs", str(runs), "run", "table5", "--tasks", "sst2", "--seeds", "1", "--budget-s", "60"]
    base += ["--data", str(data), "--device", "cpu", "--no-estimate"]
    assert cli.run(_parse(base)) == 0
    assert "not estimated: --no-estimate" in capsys.readouterr().out
    (record,) = ab.list_suites(JobRegistry(runs, gpus=0))
    assert record["estimate"] is None and len(record["runs"]) == 3 + 4  # 3 pretraining, 4 rows x SST-2
    assert all((runs / r["job"] / "job.json").is_file() for r in record["runs"])
    # a bad setting is refused before anything is queued, as with the estimate
    with pytest.raises(InputError, match="cannot queue"):
        cli.run(_parse([*base, "--set", "train.no_such_setting=1"]))
    with pytest.raises(InputError, match="cannot queue"):
        cli.run(_parse([*base[:-1], "--task-recipe", "sst2=2/3e-4", "--no-estimate", "--set", "size=huge"]))
    assert len(ab.list_suites(JobRegistry(runs, gpus=0))) == 1
    assert len([d for d in runs.iterdir() if (d / "job.json").is_file()]) == 7


def test_a_copy_without_git_records_the_commit_its_sender_gave(monkeypatch):
    monkeypatch.setattr(ab.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 128, "", "no git"))
    monkeypatch.delenv("BERTLAB_COMMIT", raising=False)
    assert ab.commit_id() == "unknown"
    monkeypatch.setenv("BERTLAB_COMMIT", "c970f0e+dirty")
    assert ab.commit_id() == "c970f0e+dirty"


def _fake_shared(root: Path) -> Path:
    """A tiny stand-in for ../shared: every folder the four tables read, with a few lines in each file."""
    data = root / "data"
    (data / "corpus" / "gutenberg").mkdir(parents=True)
    _write_corpus(data / "corpus" / "gutenberg" / "pg1.txt")
    wiki = data / "corpus" / "wikitext-2-raw"
    wiki.mkdir(parents=True)
    (wiki / "wiki.valid.raw").write_text(" = Title = \n The one line of the article . \n")
    for task in ("SST-2", "MRPC", "RTE"):
        write_sst2(data / "glue" / task, n=8)
    (data / "glue" / "QNLI").mkdir()
    (data / "glue" / "QNLI" / "dev.tsv").write_text("index\tquestion\tsentence\tlabel\n")  # no train set
    (data / "squad").mkdir()
    (data / "squad" / "dev-v1.1.json").write_text('{"data": []}')
    ud = write_upos(data / "ud_en_ewt")
    (ud / "en_ewt-ud-test.conllu").write_text((ud / "en_ewt-ud-dev.conllu").read_text())
    (data / "wnut17").mkdir()
    for name in ("wnut17train.conll", "emerging.dev.conll", "emerging.test.annotated"):
        (data / "wnut17" / name).write_text("@paul\tB-person\n\n")
    return root


def _members(path: Path) -> set[str]:
    with tarfile.open(path) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def test_the_bundle_holds_what_each_tables_suite_reads(tmp_path):
    shared = _fake_shared(tmp_path / "shared")
    m6 = bundle.build(["table6"], shared=shared, out=tmp_path / "b6", wheels=False)
    files = _members(tmp_path / "b6" / "data.tar.gz")
    assert files == {
        "data/corpus/gutenberg/pg1.txt",
        "data/corpus/wikitext-2-raw/wiki.valid.raw",
        "data/glue/SST-2/train.tsv",
        "data/glue/SST-2/dev.tsv",
        "data/glue/MRPC/train.tsv",
        "data/glue/MRPC/dev.tsv",
    }
    # the `default` corpus is gensim's: without --no-wheels those two would be in site.tar.gz
    assert m6["named_corpora_need"] == ["gensim", "smart_open"] and not (tmp_path / "b6" / "site.tar.gz").exists()
    assert json.loads((tmp_path / "b6" / "bundle.json").read_text())["tables"] == ["table6"]
    m7 = bundle.build(["table7"], shared=shared, out=tmp_path / "b7", wheels=False)
    assert _members(tmp_path / "b7" / "data.tar.gz") == {  # all of UPOS's train and dev, no test files
        "data/ud_en_ewt/en_ewt-ud-train.conllu",
        "data/ud_en_ewt/en_ewt-ud-dev.conllu",
        "data/wnut17/wnut17train.conll",
        "data/wnut17/emerging.dev.conll",
    }
    assert m7["named_corpora_need"] == [] and m7["command"].startswith("bash bench/device/ablate.sh table7 ")
    m5 = bundle.build(["table5"], shared=shared, out=tmp_path / "b5", wheels=False)
    assert "data/squad/dev-v1.1.json" in _members(tmp_path / "b5" / "data.tar.gz")
    assert m5["absent_in_shared"] == ["glue/QNLI/train.tsv", "squad/train-v1.1.json"]  # trained on 80% of dev
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a bundle")
    with pytest.raises(InputError, match="not a device bundle"):
        bundle.build(["table7"], shared=shared, out=tmp_path / "mine", wheels=False)


@pytest.mark.parametrize("table", ["table5", "table6", "table7", "table8"])
def test_the_device_suite_is_the_committed_recipe_with_the_committed_sets_corpus(table):
    """What prepare.sh suggests is the page's committed recipe plus what that leaves out and the committed set
    recorded (corpus, grid, tasks, data folder, run-only settings); its printed arguments parse back to it."""
    spec = bundle.device_spec(table)
    recorded = bundle.committed_spec(table)
    suggested = planning.suggested_spec(table)
    assert spec.corpus == recorded.corpus and spec.grid == recorded.grid and spec.data == "../shared/data"
    assert spec.tasks == (suggested.tasks or recorded.tasks)
    assert spec.overrides[: len(suggested.overrides)] == suggested.overrides
    assert {o.split("=")[0] for o in spec.overrides[len(suggested.overrides) :]} <= planning.RUN_SETTINGS
    for field in ("budget_tokens", "seeds", "max_train_examples", "epochs", "task_recipes", "feature_lr"):
        assert getattr(spec, field) == getattr(suggested, field)
    assert cli.spec_from_args(_parse(["run", *bundle.suite_args(spec)])) == spec


def test_prepare_sh_prints_the_run_call(tmp_path):
    shared = _fake_shared(tmp_path / "shared")
    out = subprocess.run(
        [
            "bash",
            "bench/device/prepare.sh",
            "table7",
            "--shared",
            str(shared),
            "--out",
            str(REPO / ".device-cache" / f"test-{os.getpid()}"),
        ],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        assert out.returncode == 0, out.stderr
        call = json.loads(out.stdout[out.stdout.index("{") :])
        assert call["carry"] == [f".device-cache/test-{os.getpid()}"] and call["timeout_s"] == 600
        assert call["command"].startswith("bash bench/device/ablate.sh table7 --tasks upos,ner --max-train-examples 0")
        assert "a call carries" in out.stdout and "OVER THE LIMIT" not in out.stdout
    finally:
        shutil.rmtree(REPO / ".device-cache" / f"test-{os.getpid()}", ignore_errors=True)


def test_a_rehearsal_runs_a_tiny_table6_suite_as_a_device_call_and_restores_it(tmp_path):
    """rehearse.sh end to end: the bundle, a copy of the checkout with no ../shared beside it (ablate.sh links
    ../shared/data to the bundle, so the suite's recorded paths are the committed ones), one tiny shape and
    one SST-2 run on CPU, the $OUT files a run call brings back, and their restore here: the collected set,
    the run folders and the fp16 model, which `bertlab ablate collect` reads again."""
    shared = _fake_shared(tmp_path / "shared")
    where = tmp_path / "rehearsal"
    suite = ["table6", "--grid", "2/32/2", "--budget-tokens", "4000", "--seeds", "1", "--tasks", "sst2"]
    suite += ["--max-train-examples", "8", "--max-eval-examples", "8", "--epochs", "1", "--threads", "1"]
    suite += ["--data", "../shared/data", "--corpus", "../shared/data/corpus/gutenberg"]
    for setting in (
        "train.batch_size=8",
        "data.max_seq_length=32",
        "phase2={}",
        "eval_instances=16",
        "eval_data={max_seq_length: 32, max_predictions_per_seq: 5}",
        "data.heldout_fraction=0.1",
        "train.eval_every=0",
        "train.save_every=0",
        f"cache_dir={tmp_path / 'cache'}",
    ):
        suite += ["--set", setting]
    env = {
        **ENV,
        "WHERE": str(where),
        "PREPARE_ARGS": f"--shared {shared} --no-wheels",
        "POLL_S": "1",
        "DEADLINE_S": "240",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        ["bash", "bench/device/rehearse.sh", *suite], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert (where / "shared" / "data").resolve() == (where / "unpack" / "data").resolve()  # the link ablate.sh made
    out = where / "out"
    assert {f.name for f in out.iterdir()} == {"summary.txt", "results.tar.gz", "models.tar.part-00"}
    assert ": 2/2 finished, 0 running" in (out / "summary.txt").read_text()
    restored = where / "restored"
    (suite_id,) = [d.name for d in (restored / "runs" / "ablations").iterdir()]
    with open(restored / "collected" / suite_id / "table6.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["task"] for r in rows} == {"pretraining", "sst2"} and {r["variant"] for r in rows} == {"L2-H32-A2"}
    record = json.loads((restored / "collected" / suite_id / "table6.json").read_text())
    assert record["commit"] != "unknown"  # the copy has no .git: the bundle's commit
    assert record["spec"]["corpus"] == "../shared/data/corpus/gutenberg"  # as the committed sets record it
    (pretraining,) = [r["job"] for r in record["runs"] if r["column"] == "pretraining"]
    model = restored / "runs" / pretraining / "model"
    assert json.loads((model / "config.json").read_text())["torch_dtype"] == "float16"
    assert not any(p.suffix == ".safetensors" for p in (restored / "runs").rglob("*") if "model" not in p.parts)
    again = subprocess.run(
        [sys.executable, "-m", "bertlab", "ablate", "--runs", str(restored / "runs"), "collect", suite_id]
        + ["--out", str(tmp_path / "again")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    with open(tmp_path / "again" / "table6.csv") as f:
        assert list(csv.DictReader(f)) == rows


def test_models_are_packed_smallest_first_within_the_budget(tmp_path):
    models = []
    for job, size in (("big", 3000), ("small", 1000), ("mid", 2000)):
        m = tmp_path / "work" / "models" / job / "model"
        m.mkdir(parents=True)
        (m / "model.safetensors").write_bytes(b"x" * size)
        models.append(m)
    out = tmp_path / "out"
    out.mkdir()
    brought, left = pack.pack_models(models, out, budget=3500)
    assert [m.parent.name for m in brought] == ["small", "mid"] and [m.parent.name for m in left] == ["big"]
    with tarfile.open(out / "models.tar.part-00") as tar:
        assert sorted(tar.getnames()) == [
            "runs/mid/model",
            "runs/mid/model/model.safetensors",
            "runs/small/model",
            "runs/small/model/model.safetensors",
        ]
