"""Time to accuracy derived, for entries proven to keep the training trajectory (DESIGN.md §3: spend compute
where the answer is unknown).

An entry declared ``same_trajectory`` in the registry (a test trains it and the baseline on one seed and
requires their curves and losses to agree: ``tests/training/test_same_trajectory.py``) takes the baseline's steps to
any target. A sweep therefore measures it in a **short run** (:func:`short_config`: whole epochs, at least
:data:`MIN_SHORT_EPOCHS` so per-epoch costs such as worker start-up show their regime, and at least
:data:`SHORT_MEASURED_STEPS` steps after the warm-up) instead of training it to the target, and
:func:`derived_seconds` gives its time to accuracy::

    derived = setup + S x (training clock per step over the short run's epochs)

where ``S`` is the calibrated steps to the target (the median over the calibration runs). The baseline of the
same round is read the same way over its own first epochs (the same count, so first-epoch costs weigh the
same on both sides), and the paired ratio of the two over the rounds is the row's speedup, with the interval
of every other row. Its accuracy is read at equal steps against the same-seed baseline: the proof, checked
again on every run.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable

from gnnbench import registry
from gnnbench.measure.run import RunResult

__all__ = [
    "MIN_SHORT_EPOCHS",
    "SHORT_MEASURED_STEPS",
    "DERIVED_LABEL",
    "is_derivable",
    "short_epochs",
    "short_config",
    "per_step_seconds",
    "derived_seconds",
]

MIN_SHORT_EPOCHS = 2  # a short run's epochs at least: the second shows persistent workers' regime
SHORT_MEASURED_STEPS = 20  # and at least this many steps after the warm-up
DERIVED_LABEL = "same trajectory (proven by test): derived"


def is_derivable(optimizations: Iterable[str]) -> bool:
    """Whether every entry of a combination is declared ``same_trajectory`` (an empty one, the baseline, is
    not: it is the reference)."""
    names = list(optimizations)
    return bool(names) and all(n in registry.REGISTRY and registry.REGISTRY[n].same_trajectory for n in names)


def short_epochs(steps_per_epoch: int, warmup_steps: int) -> int:
    """Epochs of a short run: whole epochs, at least :data:`MIN_SHORT_EPOCHS`, and enough for
    :data:`SHORT_MEASURED_STEPS` steps after the warm-up."""
    if not isinstance(steps_per_epoch, int) or steps_per_epoch < 1:
        raise ValueError(f"steps per epoch must be an integer >= 1 (got {steps_per_epoch!r})")
    return max(MIN_SHORT_EPOCHS, math.ceil((warmup_steps + SHORT_MEASURED_STEPS) / steps_per_epoch))


def short_config(config: Any, steps_per_epoch: int) -> Any:
    """``config`` (a RunConfig) as a short fixed-length run: :func:`short_epochs` epochs, no plateau rule, step
    budget or target stop; its cadence (the calibrated ``eval_every``) is kept, so its validation points fall on the
    baseline's steps."""
    return dataclasses.replace(
        config, epochs=short_epochs(steps_per_epoch, config.warmup_steps), max_steps=None, min_steps=0, stop_at=None
    )


def per_step_seconds(run: RunResult, epochs: int | None = None) -> float | None:
    """Training-clock seconds per step over a run's first ``epochs`` epochs (default: all), every per-epoch
    cost included; ``None`` when the run has fewer epochs or no steps."""
    e = run.epoch_seconds
    epochs = len(e) if epochs is None else epochs
    spe = run.steps_per_epoch
    if not e or not epochs or len(e) < epochs or not spe:
        return None
    steps = run.steps.total if run.steps is not None else None
    if epochs == len(e) and steps:
        return sum(e) / steps
    return sum(e[:epochs]) / (epochs * spe)


def derived_seconds(run: RunResult, steps_to_target: float, epochs: int | None = None) -> float | None:
    """``setup + steps_to_target x`` :func:`per_step_seconds` (over the first ``epochs`` epochs)."""
    per_step = per_step_seconds(run, epochs)
    if per_step is None:
        return None
    return run.setup_clock + steps_to_target * per_step
