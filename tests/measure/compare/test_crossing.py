"""gnnbench.measure.compare.crossing: the target crossing read between evaluations, on synthetic curves."""

import pytest

from gnnbench.measure.compare import interpolated_crossing, seconds_to, steps_to
from gnnbench.measure.run import Point, RunResult


def _point(step, seconds, val):
    return Point(seconds=seconds, step=step, epoch=0, val=val, test=val)


def _curve(points, every=6, per_step=0.25, setup=0.5):
    return [_point(every * (i + 1), setup + per_step * every * (i + 1), v) for i, v in enumerate(points)]


def test_the_crossing_is_read_on_the_line_between_the_evaluations_around_it():
    # a linear learning curve sampled every 6 steps: 0.1 per 6 steps, target 0.75 reached at step 45 exactly
    curve = [_point(s, 0.5 + 0.25 * s, s / 60) for s in range(6, 120, 6)]
    point = interpolated_crossing(curve, 0.75)
    assert point["step"] == pytest.approx(45.0) and point["seconds"] == pytest.approx(0.5 + 0.25 * 45)
    assert point["fraction"] == pytest.approx(0.5)
    # the first evaluation at or above the target would have said 48: a quantization of 3 steps (half a cadence)
    first = next(p.step for p in curve if p.val >= 0.75)
    assert first == 48


def test_edge_cases():
    assert interpolated_crossing(_curve([0.5, 0.7, 0.9]), None) is None
    assert interpolated_crossing(_curve([0.5, 0.7]), 0.8) is None, "never reached"
    at_first = interpolated_crossing(_curve([0.85, 0.9]), 0.8)
    assert at_first["step"] == 6 and at_first["fraction"] == 1.0, "nothing earlier to interpolate from"
    exact = interpolated_crossing(_curve([0.5, 0.8, 0.9]), 0.8)
    assert exact["step"] == 12, "a point exactly at the target is the crossing"
    # a dip before the crossing: the last point below is the one just before the first at or above
    dip = interpolated_crossing(_curve([0.7, 0.6, 0.9]), 0.8)
    assert dip["step"] == pytest.approx(12 + 6 * (0.2 / 0.3))


def test_the_budget_censors_the_interpolated_clock():
    run = RunResult(status="ok", config={"censor_seconds": 0.5 + 0.25 * 14}, curve=_curve([0.5, 0.7, 0.9]))
    # crossing at step 15 (clock 4.25) past a budget of 4.0: censored
    assert seconds_to(run, 0.8) is None and steps_to(run, 0.8) is None
    run.config["censor_seconds"] = 10.0
    assert steps_to(run, 0.8) == pytest.approx(15.0) and seconds_to(run, 0.8) == pytest.approx(0.5 + 0.25 * 15)


def test_a_trailing_mean_reads_a_lucky_evaluation_as_what_it_is():
    from gnnbench.measure.compare import smoothed_curve

    # one noisy evaluation above the target at step 12, the curve itself there only at step 30
    curve = _curve([0.70, 0.82, 0.74, 0.76, 0.81, 0.83, 0.84])
    assert interpolated_crossing(curve, 0.8)["step"] == pytest.approx(6 + 6 * (0.10 / 0.12))
    smooth = smoothed_curve(curve, 3)
    assert [round(p.val, 4) for p in smooth] == [0.70, 0.76, 0.7533, 0.7733, 0.77, 0.80, 0.8267]
    assert [p.step for p in smooth] == [p.step for p in curve] and smooth[2].seconds == curve[2].seconds
    assert interpolated_crossing(smooth, 0.8)["step"] == pytest.approx(36)  # the mean of the last three reaches it
    assert smoothed_curve(curve, 1) == curve and smoothed_curve([], 3) == []
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        smoothed_curve(curve, 0)


def test_a_runs_own_smoothing_is_the_curve_its_crossing_is_read_on():
    from gnnbench.measure.compare import target_curve

    curve = _curve([0.70, 0.82, 0.74, 0.76, 0.81, 0.83, 0.84])
    old = RunResult(status="ok", config={}, curve=curve)  # a result from before the field: each point alone
    assert target_curve(old) == curve and steps_to(old, 0.8) == pytest.approx(6 + 6 * (0.10 / 0.12))
    smoothed = RunResult(status="ok", config={"smoothing": 3}, curve=curve)
    assert steps_to(smoothed, 0.8) == pytest.approx(36) and seconds_to(smoothed, 0.8) == pytest.approx(0.5 + 0.25 * 36)
    for bad in (0, 2.5, True, "3"):
        with pytest.raises(ValueError, match="config.smoothing must be an integer >= 1"):
            steps_to(RunResult(status="ok", config={"smoothing": bad}, curve=curve), 0.8)
