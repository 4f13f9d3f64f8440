"""Pairing a sweep's runs by round (what every figure of a comparison row is read from): the measured runs of a
configuration by round, a run's epoch clock, the paired ratio of two clocks over rounds and a mean with its
t-interval.
"""

from __future__ import annotations

import math
import statistics

from gnnbench.measure.compare.rows import PairedRatio
from gnnbench.measure.run import RunResult
from gnnbench.measure.stats import paired_ratio, t_quantile

__all__ = ["measured", "by_round", "end_to_end", "epoch_time", "ratio_over_rounds", "mean_interval"]


def measured(r: RunResult) -> bool:
    """Whether a run was measured: it ran and timed steps."""
    return r.ok and bool(r.step_seconds_all)


def by_round(runs: list[RunResult]) -> dict[int, RunResult]:
    """The measured runs of one configuration by round (a result outside a sweep by its place in ``runs``)."""
    return {r.round if r.round is not None else i: r for i, r in enumerate(runs) if measured(r)}


def end_to_end(runs: list[RunResult]) -> bool:
    """Whether these runs were timed end to end (entries whose gain is overlap)."""
    return any(r.timing_mode == "end_to_end" for r in runs)


def epoch_time(r: RunResult) -> float:
    """A run's mean epoch time (nan without epochs)."""
    return statistics.mean(r.epoch_seconds) if r.epoch_seconds else float("nan")


def ratio_over_rounds(base: list[float], other: list[float]) -> PairedRatio | None:
    """The paired ratio ``base / other`` of two clocks over rounds, with each round's ``log(base / other)``
    (``log_ratios``, aligned with the inputs; nan where a pair is missing), which the stopping rule reads;
    ``None`` without a valid pair."""
    pairs = [(b, o) for b, o in zip(base, other) if b == b and o == o and b > 0 and o > 0]
    if not pairs:
        return None
    ri = paired_ratio([b for b, _ in pairs], [o for _, o in pairs])
    logs = [math.log(b / o) if b == b and o == o and b > 0 and o > 0 else float("nan") for b, o in zip(base, other)]
    return PairedRatio(
        ratio=ri.ratio,
        low=ri.low,
        high=ri.high,
        significant=ri.significant,
        rounds=ri.rounds,
        p=ri.p_value,
        log_ratios=logs,
    )


def mean_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean with a t-interval (nan bounds for fewer than 2 values)."""
    if not values:
        return float("nan"), float("nan"), float("nan")
    mean = statistics.mean(values)
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = t_quantile((1 + level) / 2, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half
