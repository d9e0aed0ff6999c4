"""bertlab/jobs/view.py (and the trainer's status.json) after a user review of the Jobs page: a step
that lagged the metrics, a runs table wider than its box, a chance label over the data it judges,
and two curves that looked the same in the legend."""

import json

import pytest

from bertlab.jobs.curves import curves_figure
from bertlab.jobs.progress import caught_up
from bertlab.jobs.runs import Job, read_job
from bertlab.jobs.view import jobs_table, jobs_table_widths, live_numbers

# What a tiny pretraining run (30 steps, an evaluation every 10, a train line every 20) had written
# when the page said "Step 0 / 30" beside "Eval mlm acc 8.0%" and curves up to step 10.
EVAL_10 = {"split": "eval", "step": 10, "mlm_acc": 0.08, "mlm_loss": 8.65, "nsp_acc": 0.49}


def _running(tmp_path, step: int = 0, **status) -> Job:
    run_dir = tmp_path / "reviewtiny-20261129-045415"
    run_dir.mkdir(exist_ok=True)
    status = {"state": "running", "step": step, "total_steps": 30, "progress": step / 30, **status}
    (run_dir / "status.json").write_text(json.dumps(status))
    (run_dir / "run_config.json").write_text(json.dumps({"kind": "pretrain"}))
    return read_job(run_dir)


def test_the_step_shown_never_lags_the_newest_metric_line(tmp_path):
    job = _running(tmp_path)
    numbers = dict(live_numbers(job, [EVAL_10]))
    assert numbers["Step"] == "10 / 30" and numbers["Eval mlm acc"] == "8.0%"
    ahead = caught_up(job, [EVAL_10])
    assert (ahead.step, ahead.progress) == (10, pytest.approx(1 / 3)) and job.step == 0  # a copy
    row = jobs_table([job], metrics={job.id: [EVAL_10]})[0]
    assert row["step"] == "10 / 30" and row["progress"] == 0.33
    # a train line's own progress counts (a token or time budget has no total steps)
    budget = caught_up(
        _running(tmp_path, total_steps=None, progress=None), [{"split": "train", "step": 5, "progress": 0.4}]
    )
    assert (budget.step, budget.progress) == (5, 0.4)
    # status.json ahead of the lines (it is written as training goes): it stays
    later = _running(tmp_path, step=20)
    assert caught_up(later, [EVAL_10]) is later and dict(live_numbers(later, [EVAL_10]))["Step"] == "20 / 30"


def test_the_trainer_writes_its_step_to_the_status_when_it_evaluates(tmp_path, vocab_file, monkeypatch):
    """Each time the trainer updates status.json, its step is at least the newest metric line's."""
    from test_pretrain import _config

    from bertlab.storage.runfolder import read_metrics, read_status
    from bertlab.training import trainer as training
    from bertlab.training.pretrain import run_pretraining

    run_dir, behind = tmp_path / "run", []
    update_status = training.update_status

    def checked(path, **fields):
        status = update_status(path, **fields)
        newest = max((m["step"] for m in read_metrics(path)), default=0)
        if status.get("step", 0) < newest:
            behind.append((status.get("step"), newest))
        return status

    monkeypatch.setattr(training, "update_status", checked)
    cfg = _config(tmp_path, vocab_file, max_steps=30, log_every=20, eval_every=10)
    assert run_pretraining(cfg, run_dir, progress_bar=False).state == "finished"
    assert [m["step"] for m in read_metrics(run_dir) if m["split"] == "eval"][:2] == [10, 20]
    assert behind == [] and read_status(run_dir)["step"] == 30


def _table(tmp_path, devices=("cpu",) * 4, states=("running", "finished", "finished", "cancelled")) -> list[dict]:
    """The review's table: four runs, their names as long as the registry makes them."""
    jobs = []
    for n, (device, state) in enumerate(zip(devices, states, strict=True)):
        jobs.append(
            Job(
                id=f"reviewtiny-20261129-04541{n}",
                run_dir=tmp_path,
                kind=("pretrain", "finetune")[n % 2],
                state=state,
                managed=True,
                alive=False,
                submitted=0.0,
                step=648,
                total_steps=3000,
                progress=0.216,
                eta_s=3600.0 if state == "running" else None,
                device=device,
                status={"last_train": {"loss": 9.054}},
            )
        )
    return jobs_table(jobs, now=5400.0)


