"""Rounds that stop when decided: the stopping rule for ``compare``'s interleaved rounds.

``--repeats`` is a maximum. After every round from ``min_rounds`` on (a "look"), :func:`settled` says for each
row (a configuration paired with the shared baseline) whether it stops receiving rounds, and why:

* :data:`SIGNIFICANT`: Holm's procedure over the whole family rejects it at this look's level
  (:meth:`StoppingRule.look_alpha`);
* :data:`BELOW_FLOOR`: its 95% interval lies inside the noise-floor band ``(1/floor, floor)``, so more rounds
  could only resolve an effect the table would call "not resolved" anyway; it is never called significant;
* :data:`FUTILE`: before the last round, the chance that it is significant at the last look, were the remaining
  rounds to continue as its rounds so far (its conditional power under its current estimate, at the last look's
  full level), is below ``curtail`` (10%): more rounds would almost surely end in "no significant difference"
  too (stochastic curtailment); it is never called significant;
* :data:`MAX_ROUNDS`: it reached ``max_rounds``.

The levels are a weighted Bonferroni split of ``alpha`` over the looks: ``final_share * alpha`` at the last look,
the rest in equal parts at the earlier ones (:meth:`StoppingRule.look_alpha`). A false positive, wherever it
first happens, is a Holm rejection at one look, which has probability at most that look's level whatever the
dependence between rows and looks; so the family-wise error rate over all rows and all looks is at most
``alpha``. Futility stops add no term: a row stopped below the floor or as futile enters every later Holm with
p = 1, which can only make the others' Holm steps stricter. The
final table is Holm at the last look's level (:func:`final_alpha`) over :func:`family_p_values`, so its verdicts
are the stops'. :func:`simulate` measures the rate in A/A sweeps, the power and the rounds saved; the
derivation and the tables are in ``docs/statistics.md`` ("Rounds that stop when decided"), printed by
``python -m gnnbench.measure.sequential``.

Pure numpy and the standard library on top of :mod:`gnnbench.measure.stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from gnnbench.measure.stats import DEFAULT_REPEATS, holm, paired_ratio, t_quantile

__all__ = [
    "MIN_ROUNDS",
    "FINAL_SHARE",
    "SIGNIFICANT",
    "BELOW_FLOOR",
    "FUTILE",
    "MAX_ROUNDS",
    "CURTAIL",
    "conditional_power",
    "CORRECTIONS",
    "StoppingRule",
    "Stop",
    "settled",
    "open_rows",
    "final_alpha",
    "family_p_values",
    "final_significant",
    "Simulation",
    "simulate",
    "simulate_fwer",
    "tables",
]

MIN_ROUNDS: int = 3
"""Rounds every row receives before it may stop."""

FINAL_SHARE: float = 0.75
"""Share of ``alpha`` spent at the last look; the rest is split equally over the earlier looks."""

SIGNIFICANT = "significant"
BELOW_FLOOR = "below the floor"
FUTILE = "futile"
MAX_ROUNDS = "max rounds"

CURTAIL: float = 0.10
"""A row stops as :data:`FUTILE` when its conditional power at the last look is below this."""

CORRECTIONS = ("bonferroni", "none")
"""``"bonferroni"``: the weighted split of ``alpha`` over the looks (the rule). ``"none"``: ``alpha`` at every
look, which does not control the family-wise rate; it exists to show in simulation what the split is for."""

def _count(value: Any, name: str, least: int) -> int:
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

    def __post_init__(self) -> None:
        _count(self.min_rounds, "min_rounds", 1)
        _count(self.max_rounds, "max_rounds", 1)
        if self.max_rounds < self.min_rounds:
            raise ValueError(f"max_rounds ({self.max_rounds!r}) must be >= min_rounds ({self.min_rounds!r})")
        _unit(self.alpha, "alpha")
        _unit(self.final_share, "final_share", closed_top=True)
        if not isinstance(self.futility, bool):
            raise ValueError(f"futility must be True or False, got {self.futility!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        if isinstance(self.curtail, bool) or not isinstance(self.curtail, (int, float)) or not (
                0.0 <= self.curtail < 1.0):
            raise ValueError(f"curtail must be a number in [0, 1) (0: no curtailment), got {self.curtail!r}")

    @classmethod
    def for_repeats(cls, repeats: int, **kwargs: Any) -> StoppingRule:
        """The rule for ``--repeats repeats``: at most ``repeats`` rounds, at least ``min(MIN_ROUNDS, repeats)``.
        With ``repeats <= MIN_ROUNDS`` there is one look and its level is ``alpha``, as without the rule.
        ``kwargs`` go to the other fields."""
        r = _count(repeats, "repeats", 1)
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
        """The rule a sweep's manifest recorded (:meth:`to_dict`; derived keys are ignored)."""
        names = ("min_rounds", "max_rounds", "alpha", "final_share", "futility", "correction", "curtail")
        return cls(**{k: d[k] for k in names if k in d})

    def to_dict(self) -> dict[str, Any]:
        """The rule as plain data (for a sweep's manifest), with the level at each look."""
        return {"min_rounds": self.min_rounds, "max_rounds": self.max_rounds, "alpha": float(self.alpha),
                "final_share": float(self.final_share), "futility": self.futility, "correction": self.correction,
                "curtail": float(self.curtail),
                "look_alpha": {str(k): self.look_alpha(k) for k in self.looks},
                "method": ("Holm across rows at every look; weighted Bonferroni over the looks; rows below the "
                           "floor stop and are never significant"
                           + (f"; rows whose conditional power at the last look is below {self.curtail:.0%} stop "
                              "as futile and are never significant" if self.curtail > 0 else "")
                           if self.correction != "none" else
                           "Holm across rows at every look at the full alpha (not family-wise over the looks)")}


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
        return {"reason": self.reason, "look": self.look, "rounds": self.rounds, "ratio": self.ratio,
                "low": self.low, "high": self.high, "p_value": self.p_value, "alpha": self.alpha}


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


