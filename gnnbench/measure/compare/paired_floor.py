"""The floors a sweep's verdicts are judged against, each of the statistic it judges: the clock's paired noise
(the sd a per-round log ratio of a time cannot be taken below) and, per row, the paired floor of its own primary
statistic (the smallest effect ``R`` rounds of it can resolve).

* **The clock's paired noise** :func:`clock_noise_sd`: the pooled within-row sd of the per-round log ratios of the
  epoch clock over every measured row of the sweep (each row's deviations from its own mean, so a row's effect does
  not count as noise; tens of degrees of freedom after three rounds). Every time a row is judged by is a setup plus
  a count of steps times this clock, so no row's per-round sd is taken below it: three rounds whose ratios agree
  within 0.2% by chance cannot settle a row on an interval the clock cannot give (:func:`floor_primary`).
* **A row's paired floor** :func:`row_floors`: a row judged by its time per step (derived, or its steps shown
  equivalent) has the clock's floor, ``exp(t_{R-1} sd / sqrt(R))``; a row judged by its measured time to accuracy
  has that of the A/A row's measured time to accuracy (the same paired statistic between two configurations
  that do not differ, each on its own trajectory), or, without an A/A row, ``sqrt(2)`` times the baseline's
  process spread of it; never below the clock's.
* **The in-process clock** (``clock_noise_sd(..., interleaved=True)``): a row timed against its baseline in one
  process, steps interleaved, whose time to accuracy is its time per step times a count of steps
  (:func:`reads_pairs`), does not carry the drift from one process to the next; its sd is floored at, and its
  paired floor made of, the pooled sd of such rows' per-round step log ratios (the in-process A/A row's among
  them) instead. Rows timed in duet (``row.pair_design == "duet"``) are pooled apart, with the duet's A/A: each
  design has its own noise (:func:`pair_sds`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Sequence

from gnnbench.measure.compare.rows import (
    AA_LABEL,
    EPOCH_TIME,
    PAIR_JUDGED,
    TIME_TO_ACCURACY,
    ComparisonRow,
)
from gnnbench.measure.stats import floored_interval, t_quantile

__all__ = [
    "clock_noise_sd",
    "floor_of_sd",
    "row_floors",
    "floor_primary",
    "reads_pairs",
    "pooled_sd",
    "pair_sds",
    "pair_sd_of",
    "OUTLIER_CLIP",
]

OUTLIER_CLIP = 3.0  # a pooled floor's deviations are clipped at this many robust sds (pooled_sd)


def _aligned(row: ComparisonRow, ratio_logs: Sequence[float], rounds: Sequence[int]) -> list[float]:
    by_round = dict(zip(row.primary_rounds or [], ratio_logs or []))
    return [by_round[k] for k in rounds if k in by_round and by_round[k] == by_round[k]]


def reads_pairs(r: ComparisonRow) -> bool:
    """Whether ``r``'s primary ratio is read from in-process pairs: every round timed it against the baseline in
    one process, steps interleaved, and its time to accuracy is its time per step times a count of steps
    (derived, its steps shown equivalent, or its own steps to the target read off its trajectory)."""
    judged = r.derived or (r.factors is not None and r.factors.judged_by in PAIR_JUDGED)
    return bool(r.interleaved and judged and r.primary == TIME_TO_ACCURACY)


def clock_noise_sd(
    rows: Sequence[ComparisonRow], rounds: Sequence[int], *, interleaved: bool = False, design: str | None = None
) -> float:
    """The pooled within-row sd of the epoch clock's per-round log ratios over ``rounds`` (the baseline's), over
    every measured row but the baseline; nan with no row of two rounds or more.

    ``interleaved``: the paired clock's instead, pooled over the rows timed against the baseline in pairs
    (``row.interleaved``; with ``design``, only those whose pairs are of that design), from the per-round log
    ratios of their mean paired steps."""
    groups = []
    for r in rows:
        ratio = r.step_speedup if interleaved else r.epoch_speedup
        if r.status != "ok" or ratio is None or r.label == "baseline" or (interleaved and not r.interleaved):
            continue
        if interleaved and design is not None and (r.pair_design or "interleaved") != design:
            continue
        groups.append(_aligned(r, ratio.log_ratios, rounds))
    return pooled_sd(groups)


def pair_sds(rows: Sequence[ComparisonRow], rounds: Sequence[int]) -> dict[str, float]:
    """Per pair design present among ``rows`` (``"interleaved"``, ``"duet"``), the paired clock's pooled sd over
    its rows (:func:`clock_noise_sd`); a design whose sd is not known (nan) is left out."""
    designs = {r.pair_design or "interleaved" for r in rows if r.status == "ok" and r.interleaved}
    out = {d: clock_noise_sd(rows, rounds, interleaved=True, design=d) for d in sorted(designs)}
    return {d: sd for d, sd in out.items() if sd == sd}


def pair_sd_of(row: ComparisonRow, sds: dict[str, float] | None) -> float | None:
    """The paired noise ``row`` is judged against, from :func:`pair_sds`: its design's, where its ratio is read
    from pairs (:func:`reads_pairs`) and that design's is known; else ``None`` (the clock's across processes)."""
    if not sds or not reads_pairs(row):
        return None
    return sds.get(row.pair_design or "interleaved")


def pooled_sd(groups: Sequence[Sequence[float]], clip: float = OUTLIER_CLIP) -> float:
    """The pooled within-group sd of ``groups`` (each group's deviations from its own mean), each deviation
    first clipped at ``clip`` robust sds: one disturbed round (a process the machine slowed, 20% off where its
    row's other rounds agree within 2%) would otherwise set the floor of every row. The robust sd is the median
    absolute deviation, each scaled to unit variance (``sqrt(n / (n - 1))``), over 0.6745; clipped at 3 of it, a
    normal sample's pooled sd is 0.5% below the plain one on average (simulated: 12 groups of 3 or 5), where one
    round 12 sds off in 12 groups of 5 (0.015, one 0.18 off) gave 0.020 against the plain 0.029. Groups of fewer than 2 values are skipped;
    nan with none left. ``clip=inf``: the plain pooled sd."""
    devs: list[tuple[float, float]] = []  # (deviation scaled to unit variance, its weight (n - 1) / n)
    df = 0
    for xs in groups:
        xs = [x for x in xs if x == x]
        n = len(xs)
        if n < 2:
            continue
        mean = sum(xs) / n
        devs += [((x - mean) * math.sqrt(n / (n - 1)), (n - 1) / n) for x in xs]
        df += n - 1
    if not df:
        return float("nan")
    robust = statistics.median(abs(d) for d, _ in devs) / 0.6745
    bound = clip * robust if robust > 0 else math.inf
    # a group's sum of squared deviations from its mean is (n - 1) / n times that of its scaled deviations
    return math.sqrt(sum(w * min(abs(d), bound) ** 2 for d, w in devs) / df)


def floor_of_sd(sd: float, rounds: int, level: float = 0.95) -> float:
    """The smallest factor ``rounds`` paired rounds of a log ratio of per-round sd ``sd`` resolve:
    ``exp(t_{(1+level)/2, rounds-1} sd / sqrt(rounds))``; nan without a positive sd (no spread to estimate it
    from) or with fewer than 2 rounds."""
    if not sd > 0 or rounds < 2:
        return float("nan")
    return math.exp(t_quantile((1.0 + level) / 2.0, rounds - 1) * sd / math.sqrt(rounds))


def _sd(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x == x]
    if len(xs) < 2:
        return float("nan")
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _judged_per_step(r: ComparisonRow) -> bool:
    return r.derived or (r.factors is not None and r.factors.judged_by in PAIR_JUDGED) or r.primary == EPOCH_TIME


def row_floors(
    rows: Sequence[ComparisonRow],
    rounds: Sequence[int],
    looks: Sequence[int],
    plan_rounds: int,
    base_tta: Sequence[float | None],
) -> tuple[dict[int, float], dict[str, dict[int, float]], dict[str, dict[int, float]]]:
    """Per look ``k`` (the first ``k`` of the baseline's ``rounds``): the clock's paired noise, per row the
    paired floor of its primary statistic at ``plan_rounds`` rounds (module docstring), and, for the rows whose
    ratio is read from in-process pairs (:func:`reads_pairs`), the in-process clock's paired noise, which
    replaces the clock's for them (each pair design's own, :func:`pair_sds`). ``base_tta`` is the baseline's time to the target per round (None: missed)."""
    aa = next((r for r in rows if r.label == AA_LABEL and r.status == "ok"), None)
    min_sd: dict[int, float] = {}
    floors: dict[str, dict[int, float]] = {}
    pair_sd: dict[str, dict[int, float]] = {}
    for k in looks:
        if k > len(rounds):
            break
        upto = list(rounds[:k])
        s0 = clock_noise_sd(rows, upto)
        min_sd[k] = s0
        clock_floor = floor_of_sd(s0, plan_rounds)
        tta_sd = float("nan")
        if aa is not None and aa.primary == TIME_TO_ACCURACY and aa.tta_speedup is not None:
            tta_sd = _sd(_aligned(aa, aa.tta_speedup.log_ratios, upto))
        if tta_sd != tta_sd:
            logs = [math.log(t) for t in base_tta[:k] if t is not None and t > 0]
            tta_sd = math.sqrt(2.0) * _sd(logs) if len(logs) == k else float("nan")
        tta_floor = floor_of_sd(max(tta_sd, s0) if s0 == s0 else tta_sd, plan_rounds)
        s_pairs = pair_sds(rows, upto)
        for r in rows:
            if r.status != "ok":
                continue
            floors.setdefault(r.label, {})[k] = clock_floor if _judged_per_step(r) else tta_floor
            s_pair = pair_sd_of(r, s_pairs)
            if s_pair is not None:
                floors[r.label][k] = floor_of_sd(s_pair, plan_rounds)
                pair_sd.setdefault(r.label, {})[k] = s_pair
    return min_sd, floors, pair_sd


def floor_primary(row: ComparisonRow, sd: float, level: float = 0.95) -> None:
    """Take the sd of ``row``'s primary per-round log ratios as at least ``sd`` (the clock's paired noise): its
    interval, p-value, per-row significance and the row's speedup interval follow (in place)."""
    primary = row.primary_ratio
    if row.status != "ok" or primary is None or not sd == sd or sd <= 0:
        return
    xs = [x for x in primary.log_ratios if x == x]
    if len(xs) < 2:
        return
    n, _, low, high, p = floored_interval(xs, level, sd)
    if low == primary.low and high == primary.high:
        return
    floored = dataclasses.replace(primary, low=low, high=high, p=p, significant=not (low <= 1.0 <= high))
    if row.primary == TIME_TO_ACCURACY:
        row.tta_speedup = floored
    else:
        row.epoch_speedup = floored
    row.speedup_low, row.speedup_high = low, high
