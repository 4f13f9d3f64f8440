"""A comparison row's time to accuracy against the baseline's, paired by round: measured against the target fixed
before the comparison (:mod:`gnnbench.measure.compare.calibration`), with censoring, or derived for an entry proven to
keep the baseline's trajectory (:mod:`gnnbench.measure.compare.derived`).

A round that never reached the target is censored at its budget: the row says "reached in k of R", its ratio is
a bound, and it keeps time to accuracy as its metric.
"""

from __future__ import annotations

import statistics

from gnnbench.measure.compare.calibration import censor_at
from gnnbench.measure.compare.crossing import seconds_to
from gnnbench.measure.compare.derived import DERIVED_LABEL, derived_seconds
from gnnbench.measure.compare.interleaved import interleaved_pairs, interleaved_tta
from gnnbench.measure.compare.paired import ratio_over_rounds
from gnnbench.measure.compare.rows import TimeToAccuracy
from gnnbench.measure.run import RunResult

__all__ = ["measured_tta", "derived_tta"]


def measured_tta(b: list[RunResult], m: list[RunResult], target: float | None) -> TimeToAccuracy | None:
    """Time to the target (the run clock where the validation curve crosses it, interpolated between evaluations:
    :func:`gnnbench.measure.compare.crossing.seconds_to`), paired by round, with censoring: a round that never reached the target counts at its
    budget (:func:`gnnbench.measure.compare.calibration.censor_at`), which makes the ratio a bound: ``"at most"`` when
    only this configuration missed rounds (its true time is longer), ``"at least"`` when only the baseline did,
    ``"unknown"`` when both did (``None`` without a target)."""
    if target is None:
        return None
    tb, tm = [seconds_to(r, target) for r in b], [seconds_to(r, target) for r in m]
    cb = [t if t is not None else censor_at(r) for t, r in zip(tb, b)]
    cm = [t if t is not None else censor_at(r) for t, r in zip(tm, m)]
    ratio = ratio_over_rounds(cb, cm)
    if ratio is None:
        return None
    missed_m, missed_b = sum(t is None for t in tm), sum(t is None for t in tb)
    bound = "unknown" if missed_m and missed_b else "at most" if missed_m else "at least" if missed_b else None
    reached = len(m) - missed_m
    notes = []
    if missed_m:
        notes.append(
            f"reached the target in {reached} of {len(m)} rounds; the others are censored at their budget, "
            f"so the speedup is {bound} this"
        )
    if missed_b:
        notes.append(f"the baseline missed the target in {missed_b} of {len(b)} rounds (censored at its budget)")
    reached_times = [t for t in tm if t is not None]
    return TimeToAccuracy(
        **{**vars(ratio), "rounds": len(m)},
        bound=bound,
        censored=bool(missed_m),
        reached=reached,
        reached_text=f"{reached}/{len(m)}",
        seconds=statistics.median(reached_times) if reached_times else None,
        note="; ".join(notes) or None,
    )


def derived_tta(b: list[RunResult], m: list[RunResult], steps_to_target: float | None) -> TimeToAccuracy | None:
    """A same-trajectory entry's time to accuracy, derived per round (:mod:`gnnbench.measure.compare.derived`): its
    setup plus the calibrated steps to the target times its training clock per step, against the same-round
    baseline read the same way over as many epochs; ``None`` without calibrated steps to the target."""
    if steps_to_target is None:
        return None
    if interleaved_pairs(m) is not None:
        return interleaved_tta(m, steps_to_target)
    epochs = [len(r.epoch_seconds) for r in m]
    tm = [derived_seconds(r, steps_to_target) for r in m]
    tb = [derived_seconds(r, steps_to_target, e) for r, e in zip(b, epochs)]
    ratio = ratio_over_rounds(
        [t if t is not None else float("nan") for t in tb], [t if t is not None else float("nan") for t in tm]
    )
    if ratio is None:
        return None
    reached = [t for t in tm if t is not None]
    return TimeToAccuracy(
        **{**vars(ratio), "rounds": len(m)},
        bound=None,
        censored=False,
        reached=len(reached),
        reached_text="derived",
        seconds=statistics.median(reached) if reached else None,
        note=f"{DERIVED_LABEL}: setup + {steps_to_target:g} calibrated steps to the target x its "
        f"training clock per step over {statistics.median(epochs):g} epochs (the baseline's "
        "read the same way)",
    )
