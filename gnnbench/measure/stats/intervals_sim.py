"""Calibration by simulation of the paired ratio test: how often :func:`~gnnbench.measure.stats.intervals.paired_ratio`
calls a simulated comparison significant.

:func:`simulate_step_times` draws step times of interleaved rounds under a model of process offsets, round
drift and autocorrelated step noise; :func:`simulate_calibration` summarizes each simulated process by its
median and counts the comparisons :func:`~gnnbench.measure.stats.intervals.paired_ratio` calls significant: the A/A
false-positive rate, or the power to detect a true speedup. :data:`~gnnbench.measure.stats.intervals.DEFAULT_REPEATS`
comes from it; the calibration table: ``docs/statistics.md`` ("Calibration").

Pure numpy and the standard library.
"""

from __future__ import annotations

import math

import numpy as np

from gnnbench.measure.stats.intervals import paired_ratio

__all__ = ["simulate_step_times", "simulate_calibration"]

_SIM_BASE_TIME = 0.05  # seconds per step in the simulation; only ratios matter.


def simulate_step_times(
    *,
    rounds: int,
    true_ratio: float = 1.0,
    trials: int = 400,
    steps: int = 40,
    process_sd: tuple[float, float] = (0.05, 0.08),
    ar: float = 0.5,
    step_sd: float = 0.05,
    drift_sd: float = 0.02,
    seed: int = 0,
) -> np.ndarray:
    """Simulated step times of interleaved rounds of a baseline and another configuration.

    Model, per trial: ``sigma_p ~ U(process_sd)``; for each round ``r`` a
    shared drift ``d_r ~ N(0, drift_sd)``; for each configuration in a round a
    separate process with offset ``o ~ N(0, sigma_p)``; within a process, log
    step times are ``log(base_time) + d_r + o + e_t`` with ``e_t`` stationary
    AR(1) noise (coefficient ``ar``, stationary sd ``step_sd``). The other
    configuration's base time is ``base_time / true_ratio``.

    Args:
        rounds: Rounds ``R`` (processes per configuration).
        true_ratio: True speedup of the other configuration.
        trials: Independent simulated comparisons.
        steps: Measured steps per process.
        process_sd: Range of the per-process offset sd (log scale).
        ar: AR(1) coefficient of the step noise, in [0, 1).
        step_sd: Stationary sd of the step noise (log scale).
        drift_sd: Sd of the per-round shared drift (log scale).
        seed: Seed of the numpy generator.

    Returns:
        Array of shape ``(trials, rounds, 2, steps)`` of step times in
        seconds; index 0 of the third axis is the baseline, 1 the other.

    Raises:
        ValueError: On a non-positive count, ``true_ratio``, a negative sd, a
            reversed ``process_sd`` or ``ar`` outside [0, 1).
    """
    for name, v in (("rounds", rounds), ("trials", trials), ("steps", steps)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not (math.isfinite(true_ratio) and true_ratio > 0):
        raise ValueError(f"true_ratio must be positive and finite, got {true_ratio!r}")
    lo_sd, hi_sd = process_sd
    if not (0.0 <= lo_sd <= hi_sd):
        raise ValueError(f"process_sd must be (low, high) with 0 <= low <= high, got {process_sd!r}")
    if not 0.0 <= ar < 1.0:
        raise ValueError(f"ar must be in [0, 1), got {ar!r}")
    for name, v in (("step_sd", step_sd), ("drift_sd", drift_sd)):
        if not (math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a non-negative number, got {v!r}")

    rng = np.random.default_rng(seed)
    sigma_p = rng.uniform(lo_sd, hi_sd, size=(trials, 1, 1))
    drift = rng.normal(0.0, drift_sd, size=(trials, rounds, 1))
    offset = rng.normal(0.0, 1.0, size=(trials, rounds, 2)) * sigma_p
    level = np.log([_SIM_BASE_TIME, _SIM_BASE_TIME / true_ratio])  # per configuration
    mean = level + drift + offset  # (trials, rounds, 2)

    innov_sd = step_sd * math.sqrt(1.0 - ar * ar)
    z = rng.normal(0.0, 1.0, size=(steps, trials, rounds, 2))
    e = np.empty_like(z)
    e[0] = z[0] * step_sd  # start in the stationary distribution
    for t in range(1, steps):
        e[t] = ar * e[t - 1] + innov_sd * z[t]
    return np.exp(mean[..., None] + np.moveaxis(e, 0, -1))


def simulate_calibration(
    *,
    rounds: int,
    true_ratio: float = 1.0,
    trials: int = 400,
    steps: int = 40,
    process_sd: tuple[float, float] = (0.05, 0.08),
    ar: float = 0.5,
    step_sd: float = 0.05,
    drift_sd: float = 0.02,
    seed: int = 0,
    level: float = 0.95,
) -> float:
    """Fraction of simulated comparisons that :func:`paired_ratio` calls significant.

    Each trial simulates ``rounds`` interleaved rounds with
    :func:`simulate_step_times` (see there for the model), summarizes each
    process by its median step time and applies :func:`paired_ratio` to the
    per-round summaries. With ``true_ratio=1`` this is the A/A false-positive
    rate; otherwise the power to detect ``true_ratio``.

    Args:
        rounds: Rounds ``R`` (processes per configuration).
        true_ratio: True speedup of the other configuration.
        trials: Independent simulated comparisons.
        steps: Measured steps per process.
        process_sd: Range of the per-process offset sd (log scale); each
            trial draws its sd uniformly from it.
        ar: AR(1) coefficient of the step noise.
        step_sd: Stationary sd of the step noise (log scale).
        drift_sd: Sd of the per-round drift shared by both configurations.
        seed: Seed; the same seed gives the same fraction.
        level: Confidence level of the interval.

    Returns:
        The fraction in [0, 1].

    Raises:
        ValueError: As :func:`simulate_step_times` and :func:`paired_ratio`.
    """
    times = simulate_step_times(
        rounds=rounds,
        true_ratio=true_ratio,
        trials=trials,
        steps=steps,
        process_sd=process_sd,
        ar=ar,
        step_sd=step_sd,
        drift_sd=drift_sd,
        seed=seed,
    )
    summaries = np.median(times, axis=-1)  # (trials, rounds, 2)
    hits = sum(paired_ratio(s[:, 0], s[:, 1], level=level).significant for s in summaries)
    return hits / trials
