"""The accuracy target of a sweep, fixed before the comparison: the baseline trained on seeds that no measured
round uses, to its plateau; the target is the median plateau minus a stated margin.

Calibration also sets how the measured runs are judged:

- **evaluation cadence**: every ``eval_every`` steps, chosen so the baseline's curve has at least
  :data:`MIN_POINTS_BEFORE_TARGET` points before it reaches the target (the fastest calibration run's steps to
  the target, divided by that number);
- **budget**: every configuration gets the same run-clock budget to reach the target, ``budget_factor`` times
  the slowest calibration run's time to the target. A round that has not reached the target by then is
  censored at the budget (``gnnbench.measure.comparison``): its time is a bound, and its row keeps its metric.

Calibration runs are stored beside the sweep's results (label ``calibration``, round ``i`` = seed
``base.seed + CALIBRATION_SEED_OFFSET + i``), so a resumed sweep reuses them and ``compare`` and the report read
the same target from the same files.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

__all__ = ["CALIBRATION", "CALIBRATION_SEED_OFFSET", "AA_SEED_OFFSET", "TARGET_MARGIN", "BUDGET_FACTOR",
           "DEFAULT_CALIBRATION_RUNS", "MIN_POINTS_BEFORE_TARGET", "Calibration", "calibrate", "plateau_level",
           "time_to", "censor_at"]

CALIBRATION = "calibration"  # the label of calibration runs in a sweep's folder
CALIBRATION_SEED_OFFSET = 10_000  # calibration run i trains with seed base.seed + 10_000 + i
AA_SEED_OFFSET = 20_000  # the A/A copy of round r trains with seed base.seed + 20_000 + r: its own seed stream
TARGET_MARGIN = 0.01  # target = the baseline's median plateau - 1 pp
BUDGET_FACTOR = 4.0  # every configuration may train for 4x the baseline's time to the target
DEFAULT_CALIBRATION_RUNS = 3
MIN_POINTS_BEFORE_TARGET = 10


def plateau_level(curve: list[dict]) -> float | None:
    """Where a validation curve levels off: the median of its points from the best one on (the points the
    plateau rule waited through; the best point alone is the noise's maximum)."""
    if not curve:
        return None
    vals = [float(p["val"]) for p in curve]
    best = max(range(len(vals)), key=lambda i: (vals[i], -i))
    return statistics.median(vals[best:])


def time_to(run: dict, target: float | None, key: str = "seconds") -> float | None:
    """The run clock (``key="seconds"``) or steps (``key="step"``) at the first validation point at or above
    ``target``; ``None`` when it never got there."""
    if target is None:
        return None
    for point in run.get("curve") or []:
        if point["val"] >= target - 1e-12:
            return float(point[key])
    return None


def censor_at(run: dict) -> float | None:
    """Where a round that missed the target is censored: its run-clock budget (``config.max_seconds``), or,
    without one, the end of its run (the last validation point's clock)."""
    budget = (run.get("config") or {}).get("max_seconds")
    if budget:
        return float(budget)
    curve = run.get("curve") or []
    return float(curve[-1]["seconds"]) if curve else None


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
    budget_seconds: float | None  # the measured runs' run-clock budget (None: none)
    budget_factor: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def apply(self, base: Any) -> Any:
        """``base`` (a RunConfig) with the calibrated cadence and budget, where ``base`` does not set its own."""
        return dataclasses.replace(
            base, eval_every=base.eval_every if base.eval_every is not None else self.eval_every,
            max_seconds=base.max_seconds if base.max_seconds is not None else self.budget_seconds)


def calibrate(runs: list[dict], *, target_acc: float | None = None, margin: float = TARGET_MARGIN,
              budget_factor: float = BUDGET_FACTOR) -> Calibration:
    """The calibration of the baseline runs ``runs`` (result dicts, measured on seeds the rounds do not use).

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
        raise ValueError(f"the budget factor must be >= 1 (got {budget_factor!r}): a budget below the baseline's "
                         "own time to the target censors the baseline")
    ok = [r for r in runs if r.get("status") == "ok" and r.get("curve")]
    seeds = sorted(int((r.get("config") or {})["seed"]) for r in ok if "seed" in (r.get("config") or {}))
    plateaus = [plateau_level(r["curve"]) for r in ok]
    if target_acc is not None:
        target, source = float(target_acc), "given (--target-acc)"
    elif plateaus:
        target = statistics.median(plateaus) - margin
        source = (f"calibrated before the comparison: the baseline's median validation plateau over {len(ok)} "
                  f"run(s) on seeds {seeds}, which no measured round uses, minus {100 * margin:g} pp")
    else:
        target, source = None, "not calibrated: no calibration run was measured"
    steps = [time_to(r, target, "step") for r in ok]
    secs = [time_to(r, target) for r in ok]
    reached_steps = [s for s in steps if s is not None]
    eval_every = max(1, int(min(reached_steps)) // MIN_POINTS_BEFORE_TARGET) if reached_steps else None
    ends = [s if s is not None else censor_at(r) for s, r in zip(secs, ok)]
    ends = [e for e in ends if e is not None]
    budget = budget_factor * max(ends) if ends and target is not None else None
    return Calibration(target, source, margin, seeds, plateaus, steps, secs, eval_every, budget, budget_factor)
