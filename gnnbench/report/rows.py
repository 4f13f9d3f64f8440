"""How one comparison row reads on the page: its ratio and noise-floor texts, whether its effect is resolved,
the bound a censored time-to-accuracy ratio is and the effect it is painted with (the sweep table, the charts and
the page's summary read a row the same way); and the HTML escape every section uses.
"""

from __future__ import annotations

import html

from gnnbench.measure.comparison import BASELINE, FLOOR_KEY
from gnnbench.text import absent, noise_floor, ratio, ratio_of

_BOUND_SIGN = {"at most": "≤ ", "at least": "≥ "}  # a censored time-to-accuracy ratio is a bound


def _esc(x) -> str:
    return html.escape(str(x))


def _ratio_text(d: dict | None) -> str:
    """``1.23x [1.10, 1.38]``; with one round, ``1.23x (one round: no interval)``."""
    return ratio_of(d, one_round=True)


def _floor_text(f: float | None) -> str:
    """``1.04x (+-4.0%)``; a factor of 2 or more as the factor alone."""
    if absent(f):
        return "not estimable (fewer than 2 rounds)"
    return f"{ratio(f)} ({noise_floor(f)})" if f < 2 else f"{f:.3g}x"


def _primary_floor(r: dict, floors: dict) -> float | None:
    return floors.get(FLOOR_KEY.get(r.get("primary"), "epoch"))


def _below_floor(r: dict, floors: dict) -> bool:
    """The primary effect is not resolved: not significant after Holm. The noise floor (printed beside the
    table) comes from the baseline's spread between processes, seeds included, and is unpaired; pairing by seed
    removes the seed's part, so a row whose paired interval excludes 1 family-wise is resolved even where its
    ratio lies inside that floor (on tiny, time to accuracy's floor is about 1.4x). A row without an interval
    is judged by its ratio against the floor."""
    if not r.get("significant") or absent(r.get("speedup")):
        return True
    low, high = r.get("speedup_low"), r.get("speedup_high")
    if not absent(low) and not absent(high):
        return not (low > 1 or high < 1)
    floor = _primary_floor(r, floors)
    return not absent(floor) and max(r["speedup"], 1 / r["speedup"]) < floor


def _bound(r: dict) -> str | None:
    """The bound a censored time-to-accuracy ratio is (``at most``, ``at least``, ``unknown``), else ``None``."""
    if r.get("primary") != "time to accuracy":
        return None
    return (r.get("tta_speedup") or {}).get("bound")


def _speedup_text(r: dict) -> str:
    """The primary ratio with its interval; a censored one as its bound: ``≤ 1.31x [1.10, 1.50]``."""
    primary = r["tta_speedup"] if r["primary"] == "time to accuracy" else r["epoch_speedup"]
    text = _ratio_text(primary)
    if _bound(r) == "unknown":
        return f"bound unknown (censored ratio {text})"
    return _BOUND_SIGN.get(_bound(r), "") + text


def _reached_every_round(r: dict) -> bool:
    """Whether the row reached the target in every round (a row without a target has nothing to miss)."""
    tta = r.get("tta_speedup")
    return not r.get("censored") and (tta is None or tta.get("reached") == tta.get("rounds"))


_NO_COST = ("no accuracy cost", "gains accuracy", "n/a: labels substituted")


def _effect(r: dict, floors: dict) -> str:
    """How a row's primary speedup is painted: ``gain`` (significant, reached in every round, no accuracy cost),
    ``tradeoff`` (a significant speedup that costs accuracy), ``loss`` (a significant slowdown), ``na`` (censored
    or a bound with no direction) or ``muted`` (not resolvable). A censored row is never a gain."""
    if r.get("status") != "ok" or r["label"] == BASELINE or absent(r.get("speedup")):
        return "muted"
    if _bound(r) == "unknown":
        return "na"
    if _below_floor(r, floors):
        return "na" if r.get("censored") else "muted"
    low, high = r.get("speedup_low"), r.get("speedup_high")
    if not absent(high) and high < 1:  # a slowdown is painted as one only when family-wise significant
        return "loss" if r.get("significant") else "na"
    if absent(low) or low <= 1 or not _reached_every_round(r):
        return "na"
    return "gain" if r.get("acc_verdict") in _NO_COST else "tradeoff"


def _reached_text(r: dict) -> str:
    """``4 of 5`` (rounds that reached the target, of the row's rounds)."""
    tta = r.get("tta_speedup") or {}
    if "reached" in tta:
        return f"{tta['reached']} of {tta['rounds']}"
    return str(r.get("tta_reached") or "?").replace("/", " of ")
