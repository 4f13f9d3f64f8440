"""Rounds that stop when decided: the stopping rule for ``compare``'s interleaved rounds.

``--repeats`` is a maximum. After every round from ``min_rounds`` on (a "look"), :func:`settled` says for each
row (a configuration paired with the shared baseline) whether it stops receiving rounds, and why:

* :data:`SIGNIFICANT`: Holm's procedure over the whole family rejects it at this look's level
  (:meth:`StoppingRule.look_alpha`);
* :data:`BELOW_FLOOR`: its 95% interval contains 1 and lies inside the noise-floor band ``(1/floor, floor)`` of
  its own statistic, so more rounds could only resolve an effect the table would call "not resolved" anyway; it
  is never called significant. Where the sweep declared an equivalence margin (``equivalence_futility`` 3), only
  once "no effect beyond the margin" is out of its reach too, or at the last round: an interval inside the floor
  is not yet that verdict, which Holm grants only with enough rounds;
* :data:`FUTILE`: before the last round, the chance that it is significant at the last look, were the remaining
  rounds to continue as its rounds so far (its conditional power under its current estimate, at the last look's
  full level), is below ``curtail`` (10%): more rounds would almost surely end in "no significant difference"
  too (stochastic curtailment); it is never called significant. Where the sweep declared an equivalence margin
  (``StoppingRule.equivalence_futility``), a row is futile only when the chance that its equivalence test shows
  "no effect beyond the margin" at the last look (:func:`equivalence_power`) is below ``curtail`` too: a row
  with no real effect keeps its rounds until that verdict can be reached;
* :data:`MAX_ROUNDS`: it reached ``max_rounds``.

The levels are a weighted Bonferroni split of ``alpha`` over the looks: ``final_share * alpha`` at the last look,
the rest in equal parts at the earlier ones (:meth:`StoppingRule.look_alpha`). A false positive, wherever it
first happens, is a Holm rejection at one look, which has probability at most that look's level whatever the
dependence between rows and looks; so the family-wise error rate over all rows and all looks is at most
``alpha``. Futility stops add no term: a row stopped below the floor or as futile enters every later Holm with
p = 1, which can only make the others' Holm steps stricter. The
final table is Holm at the last look's level (:func:`final_alpha`) over :func:`family_p_values`, so its verdicts
are the stops'. :func:`gnnbench.measure.stats.sequential_sim.simulate` measures the rate in A/A sweeps, the power and
the rounds saved; the derivation and the tables are in ``docs/statistics.md`` ("Rounds that stop when decided"),
printed by ``python -m gnnbench.measure.stats.sequential_sim``.

Two floors keep noise and effect apart (``StoppingRule.paired_floor``, the rule since sweeps declare it): a row
is compared with the floor of the statistic its interval uses (``row_floors``: the paired floor of its own clock),
and never stops below the floor while its interval excludes 1; and a row's per-round sd is never taken below the
clock's measured paired noise (``min_sd``), so a few rounds that agree by chance cannot settle it on an interval
narrower than the clock allows. Raising an sd only raises p-values, so the error-rate argument above holds as it
is. A sweep whose manifest records a rule without ``paired_floor`` ran under the rule before (one floor, the
baseline's unpaired spread of the primary clock, and no sd floor); :meth:`StoppingRule.from_dict` gives it back
so its stops replay as they ran.

On top of :mod:`gnnbench.measure.stats.intervals`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

import numpy as np
from scipy.stats import chi2 as _chi2

from gnnbench.measure.stats.intervals import DEFAULT_REPEATS, holm, paired_ratio, t_quantile, t_upper_tail

__all__ = [
    "MIN_ROUNDS",
    "FINAL_SHARE",
    "SIGNIFICANT",
    "BELOW_FLOOR",
    "FUTILE",
    "MAX_ROUNDS",
    "CURTAIL",
    "EQUIVALENCE_FUTILITY",
    "conditional_power",
    "equivalence_power",
    "CORRECTIONS",
    "StoppingRule",
    "Stop",
    "settled",
    "open_rows",
    "final_alpha",
    "family_p_values",
    "final_significant",
    "floored_interval",
    "sd_floor",
    "SD_FLOOR_QUANTILE",
]

MIN_ROUNDS: int = 3
"""Rounds every row receives before it may stop."""

FINAL_SHARE: float = 0.75
"""Share of ``alpha`` spent at the last look; the rest is split equally over the earlier looks."""

SIGNIFICANT = "significant"
BELOW_FLOOR = "below the floor"
FUTILE = "futile"
MAX_ROUNDS = "max rounds"

SD_FLOOR_QUANTILE: float = 0.05
"""A row's per-round sd is taken as at least this quantile of the sample sd its rounds would show under the
clock's paired noise (:func:`sd_floor`)."""

