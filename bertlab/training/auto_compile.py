"""Whether and when a training run compiles its model (torch.compile), as the run goes: compile='auto' times
a few eager steps and compiles when the time the rest of the run would save pays for compiling, then times
the compiled steps and goes back to eager ones where they are not faster on this machine; a compiled run
(compile=true, or 'auto' once it compiled) measures how long compiling took. The Trainer hands it each
step's time (`CompileTracker.observe`) and wraps its model again when told to; what it decided goes into
the run's status and card (`CompileTracker.state`).

Imports the standard library and bertlab.training.optimization (the compile rule, which imports torch) /
types; never streamlit.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass

from bertlab.training.optimization import COMPILE_PROBE_STEPS, compile_pays
from bertlab.training.types import Progress, TrainConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompileChange:
    """What a step's time changed: how to wrap the model from now on, and what the run's status should say."""

    compiled: bool | None  # wrap the model compiled (True) or eager (False) from the next step; None: as it is
    status: dict  # fields for status.json


class CompileTracker:
    """The compile plan of one run (`optimization.compile_plan`: 'now', 'decide', 'yes' or 'no') and the step
    times that decide or check it, from the step the run (or this attempt of it) started at."""

    def __init__(self, plan: str, device_type: str, num_layers: int, progress: Progress, cfg: TrainConfig):
        self.plan = plan
        self.state: dict = {"compile": plan}  # what the run's status and card say about compiling
        self.device_type, self.num_layers, self.cfg = device_type, num_layers, cfg
        self.first_step, self.start_fraction = progress.step, progress.fraction(cfg)
        self.start_time_s = progress.train_time_s
        self.eager_times: list[float] = []
        self.first_compiled_s: float | None = None
        self.compiled_times: list[float] = []  # compile='auto': steps after compiling, to check it paid

    def observe(self, step_s: float, progress: Progress) -> CompileChange | None:
        """Time eager steps (the first, warming up, aside) until compile='auto' decides; time the first
        compiled step against an eager one to report how long compiling took; time a few compiled steps to
        check that compiling paid. None while nothing changes."""
        if self.plan == "decide":
            if progress.step - self.first_step >= 2:
                self.eager_times.append(step_s)
            return self._decide(statistics.median(self.eager_times), progress) if self.eager_times else None
        if self.plan in ("now", "yes") and "compile_s" not in self.state:
            if self.first_compiled_s is None:
                self.first_compiled_s = step_s
                return None
            # no eager step timed (compile=true): the second compiled step stands in
            eager = statistics.median(self.eager_times) if self.eager_times else step_s
            return self._note_compile_time(self.first_compiled_s, eager)
        if self.plan == "yes" and len(self.compiled_times) < COMPILE_PROBE_STEPS:
            self.compiled_times.append(step_s)
            if len(self.compiled_times) == COMPILE_PROBE_STEPS:
                return self._keep_faster(statistics.median(self.compiled_times), statistics.median(self.eager_times))
        return None

    def _decide(self, step_s: float, progress: Progress) -> CompileChange | None:
        """compile='auto': after a few eager steps, compile when the time the rest of the run would
        save pays for compiling (see optimization.compile_pays); say what was decided and why."""
        p = progress
        if p.step - self.first_step < COMPILE_PROBE_STEPS:
            return None
        frac = p.fraction(self.cfg)
        remaining_s = step_s * (self.cfg.max_steps - p.step) if self.cfg.max_steps else float("inf")
        if frac > self.start_fraction:  # token or time budgets: project from the share done so far
            rate = (p.train_time_s - self.start_time_s) / (frac - self.start_fraction)
            remaining_s = min(remaining_s, rate * (1 - frac))
        pays, why = compile_pays(remaining_s, self.device_type, self.num_layers)
        self.plan = "yes" if pays else "no"
        self.state = {"compile": self.plan, "compile_reason": why}
        log.info("compile=auto at step %d: %s", p.step, why)
        return CompileChange(True if pays else None, dict(self.state))

    def _keep_faster(self, compiled_s: float, eager_s: float) -> CompileChange:
        """compile='auto' compiled on an expected gain: measure it, and go back to eager steps where the
        compiled step is not faster on this machine (the compile time is spent either way)."""
        speedup = eager_s / max(1e-9, compiled_s)
        self.state["compile_speedup"] = round(speedup, 2)
        if speedup > 1.0:
            log.info("compiled step %.3f s against %.3f s eager (%.2fx): keeping it", compiled_s, eager_s, speedup)
            return CompileChange(None, dict(self.state))
        self.plan = "no"
        why = f"compiled step measured {compiled_s:.3f} s against {eager_s:.3f} s eager ({speedup:.2f}x): back to eager"
        reason = self.state.get("compile_reason", "")
        self.state.update(compile="no", compile_reason=f"{reason}; {why}" if reason else why)
        log.info("compile=auto: %s", why)
        return CompileChange(False, dict(self.state))

    def _note_compile_time(self, step_s: float, eager_step_s: float) -> CompileChange:
        """After the first compiled step: how long compiling took (that step's time less an eager step's)."""
        compile_s = max(0.0, step_s - eager_step_s)
        self.state["compile_s"] = round(compile_s, 1)
        log.info("compiled the training step in %.0f s", compile_s)
        return CompileChange(None, {"compile_s": round(compile_s, 1)})
