"""Many rows against one baseline: which rows form the sweep's family of verdicts, Holm's family-wise control over
them (under a stopping rule, over its looks too), the ranking, and what pays: the measured best, the trade-offs
and the Pareto front of speed against accuracy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnbench.measure.compare.accuracy import NO_COST_PP
from gnnbench.measure.compare.factors import DEFAULT_EQUIVALENCE_MARGIN
from gnnbench.measure.compare.paired_floor import pair_sd_of
from gnnbench.measure.compare.rows import (
    AA_DUET_LABEL,
    AA_INPROCESS_LABEL,
    AA_LABEL,
    BASELINE,
    E2E_BASELINE,
    MEASURED_SUFFIX,
    ComparisonRow,
)
from gnnbench.measure.stats import Stop, StoppingRule, equivalence, family_p_values, final_alpha, holm, sd_floor

if TYPE_CHECKING:
    from gnnbench.measure.compare.comparison import Comparison

__all__ = [
    "FAMILY_ALPHA",
    "in_family",
    "round_log_ratios",
    "family_wise",
    "rank_key",
    "measured_best",
    "pays_alone",
    "tradeoffs",
    "pareto_front",
    "pays",
    "NO_COST",
    "no_effect_verdicts",
    "no_effect_text",
    "verdict_of",
    "verdict_words",
    "plain_reason",
    "VERDICT_GLOSSARY",
    "verdict_summary",
]

FAMILY_ALPHA = 0.05  # the family-wise error rate of a sweep's significance calls
NOT_IN_FAMILY = (
    BASELINE,
    AA_LABEL,
    AA_INPROCESS_LABEL,
    AA_DUET_LABEL,
    E2E_BASELINE,
)  # the reference rows and the noise checks
NO_COST = ("no accuracy cost", "gains accuracy")  # accuracy verdicts of a row that pays at no accuracy cost


def in_family(label: str) -> bool:
    """Whether a row is a verdict of the sweep's family: not a reference, the noise check, or a derived
    entry's measured check (which repeats its entry's verdict)."""
    return label not in NOT_IN_FAMILY and not label.endswith(MEASURED_SUFFIX)


def round_log_ratios(rows: list[ComparisonRow], rounds: list[int]) -> dict[str, list[float]]:
    """Per family row, its primary clock's ``log(baseline / row)`` per round of ``rounds`` (the baseline's, in
    order; nan where the row has no pair), up to its last measured round: the stopping rule's input
    (:func:`gnnbench.measure.stats.sequential.settled`)."""
    out = {}
    for r in rows:
        primary = r.primary_ratio
        if r.status != "ok" or not in_family(r.label) or not primary:
            continue
        by_round = dict(zip(r.primary_rounds or [], primary.log_ratios or []))
        last = max((i for i, k in enumerate(rounds) if k in by_round), default=-1)
        out[r.label] = [by_round.get(k, float("nan")) for k in rounds[: last + 1]]
    return out


def family_wise(
    rows: list[ComparisonRow], rule: StoppingRule | None = None, stops: dict[str, Stop | None] | None = None
) -> str:
    """Holm's procedure over the primary p-values of every measured row but the baseline and the A/A check: a
    row stays ``significant`` only when Holm rejects it too, so with 25 rows sharing a baseline the chance that
    any "significant" row is noise stays at 5% (per-row tests alone: about 72% for 25 independent nulls).
    Under a stopping rule (rounds that stop when decided) Holm runs at the rule's final level over
    :func:`gnnbench.measure.stats.sequential.family_p_values` (a row stopped as significant enters with 0, one stopped
    below the floor with 1), so the verdicts are the stops' and the rate stays at 5% over rows and looks.
    Each row keeps its 95% interval, ``p_value`` and ``significant_per_row``; returns the rule in words."""
    family = [r for r in rows if r.status == "ok" and in_family(r.label)]
    ps = []
    for r in family:
        primary = r.primary_ratio
        ps.append(float(primary.p) if primary and primary.p is not None else float("nan"))
    if rule is None or stops is None:
        keep = holm(ps, FAMILY_ALPHA)
    else:
        fam = family_p_values({r.label: stops.get(r.label) for r in family}, {r.label: p for r, p in zip(family, ps)})
        keep = holm(list(fam.values()), final_alpha(rule) or FAMILY_ALPHA)  # one round: no look, no significance
    for r, p, k in zip(family, ps, keep):
        r.p_value, r.significant_per_row = p, r.significant
        r.significant = bool(r.significant and k)
        if stops is not None and stops.get(r.label) is not None:
            r.stop = stops[r.label]
    if rule is not None and stops is not None:
        looks = ", ".join(f"{100 * a:.3g}% after round {k}" for k, a in rule.to_dict()["look_alpha"].items())
        return (
            f"significance is family-wise over the {len(family)} rows and every look of the stopping rule: a "
            f"row stops after round {rule.min_rounds} or later once decided (Holm at {looks}; or its interval "
            f"lies inside the noise floor), at most {rule.max_rounds} rounds; the chance that any row called "
            f"significant is noise stays at or below {rule.alpha:.0%}; intervals are per row (95%)"
        )
    return (
        f"significance is family-wise: Holm's procedure over the {len(family)} rows' p-values keeps the chance "
        f"that any row called significant is noise at or below {FAMILY_ALPHA:.0%}; intervals are per row (95%)"
    )


def no_effect_verdicts(
    rows: list[ComparisonRow],
    margin: float | None,
    clock_sd: float | None = None,
    *,
    pair_sd: dict[str, float] | None = None,
) -> int:
    """ "No effect beyond +-margin": for every row of the family that is not significant, reached the target in
    every round and has two rounds or more, the equivalence test (TOST, :func:`gnnbench.measure.stats.intervals.equivalence`)
    of its primary ratio's per-round log ratios (the statistic its interval and its significance read) against
    the margin the sweep declared before its rounds, with its sd taken as at least the clock's paired noise allows
    (:func:`gnnbench.measure.stats.sequential.sd_floor` of ``clock_sd``), as its interval is. Holm at 5% over those
    rows' TOST p-values keeps the chance that any "no effect beyond" is false (a true effect at the margin or
    beyond) at or below 5%. Sets ``row.no_effect`` (the test, ``equivalent`` the family-wise answer) in place;
    returns how many rows were tested. ``margin`` None: nothing is tested. A row whose ratio is read from
    pairs (:func:`gnnbench.measure.compare.paired_floor.reads_pairs`) takes its pair design's paired noise from
    ``pair_sd`` (:func:`gnnbench.measure.compare.paired_floor.pair_sds`: in one process, or in duet) instead of
    ``clock_sd``."""
    if margin is None:
        return 0
    tested, tests = [], []
    for r in rows:
        primary = r.primary_ratio
        if r.status != "ok" or not in_family(r.label) or r.significant or r.censored or primary is None:
            continue
        xs = [x for x in primary.log_ratios or [] if x == x]
        if len(xs) < 2:
            continue
        own = pair_sd_of(r, pair_sd)
        sd = own if own is not None else clock_sd
        floor = sd_floor(sd, len(xs)) if sd is not None and sd == sd and sd > 0 else 0.0
        tested.append(r)
        tests.append(equivalence(xs, margin, alpha=FAMILY_ALPHA, min_sd=floor))
    keep = holm([t.p_value for t in tests], FAMILY_ALPHA) if tests else []
    for r, t, k in zip(tested, tests, keep):
        r.no_effect = {
            **t.to_dict(),
            "equivalent": bool(k),
            "equivalent_per_row": bool(t.equivalent),
            "clock": r.primary,
            "family": len(tested),
        }
    return len(tested)


def no_effect_text(row: ComparisonRow) -> str | None:
    """``no effect beyond +-10% (90% interval [0.95, 1.03], Holm over 12 rows)`` for a row shown equivalent within
    the sweep's margin; ``None`` otherwise."""
    ne = row.no_effect
    if not ne or not ne.get("equivalent"):
        return None
    return (
        f"no effect beyond +-{100 * ne['margin']:.0f}% ({100 * (1 - 2 * ne['alpha']):.0f}% interval "
        f"[{ne['low']:.3f}, {ne['high']:.3f}], equivalence test, Holm over {ne['family']} rows)"
    )


