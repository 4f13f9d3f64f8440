"""The stopping rule in simulation: vectorized A/A and power sweeps, and the tables of ``docs/statistics.md``.

:func:`simulate` runs simulated sweeps under a :class:`~gnnbench.measure.stats.sequential.StoppingRule`, look by look,
applying :func:`~gnnbench.measure.stats.sequential.settled`'s decision vectorized over the sweeps, and measures the
family-wise false-positive rate, the power and the rounds saved; :func:`tables` prints the tables of
``docs/statistics.md`` ("Rounds that stop when decided"): ``python -m gnnbench.measure.stats.sequential_sim``.

Pure numpy and the standard library on top of :mod:`gnnbench.measure.stats.sequential`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnbench.measure.stats.intervals import t_quantile
from gnnbench.measure.stats.sequential import FINAL_SHARE, StoppingRule, checked_count, sd_floor, settled

__all__ = [
    "Simulation",
    "simulate",
    "simulate_fwer",
    "simulate_equivalence",
    "simulate_rule_equivalence",
    "tables",
    "inprocess_tables",
]


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
    """:func:`gnnbench.measure.stats.intervals.holm` along the last axis of ``p`` (nan: not in the family)."""
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


def load_sweeps(
    rule: StoppingRule,
    *,
    rows: int,
    effects: int,
    true_ratio: float,
    trials: int,
    sigma: float | tuple[float, float],
    drift_sd: float,
    floor: float | str | None,
    seed: int,
    independent: bool = False,
) -> dict[str, np.ndarray]:
    """Simulated sweeps and the rule's decisions in them; see :func:`simulate` for the model.

    Returns arrays: ``base`` (trials, rounds) baseline log summaries, ``d`` (trials, rows, rounds) log ratios,
    ``floor`` (trials, rounds) the floor used at each look (nan: none), ``min_sd`` (trials, rounds) the clock's
    paired noise no row's sd is taken below at each look (0: none, the rule before ``paired_floor``), ``reason`` (trials, rows) codes 1
    significant, 2 below the floor, 3 max rounds, 4 futile, ``look`` (trials, rows), ``mean`` (trials, rows) the mean log
    ratio at the stop, ``final`` (trials, rows) the final Holm verdict.
    """
    m, e, n = _checked_counts(rows, effects, trials)
    lo, hi = _checked_model(true_ratio, sigma, drift_sd, floor)
    base, d = _simulated_logs(
        rule.max_rounds,
        n=n,
        m=m,
        e=e,
        true_ratio=true_ratio,
        sigma=(lo, hi),
        drift_sd=drift_sd,
        seed=seed,
        independent=independent,
    )
    looks = _Looks.start(n, m, rule.max_rounds)
    for k in range(rule.min_rounds, rule.max_rounds + 1):
        looks.take(rule, k, base, d, floor)
    return looks.arrays(base, d)


def _checked_counts(rows: int, effects: int, trials: int) -> tuple[int, int, int]:
    """``rows``, ``effects`` and ``trials`` checked (``0 <= effects <= rows``, at least one row and trial)."""
    m = checked_count(rows, "rows", 1)
    e = checked_count(effects, "effects", 0)
    if e > m:
        raise ValueError(f"effects ({effects!r}) must be <= rows ({rows!r})")
    return m, e, checked_count(trials, "trials", 1)


def _checked_model(
    true_ratio: float, sigma: float | tuple[float, float], drift_sd: float, floor: float | str | None
) -> tuple[float, float]:
    """Refuse a model parameter out of its range; returns the range the process sd is drawn from."""
    if isinstance(true_ratio, bool) or not (
        isinstance(true_ratio, (int, float)) and math.isfinite(true_ratio) and true_ratio > 0
    ):
        raise ValueError(f"true_ratio must be positive and finite, got {true_ratio!r}")
    lo, hi = _sigma(sigma)
    if not (isinstance(drift_sd, (int, float)) and math.isfinite(drift_sd) and drift_sd >= 0):
        raise ValueError(f"drift_sd must be a non-negative number, got {drift_sd!r}")
    if floor is not None and floor != "measured":
        if isinstance(floor, (str, bool)) or not float(floor) > 1.0:
            raise ValueError(f"floor must be 'measured', None or a number > 1, got {floor!r}")
    return lo, hi


def _simulated_logs(
    rounds: int,
    *,
    n: int,
    m: int,
    e: int,
    true_ratio: float,
    sigma: tuple[float, float],
    drift_sd: float,
    seed: int,
    independent: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The model's draws (see :func:`simulate`): the baseline's log summaries (n, rounds) and the ``m`` rows'
    log ratios against it (n, m, rounds), the first ``e`` rows ``true_ratio`` times faster. ``independent``: each
    row's ratio has a baseline of its own (an in-process pair: both sides in the row's own process), so the rows'
    ratios are independent, each of sd ``sqrt(2) s`` as a shared-baseline ratio's."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(sigma[0], sigma[1], size=(n, 1, 1))
    drift = rng.normal(0.0, drift_sd, size=(n, 1, rounds))
    logs = drift + rng.normal(0.0, 1.0, size=(n, m + 1, rounds)) * s  # baseline, then the rows
    logs[:, 1 : 1 + e, :] -= math.log(true_ratio)
    base = logs[:, 0, :]
    if independent:  # each row against a baseline side of its own
        own = drift + rng.normal(0.0, 1.0, size=(n, m, rounds)) * s
        return base, own - logs[:, 1:, :]
    return base, base[:, None, :] - logs[:, 1:, :]


@dataclass
class _Looks:
    """The rule's decisions in the simulated sweeps, look by look (the arrays :func:`load_sweeps` returns).

    Attributes:
        floors: (trials, rounds) the floor used at each look (nan: none).
        min_sd: (trials, rounds) the clock's paired noise no row's sd is taken below at each look (0: none).
        open_: (trials, rows) the rows still running.
        reason: (trials, rows) why each row stopped (0: not yet).
        look: (trials, rows) the look each row stopped at.
        mean_at: (trials, rows) the mean log ratio at the stop.
        final: (trials, rows) the final Holm verdict at the last look.
    """

    floors: np.ndarray
    min_sd: np.ndarray
    open_: np.ndarray
    reason: np.ndarray
    look: np.ndarray
    mean_at: np.ndarray
    final: np.ndarray

    @classmethod
    def start(cls, n: int, m: int, rounds: int) -> _Looks:
        """Before the first look: every row open, no floor."""
        return cls(
            floors=np.full((n, rounds), np.nan),
            min_sd=np.zeros((n, rounds)),
            open_=np.ones((n, m), bool),
            reason=np.zeros((n, m), np.int8),
            look=np.full((n, m), rounds, np.int64),
            mean_at=np.zeros((n, m)),
            final=np.zeros((n, m), bool),
        )

    def take(self, rule: StoppingRule, k: int, base: np.ndarray, d: np.ndarray, floor: float | str | None) -> None:
        """The look after round ``k``: stop each open row the rule decides (at ``max_rounds``, every one)."""
        R = rule.max_rounds
        x = d[:, :, :k]
        mean = x.mean(axis=-1)
        code = self._decide(rule, k, x, mean, base, floor) if k >= 2 else np.zeros(mean.shape, np.int8)
        if k == R:
            code[code == 0] = 3
        new = self.open_ & (code > 0)
        self.reason[new] = code[new]
        self.look[new] = k
        self.mean_at[new] = mean[new]
        self.open_ &= ~new

    def _decide(
        self, rule: StoppingRule, k: int, x: np.ndarray, mean: np.ndarray, base: np.ndarray, floor: float | str | None
    ) -> np.ndarray:
        """The code of each row the look after round ``k >= 2`` stops (0: none): 1 significant (Holm over the
        family at the look's level), 2 below the floor, 4 futile (its conditional power below ``rule.curtail``)."""
        R = rule.max_rounds
        a = rule.look_alpha(k)
        code = np.zeros(mean.shape, np.int8)
        sd_k = self._look_sd(rule, k, x, mean)
        se = sd_k / math.sqrt(k)
        with np.errstate(divide="ignore", invalid="ignore"):
            p_now = _t_two_sided(mean / se, k - 1)
        p = np.where(self.open_, p_now, np.where(self.reason == 1, 0.0, 1.0))
        if a > 0:
            rejected = _holm_rows(p, a)
            code[rejected] = 1
            if k == R:
                self.final = rejected
        if rule.futility and floor is not None:
            log_f = self._log_floor(rule, k, base, floor)
            self.floors[:, k - 1] = np.exp(log_f)
            half = t_quantile(0.5 + rule.level / 2.0, k - 1) * se
            inside = (mean - half > -log_f[:, None]) & (mean + half < log_f[:, None])
            if rule.paired_floor:  # an interval that excludes 1 is never noise
                inside &= (mean - half <= 0) & (mean + half >= 0)
            code[(code == 0) & inside] = 2
        if k < R and rule.curtail > 0:
            code[(code == 0) & (_conditional_power(rule, k, mean, sd_k) < rule.curtail)] = 4
        return code

    def _look_sd(self, rule: StoppingRule, k: int, x: np.ndarray, mean: np.ndarray) -> np.ndarray:
        """Each row's sd of its ``k >= 2`` log ratios; with ``rule.paired_floor`` taken no lower than the clock's
        paired noise (the pooled within-row sd of every row's log ratios, recorded in :attr:`min_sd`)."""
        sd_k = x.std(axis=-1, ddof=1)
        if rule.paired_floor:
            m = x.shape[1]
            s0 = np.sqrt(((x - mean[..., None]) ** 2).sum(axis=(-1, -2)) / (m * (k - 1)))
            self.min_sd[:, k - 1] = s0
            sd_k = np.maximum(sd_k, s0[:, None] * sd_floor(1.0, k))
        return sd_k

    def _log_floor(self, rule: StoppingRule, k: int, base: np.ndarray, floor: float | str) -> np.ndarray:
        """The log of each sweep's floor at the look after round ``k >= 2``: ``"measured"``, the clock's paired
        floor at ``max_rounds`` rounds (the rule before ``paired_floor``: from the baseline's unpaired spread
        so far), else the fixed ``floor``."""
        R = rule.max_rounds
        if floor == "measured" and rule.paired_floor:  # the clock's paired floor at R rounds
            return t_quantile(0.975, R - 1) * self.min_sd[:, k - 1] / math.sqrt(R)
        if floor == "measured":  # the rule before: the baseline's unpaired spread so far
            sb = base[:, :k].std(axis=-1, ddof=1)
            return t_quantile(0.975, R - 1) * math.sqrt(2.0) * sb / math.sqrt(R)  # R >= k >= 2
        return np.full(base.shape[0], math.log(float(floor)))

    def arrays(self, base: np.ndarray, d: np.ndarray) -> dict[str, np.ndarray]:
        """The arrays :func:`load_sweeps` returns; ``final`` counts a row stopped significant early too."""
        return {
            "base": base,
            "d": d,
            "floor": self.floors,
            "min_sd": self.min_sd,
            "reason": self.reason,
            "look": self.look,
            "mean": self.mean_at,
            "final": self.final | (self.reason == 1),
        }


def _conditional_power(rule: StoppingRule, k: int, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """:func:`~gnnbench.measure.stats.sequential.conditional_power` after round ``k < max_rounds``, vectorized
    (no round of the simulation is missing); 1 where a row's sd is 0."""
    R = rule.max_rounds
    crit = t_quantile(1.0 - rule.look_alpha(R) / 2.0, R - 1) * sd / math.sqrt(R)
    spread = sd * math.sqrt(R - k) / R
    with np.errstate(divide="ignore", invalid="ignore"):
        cp = _phi_array((np.abs(mean) - crit) / spread) + _phi_array((-np.abs(mean) - crit) / spread)
    return np.where(sd > 0, cp, 1.0)


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


def simulate(
    rule: StoppingRule,
    *,
    rows: int = 20,
    effects: int = 0,
    true_ratio: float = 1.25,
    trials: int = 4000,
    sigma: float | tuple[float, float] = (0.05, 0.08),
    drift_sd: float = 0.02,
    floor: float | str | None = "measured",
    seed: int = 0,
    independent: bool = False,
) -> Simulation:
    """Simulated sweeps run under ``rule``, look by look, to their final verdict.

    Model, per sweep: a process sd ``s ~ U(sigma)`` (a number: fixed); per round ``r`` a drift
    ``N(0, drift_sd)`` every configuration shares; each configuration's process in round ``r`` has the log
    summary (e.g. log median epoch time) ``level + drift_r + N(0, s)``. The rows' log ratios
    ``log(baseline_r / row_r)`` share the baseline's term, so two null rows correlate at 0.5, as in a real
    sweep; the drift cancels in them but not in the floor. The first ``effects`` rows are ``true_ratio`` times
    faster. Each look applies :func:`~gnnbench.measure.stats.sequential.settled`'s decision (vectorized;
    ``tests/measure/stats/test_sequential.py`` replays it with :func:`~gnnbench.measure.stats.sequential.settled`).

    Args:
        rule: The stopping rule.
        rows: Rows in the family.
        effects: How many of them have an effect, ``0 <= effects <= rows``.
        true_ratio: Their true speedup (> 0).
        trials: Simulated sweeps.
        sigma: Process sd (log scale), or a range each sweep draws it from uniformly.
        drift_sd: Sd of the drift a round shares.
        floor: ``"measured"``: at each look, the floor the final table will print, estimated from the baseline
            so far (:func:`gnnbench.measure.stats.intervals.noise_floor` with ``rounds=max_rounds``); a number: fixed;
            None: no futility stops.
        seed: Seed of the numpy generator; the same seed gives the same figures.
        independent: Each row against a baseline of its own (rows timed in-process, each in its own process with
            its own baseline trainer): the rows' ratios independent instead of sharing the baseline's term.

    Returns:
        A :class:`Simulation`.

    Raises:
        ValueError: on a bad count, ratio, sd or floor.
    """
    out = load_sweeps(
        rule,
        rows=rows,
        effects=effects,
        true_ratio=true_ratio,
        trials=trials,
        sigma=sigma,
        drift_sd=drift_sd,
        floor=floor,
        seed=seed,
        independent=independent,
    )
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
        rule=rule.to_dict(),
        rows=m,
        effects=e,
        true_ratio=float(true_ratio),
        trials=n,
        fwer=fwer,
        fwer_se=math.sqrt(fwer * (1.0 - fwer) / n),
        power=power,
        rounds_null=float(look[:, e:].mean()) if e < m else float("nan"),
        rounds_effect=float(look[:, :e].mean()) if e else float("nan"),
        rounds_sweep=float(sweep.mean()),
        saved=float(1.0 - (look.sum(axis=-1) + sweep).mean() / ((m + 1) * rule.max_rounds)),
        below_floor=float((out["reason"] == 2).mean()),
        futile=float((out["reason"] == 4).mean()),
    )


def simulate_fwer(
    rule: StoppingRule,
    rows: int = 20,
    trials: int = 4000,
    sigma: float | tuple[float, float] = (0.05, 0.08),
    seed: int = 0,
) -> float:
    """The family-wise false-positive rate of A/A sweeps (every row null) run under ``rule``: the fraction of
    ``trials`` simulated sweeps in which some row was called significant at some look (:func:`simulate` with
    ``effects=0``; Monte Carlo standard error ``sqrt(rate (1 - rate) / trials)``)."""
    return simulate(rule, rows=rows, effects=0, trials=trials, sigma=sigma, seed=seed).fwer


def simulate_equivalence(
    margin: float = 0.10,
    *,
    true_ratio: float | None = None,
    rounds: int = 3,
    sd: float = 0.05,
    trials: int = 20000,
    seed: int = 0,
) -> float:
    """The share of simulated rows that :func:`gnnbench.measure.stats.intervals.equivalence` calls equivalent: ``rounds``
    paired log steps ratios ``N(log true_ratio, sd)`` each (``true_ratio`` default: at the margin, ``1 + margin``,
    where the share is the false "equivalent" rate and must stay at or below 5%), TOST at 5% each side,
    vectorized."""
    r = checked_count(rounds, "rounds", 2)
    ratio = 1.0 + margin if true_ratio is None else true_ratio
    rng = np.random.default_rng(seed)
    x = rng.normal(math.log(ratio), sd, size=(int(trials), r))
    mean, se = x.mean(axis=-1), x.std(axis=-1, ddof=1) / math.sqrt(r)
    half = t_quantile(0.95, r - 1) * se
    d = math.log1p(margin)
    return float(((mean - half > -d) & (mean + half < d)).mean())


def simulate_rule_equivalence(
    rule: StoppingRule,
    margin: float = 0.10,
    *,
    true_ratio: float | None = None,
    sd: float = 0.05,
    trials: int = 4000,
    seed: int = 0,
    floor: float | None = None,
    alpha: float = 0.05,
) -> tuple[float, float]:
    """One row run under ``rule`` with the sweep's equivalence margin (futility that waits for equivalence,
    :func:`gnnbench.measure.stats.sequential.settled` with ``margin``), then judged as ``compare`` judges it: not
    significant, its equivalence test (TOST at 5%) over the rounds it received, its sd floored at the clock's
    paired noise (``sd``, the true per-round sd). Per-round log ratios ``N(log true_ratio, sd)``; ``true_ratio``
    default: at the margin, where the share called equivalent is the false "equivalent" rate. ``floor``: the
    noise floor of the row's clock (e.g. an in-process row's 1.113), so that rows inside it may stop below the
    floor (``None``: no such stop). ``alpha``: each one-sided test's level (a row that Holm tests among ``m``
    rows needs down to ``0.05 / m``). Returns that share and the mean rounds the row received."""
    from gnnbench.measure.stats.intervals import equivalence

    ratio = 1.0 + margin if true_ratio is None else true_ratio
    rng = np.random.default_rng(seed)
    x = rng.normal(math.log(ratio), sd, size=(int(trials), rule.max_rounds))
    called, rounds = 0, 0
    for row in x:
        stop = settled(rule, {"row": list(row)}, floor, min_sd=sd, margin=margin)["row"]
        k = stop.look if stop is not None else rule.max_rounds
        rounds += k
        if stop is not None and stop.reason == "significant":
            continue
        called += equivalence(row[:k], margin, alpha=alpha, min_sd=sd_floor(sd, k)).equivalent
    return called / len(x), rounds / len(x)


# --- The tables of docs/statistics.md -----------------------------------------------------------------


def tables(*, trials: int = 20000, seed: int = 0) -> str:
    """The tables of ``docs/statistics.md`` ("Rounds that stop when decided"), as Markdown:
    ``python -m gnnbench.measure.stats.sequential_sim``. "Fixed" (no stopping) and "uncorrected" (alpha at every look)
    are shown without the sd floor (``paired_floor=False``), as the designs they stand for; "the rule" is the
    default :class:`StoppingRule`."""
    lines = [
        f"A/A sweeps (every row null), {trials} simulated sweeps per cell, seed {seed}: the family-wise "
        "false-positive rate (+- one Monte Carlo standard error).",
        "",
    ]
    for R in (5, 10):
        rules = [
            (f"fixed {R} rounds", StoppingRule(min_rounds=R, max_rounds=R, paired_floor=False)),
            ("the rule before paired floors", StoppingRule(max_rounds=R, paired_floor=False)),
            ("the rule", StoppingRule(max_rounds=R)),
            ("alpha at every look (uncorrected)", StoppingRule(max_rounds=R, correction="none", paired_floor=False)),
        ]
        lines += [
            f"`--repeats {R}`:",
            "",
            "| rows | " + " | ".join(name for name, _ in rules) + " |",
            "|---:|" + "---:|" * len(rules),
        ]
        for rows in (1, 5, 10, 20, 25):
            cells = [simulate(rule, rows=rows, trials=trials, seed=seed) for _, rule in rules]
            lines.append(f"| {rows} | " + " | ".join(f"{c.fwer:.2%} +- {c.fwer_se:.2%}" for c in cells) + " |")
        lines.append("")
    lines += [
        f"Power and rounds, 20 rows, {trials} sweeps per cell, seed {seed}: power is the share of effect "
        "rows called significantly faster (family-wise); rounds are the mean an effect row and a null "
        "row received; saved is the share of the `21 x R` processes (baseline included) not run; "
        '"uncurtailed" is the rule without futile stops (`curtail=0`).',
        "",
    ]
    for R in (5, 10):
        lines += [
            f"`--repeats {R}`:",
            "",
            "| effect rows | true ratio | power, fixed | power, uncurtailed | power, rule | rounds (effect) "
            "| rounds (null) | saved, uncurtailed | saved |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for effects in (0, 1, 20):
            for ratio in (1.0,) if effects == 0 else (1.1, 1.25, 1.5, 2.0):
                fixed = simulate(
                    StoppingRule(min_rounds=R, max_rounds=R, paired_floor=False),
                    rows=20,
                    effects=effects,
                    true_ratio=ratio,
                    trials=trials,
                    seed=seed,
                )
                plain = simulate(
                    StoppingRule(max_rounds=R, curtail=0.0),
                    rows=20,
                    effects=effects,
                    true_ratio=ratio,
                    trials=trials,
                    seed=seed,
                )
                sim = simulate(
                    StoppingRule(max_rounds=R), rows=20, effects=effects, true_ratio=ratio, trials=trials, seed=seed
                )
                cell = lambda v, f: "-" if v != v else f.format(v)
                lines.append(
                    f"| {effects} | {ratio:g}x | {cell(fixed.power, '{:.1%}')} | "
                    f"{cell(plain.power, '{:.1%}')} | {cell(sim.power, '{:.1%}')} | "
                    f"{cell(sim.rounds_effect, '{:.2f}')} | {cell(sim.rounds_null, '{:.2f}')} | "
                    f"{plain.saved:.1%} | {sim.saved:.1%} |"
                )
        lines.append("")
    lines += [
        f"The share of alpha at the last look, 20 rows, {trials} sweeps per cell, seed {seed}: the A/A rate, the "
        "power for one 1.25x row among 19 null ones, and the processes saved when all 20 rows are 2x.",
        "",
        "| repeats | final_share | A/A rate | power at 1.25x | saved, all 2x |",
        "|---:|---:|---:|---:|---:|",
    ]
    for R in (5, 10):
        for share in (0.5, FINAL_SHARE, 1.0):
            rule = StoppingRule(max_rounds=R, final_share=share)
            aa = simulate(rule, rows=20, trials=trials, seed=seed)
            one = simulate(rule, rows=20, effects=1, true_ratio=1.25, trials=trials, seed=seed)
            big = simulate(rule, rows=20, effects=20, true_ratio=2.0, trials=trials, seed=seed)
            lines.append(f"| {R} | {share:g} | {aa.fwer:.2%} | {one.power:.1%} | {big.saved:.1%} |")
    lines += [
        "",
        f"The equivalence test (TOST at 5% each side, margin 10%), {trials} simulated rows per cell, seed "
        f"{seed}: the share called equivalent, at the margin (a true steps ratio of 1.1: the false "
        '"equivalent" rate) and at no effect (the power), by rounds and per-round sd of the log steps '
        "ratio.",
        "",
        "| rounds | sd | at the margin (1.1x) | at 1/1.1x | at no effect |",
        "|---:|---:|---:|---:|---:|",
    ]
    for rounds in (3, 5):
        for sd in (0.01, 0.03, 0.1):
            hi = simulate_equivalence(0.10, rounds=rounds, sd=sd, trials=trials, seed=seed)
            lo = simulate_equivalence(0.10, true_ratio=1 / 1.1, rounds=rounds, sd=sd, trials=trials, seed=seed)
            null = simulate_equivalence(0.10, true_ratio=1.0, rounds=rounds, sd=sd, trials=trials, seed=seed)
            lines.append(f"| {rounds} | {sd:g} | {hi:.2%} | {lo:.2%} | {null:.1%} |")
    n = max(trials // 5, 1)
    lines += [
        "",
        f"The equivalence test after rounds that stop when decided (`--repeats 5`, margin 10%, one row, "
        f"{n} simulated rows per cell, seed {seed}): a row is futile only when neither significance nor "
        "equivalence is within reach (`equivalence_futility`), then judged on the rounds it received. The "
        'share called equivalent at the margin (the false "equivalent" rate) and at no effect (the '
        "power), and the mean rounds a row at no effect received, with futility by significance only "
        "(the rule before) and with equivalence.",
        "",
        "| sd | at 1.1x, before | at 1.1x, rule | at no effect, before | at no effect, rule | rounds, before "
        "| rounds, rule |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for sd in (0.03, 0.05, 0.07):
        before = StoppingRule(max_rounds=5, equivalence_futility=0)
        rule = StoppingRule(max_rounds=5)
        hb, _ = simulate_rule_equivalence(before, sd=sd, trials=n, seed=seed)
        hr, _ = simulate_rule_equivalence(rule, sd=sd, trials=n, seed=seed)
        nb, rb = simulate_rule_equivalence(before, true_ratio=1.0, sd=sd, trials=n, seed=seed)
        nr, rr = simulate_rule_equivalence(rule, true_ratio=1.0, sd=sd, trials=n, seed=seed)
        lines.append(f"| {sd:g} | {hb:.2%} | {hr:.2%} | {nb:.1%} | {nr:.1%} | {rb:.2f} | {rr:.2f} |")
    return "\n".join(lines).rstrip() + "\n"


def inprocess_tables(
    pair_sds: dict[str, float],
    *,
    rows: tuple[int, ...] = (5, 13, 26),
    bias: float = 1.019,
    trials: int = 20000,
    seed: int = 0,
) -> str:
    """The error rates at the in-process spread, as Markdown (``docs/statistics.md``, "Measure where the noise
    cancels"): per measured per-round sd of an in-process pair's log ratio (``pair_sds``: condition -> sd, e.g.
    the committed A/A files'), the family-wise false-positive rate of A/A sweeps under the default rule
    (``--repeats 5``) with every row in its own process against a baseline of its own (``independent``: the
    worst case for Holm; each row's sd the measured one), the power at 1.1x and 1.25x for one effect row among
    them, the false "equivalent" rate at the 10% margin with the rule's futility (one row), and the share of null
    rows called faster when every row carries the in-process A/A's measured edge (``bias``: the ratio a null row
    reads, 1.019 measured over 19 rounds; docs/statistics.md)."""
    rule = StoppingRule(max_rounds=5)
    lines = [
        f"Error rates at the in-process spread, {trials} simulated sweeps per cell, seed {seed}, `--repeats 5`: "
        "family-wise false positives of A/A sweeps (every row null, each row's ratio independent), the power "
        'for one row at 1.1x and 1.25x among the others null, and the false "equivalent" rate at the 10% '
        f"margin (one row, {max(trials // 5, 1)} simulated rows).",
        "",
        "| condition | per-round sd | rows | false positives (family-wise) | power at 1.1x | power at 1.25x | "
        f"false equivalent at 1.1x | null rows called faster at a {bias:.3f}x edge |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for condition, sd in pair_sds.items():
        sigma = sd / math.sqrt(2.0)  # a pair's ratio holds two sides' noise
        false_eq, _ = simulate_rule_equivalence(rule, sd=sd, trials=max(trials // 5, 1), seed=seed)
        for m in rows:
            common = dict(rows=m, trials=trials, sigma=sigma, drift_sd=0.0, seed=seed, independent=True)
            null = simulate(rule, effects=0, **common)
            p10 = simulate(rule, effects=1, true_ratio=1.1, **common).power
            p25 = simulate(rule, effects=1, true_ratio=1.25, **common).power
            edge = simulate(rule, effects=m, true_ratio=bias, **common).power  # every row null but for the edge
            lines.append(
                f"| {condition} | {sd:.4f} | {m} | {null.fwer:.2%} +- {null.fwer_se:.2%} | {p10:.1%} | {p25:.1%} "
                f"| {false_eq:.2%} | {edge:.2%} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    import sys

    if sys.argv[1:2] == ["--inprocess"]:  # the measured in-process sds: condition=sd pairs
        sds = dict(arg.split("=") for arg in sys.argv[2:]) or {"idle": "0.0209", "busy": "0.046"}
        print(inprocess_tables({k: float(v) for k, v in sds.items()}), end="")
    else:
        print(tables(), end="")
