"""bertlab/jobs_view.py: what the Train and Jobs pages draw, from plain data."""

import math

from bertlab.jobs_view import (
    answer_html,
    curves_figure,
    format_count,
    format_gb,
    label_text,
    split_metrics,
    tags_html,
)


def test_numbers_read_short():
    assert format_count(1_552_898) == "1.55M" and format_count(12_345) == "12.3k" and format_count(None) == "?"
    assert format_gb(0.5) == "512 MB" and format_gb(3.25) == "3.2 GB" and format_gb(None) == "?"


def test_metric_lines_are_split_one_per_step_and_drawn():
    lines = [
        {"split": "train", "step": 1, "loss": 3.0},
        {"split": "train", "step": 1, "loss": 2.5},
        {"split": "eval", "step": 1, "mlm_acc": 0.1},
        {"split": "train", "step": 2, "loss": math.nan},
    ]
    train, evals = split_metrics(lines)
    assert [m["loss"] for m in train][0] == 2.5 and len(train) == 2 and len(evals) == 1
    assert curves_figure(lines) is not None


def test_predictions_as_html_escape_their_text():
    assert label_text("sst2", 1) == "1 (positive)" and label_text("upos", "NOUN") == "NOUN"
    assert "&lt;b&gt;" in tags_html(["<b>"], ["B-X"])
    marked = answer_html("the <cat> sat", 4, 9)
    assert "<mark" in marked and "&lt;cat&gt;" in marked
    assert "<mark" not in answer_html("text", 3, 99)  # a span outside the text is not drawn


def test_live_numbers_say_how_long_a_run_took_once_it_has_ended(tmp_path):
    import json

    from bertlab.jobs_view import live_numbers
    from bertlab.runs import read_job

    metrics = [{"split": "train", "step": 4, "loss": 2.5, "tokens_per_s": 1500.0}]
    shown = {}
    for state in ("running", "finished", "failed", "cancelled"):
        run_dir = tmp_path / state
        run_dir.mkdir()
        status = {"state": state, "step": 4, "total_steps": 8, "eta_s": 90, "started": 1000.0, "ended": 1125.0}
        (run_dir / "status.json").write_text(json.dumps(status))
        shown[state] = dict(live_numbers(read_job(run_dir), metrics))
    assert shown["running"]["ETA"] and "Took" not in shown["running"]
    for state in ("finished", "failed", "cancelled"):
        assert "Took" in shown[state] and "ETA" not in shown[state], state
    assert shown["finished"]["Step"] == "4 / 8" and shown["finished"]["Train loss"] == "2.500"