def test_the_runs_table_fits_a_laptops_page_and_cuts_no_column_name(tmp_path):
    """User review: the table ran past its box (~790 px beside the sidebar at 1280 px), its last
    column read "su…" unless scrolled sideways."""
    rows = _table(tmp_path)
    widths = jobs_table_widths(rows)
    assert sum(widths.values()) <= 760, widths
    assert list(widths) == ["run", "kind", "state", "step", "progress", "loss", "ETA"]
    for name, px in widths.items():  # a name or value at 7 px a character (Source Sans digits) + 16 px padding
        assert px >= 16 + 7 * max(len(name), *(len(str(r[name])) for r in rows)), name
    assert rows[0]["progress"] == 0.21  # the bar's label: '21%', as wide as '100%'
    # nothing can have an ETA any more: no ETA column; runs on different devices: which is which
    ended = _table(tmp_path, devices=("cpu", "cuda", "cuda ×2", "cpu"), states=("finished",) * 4)
    assert list(jobs_table_widths(ended)) == ["run", "kind", "state", "step", "progress", "loss", "device"]
    assert sum(jobs_table_widths(ended).values()) <= 760


def _legend(fig) -> dict[str, tuple[str, str]]:
    return {t.name: (t.line.color, t.line.dash or "solid") for t in fig.data}


@pytest.mark.parametrize(
    "lines",
    [
        [  # pretraining: train loss is MLM + NSP, eval's the MLM loss alone
            {"split": "train", "step": s, "loss": 9.4 - s / 50, "lr": 2e-4, "mlm_acc": 0.04, "nsp_acc": 0.52}
            for s in (20, 30)
        ]
        + [{**EVAL_10, "step": s} for s in (10, 20, 30)],
        [  # fine-tuning: train 'acc' and eval 'accuracy' are one score; eval f1 beside it
            {"split": "train", "step": s, "loss": 0.69, "lr": 2e-5, "acc": 0.6} for s in (20, 40)
        ]
        + [{"split": "eval", "step": s, "loss": 0.66, "accuracy": 0.62, "f1": 0.7} for s in (20, 40)],
    ],
    ids=["pretrain", "finetune"],
)
def test_every_curve_looks_different_in_the_shared_legend(lines):
    """User review: 'eval mlm loss' and 'eval mlm acc' were both orange and dashed."""
    legend = _legend(curves_figure(lines, chance={"nsp_acc": 0.5, "accuracy": 0.5}))
    assert len(set(legend.values())) == len(legend), legend
    # one score keeps one colour: train solid, eval dashed
    train, evals = (
        ("train mlm acc", "eval mlm acc") if "train mlm acc" in legend else ("train accuracy", "eval accuracy")
    )
    assert legend[train][0] == legend[evals][0] and (legend[train][1], legend[evals][1]) == ("solid", "dash")


def test_chance_is_named_in_the_legend_not_written_over_the_scores():
    """User review: 'chance (nsp acc): 50%' sat on the NSP lines it is there to judge."""
    lines = [{"split": "eval", "step": s, "nsp_acc": 0.49} for s in (10, 20, 30)]
    fig = curves_figure(lines, chance={"nsp_acc": 0.5})
    assert not [a.text for a in fig.layout.annotations if "chance" in (a.text or "")]
    assert [s.y0 for s in fig.layout.shapes] == [0.5]
    entry = next(t for t in fig.data if t.name == "chance (nsp acc): 50%")
    assert entry.showlegend is not False and entry.line.dash == "dot"
    assert fig.layout.yaxis2.range == (0, 1.02)  # its empty entry does not unsettle the accuracy axis