EQUIVALENCE_FUTILITY: int = 3
"""The version of futility that waits for equivalence new sweeps run under (:attr:`StoppingRule.equivalence_futility`)."""

CURTAIL: float = 0.10
"""A row stops as :data:`FUTILE` when its conditional power at the last look is below this."""

CORRECTIONS = ("bonferroni", "none")
"""``"bonferroni"``: the weighted split of ``alpha`` over the looks (the rule). ``"none"``: ``alpha`` at every
look, which does not control the family-wise rate; it exists to show in simulation what the split is for."""


def checked_count(value: Any, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return int(value)


def _unit(value: Any, name: str, *, closed_top: bool = False) -> float:
    what = "(0, 1]" if closed_top else "(0, 1)"
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number in {what}, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in {what}, got {value!r}") from None
    if not (0.0 < v < 1.0 or (closed_top and v == 1.0)):
        raise ValueError(f"{name} must be in {what}, got {value!r}")
    return v


@dataclass(frozen=True)
class StoppingRule:
    """When a row of a sweep stops receiving rounds, and at which level it is significant.

    Attributes:
        min_rounds: Rounds every row receives before it may stop (>= 1; :data:`MIN_ROUNDS` by default).
        max_rounds: Rounds at most (``--repeats``); every row stops there. Must be ``>= min_rounds``.
        alpha: Family-wise error rate over all rows and all looks, in (0, 1). Intervals are at ``1 - alpha``.
        final_share: Share of ``alpha`` spent at the last look, in (0, 1]; 1 means no early significance (only
            futility stops early).
        futility: Whether a row whose interval lies inside the noise-floor band stops.
        curtail: A row stops as futile before the last round when its conditional power (:func:`conditional_power`)
            is below this, in [0, 1); 0: never.
        correction: ``"bonferroni"`` (the rule) or ``"none"`` (``alpha`` at every look; not family-wise, for
            the simulation that shows why the split is needed).
        paired_floor: True (the rule): a row is below the floor only against the floor of its own statistic
            (``settled``'s ``row_floors``) and only while its interval contains 1, and its per-round sd is floored
            at the clock's paired noise (``min_sd``). False: the rule before, one floor for every row and no sd
            floor, kept to replay sweeps that ran under it.
        equivalence_futility: Where ``settled`` is given the sweep's equivalence margin, a row stops as futile
            only when both its significance and its equivalence at the last look are out of reach
            (:func:`equivalence_power` below ``curtail`` too). 3 (the rule): as 2, and a row whose interval lies
            inside the floor band stops there (below the floor) only when its equivalence is out of reach too,
            or at the last round: an interval inside the floor is not yet "no effect beyond the margin", which
            Holm grants only with enough rounds (the 2c4859a sweep, ``results/reference/compare-small-cpu-next``,
            stopped rows so with intervals inside the margin; its ``sweep.json`` records when). A row already shown equivalent keeps its rounds
            to the last: the equivalence test runs once, at the end. 2: the projection
            takes the sd floor of the last look, and rows whose equivalence is never tested (``settled``'s
            ``untested``: censored ones) do not wait for it. 1: the first version (the sd floor of the rounds so far, every row waits),
            recorded as ``true`` by the sweeps that ran under it. 0 (``false``, or a manifest without the field):
            futility reads significance only, the rule before. 2, 1 and 0 are kept to replay sweeps as they ran.

    Raises:
        ValueError: naming the field and its bad value.
    """

    min_rounds: int = MIN_ROUNDS
    max_rounds: int = DEFAULT_REPEATS
    alpha: float = 0.05
    final_share: float = FINAL_SHARE
    futility: bool = True
    correction: str = "bonferroni"
    curtail: float = CURTAIL
    paired_floor: bool = True
    equivalence_futility: int = EQUIVALENCE_FUTILITY

    def __post_init__(self) -> None:
        checked_count(self.min_rounds, "min_rounds", 1)
        checked_count(self.max_rounds, "max_rounds", 1)
        if self.max_rounds < self.min_rounds:
            raise ValueError(f"max_rounds ({self.max_rounds!r}) must be >= min_rounds ({self.min_rounds!r})")
        _unit(self.alpha, "alpha")
        _unit(self.final_share, "final_share", closed_top=True)
        if not isinstance(self.futility, bool):
            raise ValueError(f"futility must be True or False, got {self.futility!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        if not isinstance(self.paired_floor, bool):
            raise ValueError(f"paired_floor must be True or False, got {self.paired_floor!r}")
        ef = self.equivalence_futility  # manifests of the first version recorded true / false (1 / 0)
        if not isinstance(ef, (bool, int, np.integer)) or ef not in (0, 1, 2, 3):
            raise ValueError(f"equivalence_futility must be 0, 1, 2 or 3 (or true / false, read as 1 / 0), got {ef!r}")
        object.__setattr__(self, "equivalence_futility", int(ef))
        if (
            isinstance(self.curtail, bool)
            or not isinstance(self.curtail, (int, float))
            or not (0.0 <= self.curtail < 1.0)
        ):
            raise ValueError(f"curtail must be a number in [0, 1) (0: no curtailment), got {self.curtail!r}")

    @classmethod
    def for_repeats(cls, repeats: int, **kwargs: Any) -> StoppingRule:
        """The rule for ``--repeats repeats``: at most ``repeats`` rounds, at least ``min(MIN_ROUNDS, repeats)``.
        With ``repeats <= MIN_ROUNDS`` there is one look and its level is ``alpha``, as without the rule.
        ``kwargs`` go to the other fields."""
        r = checked_count(repeats, "repeats", 1)
        return cls(min_rounds=min(MIN_ROUNDS, r), max_rounds=r, **kwargs)

    @property
    def looks(self) -> tuple[int, ...]:
        """The rounds after which a row can be called significant: ``max(min_rounds, 2) .. max_rounds`` (a
        paired t-test needs 2 rounds); empty when ``max_rounds`` is 1."""
        return tuple(range(max(self.min_rounds, 2), self.max_rounds + 1))

    @property
    def level(self) -> float:
        """The level of the intervals a row is judged by for futility and shown with: ``1 - alpha`` (95%), the
        level of the intervals ``compare`` prints."""
        return 1.0 - float(self.alpha)

    def look_alpha(self, look: int) -> float:
        """The Holm level after round ``look``, for the stopping decision and (at ``max_rounds``) the final
        verdict: ``final_share * alpha`` at ``max_rounds``, ``(1 - final_share) * alpha / (len(looks) - 1)`` at
        each earlier look, ``alpha`` when there is one look, 0 outside :attr:`looks`. The levels add up to
        ``alpha``. With ``correction="none"``: ``alpha`` at every look."""
        if look not in self.looks:
            return 0.0
        a = float(self.alpha)
        if self.correction == "none" or len(self.looks) == 1:
            return a
        if look == self.max_rounds:
            return a * float(self.final_share)
        return a * (1.0 - float(self.final_share)) / (len(self.looks) - 1)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StoppingRule:
        """The rule a sweep's manifest recorded (:meth:`to_dict`; derived keys are ignored). A manifest without
        ``paired_floor`` ran under the rule before it (``paired_floor=False``), one without
        ``equivalence_futility`` under futility by significance only (``equivalence_futility=0``; ``true``, as
        the first version recorded it, is 1)."""
        names = (
            "min_rounds",
            "max_rounds",
            "alpha",
            "final_share",
            "futility",
            "correction",
            "curtail",
            "paired_floor",
            "equivalence_futility",
        )
        return cls(**{"paired_floor": False, "equivalence_futility": 0, **{k: d[k] for k in names if k in d}})

    def to_dict(self) -> dict[str, Any]:
        """The rule as plain data (for a sweep's manifest), with the level at each look."""
        return {
            "min_rounds": self.min_rounds,
            "max_rounds": self.max_rounds,
            "alpha": float(self.alpha),
            "final_share": float(self.final_share),
            "futility": self.futility,
            "correction": self.correction,
            "curtail": float(self.curtail),
            "paired_floor": self.paired_floor,
            "equivalence_futility": self.equivalence_futility,
            "look_alpha": {str(k): self.look_alpha(k) for k in self.looks},
            "method": (
                "Holm across rows at every look; weighted Bonferroni over the looks; rows below the "
                "floor stop and are never significant"
                + (
                    "; the floor is the paired floor of each row's own statistic, a row whose interval "
                    "excludes 1 is never below it, and no row's per-round sd is taken below the clock's "
                    "paired noise"
                    if self.paired_floor
                    else ""
                )
                + (
                    f"; rows whose conditional power at the last look is below {self.curtail:.0%} stop "
                    "as futile and are never significant"
                    if self.curtail > 0
                    else ""
                )
                + (
                    " (with a declared equivalence margin, only when the chance of showing no effect "
                    "beyond it at the last look is below that too)"
                    if self.curtail > 0 and self.equivalence_futility
                    else ""
                )
                + (
                    "; with a declared equivalence margin a row inside the floor stops there only when that "
                    "chance is below it too, or at the last round"
                    if self.curtail > 0 and self.equivalence_futility >= 3
                    else ""
                )
                if self.correction != "none"
                else "Holm across rows at every look at the full alpha (not family-wise over the looks)"
            ),
        }


def final_alpha(rule: StoppingRule) -> float:
    """The Holm level ``compare`` must use for the final significance of a sweep run under ``rule`` (in place of
    ``FAMILY_ALPHA``), over :func:`family_p_values`: the level of the last look."""
    return rule.look_alpha(rule.max_rounds)


@dataclass(frozen=True)
class Stop:
    """Why and when a row stopped.

    Attributes:
        reason: :data:`SIGNIFICANT`, :data:`BELOW_FLOOR`, :data:`FUTILE` or :data:`MAX_ROUNDS`.
        look: The round after which it stopped (1-based; its list of log ratios has this length).
        rounds: Paired rounds its verdict rests on (``look`` less its missing rounds).
        ratio: ``exp(mean log ratio)``, baseline time / row time (> 1: the row is faster).
        low: Lower end of its interval at :attr:`StoppingRule.level` (nan with fewer than 2 rounds).
        high: Upper end of that interval.
        p_value: Its paired t-test's two-sided p-value over those rounds.
        alpha: The Holm level of the look it stopped at.
    """

    reason: str
    look: int
    rounds: int
    ratio: float
    low: float
    high: float
    p_value: float
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "look": self.look,
            "rounds": self.rounds,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "p_value": self.p_value,
            "alpha": self.alpha,
        }


def _checked(log_ratios: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    out = {}
    for row, values in log_ratios.items():
        xs = []
        for i, v in enumerate(values):
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"log_ratios[{row!r}][{i}] = {v!r} is not a number") from None
            if math.isinf(x):
                raise ValueError(f"log_ratios[{row!r}][{i}] = {v!r} is not finite (nan marks a missing round)")
            xs.append(x)
        out[row] = xs
    return out


def _min_sd_at(min_sd: float | Mapping[int, float] | None, look: int) -> float:
    v = min_sd.get(look) if isinstance(min_sd, Mapping) else min_sd
    if v is None:
        return 0.0
    x = float(v)
    if x != x:
        return 0.0
    if x < 0 or math.isinf(x):
        raise ValueError(f"min_sd at round {look} must be a finite number >= 0, got {v!r}")
    return x


def _floor_at(floor: float | Mapping[int, float] | None, look: int) -> float | None:
    f = floor.get(look) if isinstance(floor, Mapping) else floor
    if f is None:
        return None
    try:
        v = float(f)
    except (TypeError, ValueError):
        raise ValueError(f"floor at round {look} must be a number > 1, got {f!r}") from None
    if v != v:
        return None  # no spread to estimate it from: no futility at this look
    if not v > 1.0:
        raise ValueError(f"floor at round {look} must be > 1 (a speedup factor such as 1.08), got {f!r}")
    return v


def _interval(values: Sequence[float], level: float, min_sd: float = 0.0) -> tuple[int, float, float, float, float]:
    """(rounds, ratio, low, high, p) of the non-missing log ratios, by :func:`paired_ratio`, as ``compare``; with
    ``min_sd > 0`` the sd of the log ratios is taken as at least ``min_sd`` (:func:`floored_interval`)."""
    xs = [x for x in values if x == x]
    if not xs:
        return 0, float("nan"), float("nan"), float("nan"), float("nan")
    if min_sd > 0 and len(xs) >= 2:
        return floored_interval(xs, level, min_sd)
    r = paired_ratio([math.exp(x) for x in xs], [1.0] * len(xs), level=level)
    return r.rounds, r.ratio, r.low, r.high, r.p_value


def sd_floor(clock_sd: float, n: int) -> float:
    """The smallest sd ``n`` paired rounds of a clock whose paired noise is ``clock_sd`` plausibly show: the
    :data:`SD_FLOOR_QUANTILE` quantile of the sample sd, ``clock_sd sqrt(chi2_{q, n-1} / (n - 1))`` (0.23 of
    ``clock_sd`` for 3 rounds, 0.42 for 5). A smaller sample sd is rounds agreeing by chance, not a quieter
    clock, and is taken as this instead."""
    if n < 2 or not clock_sd > 0:
        return 0.0
    return float(clock_sd) * math.sqrt(float(_chi2.ppf(SD_FLOOR_QUANTILE, n - 1)) / (n - 1))


def floored_interval(xs: Sequence[float], level: float, min_sd: float) -> tuple[int, float, float, float, float]:
    """(rounds, ratio, low, high, p) of the paired t-test on the log ratios ``xs`` (two or more, none missing)
    with their sample sd taken as at least :func:`sd_floor` of the clock's paired noise ``min_sd``: the interval
    is never narrower, nor the p-value smaller, than that clock plausibly allows, whatever a few rounds happen to
    agree on."""
    n = len(xs)
    mean = sum(xs) / n
    sd = max(math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)), sd_floor(min_sd, n))
    if not sd > 0:
        return n, math.exp(mean), math.exp(mean), math.exp(mean), 1.0 if mean == 0 else 0.0
    se = sd / math.sqrt(n)
    half = t_quantile((1.0 + level) / 2.0, n - 1) * se
    p = min(1.0, 2.0 * t_upper_tail(abs(mean) / se, n - 1))
    return n, math.exp(mean), math.exp(mean - half), math.exp(mean + half), p


