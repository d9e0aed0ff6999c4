"""bertlab/finetune/evaluation.py: the task's official metrics, main metric first."""

import pytest

from bertlab.finetune.data import SequenceExample, TaggingExample
from bertlab.finetune.evaluation import score
from bertlab.finetune.tasks import get_task


def test_classification_scores_follow_the_task():
    examples = [SequenceExample("a", "b", label) for label in ("1", "0", "1", "1")]
    mrpc = score(get_task("mrpc"), examples, ["1", "0", "0", "1"])
    assert list(mrpc)[0] == get_task("mrpc").main_metric and mrpc["accuracy"] == pytest.approx(0.75)
    assert mrpc["f1"] == pytest.approx(0.8)
    assert list(score(get_task("cola"), examples, ["1", "0", "1", "1"]))[0] == "matthews"


def test_regression_and_tagging_scores():
    examples = [SequenceExample("a", "b", x) for x in (0.0, 1.0, 2.0)]
    stsb = score(get_task("stsb"), examples, [0.1, 0.9, 2.2])
    assert stsb["pearson"] > 0.9 and stsb["spearman"] == pytest.approx(1.0)
    tagged = [TaggingExample(["the", "cat"], ["DET", "NOUN"])]
    assert score(get_task("upos"), tagged, [["DET", "VERB"]]) == {"accuracy": 0.5}