def _interval(values: Sequence[float], level: float) -> tuple[int, float, float, float, float]:
    """(rounds, ratio, low, high, p) of the non-missing log ratios, by :func:`paired_ratio`, as ``compare``."""
    xs = [x for x in values if x == x]
    if not xs:
        return 0, float("nan"), float("nan"), float("nan"), float("nan")
    r = paired_ratio([math.exp(x) for x in xs], [1.0] * len(xs), level=level)
    return r.rounds, r.ratio, r.low, r.high, r.p_value


def conditional_power(values: Sequence[float], rule: StoppingRule) -> float:
    """The chance that a row is significant at the last look, given its log ratios so far (nan: a missing
    round) and supposing its remaining rounds continue as those did: their mean is the current mean and their
    sd the current sd. ``values`` holds one entry per round so far, so ``rule.max_rounds - len(values)`` rounds
    are left. Significance there is judged at the last look's full level (the most lenient Holm step, as if
    every other row were rejected), in either direction. With ``n`` pairs so far, ``q`` rounds left and
    ``N = n + q`` pairs at the end, the final mean is normal around the current mean ``m`` with sd
    ``s sqrt(q) / N`` and must exceed ``c = t_{N-1} s / sqrt(N)`` in size: the power is
    ``Phi((|m| - c) / (s sqrt(q) / N)) + Phi((-|m| - c) / (s sqrt(q) / N))``. 1 when it cannot be judged (fewer
    than 2 pairs, no spread) or no round is left."""
    xs = [x for x in values if x == x]
    n, left = len(xs), rule.max_rounds - len(values)
    if n < 2 or left <= 0:
        return 1.0
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    if not sd > 0:
        return 1.0
    end = n + left
    crit = t_quantile(1.0 - rule.look_alpha(rule.max_rounds) / 2.0, end - 1) * sd / math.sqrt(end)
    spread = sd * math.sqrt(left) / end
    return _phi((abs(mean) - crit) / spread) + _phi((-abs(mean) - crit) / spread)


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _holm_p(stop: Stop | None, p: float) -> float:
    """A row's p-value in Holm at a look: 0 once significant (already rejected), 1 once below the floor or
    futile (never significant), else its own."""
    if stop is None or stop.reason == MAX_ROUNDS:
        return p
    return 0.0 if stop.reason == SIGNIFICANT else 1.0


