"""bertlab/jobs/view.py and its neighbours (metric_lines, curves, progress, states, predictions): what the Train
and Jobs pages draw, from plain data."""

import math

import pytest

from bertlab.finetune.tasks import label_text
from bertlab.jobs.curves import curves_figure
from bertlab.jobs.metric_lines import split_metrics
from bertlab.jobs.predictions import answer_html, tags_html
from bertlab.jobs.runs import Job
from bertlab.jobs.states import (
    can_cancel,
    can_delete,
    can_resume,
    can_try,
    expects_metrics,
    is_waiting,
    log_expanded,
    progress_fraction,
    state_messages,
    uses_gpu_now,
)
from bertlab.jobs.view import format_count, format_gb


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

    from bertlab.jobs.runs import read_job
    from bertlab.jobs.view import live_numbers

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
    assert "Skipped (NaN)" not in shown["finished"]  # none skipped: nothing to say
    skipped = dict(live_numbers(read_job(tmp_path / "failed"), [{**metrics[0], "skipped_steps": 12}]))
    assert skipped["Skipped (NaN)"] == "12 steps"


def test_a_short_finished_run_reads_on_a_step_axis_from_zero_with_chance_beside_its_accuracy(tmp_path):
    """Issue 25: one point on a 19-21 axis looked empty; 'Eval accuracy 49.9%' said nothing of chance."""
    import json

    from bertlab.jobs.metric_lines import chance_levels
    from bertlab.jobs.runs import read_job
    from bertlab.jobs.view import live_numbers

    run_dir = tmp_path / "sst2-run"
    run_dir.mkdir()
    (run_dir / "status.json").write_text(json.dumps({"state": "finished", "step": 20, "total_steps": 20}))
    (run_dir / "run_config.json").write_text(
        json.dumps({"kind": "finetune", "task_setup": {"shape": "single", "labels": ["0", "1"]}})
    )
    metrics = [
        {"split": "train", "step": 20, "loss": 0.69, "accuracy": 0.52},
        {"split": "eval", "step": 20, "accuracy": 0.499},
    ]
    job = read_job(run_dir)
    assert chance_levels(job) == {"nsp_acc": 0.5, "accuracy": 0.5}
    assert dict(live_numbers(job, metrics))["Eval accuracy (chance 50%)"] == "49.9%"
    fig = curves_figure(metrics, chance=chance_levels(job))
    assert fig.layout.xaxis.rangemode == "tozero"  # the lone step-20 point sits at the right of 0..20
    chance_lines = [s for s in fig.layout.shapes if s.y0 == 0.5 and s.y1 == 0.5]
    assert len(chance_lines) == 1 and [t.name for t in fig.data if "chance" in t.name] == ["chance (accuracy): 50%"]
    early = curves_figure([{"split": "train", "step": 1, "loss": 3.0}])
    assert early.layout.xaxis.range == (0, 2.1)
    # a run that recorded its dev set's most frequent label: always answering it is the level to beat
    (run_dir / "run_config.json").write_text(
        json.dumps(
            {"kind": "finetune", "task_setup": {"shape": "single", "labels": ["0", "1"]}, "dev_majority": 444 / 872}
        )
    )
    assert chance_levels(read_job(run_dir))["accuracy"] == pytest.approx(0.509, abs=1e-3)


def _job(tmp_path, state: str, **kw) -> Job:
    return Job(id="r", run_dir=tmp_path, kind="pretrain", state=state, managed=True, alive=False, submitted=0.0, **kw)


