"""The accuracy target of a sweep, fixed before the comparison: the baseline trained on seeds that no measured
round uses, to its plateau; the target is the median plateau minus a stated margin.

Calibration also sets how the measured runs are judged:

- **evaluation cadence**: every ``eval_every`` steps, chosen so the baseline's curve has at least
  :data:`MIN_POINTS_BEFORE_TARGET` points before it reaches the target (the fastest calibration run's steps to
  the target, divided by that number);
- **time budget**: every configuration gets the same run-clock budget to reach the target, ``budget_factor``
  times the slowest calibration run's time to the target. A round that has not reached the target by then
  (or reached it only after) is censored at the budget (``gnnbench.measure.compare.time_to_accuracy``): its time is a bound,
  and its row keeps its metric. The time budget censors time to accuracy only; it stops no run
  (``RunConfig.censor_seconds``), so a slow configuration cannot lose accuracy to the clock;
- **step budget**: the run that judges accuracy goes on to its plateau within ``STEP_BUDGET_FACTOR`` times the
  most steps a calibration run took to its plateau (``RunConfig.max_steps``); a run that exhausts it is "not
  converged" and compared with the baseline at equal steps;
- **no early stop**: no run stops on the plateau rule before twice the most steps a calibration run needed to
  reach the target (``RunConfig.min_steps``);
- **patience on the run's own time scale**: a run that reached the calibrated target (the baseline's median
  plateau minus the margin, also when the user gives the target) after ``s`` steps waits at most ``s`` steps (and
  at most ``patience`` epochs) for a further qualifying rise (``RunConfig.patience_target``): on a graph of many
  steps per epoch, five epochs of waiting would be most of an accuracy run.

Calibration runs are stored beside the sweep's results (label ``calibration``, round ``i`` = seed
``base.seed + CALIBRATION_SEED_OFFSET + i``), so a resumed sweep reuses them and ``compare`` and the report read
the same target from the same files.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from gnnbench.measure.compare.crossing import censor_budget, smoothing_of, target_curve
from gnnbench.measure.run import Point, RunResult

__all__ = [
    "CALIBRATION",
    "CALIBRATION_SEED_OFFSET",
    "AA_SEED_OFFSET",
    "TARGET_MARGIN",
    "BUDGET_FACTOR",
    "DEFAULT_CALIBRATION_RUNS",
    "MIN_POINTS_BEFORE_TARGET",
    "STEP_BUDGET_FACTOR",
    "MIN_STEPS_FACTOR",
    "Calibration",
    "calibrate",
    "plateau_level",
    "time_to",
    "censor_at",
]

CALIBRATION = "calibration"  # the label of calibration runs in a sweep's folder
CALIBRATION_SEED_OFFSET = 10_000  # calibration run i trains with seed base.seed + 10_000 + i
AA_SEED_OFFSET = 20_000  # the A/A copy of round r trains with seed base.seed + 20_000 + r: its own seed stream
TARGET_MARGIN = 0.01  # target = the baseline's median plateau - 1 pp
BUDGET_FACTOR = 4.0  # every configuration may train for 4x the baseline's time to the target
STEP_BUDGET_FACTOR = 4  # accuracy runs may take 4x the steps the baseline took to its plateau
MIN_STEPS_FACTOR = 2  # no plateau stop before 2x the calibrated steps to the target
DEFAULT_CALIBRATION_RUNS = 3
MIN_POINTS_BEFORE_TARGET = 10


def plateau_level(curve: list[Point]) -> float | None:
    """Where a validation curve levels off: the median of its points from the best one on (the points the
    plateau rule waited through; the best point alone is the noise's maximum)."""
    if not curve:
        return None
    vals = [float(p.val) for p in curve]
    best = max(range(len(vals)), key=lambda i: (vals[i], -i))
    return statistics.median(vals[best:])


def time_to(run: RunResult, target: float | None, key: str = "seconds") -> float | None:
    """The run clock (``key="seconds"``) or steps (``key="step"``) at the first validation point of its
    :func:`~gnnbench.measure.compare.crossing.target_curve` at or above ``target`` within the run's time budget (:func:`censor_budget`); ``None`` when it never got there in time
    (a point past the budget is censored, however close)."""
    if target is None:
        return None
    budget = censor_budget(run)
    if key not in ("seconds", "step"):
        raise ValueError(f"time_to reads the run clock ('seconds') or the steps ('step'), not {key!r}")
    for point in target_curve(run):
        if budget is not None and float(point.seconds) > budget:
            return None
        if point.val >= target - 1e-12:
            return float(getattr(point, key))
    return None


def censor_at(run: RunResult) -> float | None:
    """Where a round that missed the target is censored: its run-clock budget (:func:`censor_budget`), or,
    without one, the end of its run (the last validation point's clock)."""
    budget = censor_budget(run)
    if budget:
        return budget
    return float(run.curve[-1].seconds) if run.curve else None


@dataclass(frozen=True)
class Calibration:
    """A sweep's target and the rules derived from it (see the module docstring)."""

    target: float | None
    source: str  # how the target was chosen, in words
    margin: float
    seeds: list[int]
    plateaus: list[float]
    steps_to_target: list[float | None]
    seconds_to_target: list[float | None]
    eval_every: int | None  # the measured runs' validation cadence (None: unchanged)
    budget_seconds: float | None  # the run-clock budget that censors time to accuracy (None: none)
    budget_factor: float
    steps_to_plateau: list[int] = dataclasses.field(default_factory=list)  # each run's steps when it stopped
    step_budget: int | None = None  # accuracy runs stop here at the latest (RunConfig.max_steps)
    min_steps: int = 0  # no plateau stop before this (RunConfig.min_steps)
    steps_per_epoch: int | None = None  # the baseline's steps per epoch (short runs are sized by it)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Calibration":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @property
    def median_steps_to_target(self) -> float | None:
        """The calibrated steps to the target: the median over the calibration runs that reached it (a
        same-trajectory entry's derived time to accuracy reads it); ``None`` when none did."""
        reached = [s for s in self.steps_to_target if s is not None]
        return statistics.median(reached) if reached else None

    @property
    def patience_level(self) -> float | None:
        """The validation level whose first crossing bounds a run's patience (``RunConfig.patience_target``): the
        baseline's median plateau minus the margin, the calibrated target, even when the user gives another
        (a low target is reached in a few steps, which say nothing of how long the model takes to learn)."""
        plateaus = [p for p in self.plateaus if p is not None]
        return statistics.median(plateaus) - self.margin if plateaus else None

    def apply(self, base: Any) -> Any:
        """``base`` (a RunConfig) with the calibrated cadence, time budget (censoring only), step budget,
        minimum steps (both counted in the baseline's epochs of :attr:`steps_per_epoch` steps, ``step_unit``: a
        batch source with other epochs has them in its own unit of work) and patience target, where ``base``
        does not set its own."""
        return dataclasses.replace(
            base,
            eval_every=base.eval_every if base.eval_every is not None else self.eval_every,
            censor_seconds=base.censor_seconds if base.censor_seconds is not None else self.budget_seconds,
            max_steps=base.max_steps if base.max_steps is not None else self.step_budget,
            min_steps=max(base.min_steps, self.min_steps),
            step_unit=base.step_unit if base.step_unit is not None else self.steps_per_epoch,
            patience_target=base.patience_target if base.patience_target is not None else self.patience_level,
        )


def calibrate(
    runs: list[RunResult],
    *,
    target_acc: float | None = None,
    margin: float = TARGET_MARGIN,
    budget_factor: float = BUDGET_FACTOR,
) -> Calibration:
    """The calibration of the baseline runs ``runs`` (results, measured on seeds the rounds do not use).

    Args:
        runs: The calibration results; those not measured are ignored.
        target_acc: A target given by the user (it replaces the calibrated one; the cadence and budget still
            come from these runs).
        margin: Target = median plateau - ``margin``.
        budget_factor: Budget = this x the slowest calibration run's time to the target.
    """
    if not 0 <= margin < 1:
        raise ValueError(f"the target margin must be in [0, 1) (got {margin!r})")
    if not budget_factor >= 1:
        raise ValueError(
            f"the budget factor must be >= 1 (got {budget_factor!r}): a budget below the baseline's "
            "own time to the target censors the baseline"
        )
    ok = [r for r in runs if r.ok and r.curve]
    seeds = sorted(int(r.config["seed"]) for r in ok if "seed" in r.config)
    plateaus = [plateau_level(target_curve(r)) for r in ok]  # the level the target is read on
    if target_acc is not None:
        target, source = float(target_acc), "given (--target-acc)"
    elif plateaus:
        target = statistics.median(plateaus) - margin
        source = (
            f"calibrated before the comparison: the baseline's median validation plateau over {len(ok)} "
            f"run(s) on seeds {seeds}, which no measured round uses, minus {100 * margin:g} pp"
        )
    else:
        target, source = None, "not calibrated: no calibration run was measured"
    window = smoothing_of(ok[0]) if ok else 1
    if target is not None and window > 1:
        source += f"; read on the mean of the last {window} validation points (--smoothing)"
    steps = [time_to(r, target, "step") for r in ok]
    secs = [time_to(r, target) for r in ok]
    reached_steps = [s for s in steps if s is not None]
    eval_every = max(1, int(min(reached_steps)) // MIN_POINTS_BEFORE_TARGET) if reached_steps else None
    ends = [s if s is not None else censor_at(r) for s, r in zip(secs, ok)]
    ends = [e for e in ends if e is not None]
    budget = budget_factor * max(ends) if ends and target is not None else None
    stopped = [int(r.steps.total if r.steps is not None and r.steps.total else r.curve[-1].step) for r in ok]
    min_steps = int(MIN_STEPS_FACTOR * max(reached_steps)) if reached_steps else 0
    step_budget = max(STEP_BUDGET_FACTOR * max(stopped), 2 * min_steps) if stopped and target is not None else None
    per_epoch = [int(r.steps_per_epoch) for r in ok if r.steps_per_epoch]
    return Calibration(
        target,
        source,
        margin,
        seeds,
        plateaus,
        steps,
        secs,
        eval_every,
        budget,
        budget_factor,
        stopped,
        step_budget,
        min_steps,
        int(statistics.median(per_epoch)) if per_epoch else None,
    )