def _so_far(values: Sequence[float], rule: StoppingRule, min_sd: float) -> tuple[int, int, float, float]:
    """A row's rounds so far for a projection: its pairs ``n`` (nan: a missing round), the rounds left, the mean
    of its log ratios and their sd floored at the clock's noise (nan below 2 pairs)."""
    xs = [x for x in values if x == x]
    n, left = len(xs), rule.max_rounds - len(values)
    if n < 2:
        return n, left, float("nan"), float("nan")
    mean = sum(xs) / n
    return n, left, mean, max(math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)), sd_floor(min_sd, n))


def conditional_power(values: Sequence[float], rule: StoppingRule, min_sd: float = 0.0) -> float:
    """The chance that a row is significant at the last look, given its log ratios so far (nan: a missing
    round) and supposing its remaining rounds continue as those did: their mean is the current mean and their
    sd the current sd. ``values`` holds one entry per round so far, so ``rule.max_rounds - len(values)`` rounds
    are left. Significance there is judged at the last look's full level (the most lenient Holm step, as if
    every other row were rejected), in either direction. With ``n`` pairs so far, ``q`` rounds left and
    ``N = n + q`` pairs at the end, the final mean is normal around the current mean ``m`` with sd
    ``s sqrt(q) / N`` and must exceed ``c = t_{N-1} s / sqrt(N)`` in size: the power is
    ``Phi((|m| - c) / (s sqrt(q) / N)) + Phi((-|m| - c) / (s sqrt(q) / N))``. 1 when it cannot be judged (fewer
    than 2 pairs, no spread) or no round is left. ``min_sd``: the sd is taken as at least this (the clock's
    paired noise)."""
    n, left, mean, sd = _so_far(values, rule, min_sd)
    if n < 2 or left <= 0 or not sd > 0:
        return 1.0
    end = n + left
    crit = t_quantile(1.0 - rule.look_alpha(rule.max_rounds) / 2.0, end - 1) * sd / math.sqrt(end)
    spread = sd * math.sqrt(left) / end
    return _phi((abs(mean) - crit) / spread) + _phi((-abs(mean) - crit) / spread)