def test_each_state_says_what_it_means(tmp_path):
    def said(job):
        return [(m.level, m.text, m.icon) for m in state_messages(job)]

    assert said(_job(tmp_path, "running", progress=0.4)) == []
    assert said(_job(tmp_path, "queued")) == [
        ("info", "Waiting for a free device; it starts when the job ahead of it ends.", None)
    ]
    assert said(_job(tmp_path, "preparing")) == [("info", "Preparing: reading the data and building the model…", None)]
    assert said(_job(tmp_path, "failed", error="boom: lower --lr")) == [
        ("error", "This run failed: boom: lower --lr", ":material/error:")  # one line: text, wrapped
    ]
    assert said(_job(tmp_path, "failed", error="Traceback\n  line 1\nValueError: x")) == [
        ("error", "This run failed.\n\n```\nTraceback\n  line 1\nValueError: x\n```", ":material/error:")
    ]
    assert "no error recorded" in said(_job(tmp_path, "failed"))[0][1]
    stopping = _job(tmp_path, "cancelled")
    stopping.alive = True
    assert said(stopping) == [("info", "Stopping: saving a checkpoint and exiting…", None)]
    assert said(_job(tmp_path, "cancelled")) == [
        ("info", "Cancelled. No checkpoint was saved; Resume starts it again.", None)
    ]
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "trainer_state.pt").write_bytes(b"")
    saved = _job(tmp_path, "cancelled", status={"checkpoint_step": 40})
    assert said(saved)[0][1] == "Cancelled. Resume continues from its last checkpoint (step 40)."
    unreadable = said(_job(tmp_path, "finished", error="status.json: bad JSON"))
    assert unreadable == [
        ("warning", "Part of this run's record cannot be read: status.json: bad JSON", ":material/warning:")
    ]


def test_what_a_state_allows(tmp_path):
    queued, running, failed = (_job(tmp_path, s) for s in ("queued", "running", "failed"))
    assert is_waiting(queued) and is_waiting(running) and not is_waiting(failed)
    assert can_cancel(queued) and can_cancel(running) and not can_cancel(failed)
    assert can_resume(failed) and not can_resume(running)
    assert can_delete(queued) and can_delete(failed) and not can_delete(running)
    assert not expects_metrics(queued) and expects_metrics(running) and log_expanded(failed)
    assert progress_fraction(_job(tmp_path, "running", progress=1.7)) == 1.0
    assert progress_fraction(_job(tmp_path, "finished", progress=0.5)) is None
    assert uses_gpu_now(_job(tmp_path, "running", device="cuda:0")) and not uses_gpu_now(running)
    assert not can_try(_job(tmp_path, "finished"))  # no model written
    leftover = _job(tmp_path, "cancelled")
    leftover.alive = True  # still saving: not resumable or deletable, and the page keeps refreshing
    assert is_waiting(leftover) and not can_resume(leftover) and not can_delete(leftover)
    unmanaged = _job(tmp_path, "running")
    unmanaged.managed = False
    assert not can_cancel(unmanaged)


def test_the_runs_table_leaves_missing_values_empty_and_sizes_columns_for_their_longest_value(tmp_path):
    """A queued or cancelled run's loss read "None"; a running run's ETA lost its last character."""
    from bertlab.jobs.view import jobs_table, jobs_table_widths

    running = _job(
        tmp_path,
        "running",
        step=120,
        total_steps=1000,
        progress=0.12,
        eta_s=387.0,
        status={"last_train": {"loss": 5.4321}},
    )
    rows = jobs_table([_job(tmp_path, "queued"), _job(tmp_path, "cancelled"), running], now=100.0)
    assert not [(r["run"], k) for r in rows for k, v in r.items() if v is None or v == "None"]
    assert [r["loss"] for r in rows] == ["", "", "5.432"] and rows[2]["ETA"] == "6 min 27 s"
    widths = jobs_table_widths(rows)
    assert list(widths) == [k for k in rows[0] if k not in ("device", "submitted")]  # see the next test
    for name, px in widths.items():
        assert px >= 7 * max(len(name), *(len(str(r[name])) for r in rows)), name
    # the ETA column is as wide before a run has one: the table refreshes in place as the run starts
    assert jobs_table_widths(rows[:2])["ETA"] == widths["ETA"] >= 7 * len("99 h 59 min")


