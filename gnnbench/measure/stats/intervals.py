"""Process-level significance for speedups: paired ratios over interleaved rounds, and the noise floor.

The unit of repetition is the process, not the step (each process has its own offset: memory layout, clock
state, allocator luck). ``compare`` runs every configuration in ``R`` processes in interleaved rounds and
summarizes each by its median step time; :func:`paired_ratio` gives the ratio of two configurations with a
paired Student-t interval over the per-round log ratios, and :func:`noise_floor` the smallest speedup ``R``
rounds can resolve. :data:`DEFAULT_REPEATS` comes from the simulation of
:func:`gnnbench.measure.stats.intervals_sim.simulate_calibration`.

Student's t (its quantile, tail and noncentral form) comes from ``scipy.stats``; :func:`equivalence` is the
two one-sided tests (TOST) that a paired ratio lies within a margin declared before the sweep. The rationale
and the calibration table: ``docs/statistics.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import optimize as _optimize
from scipy import stats as _stats

__all__ = [
    "DEFAULT_REPEATS",
    "RatioInterval",
    "paired_ratio",
    "holm",
    "noise_floor",
    "t_quantile",
    "t_test_power",
    "detectable_shift",
    "Equivalence",
    "equivalence",
]

DEFAULT_REPEATS: int = 5
"""Processes per configuration (rounds) that ``compare`` runs by default."""

METHOD = "paired-t on per-round log ratios of run medians"


@dataclass(frozen=True)
class RatioInterval:
    """A ratio with its confidence interval.

    Attributes:
        ratio: Point estimate, ``exp(mean of per-round log ratios)``. On step
            times given as ``(base, other)``, ``> 1`` means ``other`` is faster.
        low: Lower end of the interval (nan with fewer than 2 rounds).
        high: Upper end of the interval (nan with fewer than 2 rounds).
        rounds: Number of paired rounds used.
        significant: True when the interval excludes 1.
        level: Confidence level, e.g. 0.95.
        method: How the interval was computed.
        p_value: Two-sided p-value of the paired t-test of "no difference" (nan with fewer than 2 rounds);
            :func:`holm` turns a family of them into family-wise decisions.
    """

    ratio: float
    low: float
    high: float
    rounds: int
    significant: bool
    level: float
    method: str = METHOD
    p_value: float = float("nan")


def _open_unit(value: float, name: str, what: str = "a number") -> float:
    """``value`` as a float strictly inside (0, 1), or a ValueError naming ``name`` and the bad value."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {what} in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return v


def _check_level(level: float) -> float:
    return _open_unit(level, "level")


def _positive_logs(values: Sequence[float], name: str) -> list[float]:
    out = []
    for i, v in enumerate(values):
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name}[{i}] = {v!r} is not a number") from None
        if not math.isfinite(x) or x <= 0.0:
            raise ValueError(f"{name}[{i}] = {v!r} is not a positive finite number")
        out.append(math.log(x))
    return out


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    mean = math.fsum(xs) / n
    if n < 2:
        return mean, float("nan")
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))


