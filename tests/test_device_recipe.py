"""What a lent GPU machine needs from the package: `bertlab ablate run --no-estimate` (queue a suite without
timing steps first, still checked) and the commit a copy without git records."""

from __future__ import annotations

import argparse
import subprocess

import pytest
from test_finetune_recipe import write_sst2

from bertlab.ablations import cli
from bertlab.ablations import suites as ab
from bertlab.errors import InputError
from bertlab.jobs.registry import JobRegistry


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