# --------------------------------------------------------------------------------------
# A fine-tuning run's accuracy, as its trainer logs it
# --------------------------------------------------------------------------------------
def _logged_score_key(shape: str) -> str:
    """The accuracy key a fine-tuning run's train lines carry, from the recipe that writes them."""
    from types import SimpleNamespace

    from bertlab.finetune.recipe import FinetuneTask

    stand_in = SimpleNamespace(spec=SimpleNamespace(shape=shape))  # summarize reads only the task's shape
    (key,) = FinetuneTask.summarize(stand_in, {"correct": 3.0, "count": 4.0})
    return key


def _accuracy_panel(fig) -> list[str]:
    """The names of the accuracy panel's lines (not its chance levels' legend entries)."""
    return [t.name for t in fig.data if t.xaxis == "x2" and not t.name.startswith("chance")]


@pytest.mark.parametrize(("shape", "shown"), [("single", "accuracy"), ("tagging", "accuracy"), ("qa", "span acc")])
def test_a_finetuned_runs_train_accuracy_is_drawn_before_its_first_evaluation(tmp_path, shape, shown):
    """User review: a fine-tuned SST-2 run cancelled at step 772 of 3000 (no evaluation yet) drew an
    'Accuracy' title over a blank plot, though every train line had its 'acc'."""
    import json

    from bertlab.jobs.metric_lines import chance_levels
    from bertlab.jobs.runs import read_job
    from bertlab.jobs.view import live_numbers

    key = _logged_score_key(shape)
    run_dir = tmp_path / "sst2-run"
    run_dir.mkdir()
    (run_dir / "status.json").write_text(json.dumps({"state": "cancelled", "step": 772, "total_steps": 3000}))
    (run_dir / "run_config.json").write_text(
        json.dumps({"kind": "finetune", "task_setup": {"shape": shape, "labels": ["0", "1"]}, "dev_majority": 0.51})
    )
    job = read_job(run_dir)
    train = [{"split": "train", "step": s, "loss": 0.7 - s / 5000, key: 0.5 + s / 4000} for s in range(20, 780, 20)]
    fig = curves_figure(train, chance=chance_levels(job))
    assert _accuracy_panel(fig) == [f"train {shown}"]
    assert dict(live_numbers(job, train)).get(f"Train {shown}" + (" (chance 51%)" if shape == "single" else "")) == (
        "69.0%"
    )
    if shape == "single":  # a classifier: what always answering the commonest label scores, drawn once
        fig = curves_figure([*train, {"split": "eval", "step": 760, "accuracy": 0.8}], chance=chance_levels(job))
        assert _accuracy_panel(fig) == ["train accuracy", "eval accuracy"]
        assert [s.y0 for s in fig.layout.shapes] == [0.51]


# --------------------------------------------------------------------------------------
# The ETA: at the pace the run goes now
# --------------------------------------------------------------------------------------
TOTAL, TOKENS_PER_STEP = 3000, 410


def _attempt(first: int, last: int, started: float, s_per_step: float, before_s: float = 0.0) -> list[dict]:
    """Train lines every 20 steps as the trainer writes them, for one attempt that started at `started`
    from step `first` and took `s_per_step`; `before_s`: training time of the earlier attempts (what the
    trainer's own ETA, recorded in each line, projects from)."""
    lines = []
    for step in range(first + 20, last + 1, 20):
        train_s = before_s + (step - first) * s_per_step
        lines.append(
            {
                "split": "train",
                "step": step,
                "time": started + 2.0 + (step - first) * s_per_step,  # 2 s to set up before the first step
                "loss": 0.4,
                "tokens": step * TOKENS_PER_STEP,
                "tokens_per_s": TOKENS_PER_STEP / s_per_step,
                "progress": step / TOTAL,
                "eta_s": train_s / (step / TOTAL) * (1 - step / TOTAL),
                "acc": 0.8,
            }
        )
    return lines