FASTER, SLOWER, NO_EFFECT, NOT_RESOLVED = "faster", "slower", "no effect beyond the margin", "not resolved"


def verdict_of(row: ComparisonRow) -> str | None:
    """A family row's verdict: ``faster`` or ``slower`` (family-wise significant, in a bound's direction only),
    ``no effect beyond the margin`` (shown equivalent, :func:`no_effect_verdicts`), else ``not resolved``;
    ``None`` for a row outside the family or not measured."""
    if row.status != "ok" or not in_family(row.label) or row.speedup is None:
        return None
    if row.significant and (row.speedup_low or 0) > 1:
        return FASTER
    if row.significant and row.speedup_high is not None and row.speedup_high < 1:
        return SLOWER
    if row.no_effect and row.no_effect.get("equivalent"):
        return NO_EFFECT
    return NOT_RESOLVED


def verdict_words(row: ComparisonRow) -> str | None:
    """A family row's verdict in the words every view uses (compare's table, the report, the reference block):
    ``faster (family-wise)``, ``slower (family-wise)``, ``no effect beyond +-10%``, or ``not resolved`` with why
    (significant alone but not family-wise; stopped futile or below the floor at a round); ``None`` outside the
    family. A row whose interval excludes 1 is never worded as if it contained it: alone it is "significant
    alone, not family-wise"."""
    v = verdict_of(row)
    if v is None:
        return None
    if v == NO_EFFECT:
        return no_effect_text(row).split(" (")[0]
    if v in (FASTER, SLOWER):
        return f"{v} (family-wise)"
    if row.significant_per_row:
        return f"{NOT_RESOLVED} (significant alone, not family-wise)"
    stop = row.stop
    if stop is not None and stop.reason != "max rounds":
        return f"{NOT_RESOLVED} ({stop.reason} after round {stop.look})"
    return NOT_RESOLVED


