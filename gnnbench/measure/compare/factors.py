"""Time to accuracy as its two factors, paired by round: steps to the target and time per step (plus setup).

A run's time to accuracy is its setup plus the steps it needs to reach the target times its training clock per
step. A comparison row shows both factors beside the product (:class:`TtaFactors`), each as a paired ratio
against the baseline of the same round, so a reader sees whether an entry is faster per step, converges in
fewer steps, or both. Steps are read between evaluations (:mod:`gnnbench.measure.compare.crossing`). An entry that
changes the work per step (a full-batch step is an epoch) is counted in epochs and timed per epoch instead, so
its two factors still multiply to its time.

:func:`factor_judged_tta` is how an entry that changes the numerics but not the work per step is judged where
every round timed it against its baseline in a pair (one process, or duet) and both reached the target: per
round, each side's setup plus its own steps to the target (read off its trajectory, paired by seed) times its
mean paired step. Its steps are a count, which no machine's speed moves, and its time per step cancels the drift
from one process to the next; its measured time to accuracy, which carries that drift, stays beside it.

:func:`convergence_judged_tta` is how an entry whose steps to the target are shown equivalent to the baseline's
(two one-sided tests against the margin the sweep declared, :func:`gnnbench.measure.stats.intervals.equivalence`) is judged:
its setup plus its time per step times the baseline's steps to the target of the same round, against the
baseline read the same way, as MLPerf judges convergence within a fixed margin (``docs/statistics.md``).
"""

from __future__ import annotations

import math
import statistics

from gnnbench.measure.compare.crossing import steps_to
from gnnbench.measure.compare.derived import per_step_seconds
from gnnbench.measure.compare.interleaved import (
    interleaved_pairs,
    interleaved_step,
    pair_design,
    pair_note,
    pair_seconds,
)
from gnnbench.measure.compare.paired import ratio_over_rounds
from gnnbench.measure.compare.rows import (
    EPOCHS,
    JUDGED_DERIVED,
    JUDGED_FACTORS,
    JUDGED_PER_STEP,
    STEPS,
    TimeToAccuracy,
    TtaFactors,
)
from gnnbench.measure.run import RunResult
from gnnbench.measure.stats import Equivalence, equivalence

__all__ = [
    "EQUIVALENCE_ALPHA",
    "DEFAULT_EQUIVALENCE_MARGIN",
    "tta_factors",
    "convergence_judged_tta",
    "factor_judged_tta",
    "steps_equivalence",
]

EQUIVALENCE_ALPHA = 0.05  # each one-sided test of the equivalence of steps to the target
DEFAULT_EQUIVALENCE_MARGIN = 0.10  # steps to the target within [1/1.1, 1.1] of the baseline's: "equivalent"


def _per_unit(run: RunResult, unit: str) -> float | None:
    per_step = per_step_seconds(run)
    if per_step is None:
        return None
    if unit == EPOCHS:
        return per_step * run.steps_per_epoch if run.steps_per_epoch else None
    return per_step


def _to_target(run: RunResult, target: float | None, unit: str) -> float | None:
    s = steps_to(run, target)
    if s is None:
        return None
    if unit == EPOCHS:
        return s / run.steps_per_epoch if run.steps_per_epoch else None
    return s


def _median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def tta_factors(
    b: list[RunResult], m: list[RunResult], target: float | None, *, changes_work: bool, derived: bool = False
) -> TtaFactors | None:
    """The factors of a row (its runs ``m``) against the baseline runs ``b`` of the same rounds; ``None``
    without a target. A derived row takes the baseline's steps by proof, so only its time per step is paired."""
    if target is None:
        return None
    unit = EPOCHS if changes_work else STEPS
    pb, pm = [_per_unit(r, unit) for r in b], [_per_unit(r, unit) for r in m]
    nan = float("nan")
    # time per step from the pairs where every round has one (the drift between processes cancels there)
    per = (interleaved_step(m) if unit == STEPS else None) or ratio_over_rounds(
        [x if x is not None else nan for x in pb], [x if x is not None else nan for x in pm]
    )
    sb = [_to_target(r, target, unit) for r in b]
    if derived:
        return TtaFactors(
            unit,
            None,
            per,
            None,
            _median(sb),
            _median(pm),
            _median([r.setup_clock for r in m]),
            _median([r.setup_clock for r in b]),
            None,
            JUDGED_DERIVED,
        )
    sm = [_to_target(r, target, unit) for r in m]
    both = [(x, y) for x, y in zip(sb, sm) if x is not None and y is not None]
    steps = ratio_over_rounds(
        [x if x is not None and y is not None else nan for x, y in zip(sb, sm)],
        [y if x is not None and y is not None else nan for x, y in zip(sb, sm)],
    )
    return TtaFactors(
        unit,
        steps,
        per,
        _median([y for _, y in both]),
        _median([x for x, _ in both]),
        _median(pm),
        _median([r.setup_clock for r in m]),
        _median([r.setup_clock for r in b]),
    )