def settled(rule: StoppingRule, log_ratios: Mapping[str, Sequence[float]],
            floor: float | Mapping[int, float] | None = None) -> dict[str, Stop | None]:
    """After a round: which rows stop, and why.

    ``log_ratios[row][j]`` is the row's paired log ratio ``log(baseline / row)`` of its primary clock in round
    ``j + 1`` (nan where the pair is missing, e.g. a failed run); a row that stopped gets no entries after its
    stop. The rounds run so far are ``n = max(len)``. The function is pure: it replays the looks
    ``min_rounds .. min(n, max_rounds)`` from the data, so the same data always give the same stops. At look
    ``k`` every row enters Holm at ``rule.look_alpha(k)`` with the p-value of its first ``k`` entries, a row that
    stopped earlier with 0 (significant) or 1 (below the floor): the family never shrinks. A row with an entry
    for round ``k`` and at least ``min_rounds`` measured pairs is decided there: significant if Holm rejects it;
    else below the floor if ``rule.futility`` and its interval at ``rule.level`` lies inside ``(1/floor, floor)``;
    else futile if ``k < max_rounds`` and its :func:`conditional_power` is below ``rule.curtail``; else max rounds
    if ``k == max_rounds``. At ``n >= max_rounds`` every row still open stops (max rounds).

    Args:
        rule: The stopping rule.
        log_ratios: Per row, its per-round log ratios. Pass the rows of Holm's family only (not the baseline,
            the A/A row or the end-to-end baseline, which run every round).
        floor: The noise floor of the primary clock that the final table will print (e.g. 1.08): one value for
            every look, or one per look (``{round: floor}``; a missing look or nan: no futility there). None: no
            futility stops.

    Returns:
        Per row (in the order given), its :class:`Stop`, or None while it keeps receiving rounds.

    Raises:
        ValueError: on a value that is not a number or is infinite, or a floor that is not > 1.
    """
    data = _checked(log_ratios)
    n = max((len(v) for v in data.values()), default=0)
    stops: dict[str, Stop | None] = {row: None for row in data}
    for k in range(rule.min_rounds, min(n, rule.max_rounds) + 1):
        a = rule.look_alpha(k)
        now = {row: _interval(data[row][:k], rule.level) for row in data if stops[row] is None}
        ps = [_holm_p(stops[row], now[row][4] if row in now else float("nan")) for row in data]
        rejected = dict(zip(data, holm(ps, a) if a > 0 else [False] * len(ps)))
        f = _floor_at(floor, k) if rule.futility else None
        for row, (r, ratio, low, high, p) in now.items():
            if len(data[row]) < k or r < rule.min_rounds:
                continue  # not measured in round k, or too few pairs yet
            reason = None
            if rejected[row]:
                reason = SIGNIFICANT
            elif f is not None and 1.0 / f < low and high < f:
                reason = BELOW_FLOOR
            elif k < rule.max_rounds and conditional_power(data[row][:k], rule) < rule.curtail:
                reason = FUTILE
            elif k == rule.max_rounds:
                reason = MAX_ROUNDS
            if reason is not None:
                stops[row] = Stop(reason, k, r, ratio, low, high, p, a)
    if n >= rule.max_rounds:
        for row in data:
            if stops[row] is None:
                r, ratio, low, high, p = _interval(data[row][:rule.max_rounds], rule.level)
                stops[row] = Stop(MAX_ROUNDS, rule.max_rounds, r, ratio, low, high, p, final_alpha(rule))
    return stops


def open_rows(stops: Mapping[str, Stop | None]) -> list[str]:
    """The rows that receive the next round (in the order given); the sweep ends when none is left."""
    return [row for row, s in stops.items() if s is None]


def family_p_values(stops: Mapping[str, Stop | None], p_values: Mapping[str, float]) -> dict[str, float]:
    """The p-values the final Holm (at :func:`final_alpha`) takes: 0 for a row stopped as significant, 1 for a
    row stopped below the floor (never significant), else the row's own (``p_values[row]``, nan if absent).
    Rows are those of ``stops``, in its order."""
    return {row: _holm_p(s, float(p_values.get(row, float("nan")))) for row, s in stops.items()}


