"""The training loop's two decisions, without training: when a run stops and why
(:class:`~gnnbench.training.stopping.Stopping`, on a fake clock and a fake cross-rank agreement) and when it
records a validation point (:class:`~gnnbench.training.stopping.EvaluationCadence`)."""

import dataclasses

import pytest

from gnnbench.training.stopping import MIN_PATIENCE_STEPS, EvaluationCadence, Stopping
from tests.helpers import QUICK

PLATEAU = dataclasses.replace(QUICK, epochs=None, max_epochs=30, patience=1.0, min_delta=0.01)


class Clock:
    """A run clock the test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _stopping(cfg, epochs=None, *, clock=None, agree=bool, **facts):
    return Stopping(cfg, epochs, evaluate=True, clock=clock or Clock(), agree=agree, **facts)


def _step(stopping: Stopping, steps: int, val: float | None = None) -> bool:
    """One step as the loop takes it: the budgets, a validation point when given, the decision."""
    stopping.after_step(steps)
    if val is not None:
        stopping.after_evaluation(val, steps)
    return stopping.should_stop()


# ------------------------------------------------------------------ length
def test_a_fixed_length_run_runs_its_epochs_raised_to_the_floor():
    s = _stopping(dataclasses.replace(QUICK, epochs=2), floor=5)
    assert (s.epochs, s.schedule_epochs, s.reason, s.to_plateau) == (5, 5, "epochs", False)
    assert list(s.each_epoch()) == [0, 1, 2, 3, 4]
    assert [s.last_epoch(e) for e in range(5)] == [False] * 4 + [True]
    given = _stopping(dataclasses.replace(QUICK, epochs=2), 3, floor=5)
    assert given.epochs == 3, "epochs passed in are not raised"
    endless = _stopping(QUICK, float("inf"))
    with pytest.raises(RuntimeError, match="no batches for epoch 4"):
        endless.end_epoch(4, 0)


def test_a_run_to_a_plateau_needs_evaluation_and_spans_max_epochs():
    with pytest.raises(ValueError, match="needs evaluate=True"):
        Stopping(PLATEAU, None, evaluate=False, clock=Clock())
    s = _stopping(PLATEAU, floor=40)
    assert (s.epochs, s.schedule_epochs, s.reason, s.to_plateau) == (40, 30, "max_epochs", True)
    assert not _stopping(PLATEAU, 3).to_plateau, "epochs passed in: a fixed length, no plateau rule"
    assert _stopping(PLATEAU, per_epoch=10, cap=4).per_epoch == 4, "the epoch's length within the cap"


def test_the_epoch_loop_ends_once_the_run_stopped():
    s = _stopping(dataclasses.replace(QUICK, epochs=10, max_seconds=1.0), clock=Clock())
    seen = []
    for epoch in s.each_epoch():
        seen.append(epoch)
        if epoch == 2:
            s.clock.now = 2.0
            assert _step(s, 3)
    assert seen == [0, 1, 2] and s.reason == "max_seconds" and s.last_epoch(2)


# ------------------------------------------------------------------ the plateau rule and the budgets
def test_a_sweep_run_waits_at_most_its_own_steps_to_the_target():
    cfg = dataclasses.replace(PLATEAU, patience=5.0, patience_target=0.8)
    s = _stopping(cfg, per_epoch=20)
    assert s.plateau.target == 0.8
    assert not _step(s, 10, 0.5)
    assert not _step(s, 30, 0.81), "the target reached at step 30: the wait is now 30 steps, not 100"
    assert not _step(s, 59, 0.81) and _step(s, 60, 0.81) and s.reason == "plateau"
    plain = _stopping(dataclasses.replace(PLATEAU, patience=5.0), per_epoch=20)
    for step, val in ((10, 0.5), (30, 0.81), (60, 0.81), (129, 0.81)):
        assert not _step(plain, step, val), "without a patience target: 5 epochs of 20 steps"
    assert _step(plain, 130, 0.81)


def test_the_plateau_rule_waits_for_the_epochs_length_and_its_patience():
    s = _stopping(PLATEAU)
    assert s.plateau is not None and s.per_epoch is None
    assert not _step(s, 1, 0.5)
    assert not _step(s, 3 * MIN_PATIENCE_STEPS, 0.5), "the epoch's length unknown: no plateau yet"
    s.end_epoch(0, 0)
    s.end_epoch(1, 8)
    s.end_epoch(2, 3)
    assert s.per_epoch == 8, "the first epoch that trained tells the length"
    assert _step(s, 3 * MIN_PATIENCE_STEPS + 1, 0.5) and s.reason == "plateau"
    exact = _stopping(PLATEAU, per_epoch=8)  # patience: max(MIN_PATIENCE_STEPS, 1 epoch) steps after the best
    assert not _step(exact, 1, 0.5) and not _step(exact, MIN_PATIENCE_STEPS, 0.5)
    assert _step(exact, MIN_PATIENCE_STEPS + 1, 0.5) and exact.reason == "plateau"


def test_budgets_stop_at_the_first_step_past_them():
    clock = Clock()
    s = _stopping(dataclasses.replace(PLATEAU, max_seconds=2.0), clock=clock)
    clock.now = 1.99
    assert not s.after_step(1) and not s.should_stop()
    clock.now = 2.0
    assert s.after_step(2), "a spent budget: the run ends on a validation point"
    assert s.should_stop() and s.reason == "max_seconds"
    steps = _stopping(dataclasses.replace(PLATEAU, max_steps=5))
    assert not any(_step(steps, k) for k in range(1, 5))
    assert _step(steps, 5) and steps.reason == "max_steps"
    fixed = _stopping(dataclasses.replace(QUICK, epochs=3, max_steps=5))
    assert not fixed.after_step(5) and not fixed.should_stop(), "the step budget bounds runs to a plateau only"


def test_one_rule_names_the_stop_in_order():
    clock = Clock()
    clock.now = 9.0
    both = _stopping(dataclasses.replace(PLATEAU, max_seconds=1.0, max_steps=5), clock=clock)
    assert _step(both, 5) and both.reason == "max_seconds"
    s = _stopping(dataclasses.replace(PLATEAU, max_seconds=1.0, max_steps=5), clock=clock, per_epoch=1)
    s.after_evaluation(0.5, 1)
    assert _step(s, MIN_PATIENCE_STEPS + 1, 0.5) and s.reason == "plateau", "the plateau rule before the budgets"


def test_another_ranks_decision_stops_this_rank():
    """The agreement is any rank's flag: a rank whose own clock is inside the budget stops with the rank past
    it, at the same step."""
    calls = []

    def other_rank_over(flag):
        calls.append(flag)
        return True

    s = _stopping(dataclasses.replace(QUICK, epochs=3, max_seconds=5.0), agree=other_rank_over)
    assert _step(s, 1) and s.reason == "max_seconds" and calls == [False]
    alone = _stopping(dataclasses.replace(QUICK, epochs=3), agree=other_rank_over)
    calls.clear()
    assert not _step(alone, 1) and calls == [], "no budget: nothing to agree on"


# ------------------------------------------------------------------ time-to-accuracy runs
def test_a_time_to_accuracy_run_stops_at_its_target_after_min_steps():
    cfg = dataclasses.replace(PLATEAU, stop_at=0.8, min_steps=10)
    s = _stopping(cfg, per_epoch=1)
    assert not _step(s, 4, 0.9), "never before min_steps"
    assert not _step(s, 10, 0.79)
    assert _step(s, 12, 0.8 - 1e-13) and s.reason == "target", "at the target within its tolerance"
    fixed = _stopping(dataclasses.replace(QUICK, epochs=3, stop_at=0.8))
    assert _step(fixed, 2, 0.85) and fixed.reason == "target", "a fixed-length run stops at its target too"


def test_the_plateau_rule_never_stops_a_time_to_accuracy_run():
    s = _stopping(dataclasses.replace(PLATEAU, stop_at=0.9), per_epoch=1)
    assert s.plateau is None
    assert not any(_step(s, k, 0.5) for k in range(1, 20 * MIN_PATIENCE_STEPS))
    assert s.reason == "max_epochs"


def test_a_time_to_accuracy_run_is_censored_past_its_budget():
    clock = Clock()
    cfg = dataclasses.replace(PLATEAU, stop_at=0.9, censor_seconds=3.0)
    s = _stopping(cfg, clock=clock, per_epoch=1)
    clock.now = 3.0
    assert not _step(s, 1, 0.5), "at the budget, not past it"
    clock.now = 3.01
    assert _step(s, 2) and s.reason == "censored"
    target = _stopping(cfg, clock=clock, per_epoch=1)
    assert _step(target, 3, 0.95) and target.reason == "target", "the target before the censoring budget"
    plain = _stopping(dataclasses.replace(PLATEAU, censor_seconds=3.0), clock=clock, per_epoch=1)
    assert not _step(plain, 1), "the censoring budget stops only a time-to-accuracy run"


# ------------------------------------------------------------------ the evaluation cadence
def test_the_cadence_evaluates_every_n_steps_and_at_the_last_epoch_end():
    s = _stopping(dataclasses.replace(QUICK, epochs=2, eval_every=3))
    c = EvaluationCadence(s, 3, evaluate=True)
    assert [k for k in range(1, 8) if c.after_step(k, False)] == [3, 6]
    assert c.after_step(7, True), "a spent budget forces a point"
    assert not c.at_epoch_end(0, 4, 4), "not the last epoch"
    c2 = EvaluationCadence(s, 3, evaluate=True)
    assert c2.after_step(6, False) and not c2.at_epoch_end(1, 3, 6), "never twice at one step"
    assert c2.at_epoch_end(1, 2, 8) and not c2.at_epoch_end(1, 0, 9), "the last epoch, if it trained"


def test_without_a_step_cadence_every_epoch_end_evaluates_and_without_evaluate_nothing():
    s = _stopping(dataclasses.replace(QUICK, epochs=3))
    c = EvaluationCadence(s, None, evaluate=True)
    assert not any(c.after_step(k, False) for k in range(1, 5))
    assert [c.at_epoch_end(e, 2, 2 * (e + 1)) for e in range(3)] == [True] * 3
    off = EvaluationCadence(s, 2, evaluate=False)
    assert off.every is None
    assert not any(off.after_step(k, True) for k in range(1, 5)) and not off.at_epoch_end(2, 2, 6)


def test_a_run_to_a_plateau_evaluates_four_times_an_epoch_once_it_knows_the_length():
    s = _stopping(PLATEAU)
    c = EvaluationCadence(s, None, evaluate=True)
    assert c.every is None and not c.after_step(5, False)
    s.end_epoch(0, 20)
    assert c.at_epoch_end(0, 20, 20), "the first epoch's end: the length is told, and a point recorded"
    assert c.every == 5
    assert [k for k in range(21, 41) if c.after_step(k, False)] == [25, 30, 35, 40]
    assert not c.at_epoch_end(1, 20, 40)
    known = EvaluationCadence(_stopping(PLATEAU, per_epoch=8), None, evaluate=True)
    assert known.every == 2 and known.at_epoch_end(0, 7, 7), "the first epoch ends on a point"
    given = EvaluationCadence(_stopping(PLATEAU, per_epoch=8), 3, evaluate=True)
    assert given.every == 3, "the run's own cadence wins"


# ------------------------------------------------------------------ the floor and budget in the run's own unit
def test_the_step_floor_and_budget_are_counted_in_the_baselines_epochs():
    """A sweep counts min_steps and max_steps in the baseline's steps (20 a epoch here): a full-batch run (one
    step an epoch) has them as the same number of epochs; a batch source of the baseline's epoch length, or a
    config without a unit, as given; a source whose length the first epoch tells is rescaled then."""
    cfg = dataclasses.replace(PLATEAU, min_steps=140, max_steps=400, step_unit=20)
    full = _stopping(cfg, per_epoch=1)
    assert (full.min_steps, full.max_steps, full.plateau.min_steps) == (7, 20, 7)
    assert not _step(full, 19) and _step(full, 20) and full.reason == "max_steps"
    same = _stopping(cfg, per_epoch=20)
    assert (same.min_steps, same.max_steps) == (140, 400)
    plain = _stopping(dataclasses.replace(cfg, step_unit=None), per_epoch=1)
    assert (plain.min_steps, plain.max_steps) == (140, 400)
    learned = _stopping(cfg)
    assert (learned.min_steps, learned.max_steps) == (140, 400)
    learned.end_epoch(0, 5)
    assert (learned.min_steps, learned.max_steps, learned.plateau.min_steps) == (35, 100, 35)
    with pytest.raises(ValueError, match="step_unit must be None or an integer >= 1"):
        dataclasses.replace(cfg, step_unit=0)


def test_a_time_to_accuracy_run_stops_on_the_trailing_mean_of_its_smoothing():
    """``smoothing=3``: one lucky evaluation above the target does not stop the run; the mean of the last three
    reaching it does, at the point where the readers' target curve first reaches it."""
    from gnnbench.measure.compare import interpolated_crossing, smoothed_curve
    from gnnbench.measure.run import Point

    vals = [0.70, 0.82, 0.74, 0.76, 0.81, 0.83, 0.84]
    raw = _stopping(dataclasses.replace(PLATEAU, stop_at=0.8), per_epoch=1)
    assert [_step(raw, 6 * (i + 1), v) for i, v in enumerate(vals[:2])] == [False, True], "each point alone"
    smooth = _stopping(dataclasses.replace(PLATEAU, stop_at=0.8, smoothing=3), per_epoch=1)
    stops = [_step(smooth, 6 * (i + 1), v) for i, v in enumerate(vals[:6])]
    assert stops == [False] * 5 + [True] and smooth.reason == "target"
    curve = [Point(seconds=float(i), step=6 * (i + 1), epoch=0, val=v, test=v) for i, v in enumerate(vals)]
    assert interpolated_crossing(smoothed_curve(curve, 3), 0.8)["step"] == 36, "where the readers read it"
    with pytest.raises(ValueError, match=r"RunConfig.smoothing must be an integer >= 1 \(got 0\)"):
        dataclasses.replace(PLATEAU, smoothing=0)
