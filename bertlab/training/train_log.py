"""What a training run's train lines add up and how far ahead they look: the task's statistics, the loss,
and the tokens and sequences trained on since the last train line (`LogWindow`), and the ETA at the pace
of this attempt's last few lines. The Trainer adds each micro-batch and step to it and writes the line.

Standard library only: the Trainer reads the clock and passes the time in, so that one clock times a run.
"""

from __future__ import annotations

from collections import deque


class LogWindow:
    """The steps since the last train line of one attempt of a run, and the pace of its last few lines."""

    def __init__(self, start_fraction: float, now: float):
        self.sums: dict[str, float] = {}  # the task's statistics, summed over micro-batches; loss_sum and batches
        self.start, self.tokens, self.seqs = now, 0, 0
        # (wall time, share of the budget done) at this attempt's start and its last train lines: the ETA's pace
        self.pace_points: deque[tuple[float, float]] = deque([(now, start_fraction)], maxlen=5)

    def add_batch(self, stats: dict, loss: float, group_size: int) -> None:
        """One micro-batch's statistics and its share of the step's loss (`loss`: the step's loss over
        `group_size` micro-batches, as its backward pass saw it)."""
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v)
        self.sums["loss_sum"] = self.sums.get("loss_sum", 0.0) + loss * group_size
        self.sums["batches"] = self.sums.get("batches", 0.0) + 1

    def eta_s(self, frac: float, train_time_s: float, now: float) -> float:
        """Seconds left at the pace of the last few train lines of this attempt (wall clock: evaluations and
        checkpoints included, a machine now shared included), where the average over every attempt kept a
        resumed run at the pace it had alone; before a second line, the training time so far
        (`train_time_s`) projected. Records (`now`, `frac`) as this line's point."""
        self.pace_points.append((now, frac))
        then, done_then = self.pace_points[0]
        if frac >= 1:
            return 0.0
        if frac > done_then and now > then:
            return max(0.0, (now - then) / (frac - done_then) * (1 - frac))
        return max(0.0, train_time_s / frac * (1 - frac)) if frac > 0 else float("nan")

    def reset(self, now: float) -> None:
        """A new window, from a train line just written (the pace's points stay)."""
        self.sums = {}
        self.start, self.tokens, self.seqs = now, 0, 0