def _running(tmp_path, lines: list[dict], started: float) -> Job:
    last = lines[-1]
    return _job(
        tmp_path,
        "running",
        step=last["step"],
        total_steps=TOTAL,
        progress=last["progress"],
        eta_s=last["eta_s"],
        status={"started": started, "last_train": last},
    )


def test_the_eta_of_a_resumed_run_follows_its_pace_now_not_the_pace_before_the_resume(tmp_path):
    """User review: a fine-tuning run resumed beside another job said 'ETA 37 s' at step 2,500 of 3,000
    beside 'Tokens/s 957': 500 steps at that rate take about 4 minutes. Its trainer projects the training
    time of all its attempts; the first ran alone, 8x as fast."""
    from bertlab.formatting import format_duration
    from bertlab.jobs.progress import eta_s
    from bertlab.jobs.view import jobs_table, live_numbers

    first = _attempt(0, 2340, started=1000.0, s_per_step=0.053)  # cancelled at step 2,340, resumed an hour later
    resumed_at = first[-1]["time"] + 3600
    lines = first + _attempt(2340, 2500, started=resumed_at, s_per_step=0.43, before_s=2340 * 0.053)
    job = _running(tmp_path, lines, started=resumed_at)
    assert job.eta_s == pytest.approx(38.6, abs=0.5)  # what the page said (the trainer's estimate)
    shown = dict(live_numbers(job, lines))
    assert shown["Tokens/s"] == "953"
    assert eta_s(job, lines) == pytest.approx(500 * 0.43, rel=0.01)
    assert eta_s(job, lines) == pytest.approx(500 * TOKENS_PER_STEP / lines[-1]["tokens_per_s"], rel=0.01)
    assert shown["ETA"] == format_duration(eta_s(job, lines)) == "3 min 35 s"
    # the runs table says the same, from the same lines; from its status alone, from its last line's rate
    assert jobs_table([job], metrics={job.id: lines})[0]["ETA"] == "3 min 35 s"
    assert jobs_table([job])[0]["ETA"] == "3 min 35 s"
    # one line into the resumed attempt: that line's own rate, not the two lines across the resume
    one_in = lines[: len(first) + 1]
    assert eta_s(_running(tmp_path, one_in, started=resumed_at), one_in) == pytest.approx(640 * 0.43, rel=0.01)


def test_the_eta_follows_a_slowdown_within_a_few_lines(tmp_path):
    """Another job starts on the machine at step 1,000: four times slower from there."""
    from bertlab.jobs.progress import PACE_LINES, eta_s

    fast = _attempt(0, 1000, started=0.0, s_per_step=0.05)
    slow = _attempt(1000, 1000 + 20 * (PACE_LINES - 1), started=fast[-1]["time"] - 2.0, s_per_step=0.2)
    lines = fast + slow
    job = _running(tmp_path, lines, started=0.0)
    assert eta_s(job, fast) == pytest.approx(2000 * 0.05, rel=0.01)
    assert eta_s(job, lines) == pytest.approx((TOTAL - lines[-1]["step"]) * 0.2, rel=0.01)
    assert job.eta_s < eta_s(job, lines) / 2  # the trainer's, still near the average of both paces


def test_the_eta_is_the_trainers_where_the_lines_cannot_say_and_none_unless_running(tmp_path):
    from bertlab.jobs.progress import eta_s

    untimed = [{"split": "train", "step": 20, "loss": 1.0}]
    assert eta_s(_job(tmp_path, "running", total_steps=100, eta_s=42.0), untimed) == 42.0
    assert eta_s(_job(tmp_path, "running", total_steps=100), []) is None  # nothing logged yet
    lines = _attempt(0, 200, started=0.0, s_per_step=0.1)
    assert eta_s(_job(tmp_path, "cancelled", total_steps=TOTAL, status={"started": 0.0}), lines) is None