def plain_reason(row: ComparisonRow, family: int | None = None) -> str | None:
    """Why a family row is not resolved, in plain words a reader acts on (``could not tell it from the baseline
    within +-47% on this machine in 3 rounds; more rounds were unlikely to settle it``); ``None`` for a row with
    a verdict or outside the family. ``family``: the rows tested together (named in the significant-alone case)."""
    if verdict_of(row) != NOT_RESOLVED:
        return None
    low, high, rounds = row.speedup_low, row.speedup_high, row.rounds
    if row.bound == "at most":
        return "missed the target in some rounds: its speedup is only an upper bound, which shows no gain"
    if row.bound in ("at least", "unknown"):
        return "the baseline missed the target in some rounds: no direction can be claimed"
    if low is None or high is None or low != low or high != high:
        return "one round only: no interval"
    if row.significant_per_row:
        way = "faster" if low > 1 else "slower"
        together = f"the {family} rows tested together" if family else "the rows tested together"
        return f"{way} on its own test, but not after the correction for {together}: more rounds would tell"
    width = 100 * max(high - 1, 1 - low)
    stop = row.stop
    if stop is not None and stop.reason == "below the floor":
        return (
            f"any effect lies within this machine's noise (interval within +-{width:.0f}% after {stop.look} "
            "rounds): too small to resolve here"
        )
    if stop is not None and stop.reason == "futile":
        return (
            f"could not tell it from the baseline within +-{width:.0f}% on this machine in {stop.look} rounds; "
            "more rounds were unlikely to settle it"
        )
    return f"could not tell it from the baseline within +-{width:.0f}% on this machine in {rounds} rounds"


VERDICT_GLOSSARY: tuple[tuple[str, str], ...] = (
    (
        "faster / slower (family-wise)",
        "the row's 95% interval excludes 1 after Holm's correction over every row of the sweep: a verdict that "
        "holds with all rows tested together.",
    ),
    (
        f"no effect beyond +-{100 * DEFAULT_EQUIVALENCE_MARGIN:.0f}%",
        "an equivalence test (90% interval inside the sweep's declared margin, "
        f"+-{100 * DEFAULT_EQUIVALENCE_MARGIN:.0f}% unless the sweep declares another, Holm over the rows): "
        "shown to make no difference that matters.",
    ),
    (
        "not resolved",
        "none of the above; the reason says why: significant alone (its own interval excludes 1, not after the "
        "correction), futile (stopped: more rounds were unlikely to settle it), below the floor (stopped: "
        "its interval lies inside this machine's noise).",
    ),
    (
        "time to accuracy",
        "setup plus the training clock until validation first reaches the calibrated target; > 1x means the row "
        "gets there sooner than the baseline.",
    ),
    (
        "derived",
        "an entry proven by test to keep the baseline's training trajectory: its steps to the target are the "
        "baseline's, so its time to accuracy is setup + those steps x its measured time per step.",
    ),
    (
        "judged by",
        "which figure the verdict reads: measured time to accuracy, derived, or time per step x the baseline's "
        "steps (steps equivalent, where the steps to the target are shown equal within the margin).",
    ),
    (
        "no accuracy cost",
        f"the paired test-accuracy change at the best validation point has its 95% interval inside +-{NO_COST_PP} pp.",
    ),
    (
        "A/A",
        "the baseline measured against itself: the noise a verdict has to beat on this machine.",
    ),
)
"""The verdict words and the terms beside them, defined once: compare's table legend, the report's glossary and
README's reference block read this."""


