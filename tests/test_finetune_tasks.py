"""bertlab/finetune/tasks.py: the task specs the CLI, the jobs and the recipe share."""

import pytest

from bertlab.errors import InputError
from bertlab.finetune.tasks import SHAPES, TASKS, get_task
from bertlab.jobs.spec import FINETUNE_TASKS


def test_every_task_has_a_known_shape_and_a_main_metric_first():
    for name, spec in TASKS.items():
        assert spec.name == name and spec.shape in SHAPES
        assert spec.main_metric == spec.metrics[0]
    assert set(FINETUNE_TASKS) == set(TASKS)  # the Train page offers exactly these


def test_task_names_are_forgiving_and_unknown_ones_say_which_exist():
    assert get_task("SST-2") is TASKS["sst2"] and get_task("sts_b") is TASKS["stsb"]
    with pytest.raises(InputError, match="choose one of"):
        get_task("imdb")


def test_default_sequence_length_is_google_scripts():
    # Issue 12: run_squad.py reads 384-token windows (doc stride 128); run_classifier.py 128
    assert {name: spec.max_seq_length for name, spec in TASKS.items() if spec.max_seq_length != 128} == {"squad": 384}


def test_suggested_learning_rate_follows_the_model_width_and_mode():
    from bertlab.finetune.tasks import suggested_learning_rate

    assert suggested_learning_rate(256) == 3e-4  # the shipped mini model
    assert suggested_learning_rate(768) == 5e-5  # BERT-base: the paper's
    assert suggested_learning_rate(None) == 5e-5  # unknown: the paper's
    assert suggested_learning_rate(768, "feature") == 1e-3
