"""bertlab/ablations/cli.py: `bertlab ablate ...` parses and prints; the work is bertlab.ablations' (planning, suites, estimate, reuse, results)."""

import argparse
import json

import pytest

from bertlab.ablations import planning
from bertlab.ablations.cli import add_args, run, spec_from_args
from bertlab.ablations.paper import CITATION
from bertlab.errors import InputError


def _parse(argv):
    p = argparse.ArgumentParser()
    add_args(p)
    return p.parse_args(argv)


def test_a_suite_spec_from_the_command_line():
    spec = spec_from_args(_parse(["run", "table5", "--tasks", "sst2, mrpc", "--seeds", "2", "--budget-s", "60"]))
    assert isinstance(spec, planning.SuiteSpec) and spec.tasks == ("sst2", "mrpc") and spec.seeds == 2


def test_reuse_on_the_command_line():
    argv = ["run", "table5", "--reuse", "mlm_nsp=job-1", "--reuse", " ltr = job-2 ", "--reuse-matching"]
    args = _parse(argv)
    spec = spec_from_args(args)
    assert spec.reuse == (("mlm_nsp", "job-1"), ("ltr", "job-2")) and args.reuse_matching
    assert "--reuse mlm_nsp=job-1 --reuse ltr=job-2" in planning.command(spec)
    with pytest.raises(InputError, match="VARIANT=JOB_ID"):
        spec_from_args(_parse(["run", "table5", "--reuse", "job-1"]))
    with pytest.raises(InputError, match="pretrained rows are mlm_nsp, no_nsp, ltr"):
        spec_from_args(_parse(["run", "table5", "--reuse", "ltr_bilstm=job-1"]))


def test_paper_prints_the_papers_table(capsys):
    assert run(_parse(["--json", "paper", "table8"])) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["citation"] == CITATION and out["rows"]


def test_a_tasks_own_recipe_on_the_command_line():
    argv = ["run", "table5", "--budget-s", "60", "--task-recipe", "mrpc=4/3e-4", "--task-recipe", "rte=3/2e-4"]
    spec = spec_from_args(_parse(argv))
    assert spec.task_recipes == (("mrpc", 4.0, 3e-4), ("rte", 3.0, 2e-4))
    assert "--task-recipe mrpc=4/0.0003 --task-recipe rte=3/0.0002" in planning.command(spec)
    with pytest.raises(InputError, match="TASK=EPOCHS/LR"):
        spec_from_args(_parse(["run", "table5", "--budget-s", "60", "--task-recipe", "mrpc:4"]))