def verdict_summary(rows: list[ComparisonRow]) -> str:
    """``verdicts for 14 of 21 rows: 3 faster, 4 slower, 7 no effect beyond +-10%; not resolved: a, b``."""
    verdicts = {r.label: verdict_of(r) for r in rows}
    verdicts = {k: v for k, v in verdicts.items() if v is not None}
    if not verdicts:
        return ""
    margin = next((r.no_effect["margin"] for r in rows if r.no_effect), None)
    counts = {v: sum(1 for x in verdicts.values() if x == v) for v in (FASTER, SLOWER, NO_EFFECT)}
    open_ = sorted(k for k, v in verdicts.items() if v == NOT_RESOLVED)
    words = [f"{counts[FASTER]} faster", f"{counts[SLOWER]} slower"]
    if margin is not None:
        words.append(f"{counts[NO_EFFECT]} no effect beyond +-{100 * margin:.0f}%")
    done = len(verdicts) - len(open_)
    return f"verdicts for {done} of {len(verdicts)} rows ({', '.join(words)})" + (
        f"; not resolved: {', '.join(open_)}" if open_ else ""
    )


def rank_key(row: ComparisonRow) -> tuple:
    """The ranking: measured rows first; among them, rows that reached the target in every round before rows
    that missed it in some; then significant speedups, then no significant difference, then significant
    slowdowns; within each class by the speedup. A significant slowdown never ranks above a significant
    speedup, nor a row that misses above one that reaches."""
    if row.status != "ok":
        return (1, 0, 0, 0.0)
    low, high = row.speedup_low, row.speedup_high
    cls = 1  # both directions on the family-wise verdict (Holm), never on a per-row interval alone
    if row.significant and low is not None and low > 1:
        cls = 0
    elif row.significant and high is not None and high < 1:
        cls = 2
    return (0, 1 if row.censored else 0, cls, -(row.speedup or 0.0))


def pays(r: ComparisonRow) -> bool:
    """A row that pays: significant (family-wise), faster, reached the target in every round."""
    return (
        r.status == "ok" and in_family(r.label) and bool(r.significant) and (r.speedup_low or 0) > 1 and not r.censored
    )


def pays_alone(r: ComparisonRow) -> bool:
    """A row that pays on its own test but not after the family-wise correction: significant before Holm,
    faster, reached the target in every round. A hypothesis for the measured best set, never a verdict."""
    return (
        r.status == "ok"
        and in_family(r.label)
        and not r.significant
        and bool(r.significant_per_row)
        and (r.speedup_low or 0) > 1
        and not r.censored
    )


def measured_best(c: Comparison) -> ComparisonRow | None:
    """The configuration this sweep measured best on this machine: the top-ranked row that pays (significant
    after Holm, faster, reached the target in every round) at no accuracy cost; ``None`` when nothing does.
    Chosen from measurement only: the registry's static list competes as one measured row like any other."""
    return next((r for r in c.rows if pays(r) and r.acc_verdict in NO_COST), None)


def tradeoffs(c: Comparison) -> list[ComparisonRow]:
    """Rows that pay in time but not in accuracy: significantly faster, yet their accuracy at convergence is
    significantly lower or not shown to be within the no-cost band."""
    return [r for r in c.rows if pays(r) and r.acc_verdict not in NO_COST]


def pareto_front(rows: list[ComparisonRow]) -> list[str]:
    """Labels of the rows no other row beats in both time-to-accuracy speedup and accuracy delta (rows censored
    in some round are left out: their speedup is only a bound); the baseline (1x, 0 pp) competes too."""
    pts = [
        (r.label, r.tta_speedup.ratio, r.acc_delta)
        for r in rows
        if r.status == "ok" and r.tta_speedup and not r.censored and r.acc_delta == r.acc_delta and in_family(r.label)
    ]
    pts.append((BASELINE, 1.0, 0.0))
    front = [a for a in pts if not any(b[1] >= a[1] and b[2] >= a[2] and (b[1] > a[1] or b[2] > a[2]) for b in pts)]
    return [label for label, _, _ in sorted(front, key=lambda p: p[1])]
