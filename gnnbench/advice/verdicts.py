"""``diagnose --verify``: which recommendations to measure (:func:`verify_names`) and, from ``compare``'s rows,
whether each pays here (:func:`verdicts`).
"""

from __future__ import annotations

import math
from typing import Iterable

from gnnbench import registry
from gnnbench.advice.diagnose import Diagnosis
from gnnbench.measure.compare import BASELINE, FLOOR_KEY, ComparisonRow
from gnnbench.text import noise_floor, pp, ratio

__all__ = ["verify_names", "verdicts"]


def verify_names(d: Diagnosis, top: int = 3) -> list[str]:
    """The sweep labels ``--verify`` measures: each of the ``top`` runnable recommendations alone, and the
    ones that do not cost accuracy together (``a+b``) when there are two or more."""
    names = d.recommended[:top]
    safe = [n for n in names if not registry.get(n).costs_accuracy]
    labels = list(names)
    if len(safe) >= 2:
        labels.append("+".join(safe))
    return labels


def verdicts(rows: Iterable[ComparisonRow], floors: dict[str, float] | None = None) -> list[str]:
    """One line per measured recommendation (rows of :func:`gnnbench.measure.compare.comparison.compare`): does it pay
    here?

    An interval that contains 1 is never "does not pay": with the noise floor of its metric (``floors``, from
    :class:`~gnnbench.measure.compare.comparison.Comparison`) it is "not resolved" when every gain it admits is below
    the floor, and "no significant difference" (more rounds would tell) when it admits a gain above it. Only a
    significant slowdown does not pay."""
    floors = floors or {}
    out = []
    for row in rows:
        label = row.label
        if label == BASELINE or label.startswith(f"{BASELINE} ("):
            continue
        if row.status != "ok":
            out.append(f"{label}: not measured ({row.reason or row.status})")
            continue
        speedup = row.speedup
        shown = ratio(speedup, row.speedup_low, row.speedup_high)
        by = row.primary
        acc = f"; accuracy {pp(row.acc_delta)} ({row.acc_verdict})"
        if speedup is None:
            out.append(f"{label}: no comparable measurement{acc}")
        elif row.significant and speedup > 1:
            out.append(f"{label}: pays here, {shown} by {by}{acc}")
        elif row.significant:
            out.append(f"{label}: does not pay here, it is slower: {shown} by {by}{acc}")
        else:
            floor = floors.get(FLOOR_KEY.get(by, ""))
            high = row.speedup_high
            if floor is not None and math.isfinite(floor) and high is not None and high <= floor:
                out.append(
                    f"{label}: not resolved: any effect is below the {noise_floor(floor)} floor ({shown} by {by}){acc}"
                )
            else:
                admits = (
                    f", the interval admits a gain of up to {high - 1:.0%}; more rounds would tell"
                    if high is not None and math.isfinite(high) and high > 1
                    else ""
                )
                out.append(f"{label}: no significant difference: {shown} by {by}{admits}{acc}")
    return out
