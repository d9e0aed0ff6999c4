"""bertlab.training.trainer (and train_log, its train lines' ETA): the config's checks, budgets and log-spaced
snapshot steps (the loop itself runs in test_pretrain and test_finetune_recipe, compile='auto' there too; the
optimizer and LR schedule in test_optimization)."""

import pytest
import torch

from bertlab.errors import InputError
from bertlab.training.trainer import (
    Progress,
    TrainConfig,
    is_snapshot_step,
    snapshot_steps,
)


def test_snapshot_steps_are_log_spaced():
    assert snapshot_steps(1000) == [10, 20, 30, 50, 70, 100, 200, 300, 500, 700, 1000]
    assert [s for s in range(1, 2001) if is_snapshot_step(s)] == snapshot_steps(2000)


def test_budgets():
    with pytest.raises(InputError, match="budget"):
        TrainConfig()
    with pytest.raises(InputError, match="divisible"):
        TrainConfig(max_steps=1, batch_size=10, grad_accum=3)
    with pytest.raises(InputError, match="schedule"):
        TrainConfig(max_steps=10, schedule="exponential")
    # (a negative budget trained for ever at lr 0; batch 0 was a ZeroDivisionError in the data)
    with pytest.raises(InputError, match="max_steps must be 0"):
        TrainConfig(max_steps=-3)
    with pytest.raises(InputError, match="max_tokens must be 0"):
        TrainConfig(max_steps=10, max_tokens=-1)
    with pytest.raises(InputError, match="batch_size must be 1 or more"):
        TrainConfig(max_steps=10, batch_size=0)
    with pytest.raises(InputError, match="grad_accum must be 1 or more"):
        TrainConfig(max_steps=10, grad_accum=0)
    for bad in (float("nan"), float("inf"), 0.0):  # nan passed 'lr <= 0' and reached torch's optimizer
        with pytest.raises(InputError, match="learning_rate must be a positive number"):
            TrainConfig(max_steps=10, learning_rate=bad)
    with pytest.raises(InputError, match="warmup must be"):
        TrainConfig(max_steps=10, warmup=-1)
    with pytest.raises(InputError, match="beyond any run"):
        TrainConfig(max_steps=10**30)
    with pytest.raises(InputError, match="max_time_s must be 0"):  # a nan budget never ended
        TrainConfig(max_time_s=float("nan"))
    with pytest.raises(InputError, match="grad_clip must be a number"):
        TrainConfig(max_steps=10, grad_clip=float("nan"))
    cfg = TrainConfig(max_steps=100, max_tokens=1000)
    p = Progress(step=10, tokens=500)
    assert p.fraction(cfg) == pytest.approx(0.5) and not p.done(cfg)
    assert Progress(step=100).done(cfg)
    assert Progress(train_time_s=30).fraction(TrainConfig(max_time_s=60)) == pytest.approx(0.5)
    assert Progress(step=3, tokens=6144).fraction(TrainConfig(max_tokens=4000)) == 1.0  # a last batch past the budget


def test_nonfinite_steps_stop_a_run_only_when_they_count():
    """Under fp16 the loss scaler's own overflows (while its scale settles) are skipped but not counted
    towards stopping; NONFINITE_STEPS_LIMIT counted ones in a row stop the run, naming what to change."""
    from types import SimpleNamespace

    from bertlab.errors import TrainingDiverged
    from bertlab.training.trainer import NONFINITE_STEPS_LIMIT, Trainer

    trainer = Trainer.__new__(Trainer)  # only the state note_nonfinite_step reads
    trainer.progress, trainer.nonfinite_run = Progress(step=41, tokens=2_000_000), 0
    trainer.optimizer = SimpleNamespace(param_groups=[{"lr": 1.5e-3}])
    trainer.amp_dtype, trainer.precision = None, "fp32"  # a full-precision run
    for _ in range(50):
        trainer.note_nonfinite_step(counts=False)
    assert trainer.progress.skipped_steps == 50 and trainer.nonfinite_run == 0
    for _ in range(NONFINITE_STEPS_LIMIT - 1):
        trainer.note_nonfinite_step(counts=True)
    with pytest.raises(
        TrainingDiverged, match=r"step 42 \(2\.0M tokens\).*0\.0015.*train\.learning_rate.*--lr"
    ) as fp32:
        trainer.note_nonfinite_step(counts=True)
    assert "precision" not in str(fp32.value)  # nothing to gain from full precision in a full-precision run
    # under bf16 autocast, full precision comes first: it keeps the recipe, where a lower rate changes it
    trainer.amp_dtype, trainer.precision, trainer.nonfinite_run = torch.bfloat16, "bf16 autocast (GPU)", 0
    for _ in range(NONFINITE_STEPS_LIMIT - 1):
        trainer.note_nonfinite_step(counts=True)
    with pytest.raises(
        TrainingDiverged,
        match=r"under bf16 autocast \(GPU\)\. Start a new run with full precision.*"
        r"train\.precision=fp32.*--precision fp32.*lower learning rate",
    ):
        trainer.note_nonfinite_step(counts=True)


def test_a_negative_grad_clip_is_refused():
    with pytest.raises(InputError, match="grad_clip must be 0"):
        TrainConfig(max_steps=10, grad_clip=-1.0)


def test_the_trainers_eta_follows_the_recent_pace_of_this_attempt():
    """A run that went fast alone, resumed on a machine now shared, kept its old pace in the terminal's and
    the progress bar's ETA ('37 s' with four minutes of steps left): the ETA is now the last lines' pace."""
    from bertlab.training.train_log import LogWindow

    # resumed at 80% after 40 s of training (0.5 s a percent alone); now 10 s a percent
    window = LogWindow(0.80, now=90.0)
    assert window.eta_s(0.81, 40.0, now=100.0) == pytest.approx(10 / 0.01 * 0.19)  # not 40 / 0.81 * 0.19, about 9 s
    assert window.eta_s(0.82, 40.0, now=110.0) == pytest.approx(20 / 0.02 * 0.18)
    assert window.eta_s(1.0, 40.0, now=120.0) == 0.0
