"""Where a validation curve crosses the target, read between evaluations.

The curve is evaluated every ``eval_every`` steps, so the first evaluation at or above the target is a step count
rounded up to the cadence: on ``small`` (``eval_every`` 6, about 60 steps to the target) that is up to 10% of the
steps to the target, and two runs that cross between the same two evaluations read alike whatever their true
crossing. :func:`interpolated_crossing` reads the crossing on the straight line between the last evaluation below
the target and the first at or above it, for the step and the run clock alike; ``scripts/verdict_replay.py
--quantization`` measures what that removes on a sweep's stored curves (``docs/statistics.md``).

Near the plateau the curve rises slowly, so the evaluation's own noise moves its first crossing by many steps: one
lucky evaluation above the target ends the count early. :func:`smoothed_curve` is the curve read through a
trailing mean of its last evaluations (what a run knows at each point, so a run could stop on it), and
``scripts/verdict_replay.py --smoothing`` measures what reading the crossing on it removes from the spread of
a row's steps to the target, round to round (its figures, and why the default window is 3: ``docs/statistics.md``,
"The crossing, read on a trailing mean"); a run's ``RunConfig.smoothing`` (``compare
--smoothing``, default :data:`DEFAULT_SMOOTHING`) is the window its target is read on: it stops on the mean
(``stop_at``), and :func:`target_curve` is the curve every reader of its crossing reads (steps and time to
the target, the calibration's plateau and cadence). A result without the field was read point by point (1).
"""

from __future__ import annotations

from typing import Sequence

from gnnbench.measure.run import Point, RunResult

__all__ = [
    "DEFAULT_SMOOTHING",
    "interpolated_crossing",
    "smoothed_curve",
    "smoothing_of",
    "target_curve",
    "steps_to",
    "seconds_to",
    "censor_budget",
]

DEFAULT_SMOOTHING = 3  # evaluations in the trailing mean a sweep reads its target on (compare --smoothing)


def interpolated_crossing(curve: Sequence[Point], target: float | None) -> dict[str, float] | None:
    """The point where ``curve`` first reaches ``target``, linearly interpolated between evaluations.

    Args:
        curve: Validation points in step order (:class:`~gnnbench.measure.run.results.Point`, or the training
            loop's points: anything with ``val``, ``step`` and ``seconds``, the run clock).
        target: The validation target (``None``: no crossing).

    Returns:
        ``{"step": s, "seconds": t, "fraction": f}``: with ``(s0, v0)`` the last point below the target and
        ``(s1, v1)`` the first at or above it, ``f = (target - v0) / (v1 - v0)`` and ``s = s0 + f (s1 - s0)`` (the
        same ``f`` for the clock). A curve whose first point is already at or above the target crosses there
        (``f = 1``: nothing earlier to interpolate from). ``None`` when the curve never reaches the target.
    """
    if target is None:
        return None
    prev = None
    for point in curve or []:
        v = float(point.val)
        if v >= target - 1e-12:
            if prev is None or not float(prev.val) < v:
                return {"step": float(point.step), "seconds": float(point.seconds), "fraction": 1.0}
            v0 = float(prev.val)
            f = min(1.0, max(0.0, (target - v0) / (v - v0)))
            return {
                "step": prev.step + f * (point.step - prev.step),
                "seconds": prev.seconds + f * (point.seconds - prev.seconds),
                "fraction": f,
            }
        prev = point
    return None


def smoothed_curve(curve: Sequence[Point], window: int) -> list:
    """``curve`` with each point's validation replaced by the mean of its last ``window`` evaluations (fewer at
    the start): a trailing mean, so each point uses only what the run had evaluated by then. ``window`` 1 is the
    curve itself."""
    import dataclasses

    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer >= 1 (got {window!r})")
    points = list(curve or [])
    out = []
    for i, point in enumerate(points):
        last = points[max(0, i - window + 1) : i + 1]
        out.append(dataclasses.replace(point, val=sum(float(p.val) for p in last) / len(last)))
    return out


def smoothing_of(run: RunResult) -> int:
    """The window a run's target is read on: its ``config.smoothing`` (1 for a result from before the field)."""
    value = run.config.get("smoothing", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"a run's config.smoothing must be an integer >= 1 (got {value!r})")
    return value


def target_curve(run: RunResult) -> list:
    """The validation curve a run's target is read on: its curve through the trailing mean of its
    :func:`smoothing_of` last evaluations (the same mean its ``stop_at`` stopped on)."""
    return smoothed_curve(run.curve, smoothing_of(run))


def steps_to(run: RunResult, target: float | None) -> float | None:
    """A run's interpolated steps to the target (:func:`interpolated_crossing` on its :func:`target_curve`), ``None`` when it never got there
    within its time budget (:func:`censor_budget`)."""
    point = _within_budget(run, target)
    return point["step"] if point else None


def seconds_to(run: RunResult, target: float | None) -> float | None:
    """A run's interpolated run clock (setup + training) at the target, ``None`` when it never got there within
    its time budget."""
    point = _within_budget(run, target)
    return point["seconds"] if point else None


def censor_budget(run: RunResult) -> float | None:
    """The run-clock budget of a run's time to accuracy: ``config.censor_seconds`` (what a sweep sets), else its
    hard stop ``config.max_seconds``; ``None`` without either."""
    budget = run.config.get("censor_seconds") or run.config.get("max_seconds")
    return float(budget) if budget else None


def _within_budget(run: RunResult, target: float | None) -> dict[str, float] | None:
    point = interpolated_crossing(target_curve(run), target)
    budget = censor_budget(run)
    if point is None or (budget is not None and point["seconds"] > budget):
        return None
    return point
