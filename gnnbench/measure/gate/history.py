"""Steps in a benchmark's history across commits: where a series changed level, by how much, with an interval.

The segmentation is asv's own step detection (``asv.step_detect.detect_steps``: a penalized piecewise-constant
fit of the series, the method ``asv publish`` uses to flag regressions); gnnbench adds, per step, the ratio of
the two segments' levels with a Welch t-interval on their log values, and keeps only steps of at least
``min_ratio`` either way. asv is installed with the ``test`` and ``bench`` extras; without it the report says
change points cannot be computed, and why.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["ChangePoint", "change_points", "available"]


def available() -> str | None:
    """``None`` when asv's step detection can be imported, else why not."""
    try:
        import asv.step_detect  # noqa: F401
    except ImportError as exc:
        return f"asv is not installed ({exc}): pip install 'asv>=0.6' for change points in the history"
    return None


@dataclass(frozen=True)
class ChangePoint:
    """A change of level: ``ratio`` is after / before (above 1 on a time: slower from ``commit`` on)."""

    index: int  # position of the first point after the step
    commit: str  # that point's commit
    before: float  # level of the segment before (its mean)
    after: float  # level of the segment after
    ratio: float
    low: float | None  # 95% interval of the ratio (None: a segment of one point)
    high: float | None


def _welch(a: list[float], b: list[float]) -> tuple[float | None, float | None]:
    """95% Welch t-interval of ``exp(mean(log b) - mean(log a))``."""
    from gnnbench.measure.stats.intervals import t_quantile

    if len(a) < 2 or len(b) < 2:
        return None, None
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    diff = statistics.mean(lb) - statistics.mean(la)
    if va + vb == 0:
        return math.exp(diff), math.exp(diff)
    df = (va + vb) ** 2 / ((va**2 / (len(la) - 1) if va else 0) + (vb**2 / (len(lb) - 1) if vb else 0))
    half = t_quantile(0.975, max(1, int(df))) * math.sqrt(va + vb)
    return math.exp(diff - half), math.exp(diff + half)


def change_points(values: list[float], commits: list[str], *, min_ratio: float = 1.05) -> list[ChangePoint]:
    """The steps of a series of positive values (one per commit, oldest first) of at least ``min_ratio``.

    Raises:
        ValueError: when the lengths differ, a value is not positive, or ``min_ratio`` < 1.
        ImportError: without asv (:func:`available` says so first).
    """
    from asv.step_detect import detect_steps

    if len(values) != len(commits):
        raise ValueError(f"one commit per value: {len(values)} values, {len(commits)} commits")
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError("change points need positive, finite values")
    if not min_ratio >= 1:
        raise ValueError(f"min_ratio must be >= 1 (got {min_ratio!r})")
    if len(values) < 3:
        return []
    segments = detect_steps(list(values))
    out = []
    for (l0, r0, *_), (l1, r1, *_) in zip(segments, segments[1:]):
        a, b = values[l0:r0], values[l1:r1]
        before, after = statistics.mean(a), statistics.mean(b)
        ratio = after / before
        if max(ratio, 1 / ratio) < min_ratio:
            continue
        low, high = _welch(a, b)
        out.append(ChangePoint(l1, commits[l1], before, after, ratio, low, high))
    return out