def final_significant(rule: StoppingRule, log_ratios: Mapping[str, Sequence[float]],
                      floor: float | Mapping[int, float] | None = None) -> dict[str, bool]:
    """The final family-wise verdict of a sweep run under ``rule``: Holm at :func:`final_alpha` over
    :func:`family_p_values` (a row still open enters with the p-value of all its rounds). After ``max_rounds``
    it is exactly the set of rows :func:`settled` stopped as significant."""
    data = _checked(log_ratios)
    stops = settled(rule, data, floor)
    own = {row: _interval(data[row][:rule.max_rounds], rule.level)[4] for row in data}
    ps = family_p_values(stops, own)
    return dict(zip(ps, holm(list(ps.values()), final_alpha(rule))))


# --- Simulation (vectorized over sweeps) -------------------------------------------------------------

def _t_two_sided(t: np.ndarray, df: int) -> np.ndarray:
    """``P(|T| > |t|)`` for Student's t with integer ``df >= 1``, elementwise, by the closed-form finite series
    in ``theta = atan(|t| / sqrt(df))`` (Abramowitz & Stegun 26.7.3-4); nan stays nan."""
    theta = np.arctan(np.abs(t) / math.sqrt(df))
    c2 = np.cos(theta) ** 2
    term, total = np.ones_like(theta), np.ones_like(theta)
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        for j in range(1, (df - 3) // 2 + 1):
            term = term * c2 * (2 * j) / (2 * j + 1)
            total = total + term
        inside = 2.0 / math.pi * (theta + (np.sin(theta) * np.cos(theta) * total if df > 1 else 0.0))
    else:  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        for j in range(1, (df - 2) // 2 + 1):
            term = term * c2 * (2 * j - 1) / (2 * j)
            total = total + term
        inside = np.sin(theta) * total
    return np.clip(1.0 - inside, 0.0, 1.0)


def _phi_array(z: np.ndarray) -> np.ndarray:
    """The standard normal cdf, elementwise."""
    return 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


def _holm_rows(p: np.ndarray, alpha: float) -> np.ndarray:
    """:func:`gnnbench.measure.stats.holm` along the last axis of ``p`` (nan: not in the family)."""
    finite = ~np.isnan(p)
    m = finite.sum(axis=-1, keepdims=True)
    ps = np.where(finite, p, np.inf)
    order = np.argsort(ps, axis=-1, kind="stable")
    ranked = np.take_along_axis(ps, order, axis=-1)
    k = np.arange(p.shape[-1])
    ok = (k < m) & (ranked <= alpha / np.maximum(m - k, 1))
    run = np.cumprod(ok, axis=-1).astype(bool)
    out = np.zeros_like(run)
    np.put_along_axis(out, order, run, axis=-1)
    return out


def _sigma(sigma: float | tuple[float, float]) -> tuple[float, float]:
    try:
        lo, hi = (sigma, sigma) if isinstance(sigma, (int, float)) else sigma
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a positive number or (low, high), got {sigma!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 < lo <= hi):
        raise ValueError(f"sigma must be a positive number or (low, high) with 0 < low <= high, got {sigma!r}")
    return lo, hi


def _sweeps(rule: StoppingRule, *, rows: int, effects: int, true_ratio: float, trials: int,
            sigma: float | tuple[float, float], drift_sd: float, floor: float | str | None,
            seed: int) -> dict[str, np.ndarray]:
    """Simulated sweeps and the rule's decisions in them; see :func:`simulate` for the model.

    Returns arrays: ``base`` (trials, rounds) baseline log summaries, ``d`` (trials, rows, rounds) log ratios,
    ``floor`` (trials, rounds) the floor used at each look (nan: none), ``reason`` (trials, rows) codes 1
    significant, 2 below the floor, 3 max rounds, 4 futile, ``look`` (trials, rows), ``mean`` (trials, rows) the mean log
    ratio at the stop, ``final`` (trials, rows) the final Holm verdict.
    """
    m = _count(rows, "rows", 1)
    e = _count(effects, "effects", 0)
    if e > m:
        raise ValueError(f"effects ({effects!r}) must be <= rows ({rows!r})")
    n = _count(trials, "trials", 1)
    if isinstance(true_ratio, bool) or not (isinstance(true_ratio, (int, float)) and math.isfinite(true_ratio)
                                            and true_ratio > 0):
        raise ValueError(f"true_ratio must be positive and finite, got {true_ratio!r}")
    lo, hi = _sigma(sigma)
    if not (isinstance(drift_sd, (int, float)) and math.isfinite(drift_sd) and drift_sd >= 0):
        raise ValueError(f"drift_sd must be a non-negative number, got {drift_sd!r}")
    if floor is not None and floor != "measured":
        if isinstance(floor, (str, bool)) or not float(floor) > 1.0:
            raise ValueError(f"floor must be 'measured', None or a number > 1, got {floor!r}")

    R = rule.max_rounds
    rng = np.random.default_rng(seed)
    s = rng.uniform(lo, hi, size=(n, 1, 1))
    drift = rng.normal(0.0, drift_sd, size=(n, 1, R))
    logs = drift + rng.normal(0.0, 1.0, size=(n, m + 1, R)) * s  # baseline, then the rows
    logs[:, 1:1 + e, :] -= math.log(true_ratio)
    base = logs[:, 0, :]
    d = base[:, None, :] - logs[:, 1:, :]

    floors = np.full((n, R), np.nan)
    open_ = np.ones((n, m), bool)
    reason = np.zeros((n, m), np.int8)
    look = np.full((n, m), R, np.int64)
    mean_at = np.zeros((n, m))
    final = np.zeros((n, m), bool)
    for k in range(rule.min_rounds, R + 1):
        x = d[:, :, :k]
        mean = x.mean(axis=-1)
        a = rule.look_alpha(k)
        code = np.zeros((n, m), np.int8)
        if k >= 2:
            se = x.std(axis=-1, ddof=1) / math.sqrt(k)
            with np.errstate(divide="ignore", invalid="ignore"):
                p_now = _t_two_sided(mean / se, k - 1)
            p = np.where(open_, p_now, np.where(reason == 1, 0.0, 1.0))
            if a > 0:
                rejected = _holm_rows(p, a)
                code[rejected] = 1
                if k == R:
                    final = rejected
            if rule.futility and floor is not None:
                if floor == "measured":  # the floor the final table prints, estimated from the baseline so far
                    sb = base[:, :k].std(axis=-1, ddof=1)
                    log_f = t_quantile(0.975, R - 1) * math.sqrt(2.0) * sb / math.sqrt(R)  # R >= k >= 2
                else:
                    log_f = np.full(n, math.log(float(floor)))
                floors[:, k - 1] = np.exp(log_f)
                half = t_quantile(0.5 + rule.level / 2.0, k - 1) * se
                inside = (mean - half > -log_f[:, None]) & (mean + half < log_f[:, None])
                code[(code == 0) & inside] = 2
            if k < R and rule.curtail > 0:  # conditional_power, vectorized (no round of the simulation is missing)
                sd = x.std(axis=-1, ddof=1)
                crit = t_quantile(1.0 - rule.look_alpha(R) / 2.0, R - 1) * sd / math.sqrt(R)
                spread = sd * math.sqrt(R - k) / R
                with np.errstate(divide="ignore", invalid="ignore"):
                    cp = _phi_array((np.abs(mean) - crit) / spread) + _phi_array((-np.abs(mean) - crit) / spread)
                cp = np.where(sd > 0, cp, 1.0)
                code[(code == 0) & (cp < rule.curtail)] = 4
        if k == R:
            code[code == 0] = 3
        new = open_ & (code > 0)
        reason[new] = code[new]
        look[new] = k
        mean_at[new] = mean[new]
        open_ &= ~new
    return {"base": base, "d": d, "floor": floors, "reason": reason, "look": look, "mean": mean_at,
            "final": final | (reason == 1)}


@dataclass(frozen=True)
class Simulation:
    """What :func:`simulate` measured.

    Attributes:
        rule: The rule, as :meth:`StoppingRule.to_dict`.
        rows: Rows per sweep; the first ``effects`` have the true ratio ``true_ratio``, the others are null.
        effects: Rows with an effect.
        true_ratio: Their true speedup.
        trials: Simulated sweeps.
        fwer: Fraction of sweeps in which some null row was called significant (at any look).
        fwer_se: Its Monte Carlo standard error, ``sqrt(fwer (1 - fwer) / trials)``.
        power: Fraction of effect rows called significant in the direction of their effect (nan without any).
        rounds_null: Mean rounds a null row received (nan without any).
        rounds_effect: Mean rounds an effect row received (nan without any).
        rounds_sweep: Mean rounds a sweep ran (the baseline runs until its last row stops).
        saved: Fraction of the ``(rows + 1) * max_rounds`` processes (baseline included) not run.
        below_floor: Fraction of rows stopped below the floor.
        futile: Fraction of rows stopped as futile (their conditional power below ``rule.curtail``).
    """

    rule: dict[str, Any]
    rows: int
    effects: int
    true_ratio: float
    trials: int
    fwer: float
    fwer_se: float
    power: float
    rounds_null: float
    rounds_effect: float
    rounds_sweep: float
    saved: float
    below_floor: float
    futile: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def simulate(rule: StoppingRule, *, rows: int = 20, effects: int = 0, true_ratio: float = 1.25,
             trials: int = 4000, sigma: float | tuple[float, float] = (0.05, 0.08), drift_sd: float = 0.02,
             floor: float | str | None = "measured", seed: int = 0) -> Simulation:
    """Simulated sweeps run under ``rule``, look by look, to their final verdict.

    Model, per sweep: a process sd ``s ~ U(sigma)`` (a number: fixed); per round ``r`` a drift
    ``N(0, drift_sd)`` every configuration shares; each configuration's process in round ``r`` has the log
    summary (e.g. log median epoch time) ``level + drift_r + N(0, s)``. The rows' log ratios
    ``log(baseline_r / row_r)`` share the baseline's term, so two null rows correlate at 0.5, as in a real
    sweep; the drift cancels in them but not in the floor. The first ``effects`` rows are ``true_ratio`` times
    faster. Each look applies :func:`settled`'s decision (vectorized; ``tests/measure/test_sequential.py`` replays it
    with :func:`settled`).

    Args:
        rule: The stopping rule.
        rows: Rows in the family.
        effects: How many of them have an effect, ``0 <= effects <= rows``.
        true_ratio: Their true speedup (> 0).
        trials: Simulated sweeps.
        sigma: Process sd (log scale), or a range each sweep draws it from uniformly.
        drift_sd: Sd of the drift a round shares.
        floor: ``"measured"``: at each look, the floor the final table will print, estimated from the baseline
            so far (:func:`gnnbench.measure.stats.noise_floor` with ``rounds=max_rounds``); a number: fixed;
            None: no futility stops.
        seed: Seed of the numpy generator; the same seed gives the same figures.

    Returns:
        A :class:`Simulation`.

    Raises:
        ValueError: on a bad count, ratio, sd or floor.
    """
    out = _sweeps(rule, rows=rows, effects=effects, true_ratio=true_ratio, trials=trials, sigma=sigma,
                  drift_sd=drift_sd, floor=floor, seed=seed)
    m, e, n = int(rows), int(effects), int(trials)
    called, look = out["final"], out["look"]
    fwer = float(np.any(called[:, e:], axis=-1).mean())
    if e:
        sign = math.copysign(1.0, math.log(true_ratio)) if true_ratio != 1 else 0.0
        power = float((called[:, :e] & (out["mean"][:, :e] * sign > 0)).mean())
    else:
        power = float("nan")
    sweep = look.max(axis=-1)
    return Simulation(
        rule=rule.to_dict(), rows=m, effects=e, true_ratio=float(true_ratio), trials=n, fwer=fwer,
        fwer_se=math.sqrt(fwer * (1.0 - fwer) / n), power=power,
        rounds_null=float(look[:, e:].mean()) if e < m else float("nan"),
        rounds_effect=float(look[:, :e].mean()) if e else float("nan"), rounds_sweep=float(sweep.mean()),
        saved=float(1.0 - (look.sum(axis=-1) + sweep).mean() / ((m + 1) * rule.max_rounds)),
        below_floor=float((out["reason"] == 2).mean()), futile=float((out["reason"] == 4).mean()))


def simulate_fwer(rule: StoppingRule, rows: int = 20, trials: int = 4000,
                  sigma: float | tuple[float, float] = (0.05, 0.08), seed: int = 0) -> float:
    """The family-wise false-positive rate of A/A sweeps (every row null) run under ``rule``: the fraction of
    ``trials`` simulated sweeps in which some row was called significant at some look (:func:`simulate` with
    ``effects=0``; Monte Carlo standard error ``sqrt(rate (1 - rate) / trials)``)."""
    return simulate(rule, rows=rows, effects=0, trials=trials, sigma=sigma, seed=seed).fwer


# --- The tables of docs/statistics.md -----------------------------------------------------------------

def tables(*, trials: int = 20000, seed: int = 0) -> str:
    """The tables of ``docs/statistics.md`` ("Rounds that stop when decided"), as Markdown:
    ``python -m gnnbench.measure.sequential``."""
    lines = [f"A/A sweeps (every row null), {trials} simulated sweeps per cell, seed {seed}: the family-wise "
             "false-positive rate (+- one Monte Carlo standard error).", ""]
    for R in (5, 10):
        rules = [(f"fixed {R} rounds", StoppingRule(min_rounds=R, max_rounds=R)),
                 ("the rule", StoppingRule(max_rounds=R)),
                 ("alpha at every look (uncorrected)", StoppingRule(max_rounds=R, correction="none"))]
        lines += [f"`--repeats {R}`:", "", "| rows | " + " | ".join(name for name, _ in rules) + " |",
                  "|---:|" + "---:|" * len(rules)]
        for rows in (1, 5, 10, 20, 25):
            cells = [simulate(rule, rows=rows, trials=trials, seed=seed) for _, rule in rules]
            lines.append(f"| {rows} | " + " | ".join(f"{c.fwer:.2%} +- {c.fwer_se:.2%}" for c in cells) + " |")
        lines.append("")
    lines += [f"Power and rounds, 20 rows, {trials} sweeps per cell, seed {seed}: power is the share of effect "
              "rows called significantly faster (family-wise); rounds are the mean an effect row and a null "
              "row received; saved is the share of the `21 x R` processes (baseline included) not run; "
              "\"uncurtailed\" is the rule without futile stops (`curtail=0`).", ""]
    for R in (5, 10):
        lines += [f"`--repeats {R}`:", "",
                  "| effect rows | true ratio | power, fixed | power, uncurtailed | power, rule | rounds (effect) "
                  "| rounds (null) | saved, uncurtailed | saved |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for effects in (0, 1, 20):
            for ratio in ((1.0,) if effects == 0 else (1.1, 1.25, 1.5, 2.0)):
                fixed = simulate(StoppingRule(min_rounds=R, max_rounds=R), rows=20, effects=effects,
                                 true_ratio=ratio, trials=trials, seed=seed)
                plain = simulate(StoppingRule(max_rounds=R, curtail=0.0), rows=20, effects=effects,
                                 true_ratio=ratio, trials=trials, seed=seed)
                sim = simulate(StoppingRule(max_rounds=R), rows=20, effects=effects, true_ratio=ratio,
                               trials=trials, seed=seed)
                cell = (lambda v, f: "-" if v != v else f.format(v))
                lines.append(f"| {effects} | {ratio:g}x | {cell(fixed.power, '{:.1%}')} | "
                             f"{cell(plain.power, '{:.1%}')} | {cell(sim.power, '{:.1%}')} | "
                             f"{cell(sim.rounds_effect, '{:.2f}')} | {cell(sim.rounds_null, '{:.2f}')} | "
                             f"{plain.saved:.1%} | {sim.saved:.1%} |")
        lines.append("")
    lines += [f"The share of alpha at the last look, 20 rows, {trials} sweeps per cell, seed {seed}: the A/A rate, the "
              "power for one 1.25x row among 19 null ones, and the processes saved when all 20 rows are 2x.", "",
              "| repeats | final_share | A/A rate | power at 1.25x | saved, all 2x |", "|---:|---:|---:|---:|---:|"]
    for R in (5, 10):
        for share in (0.5, FINAL_SHARE, 1.0):
            rule = StoppingRule(max_rounds=R, final_share=share)
            aa = simulate(rule, rows=20, trials=trials, seed=seed)
            one = simulate(rule, rows=20, effects=1, true_ratio=1.25, trials=trials, seed=seed)
            big = simulate(rule, rows=20, effects=20, true_ratio=2.0, trials=trials, seed=seed)
            lines.append(f"| {R} | {share:g} | {aa.fwer:.2%} | {one.power:.1%} | {big.saved:.1%} |")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(tables(), end="")