def equivalence_power(
    values: Sequence[float], rule: StoppingRule, margin: float, min_sd: float = 0.0, *, final_floor: bool = True
) -> float:
    """The chance that a row's equivalence test (TOST at ``rule.alpha`` each side against ``log(1 + margin)``,
    :func:`gnnbench.measure.stats.intervals.equivalence`, the most lenient Holm step) shows "no effect beyond the margin"
    at the last look, given its log ratios so far and supposing its remaining rounds continue as those did (as
    :func:`conditional_power`). With ``n`` pairs so far, ``q`` left, ``N = n + q``, current mean ``m`` and sd
    ``s``, the final mean is normal around ``m`` with sd ``s sqrt(q) / N`` and must lie within
    ``+-(d - c)``, ``d = log(1 + margin)``, ``c = t_{N-1, 1-alpha} s_N / sqrt(N)`` (``s_N``: ``s`` taken as at
    least the sd floor of ``N`` rounds, as the final test takes it): the chance is
    ``Phi((d - c - m) / sd_end) - Phi((-(d - c) - m) / sd_end)``, 0 when ``c >= d`` (the margin is out of reach
    in the rounds left). 1 when it cannot be judged (fewer than 2 pairs, no spread); 0 when no round is left.
    ``min_sd``: the sd is taken as at least this (the clock's paired noise). ``final_floor`` False: ``s_N`` is
    ``s`` (the first version, which took the floor of the rounds so far only)."""
    n, left, mean, sd = _so_far(values, rule, min_sd)
    if left <= 0:
        return 0.0
    if n < 2 or not sd > 0:
        return 1.0
    end = n + left
    # the final TOST takes its sd as at least the floor for ``end`` rounds (larger than for ``n``)
    sd_end = max(sd, sd_floor(min_sd, end)) if final_floor else sd
    room = math.log1p(float(margin)) - t_quantile(1.0 - float(rule.alpha), end - 1) * sd_end / math.sqrt(end)
    if room <= 0:
        return 0.0
    spread = sd * math.sqrt(left) / end
    return max(0.0, _phi((room - mean) / spread) - _phi((-room - mean) / spread))


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _holm_p(stop: Stop | None, p: float) -> float:
    """A row's p-value in Holm at a look: 0 once significant (already rejected), 1 once below the floor or
    futile (never significant), else its own."""
    if stop is None or stop.reason == MAX_ROUNDS:
        return p
    return 0.0 if stop.reason == SIGNIFICANT else 1.0


