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


def test_the_committed_recipe_on_the_command_line():
    """Without options a suite takes SuiteSpec's defaults; --committed-recipe takes the table's committed set's
    recipe (the page's suggestion), each option given replacing its value, and the printed command spells it out."""
    assert spec_from_args(_parse(["run", "table7"])) == planning.SuiteSpec("table7")
    for table in ("table5", "table6", "table7", "table8"):
        assert spec_from_args(_parse(["run", table, "--committed-recipe"])) == planning.suggested_spec(table)
    spec = spec_from_args(_parse(["run", "table7", "--committed-recipe", "--epochs", "3", "--seeds", "1"]))
    assert (spec.epochs, spec.seeds, spec.max_train_examples, spec.max_eval_examples) == (3.0, 1, 0, 0)
    assert spec.task_recipes == planning.suggested_spec("table7").task_recipes
    printed = planning.command(spec)
    assert "--epochs 3" in printed and "--max-train-examples 0 --max-eval-examples 0" in printed
    assert spec_from_args(_parse(printed.split()[2:])) == spec  # the printed command needs no --committed-recipe
    # a wall-clock budget asked for replaces the recipe's tokens; a task recipe given replaces the table's
    t8 = spec_from_args(
        _parse(["run", "table8", "--committed-recipe", "--budget-s", "60", "--task-recipe", "upos=1/1e-4"])
    )
    assert (t8.budget_s, t8.budget_tokens, t8.task_recipes) == (60.0, 0, (("upos", 1.0, 1e-4),))
    assert t8.overrides == ("train.batch_size=128",) and t8.size == "mini"


def test_the_frozen_taggers_rate_on_the_command_line():
    """--feature-lr sets the rate of the feature-based runs only: fine-tuning keeps its task recipe, and the
    printed command carries it."""
    spec = spec_from_args(_parse(["run", "table7", "--committed-recipe", "--feature-lr", "3e-3", "--tasks", "upos"]))
    assert spec.feature_lr == 3e-3 and spec_from_args(_parse(["run", "table7"])).feature_lr == 1e-3
    runs = [r for r in planning.plan(spec, "s") if r.column != "pretraining"]
    rates = {r.variant: r.spec.args[r.spec.args.index("--lr") + 1] for r in runs}
    assert rates["finetune"] == str(dict((t, lr) for t, _, lr in spec.task_recipes)["upos"])
    assert {rates[v] for v in rates if v != "finetune"} == {"0.003"}
    printed = planning.command(spec)
    assert "--feature-lr 0.003" in printed and spec_from_args(_parse(printed.split()[2:])) == spec
    with pytest.raises(InputError, match="learning rates must be above 0"):
        planning.SuiteSpec("table7", feature_lr=0)


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


def test_a_tasks_own_taggers_rate_on_the_command_line():
    """--task-feature-lr gives one task's frozen-feature taggers their own rate (a task whose taggers do best at
    another rate than the suite's): the other task's taggers and every fine-tuning run keep theirs."""
    argv = ["run", "table7", "--committed-recipe", "--feature-lr", "3e-3", "--task-feature-lr", "upos=1e-2"]
    spec = spec_from_args(_parse(argv))
    assert spec.task_feature_lrs == (("upos", 1e-2),) and spec.feature_rate("upos") == 1e-2
    assert spec.feature_rate("ner") == 3e-3
    runs = [r for r in planning.plan(spec, "s") if r.column != "pretraining"]
    rates = {(r.variant, r.column): r.spec.args[r.spec.args.index("--lr") + 1] for r in runs}
    assert {rates[v, "upos"] for v, _ in rates if v != "finetune"} == {"0.01"}
    assert {rates[v, "ner"] for v, _ in rates if v != "finetune"} == {"0.003"}
    recipe = dict((t, lr) for t, _, lr in spec.task_recipes)
    assert (rates["finetune", "upos"], rates["finetune", "ner"]) == (str(recipe["upos"]), str(recipe["ner"]))
    printed = planning.command(spec)
    assert "--task-feature-lr upos=0.01" in printed and spec_from_args(_parse(printed.split()[2:])) == spec
    assert planning.SuiteSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec  # the suite record
    assert planning.parse_task_feature_lrs(" upos=1e-2, ner=3e-3 ") == (("upos", 1e-2), ("ner", 3e-3))
    # the committed recipe's own rates stay unless a --feature-lr typed alone sets every task's
    committed = spec_from_args(_parse(["run", "table7", "--committed-recipe"]))
    assert committed.task_feature_lrs == planning.suggested_spec("table7").task_feature_lrs
    alone = spec_from_args(_parse(["run", "table7", "--committed-recipe", "--feature-lr", "5e-3"]))
    assert alone.task_feature_lrs == () and alone.feature_rate("upos") == alone.feature_rate("ner") == 5e-3
    for bad in ("upos", "upos=fast", "=1e-2"):
        with pytest.raises(InputError, match="TASK=LR"):
            planning.parse_task_feature_lrs(bad)
    for rates_given, message in (
        ((("upso", 1e-2),), "unknown task 'upso'"),
        ((("upos", 0.0),), "above 0"),
        ((("upos", 1e-2), ("upos", 3e-3)), "one taggers' rate"),
    ):
        with pytest.raises(InputError, match=message):
            planning.SuiteSpec("table7", task_feature_lrs=rates_given)


def test_options_given_beat_the_committed_recipe():
    """--committed-recipe fills in the committed set's tasks, shapes and corpus; each one given replaces it."""
    spec = spec_from_args(
        _parse(["run", "table6", "--committed-recipe", "--tasks", "sst2", "--grid", "2/128/2", "--corpus", "default"])
    )
    assert (spec.tasks, spec.grid, spec.corpus) == (("sst2",), ((2, 128, 2),), "default")
    committed = spec_from_args(_parse(["run", "table6", "--committed-recipe"]))
    assert len(committed.grid) == 9 and "gutenberg" in committed.corpus and committed.size == "mini"
    plain = spec_from_args(_parse(["run", "table6"]))  # without it, the plain defaults
    assert (plain.tasks, plain.grid, plain.corpus, plain.size) == ((), (), "", "tiny")