def steps_equivalence(factors: TtaFactors, margin: float) -> Equivalence | None:
    """TOST of a row's paired log steps-to-target ratios against ``margin``; ``None`` without a steps ratio."""
    if factors is None or factors.steps is None:
        return None
    return equivalence(factors.steps.log_ratios, margin, alpha=EQUIVALENCE_ALPHA)


def convergence_judged_tta(
    b: list[RunResult], m: list[RunResult], target: float, eq: Equivalence
) -> TimeToAccuracy | None:
    """The time to accuracy of a row whose steps to the target were shown equivalent to the baseline's (``eq``):
    per round ``r``, ``setup + S_r x time per step`` for the row and for the baseline, ``S_r`` the baseline's
    interpolated steps to the target in round ``r``; ``None`` when no round has both."""
    tb, tm = [], []
    paired = interleaved_pairs(m) is not None  # every round timed in one process: read the pairs
    for rb, rm in zip(b, m):
        s, pb, pm = steps_to(rb, target), per_step_seconds(rb), per_step_seconds(rm)
        if paired and s is not None:
            pair_b, pair_m = pair_seconds(rm, s)
            tb.append(pair_b)
            tm.append(pair_m)
            continue
        if s is None or pb is None or pm is None:
            tb.append(math.nan)
            tm.append(math.nan)
            continue
        tb.append(rb.setup_clock + s * pb)
        tm.append(rm.setup_clock + s * pm)
    return _judged(
        tb,
        tm,
        (
            f"judged by {JUDGED_PER_STEP}: its steps to the target are within "
            f"+-{eq.margin:.0%} of the baseline's (TOST p = {eq.p_value:.2g}, steps ratio "
            f"{eq.ratio:.3f} [{eq.low:.3f}, {eq.high:.3f}] at {1 - 2 * eq.alpha:.0%}), so its time "
            "to accuracy is setup + the baseline's steps to the target x its time per step, "
            "against the baseline read the same way"
            + (f" (time per step {pair_note(pair_design(m))})" if paired else "")
        ),
    )


def _judged(tb: list[float], tm: list[float], note: str) -> TimeToAccuracy | None:
    """A judged time to accuracy from each round's baseline and row seconds (nan: the round has none), or
    ``None`` when no round has both."""
    ratio = ratio_over_rounds(tb, tm)
    if ratio is None:
        return None
    reached = [t for t in tm if t == t]
    return TimeToAccuracy(
        **{**vars(ratio), "rounds": len(tm)},
        bound=None,
        censored=False,
        reached=len(reached),
        reached_text=f"{len(reached)}/{len(tm)}",
        seconds=statistics.median(reached),
        note=note,
    )


def factor_judged_tta(b: list[RunResult], m: list[RunResult], target: float) -> TimeToAccuracy | None:
    """The time to accuracy of a row from its factors where every round of ``m`` has a pair
    (:func:`~gnnbench.measure.compare.interleaved.interleaved_pairs`): per round ``r``, each side's setup plus
    its own interpolated steps to the target in round ``r`` (the baseline's from ``b``, the row's from ``m``)
    times its mean paired step. ``None`` without pairs, or when a round of either side missed the target (its
    reading is then a bound: the measured one stays)."""
    pairs = interleaved_pairs(m)
    if pairs is None:
        return None
    tb, tm = [], []
    for rb, rm, p in zip(b, m, pairs):
        sb, sm = steps_to(rb, target), steps_to(rm, target)
        if sb is None or sm is None:
            return None
        tb.append(p.setup_seconds[0] + sb * p.base_step)
        tm.append(p.setup_seconds[1] + sm * p.other_step)
    return _judged(
        tb,
        tm,
        (
            f"judged by {JUDGED_FACTORS}: per round, setup + its own steps to the target (read off its "
            "trajectory, paired by seed with the baseline's) x its mean step, against the baseline read the same "
            f"way (time per step {pair_note(pairs[0].design)}); its steps to the target are not shown within the "
            "margin of the baseline's, so they count as measured"
        ),
    )
