"""How one comparison row reads on the page: its ratio and noise-floor texts, whether its effect is resolved,
the bound a censored time-to-accuracy ratio is and the effect it is painted with (the sweep table, the charts and
the page's summary read a row the same way).
"""

from __future__ import annotations

from gnnbench.measure.compare import BASELINE, FLOOR_KEY, ComparisonRow, PairedRatio
from gnnbench.text import absent, noise_floor, ratio, ratio_of

_BOUND_SIGN = {"at most": "≤ ", "at least": "≥ "}  # a censored time-to-accuracy ratio is a bound


def ratio_text(d: PairedRatio | None) -> str:
    """``1.23x [1.10, 1.38]``; with one round, ``1.23x (one round: no interval)``."""
    return ratio_of(d, one_round=True)


def floor_text(f: float | None) -> str:
    """``1.04x (+-4.0%)``; a factor of 2 or more as the factor alone."""
    if absent(f):
        return "not estimable (fewer than 2 rounds)"
    return f"{ratio(f)} ({noise_floor(f)})" if f < 2 else f"{f:.3g}x"


def primary_floor(r: ComparisonRow, floors: dict) -> float | None:
    return floors.get(FLOOR_KEY.get(r.primary, "epoch"))


def below_floor(r: ComparisonRow, floors: dict) -> bool:
    """The primary effect is not resolved: not significant after Holm. The noise floor (printed beside the
    table) comes from the baseline's spread between processes, seeds included, and is unpaired; pairing by seed
    removes the seed's part, so a row whose paired interval excludes 1 family-wise is resolved even where its
    ratio lies inside that floor (on tiny, time to accuracy's floor is about 1.4x). A row without an interval
    is judged by its ratio against the floor."""
    if not r.significant or absent(r.speedup):
        return True
    low, high = r.speedup_low, r.speedup_high
    if not absent(low) and not absent(high):
        return not (low > 1 or high < 1)
    floor = primary_floor(r, floors)
    return not absent(floor) and max(r.speedup, 1 / r.speedup) < floor


def speedup_text(r: ComparisonRow) -> str:
    """The primary ratio with its interval; a censored one as its bound: ``≤ 1.31x [1.10, 1.50]``."""
    text = ratio_text(r.primary_ratio)
    if r.bound == "unknown":
        return f"bound unknown (censored ratio {text})"
    return _BOUND_SIGN.get(r.bound, "") + text


def _reached_every_round(r: ComparisonRow) -> bool:
    """Whether the row reached the target in every round (a row without a target has nothing to miss)."""
    tta = r.tta_speedup
    return not r.censored and (tta is None or tta.reached == tta.rounds)


_NO_COST = ("no accuracy cost", "gains accuracy", "n/a: labels substituted")


def effect_kind(r: ComparisonRow, floors: dict) -> str:
    """How a row's primary speedup is painted: ``gain`` (significant, reached in every round, no accuracy cost),
    ``tradeoff`` (a significant speedup that costs accuracy), ``loss`` (a significant slowdown), ``na`` (censored
    or a bound with no direction) or ``muted`` (not resolvable). A censored row is never a gain."""
    if r.status != "ok" or r.label == BASELINE or absent(r.speedup):
        return "muted"
    if r.bound == "unknown":
        return "na"
    if below_floor(r, floors):
        return "na" if r.censored else "muted"
    low, high = r.speedup_low, r.speedup_high
    if not absent(high) and high < 1:  # a slowdown is painted as one only when family-wise significant
        return "loss" if r.significant else "na"
    if absent(low) or low <= 1 or not _reached_every_round(r):
        return "na"
    return "gain" if r.acc_verdict in _NO_COST else "tradeoff"


def reached_text(r: ComparisonRow) -> str:
    """``4 of 5`` (rounds that reached the target, of the row's rounds)."""
    tta = r.tta_speedup
    if tta is not None:
        return f"{tta.reached} of {tta.rounds}"
    return str(r.tta_reached or "?").replace("/", " of ")