def settled(
    rule: StoppingRule,
    log_ratios: Mapping[str, Sequence[float]],
    floor: float | Mapping[int, float] | None = None,
    *,
    row_floors: Mapping[str, float | Mapping[int, float] | None] | None = None,
    min_sd: float | Mapping[int, float] | None = None,
    margin: float | None = None,
    untested: Collection[str] = (),
    row_min_sd: Mapping[str, float | Mapping[int, float] | None] | None = None,
) -> dict[str, Stop | None]:
    """After a round: which rows stop, and why.

    ``log_ratios[row][j]`` is the row's paired log ratio ``log(baseline / row)`` of its primary clock in round
    ``j + 1`` (nan where the pair is missing, e.g. a failed run); a row that stopped gets no entries after its
    stop. The rounds run so far are ``n = max(len)``. The function is pure: it replays the looks
    ``min_rounds .. min(n, max_rounds)`` from the data, so the same data always give the same stops. At look
    ``k`` every row enters Holm at ``rule.look_alpha(k)`` with the p-value of its first ``k`` entries, a row that
    stopped earlier with 0 (significant) or 1 (below the floor): the family never shrinks. A row with an entry
    for round ``k`` and at least ``min_rounds`` measured pairs is decided there: significant if Holm rejects it;
    else below the floor if ``rule.futility`` and its interval at ``rule.level`` lies inside ``(1/floor, floor)``
    (with ``margin`` under ``equivalence_futility`` 3, only when equivalence is out of reach too, or at
    ``k == max_rounds``); else futile if ``k < max_rounds`` and its :func:`conditional_power` is below ``rule.curtail``; else max rounds
    if ``k == max_rounds``. At ``n >= max_rounds`` every row still open stops (max rounds).

    Under ``rule.paired_floor`` a row is below the floor only while its interval contains 1, against its own
    floor where ``row_floors`` has one, and every interval, p-value and conditional power takes the row's sd as
    at least ``min_sd`` at that look (the clock's paired noise, log scale).

    Args:
        rule: The stopping rule.
        log_ratios: Per row, its per-round log ratios. Pass the rows of Holm's family only (not the baseline,
            the A/A row or the end-to-end baseline, which run every round).
        floor: The noise floor of the primary clock that the final table will print (e.g. 1.08): one value for
            every look, or one per look (``{round: floor}``; a missing look or nan: no futility there). None: no
            futility stops.
        row_floors: Per row, the paired floor of the statistic its interval uses (one value, or one per look);
            it replaces ``floor`` for that row (only under ``rule.paired_floor``).
        min_sd: The clock's paired noise, the sd of a per-round log ratio no row's is taken below (one value or
            one per look; None or nan: none; only under ``rule.paired_floor``).
        margin: The equivalence margin the sweep declared before its rounds (e.g. 0.10), or None. Under
            ``rule.equivalence_futility`` a row is futile only when its :func:`equivalence_power` against it is
            below ``rule.curtail`` too; under version 3, likewise below the floor (but at the last round).
        untested: Rows whose equivalence is never tested (censored ones): under ``equivalence_futility`` 2 or
            3 they do not wait for it.
        row_min_sd: Per row, the paired noise of the clock its ratio was timed on, replacing ``min_sd`` for it
            (a row timed against the baseline in one process, steps interleaved, has that design's noise).

    Returns:
        Per row (in the order given), its :class:`Stop`, or None while it keeps receiving rounds.

    Raises:
        ValueError: on a value that is not a number or is infinite, or a floor that is not > 1.
    """
    data = _checked(log_ratios)
    n = max((len(v) for v in data.values()), default=0)
    stops: dict[str, Stop | None] = {row: None for row in data}
    version = rule.equivalence_futility if margin is not None else 0
    untested = set(untested) if version >= 2 else set()

    def sd_of(row: str, k: int) -> float:
        if not rule.paired_floor:
            return 0.0
        own = row_min_sd.get(row) if row_min_sd is not None else None
        return _min_sd_at(own if own is not None else min_sd, k)

    for k in range(rule.min_rounds, min(n, rule.max_rounds) + 1):
        a = rule.look_alpha(k)
        now = {row: _interval(data[row][:k], rule.level, sd_of(row, k)) for row in data if stops[row] is None}
        ps = [_holm_p(stops[row], now[row][4] if row in now else float("nan")) for row in data]
        rejected = dict(zip(data, holm(ps, a) if a > 0 else [False] * len(ps)))
        f = _floor_at(floor, k) if rule.futility else None
        for row, (r, ratio, low, high, p) in now.items():
            if len(data[row]) < k or r < rule.min_rounds:
                continue  # not measured in round k, or too few pairs yet
            reason = None
            sd0 = sd_of(row, k)
            fr = f
            if rule.paired_floor and rule.futility and row_floors is not None and row_floors.get(row) is not None:
                fr = _floor_at(row_floors[row], k)
            out_of_reach = functools.partial(_no_equivalence, rule, version, data[row][:k], margin, sd0)
            if rejected[row]:
                reason = SIGNIFICANT
            elif (
                fr is not None
                and 1.0 / fr < low
                and high < fr
                and (not rule.paired_floor or low <= 1.0 <= high)
                and (version < 3 or k >= rule.max_rounds or out_of_reach(row in untested))
            ):
                reason = BELOW_FLOOR
            elif (
                k < rule.max_rounds
                and conditional_power(data[row][:k], rule, sd0) < rule.curtail
                and out_of_reach(row in untested)
            ):
                reason = FUTILE
            elif k == rule.max_rounds:
                reason = MAX_ROUNDS
            if reason is not None:
                stops[row] = Stop(reason, k, r, ratio, low, high, p, a)
    if n >= rule.max_rounds:
        for row in data:
            if stops[row] is None:
                r, ratio, low, high, p = _interval(
                    data[row][: rule.max_rounds], rule.level, sd_of(row, rule.max_rounds)
                )
                stops[row] = Stop(MAX_ROUNDS, rule.max_rounds, r, ratio, low, high, p, final_alpha(rule))
    return stops