def paired_ratio(base: Sequence[float], other: Sequence[float], *, level: float = 0.95) -> RatioInterval:
    """Ratio ``base / other`` over paired rounds, with a paired-t interval.

    ``base[i]`` and ``other[i]`` are one summary each from round ``i`` (e.g.
    the median step time of the process that ran that configuration in round
    ``i``). With ``d_i = log(base[i] / other[i])``, the interval is
    ``exp(mean(d) +- t_{(1+level)/2, n-1} * sd(d) / sqrt(n))`` (``sd`` the
    sample standard deviation). On times the ratio is the speedup of ``other``.

    Args:
        base: Per-round summaries of the baseline.
        other: Per-round summaries of the other configuration, same length.
        level: Confidence level in (0, 1).

    Returns:
        A :class:`RatioInterval`. With fewer than 2 rounds the interval is
        ``(nan, nan)`` and not significant; the point estimate is still given
        (nan with no rounds).

    Raises:
        ValueError: If the lengths differ, a value is non-positive or not
            finite, or ``level`` is not in (0, 1).
    """
    lv = _check_level(level)
    if len(base) != len(other):
        raise ValueError(f"base and other must have one value per round; got {len(base)} and {len(other)}")
    lb = _positive_logs(base, "base")
    lo = _positive_logs(other, "other")
    n = len(lb)
    nan = float("nan")
    if n == 0:
        return RatioInterval(nan, nan, nan, 0, False, lv)
    d = [a - b for a, b in zip(lb, lo)]
    mean, sd = _mean_sd(d)
    if n < 2:
        return RatioInterval(math.exp(mean), nan, nan, n, False, lv)
    half = t_quantile((1.0 + lv) / 2.0, n - 1) * sd / math.sqrt(n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    if sd > 0:
        p = min(1.0, 2.0 * t_upper_tail(abs(mean) / (sd / math.sqrt(n)), n - 1))
    else:
        p = 1.0 if mean == 0 else 0.0
    return RatioInterval(math.exp(mean), low, high, n, not (low <= 1.0 <= high), lv, METHOD, p)


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down procedure: which of ``p_values`` are rejected with the family-wise error rate (the
    chance that any rejection is a false one) at most ``alpha``, whatever the dependence between the tests.

    The ``m`` p-values are sorted; the k-th smallest (k from 0) is rejected while ``p <= alpha / (m - k)``;
    the first that is not stops the procedure. NaN p-values (fewer than 2 rounds) are never rejected and do not
    count in ``m``.
    """
    a = _open_unit(alpha, "alpha")
    finite = sorted((p, i) for i, p in enumerate(p_values) if p == p)
    out = [False] * len(p_values)
    m = len(finite)
    for k, (p, i) in enumerate(finite):
        if p > a / (m - k):
            break
        out[i] = True
    return out


def noise_floor(base_runs: Sequence[float], *, rounds: int | None = None, level: float = 0.95) -> float:
    """Smallest speedup factor resolvable with ``rounds`` paired rounds.

    From the process-to-process spread of the baseline's run summaries: with
    ``s`` the sample sd of ``log(base_runs)`` and independent processes, a
    paired log ratio has sd ``sqrt(2) * s``, so the floor is
    ``exp(t_{(1+level)/2, R-1} * sqrt(2) * s / sqrt(R))``. It is conservative
    where rounds share drift (pairing cancels that part of ``s``).

    Args:
        base_runs: One summary per baseline process (e.g. median step time).
        rounds: The ``R`` to plan for; defaults to ``len(base_runs)``.
        level: Confidence level in (0, 1).

    Returns:
        E.g. 1.08, meaning effects within about +-8% are not resolvable; nan
        with fewer than 2 runs (no spread to estimate) or ``rounds`` < 2.

    Raises:
        ValueError: If a value is non-positive or not finite, ``rounds`` is
            not a positive integer, or ``level`` is not in (0, 1).
    """
    lv = _check_level(level)
    logs = _positive_logs(base_runs, "base_runs")
    if rounds is None:
        r = len(logs)
    else:
        if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
            raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
        r = int(rounds)
    if len(logs) < 2 or r < 2:
        return float("nan")
    _, s = _mean_sd(logs)
    return math.exp(t_quantile((1.0 + lv) / 2.0, r - 1) * math.sqrt(2.0) * s / math.sqrt(r))


def t_test_power(shift: float, df: int, alpha: float) -> float:
    """The power of a two-sided one-sample t test at level ``alpha`` with ``df`` degrees of freedom against a
    true mean of ``shift`` standard errors: ``P(|T'| > t_{1-alpha/2, df})`` for the noncentral ``T'`` with
    noncentrality ``shift`` (``scipy.stats.nct``).

    Raises:
        ValueError: for ``df < 1`` or ``alpha`` outside (0, 1).
    """
    if isinstance(df, bool) or not isinstance(df, (int, np.integer)) or df < 1:
        raise ValueError(f"df must be an integer >= 1 (got {df!r})")
    a = _open_unit(alpha, "alpha")
    c = t_quantile(1.0 - a / 2.0, int(df))
    # P(T' > c) + P(T' < -c), the second as the upper tail of the mirrored noncentrality; scipy's noncentral t
    # returns nan for a tail far below double precision (a rejection in the wrong direction at a large shift):
    # such a tail is 0 to the precision of the sum
    with warnings.catch_warnings():  # its series' "did not converge" in those tails, with the same nan
        warnings.simplefilter("ignore", RuntimeWarning)
        tails = [float(_stats.nct.sf(c, int(df), nc)) for nc in (shift, -shift)]
    return float(np.clip(sum(t if t == t else 0.0 for t in tails), 0.0, 1.0))


@functools.lru_cache(maxsize=256)
def detectable_shift(df: int, alpha: float, power: float = 0.8) -> float:
    """The smallest true mean, in standard errors, that a two-sided t test at ``alpha`` with ``df`` degrees of
    freedom rejects with probability ``power`` (:func:`t_test_power`, solved by Brent's method)."""
    target = _open_unit(power, "power")
    hi = 1.0
    while t_test_power(hi, df, alpha) < target:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    if t_test_power(0.0, df, alpha) >= target:
        return 0.0
    return float(_optimize.brentq(lambda x: t_test_power(x, df, alpha) - target, 0.0, hi, xtol=1e-12))


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided tests (TOST, Schuirmann 1987) that a paired log ratio lies within a margin.

    Attributes:
        equivalent: True when both one-sided tests reject at ``alpha``: the true ratio lies within
            ``[1/(1+margin), 1+margin]`` with confidence ``1 - alpha`` (its ``1 - 2 alpha`` interval lies inside).
        margin: The margin, e.g. 0.10 for ratios within ``[1/1.1, 1.1]`` (symmetric in log ratio).
        ratio: ``exp(mean log ratio)``.
        low: Lower end of the ``1 - 2 alpha`` interval (nan with fewer than 2 rounds).
        high: Upper end.
        p_value: The larger of the two one-sided p-values (nan with fewer than 2 rounds).
        rounds: Paired rounds used.
        alpha: Level of each one-sided test.
    """

    equivalent: bool
    margin: float
    ratio: float
    low: float
    high: float
    p_value: float
    rounds: int
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def equivalence(log_ratios: Sequence[float], margin: float, *, alpha: float = 0.05, min_sd: float = 0.0) -> Equivalence:
    """TOST on paired log ratios: is ``|mean| < log(1 + margin)`` shown at ``alpha``?

    With ``n`` finite values (nan: a missing round, skipped), mean ``m``, sample sd ``s`` and
    ``d = log(1 + margin)``, the two one-sided p-values are ``P(T > (m + d) / se)`` and ``P(T < (m - d) / se)``
    for Student's t on ``n - 1`` degrees of freedom, ``se = s / sqrt(n)``; equivalence is shown when the larger
    is below ``alpha``. Its size is ``alpha`` at the margin whatever ``s`` (the false "equivalent" rate of a
    true ratio of ``1 + margin`` is at most ``alpha``: ``docs/statistics.md``). With no spread (``s = 0``) the
    p-value is 0 inside the margin and 1 outside. ``min_sd``: ``s`` is taken as at least this (a floor on the
    spread the clock allows, :func:`gnnbench.measure.stats.sequential.sd_floor`); it only makes the test harder to pass.

    Raises:
        ValueError: for ``margin`` not in (0, 1), ``alpha`` not in (0, 1) or a value that is infinite.
    """
    m_ = _open_unit(margin, "margin")
    a = _open_unit(alpha, "alpha")
    xs = []
    for i, v in enumerate(log_ratios):
        x = float(v)
        if math.isinf(x):
            raise ValueError(f"log_ratios[{i}] = {v!r} is not finite (nan marks a missing round)")
        if x == x:
            xs.append(x)
    n, nan = len(xs), float("nan")
    if n == 0:
        return Equivalence(False, m_, nan, nan, nan, nan, 0, a)
    mean, sd = _mean_sd(xs)
    if n < 2:
        return Equivalence(False, m_, math.exp(mean), nan, nan, nan, n, a)
    sd = max(sd, float(min_sd)) if min_sd == min_sd else sd
    d = math.log1p(m_)
    se = sd / math.sqrt(n)
    if se > 0:
        p = max(float(_stats.t.sf((mean + d) / se, n - 1)), float(_stats.t.cdf((mean - d) / se, n - 1)))
    else:
        p = 0.0 if abs(mean) < d else 1.0
    half = t_quantile(1.0 - a, n - 1) * se
    return Equivalence(p < a, m_, math.exp(mean), math.exp(mean - half), math.exp(mean + half), p, n, a)


# --- Student t -----------------------------------------------------------------------------------


def t_upper_tail(t: float, df: float) -> float:
    """``P(T > t)`` (``scipy.stats.t.sf``)."""
    return float(_stats.t.sf(t, df))


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t distribution (the inverse of its CDF; ``scipy.stats.t.ppf``).

    Args:
        p: Probability in (0, 1).
        df: Degrees of freedom, > 0 (normally a positive integer).

    Returns:
        ``t`` with ``P(T <= t) = p``.

    Raises:
        ValueError: If ``p`` is not in (0, 1) or ``df`` is not positive and finite.
    """
    pf = _open_unit(p, "p", "a probability")
    try:
        dff = float(df)
    except (TypeError, ValueError):
        raise ValueError(f"df must be a positive number, got {df!r}") from None
    if isinstance(df, bool) or not math.isfinite(dff) or dff <= 0.0:
        raise ValueError(f"df must be positive and finite, got {df!r}")
    if pf == 0.5:
        return 0.0
    return _t_ppf(pf, dff)


@functools.lru_cache(maxsize=1024)
def _t_ppf(p: float, dff: float) -> float:
    return float(_stats.t.ppf(p, dff))