def _no_equivalence(
    rule: StoppingRule, version: int, xs: Sequence[float], margin: float | None, sd0: float, untested: bool
) -> bool:
    """Whether "no effect beyond the margin" is out of the row's reach at the last look (``settled``'s
    ``rule.equivalence_futility`` ``version``; 0: it is never waited for)."""
    return not version or untested or equivalence_power(xs, rule, margin, sd0, final_floor=version >= 2) < rule.curtail


def open_rows(stops: Mapping[str, Stop | None]) -> list[str]:
    """The rows that receive the next round (in the order given); the sweep ends when none is left."""
    return [row for row, s in stops.items() if s is None]


def family_p_values(stops: Mapping[str, Stop | None], p_values: Mapping[str, float]) -> dict[str, float]:
    """The p-values the final Holm (at :func:`final_alpha`) takes: 0 for a row stopped as significant, 1 for a
    row stopped below the floor (never significant), else the row's own (``p_values[row]``, nan if absent).
    Rows are those of ``stops``, in its order."""
    return {row: _holm_p(s, float(p_values.get(row, float("nan")))) for row, s in stops.items()}


def final_significant(
    rule: StoppingRule,
    log_ratios: Mapping[str, Sequence[float]],
    floor: float | Mapping[int, float] | None = None,
    *,
    row_floors: Mapping[str, float | Mapping[int, float] | None] | None = None,
    min_sd: float | Mapping[int, float] | None = None,
    margin: float | None = None,
    untested: Collection[str] = (),
    row_min_sd: Mapping[str, float | Mapping[int, float] | None] | None = None,
) -> dict[str, bool]:
    """The final family-wise verdict of a sweep run under ``rule``: Holm at :func:`final_alpha` over
    :func:`family_p_values` (a row still open enters with the p-value of all its rounds). After ``max_rounds``
    it is exactly the set of rows :func:`settled` stopped as significant."""
    data = _checked(log_ratios)
    stops = settled(
        rule,
        data,
        floor,
        row_floors=row_floors,
        min_sd=min_sd,
        margin=margin,
        untested=untested,
        row_min_sd=row_min_sd,
    )

    def sd_of(row: str) -> float:
        own = row_min_sd.get(row) if row_min_sd is not None else None
        return _min_sd_at(own if own is not None else min_sd, rule.max_rounds) if rule.paired_floor else 0.0

    own = {row: _interval(data[row][: rule.max_rounds], rule.level, sd_of(row))[4] for row in data}
    ps = family_p_values(stops, own)
    return dict(zip(ps, holm(list(ps.values()), final_alpha(rule))))
