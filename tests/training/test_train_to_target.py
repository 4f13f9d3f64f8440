"""Training to a target: the plateau rule and its budgets, the target calibrated on seeds no round uses, and the
A/A row's own seed stream."""

import dataclasses
import json
import statistics

import pytest

from gnnbench.measure.compare import (
    AA_LABEL,
    AA_SEED_OFFSET,
    CALIBRATION,
    CALIBRATION_SEED_OFFSET,
    MIN_POINTS_BEFORE_TARGET,
    calibrate,
    censor_at,
    compare,
    plateau_level,
    smoothed_curve,
    time_to,
)
from gnnbench.measure.sweep import MANIFEST, SweepOptions, run_calibration, run_sweep, sweep_entries
from gnnbench.training import Trainer
from gnnbench.training.stopping import MIN_PATIENCE_STEPS, Plateau, eval_interval
from tests.helpers import QUICK, result_of


# ------------------------------------------------------------------ the plateau rule
def test_plateau_waits_patience_epochs_and_at_least_the_minimum_steps():
    p = Plateau(patience=2, min_delta=0.01)
    assert not p.reached(100, None), "never before the epoch's length is known"
    p.update(0.50, 10)
    assert not p.update(0.505, 20)  # a rise below min_delta moves nothing: the reference stays
    assert p.best == pytest.approx(0.50) and p.best_step == 10
    wait = max(MIN_PATIENCE_STEPS, 2 * 30)
    assert not p.reached(10 + wait - 1, 30) and p.reached(10 + wait, 30)
    assert p.update(0.52, 80)  # a qualifying rise restarts the patience
    assert p.best_step == 80 and not p.reached(80 + wait - 1, 30)
    # one step per epoch (full batch): the patience is at least MIN_PATIENCE_STEPS steps, not 2
    q = Plateau(patience=2, min_delta=0.0)
    q.update(0.9, 5)
    assert not q.reached(5 + MIN_PATIENCE_STEPS - 1, 1) and q.reached(5 + MIN_PATIENCE_STEPS, 1)
    q.update(float("nan"), 6)
    assert q.best == 0.9, "a NaN point is ignored"
    # never before min_steps, however flat
    r = Plateau(patience=1, min_delta=0.01, min_steps=200)
    r.update(0.9, 1)
    assert not r.reached(150, 10) and r.reached(200, 10)


def test_the_patience_follows_the_steps_the_run_took_to_reach_the_target():
    """A sweep's runs wait at most as many steps as they took to reach the calibrated target (the time scale of
    their own learning): on small, 5 epochs of 20 steps (100 steps) were 43% of the baseline's accuracy run,
    while it reached the target in ~60 steps. Steps only: the clock never shortens the wait."""
    p = Plateau(patience=5, min_delta=0.01, target=0.8)
    p.update(0.5, 10)
    assert p.wait(20) == 100, "before the target: patience epochs"
    p.update(0.81, 60)  # the target, reached at step 60 (a qualifying rise too)
    assert p.target_step == 60 and p.wait(20) == 60
    assert not p.reached(60 + 59, 20) and p.reached(60 + 60, 20)
    p.update(0.79, 130)  # falling below the target again keeps the first crossing
    assert p.target_step == 60
    # never longer than patience epochs (a slow learner: 300 steps to the target, 5 epochs of 20 = 100)
    slow = Plateau(patience=5, min_delta=0.01, target=0.8)
    slow.update(0.8, 300)
    assert slow.wait(20) == 100
    # never below MIN_PATIENCE_STEPS (the target reached in 6 steps)
    fast = Plateau(patience=5, min_delta=0.01, target=0.8)
    fast.update(0.9, 6)
    assert fast.wait(20) == MIN_PATIENCE_STEPS
    # a one-node difference at float32 rounding: the crossing counts with the time_to tolerance
    edge = Plateau(patience=5, min_delta=0.01, target=0.8)
    edge.update(0.8 - 1e-13, 40)
    assert edge.target_step == 40
    # without a target, patience epochs alone (a plain `gnnbench run`)
    plain = Plateau(patience=5, min_delta=0.01)
    plain.update(0.99, 6)
    assert plain.target_step is None and plain.wait(20) == 100


def test_patience_target_is_validated_and_set_by_the_calibration():
    with pytest.raises(ValueError, match=r"patience_target must be None or a validation level in \(0, 1\] \(got 1.5\)"):
        dataclasses.replace(QUICK, patience_target=1.5)
    with pytest.raises(ValueError, match="patience_target"):
        dataclasses.replace(QUICK, patience_target=True)
    runs = [
        result_of(
            {
                "config": {"seed": 10000 + i},
                "steps_per_epoch": 10,
                "steps": {"total": 100},
                "curve": [{"step": 10 * k, "seconds": float(k), "val": 0.1 * k, "test": 0.1 * k} for k in range(1, 9)],
            }
        )
        for i in range(3)
    ]
    cal = calibrate(runs)
    assert cal.target == pytest.approx(0.8 - 0.01)
    applied = cal.apply(dataclasses.replace(QUICK, epochs=None))
    assert applied.patience_target == cal.target
    assert cal.apply(dataclasses.replace(QUICK, epochs=None, patience_target=0.5)).patience_target == 0.5, (
        "a base's own level is kept"
    )
    # a target the user gives (here far below the plateau, reached within a few steps) does not shorten the
    # patience: the level stays the calibrated one
    given = calibrate(runs, target_acc=0.2)
    assert given.target == 0.2 and given.apply(
        dataclasses.replace(QUICK, epochs=None)
    ).patience_target == pytest.approx(0.8 - 0.01)
    assert calibrate([]).patience_level is None


def test_a_slow_steady_climb_is_not_stopped():
    """+0.05 pp per point for 200 points (10 pp in all): each rise is below min_delta, but they add up to it
    every few points, and each time the patience restarts. A rule that moved its best on every small rise
    without restarting the patience would stop mid-climb."""
    p = Plateau(patience=1, min_delta=0.001, granularity=0.0)
    stopped_at = None
    for i in range(200):
        step = 5 * (i + 1)
        p.update(0.5 + 0.0005 * i, step)
        if p.reached(step, 20):
            stopped_at = step
            break
    assert stopped_at is None, f"a steady climb was stopped at step {stopped_at}"
    assert p.best >= 0.5 + 0.0005 * 190


@pytest.mark.parametrize("n_val", [1000, 997, 3333])
@pytest.mark.parametrize("k", [850, 857, 899, 903])
def test_a_one_node_rise_counts_whatever_the_rounding(n_val, k):
    """min_delta equal to one validation node: a rise of exactly one node qualifies whatever float32 rounding
    the two accuracies carry, and no change never does."""
    import numpy as np

    k = min(k, n_val - 1)
    before, after = float(np.float32(k / n_val)), float(np.float32((k + 1) / n_val))
    p = Plateau(patience=1, min_delta=1 / n_val, granularity=1 / n_val)
    p.update(before, 10)
    assert not p.update(before, 20), "no rise must not qualify"
    assert p.update(after, 30), f"a one-node rise {before} -> {after} must qualify"
    # min_delta below the granularity is raised to it: a rise smaller than one node cannot exist, and one node
    # is the smallest that qualifies
    q = Plateau(patience=1, min_delta=1e-6, granularity=1 / n_val)
    assert q.threshold == pytest.approx(1 / n_val)
    q.update(before, 10)
    assert q.update(after, 20)


def test_the_node_task_reports_one_validation_node_as_its_granularity(quick_graph):
    from gnnbench.models.tasks import NodeClassification

    task = NodeClassification(quick_graph, "cpu")
    assert task.val_granularity == pytest.approx(1 / int(quick_graph.val_mask.sum()))


def test_eval_interval_gives_four_points_per_epoch():
    assert eval_interval(None) is None and eval_interval(2) == 1 and eval_interval(20) == 5 and eval_interval(21) == 6


def test_run_config_checks_the_stopping_fields():
    for bad, match in (
        ({"epochs": 0}, "epochs must be None"),
        ({"max_seconds": -1.0}, "max_seconds"),
        ({"patience": 0}, "patience"),
        ({"min_delta": 1.5}, "min_delta"),
        ({"max_epochs": 0}, "max_epochs"),
    ):
        with pytest.raises(ValueError, match=match):
            dataclasses.replace(QUICK, **bad)
    assert dataclasses.replace(QUICK, epochs=None).to_plateau and not QUICK.to_plateau


def test_a_run_to_a_plateau_stops_on_it_and_records_why():
    cfg = dataclasses.replace(QUICK, epochs=None, max_steps_per_epoch=None, max_epochs=60, patience=3)
    t = Trainer(cfg)
    try:
        steps = list(t.steps(evaluate=True))
    finally:
        t.close()
    assert t.stop_reason in ("plateau", "max_epochs")
    if t.stop_reason == "plateau":  # replayed: the last qualifying rise is at least the patience back
        replay = Plateau(cfg.patience, cfg.min_delta, granularity=t.pipeline.task.val_granularity)
        for point in t.curve:
            replay.update(point.val, point.step)
        per_epoch = t.pipeline.batches.steps_per_epoch()
        assert t.steps_taken - replay.best_step >= max(MIN_PATIENCE_STEPS, 3 * per_epoch)
    # validation points: at the plateau cadence, the last one at the last step
    assert len(t.curve) >= 10 and t.curve[-1].step == len(steps) == t.steps_taken
    with pytest.raises(ValueError, match="needs evaluate=True"):
        next(Trainer(cfg).steps(evaluate=False))


def test_a_step_budget_stops_a_run_to_a_plateau_and_says_it_did_not_converge():
    cfg = dataclasses.replace(QUICK, epochs=None, max_steps_per_epoch=None, max_epochs=60, max_steps=9, min_steps=9)
    t = Trainer(cfg)
    try:
        list(t.steps(evaluate=True))
    finally:
        t.close()
    assert t.stop_reason == "max_steps" and t.steps_taken == 9
    assert t.curve[-1].step == 9, "the run ends on a validation point"


def test_the_censoring_budget_stops_nothing():
    cfg = dataclasses.replace(QUICK, epochs=3, max_steps_per_epoch=None, censor_seconds=0.01)
    t = Trainer(cfg)
    try:
        list(t.steps(evaluate=True))
    finally:
        t.close()
    assert t.stop_reason == "epochs" and len(t.epoch_seconds) == 3


def test_a_time_budget_stops_any_run_at_the_first_step_past_it():
    cfg = dataclasses.replace(QUICK, epochs=50, max_steps_per_epoch=None, max_seconds=0.3)
    t = Trainer(cfg)
    try:
        list(t.steps(evaluate=True))
    finally:
        t.close()
    assert t.stop_reason == "max_seconds" and len(t.epoch_seconds) < 50
    assert t.pipeline.setup_clock + t.train_seconds >= 0.3
    assert t.curve and t.curve[-1].step == t.steps_taken, "the run ends on a validation point"


# ------------------------------------------------------------------ calibration
def _run(seed, vals, every=2, seconds_per_step=0.5):
    curve = [
        {"step": every * (i + 1), "epoch": i, "seconds": seconds_per_step * every * (i + 1), "val": v, "test": v - 0.01}
        for i, v in enumerate(vals)
    ]
    return result_of({"label": CALIBRATION, "round": seed, "config": {"seed": seed}, "curve": curve})


def test_calibration_fixes_target_cadence_and_budget_from_its_own_runs():
    runs = [
        _run(10_000, [0.5, 0.7, 0.85, 0.90, 0.89, 0.90, 0.88]),
        _run(10_001, [0.4, 0.6, 0.80, 0.86, 0.88, 0.87, 0.86]),
        _run(10_002, [0.6, 0.8, 0.88, 0.91, 0.90, 0.92, 0.90, 0.91]),
    ]
    assert plateau_level(runs[0].curve) == pytest.approx(0.895)  # median from the best point on
    cal = calibrate(runs, margin=0.01, budget_factor=3.0)
    plateaus = sorted(cal.plateaus)
    assert cal.target == pytest.approx(plateaus[1] - 0.01) and cal.seeds == [10_000, 10_001, 10_002]
    assert "minus 1 pp" in cal.source and "10000" in cal.source
    first = [s for s in cal.steps_to_target if s is not None]
    assert cal.eval_every == max(1, int(min(first)) // MIN_POINTS_BEFORE_TARGET)
    ends = [s if s is not None else censor_at(r) for s, r in zip(cal.seconds_to_target, runs)]
    assert cal.budget_seconds == pytest.approx(3.0 * max(ends))
    # the time budget censors, it stops nothing: accuracy runs go on within a step budget, never stopping
    # before twice the slowest calibration run's steps to the target
    applied = cal.apply(QUICK)
    assert applied.censor_seconds == cal.budget_seconds and applied.max_seconds is None
    assert applied.eval_every == cal.eval_every
    assert cal.steps_to_plateau == [14, 14, 16] and cal.min_steps == 2 * max(first)
    assert applied.max_steps == cal.step_budget == max(4 * 16, 2 * cal.min_steps)
    assert applied.min_steps == cal.min_steps
    kept = cal.apply(dataclasses.replace(QUICK, eval_every=7, censor_seconds=99.0, max_steps=500))
    assert (kept.eval_every, kept.censor_seconds, kept.max_steps) == (7, 99.0, 500), (
        "the user's own cadence and budgets win"
    )
    given = calibrate(runs, target_acc=0.95)
    assert given.target == 0.95 and given.source.startswith("given") and given.steps_to_target == [None] * 3
    with pytest.raises(ValueError, match="margin"):
        calibrate(runs, margin=1.5)
    with pytest.raises(ValueError, match="budget factor"):
        calibrate(runs, budget_factor=0.5)


def test_calibration_reads_plateau_and_crossing_on_the_runs_smoothing():
    vals = [[0.5, 0.7, 0.85, 0.90, 0.89, 0.90, 0.88], [0.4, 0.6, 0.80, 0.86, 0.88, 0.87, 0.86]]
    runs = [_run(10_000 + i, v) for i, v in enumerate(vals)]
    for r in runs:
        r.config["smoothing"] = 3
    cal = calibrate(runs, margin=0.01)
    smoothed = [plateau_level(smoothed_curve(r.curve, 3)) for r in runs]
    assert cal.plateaus == pytest.approx(smoothed) and cal.plateaus != pytest.approx(
        [plateau_level(r.curve) for r in runs]
    )
    assert cal.target == pytest.approx(statistics.median(smoothed) - 0.01)
    assert cal.steps_to_target == [time_to(r, cal.target, "step") for r in runs] and cal.steps_to_target[0] == 10
    assert [time_to(r, cal.target, "step") for r in runs] == [
        next((p.step for p in smoothed_curve(r.curve, 3) if p.val >= cal.target - 1e-12), None) for r in runs
    ]
    assert "read on the mean of the last 3 validation points" in cal.source
    assert "mean of the last" not in calibrate([_run(10_000, vals[0])]).source, "each point alone: not said"


def test_compare_reads_the_calibrated_target_not_the_measured_baselines():
    def result(label, rnd, vals):
        r = _run(rnd, vals).to_dict()
        r.update(
            label=label,
            round=rnd,
            optimizations=[],
            step_seconds_all=[0.1] * 4,
            step_seconds={"median": 0.1},
            epoch_seconds=[1.0],
            setup_seconds=0.1,
            accuracy={"test": vals[-1] - 0.01},
            phases={"sample": {"median": 0.05}},
            transfer={"bytes_h2d_per_batch": 0},
            graph={},
            config={"seed": rnd, "epochs": None},
        )
        return result_of(r)

    measured = [result("baseline", r, [0.6, 0.80, 0.82]) for r in range(3)]
    calibration = [result(CALIBRATION, 10_000 + i, [0.6, 0.85, 0.90, 0.90]) for i in range(3)]
    c = compare(measured + calibration)
    assert c.target == pytest.approx(0.89) and c.target_source.startswith("calibrated")
    assert c.calibration["seeds"] == [10_000, 10_001, 10_002]
    base = c.rows[0]
    assert base.label == "baseline" and base.tta_reached == "0/3", (
        "a target fixed in advance: the baseline is not guaranteed to reach it"
    )
    assert [r.label for r in c.rows] == ["baseline"], "calibration runs are not rows"


def test_a_sweep_calibrates_on_its_own_seeds_and_the_aa_row_has_its_own_stream(tmp_path):
    base = dataclasses.replace(QUICK, epochs=3)
    cal, runs = run_calibration(base, tmp_path, SweepOptions(calibration_runs=2, isolate=False))
    assert [r.config["seed"] for r in runs] == [base.seed + CALIBRATION_SEED_OFFSET + i for i in range(2)]
    assert cal is not None and cal.target is not None and cal.budget_seconds > 0
    assert sorted(p.name.split("-r")[0] for p in tmp_path.glob("calibration-r*.json")) == [CALIBRATION] * 2
    entries = sweep_entries(cal.apply(base), [], repeats=2, include_all_recommended=False, aa=True)
    seeds = {(e.label, e.round): e.config.seed for e in entries}
    assert seeds[("baseline", 1)] == base.seed + 1 and seeds[(AA_LABEL, 1)] == base.seed + AA_SEED_OFFSET + 1
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=False), calibration=cal)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["calibration"]["target"] == cal.target
    c = compare(list(runs) + list(results))
    assert c.target == pytest.approx(cal.target) and c.aa is not None
    assert all(
        r.config["censor_seconds"] == cal.budget_seconds
        and r.config["max_seconds"] is None
        and r.config["max_steps"] == cal.step_budget
        for r in results
    )
    again, _ = run_calibration(base, tmp_path, SweepOptions(calibration_runs=2, isolate=False))
    assert again == cal, "a resumed sweep reuses its calibration runs"
    assert run_calibration(base, tmp_path, SweepOptions(calibration_runs=0)) == (None, [])
    with pytest.raises(ValueError, match="calibration_runs must be an integer >= 0"):
        run_calibration(base, tmp_path, SweepOptions(calibration_runs=-1))


def test_min_delta_is_rounded_up_to_whole_validation_nodes():
    """1,500 validation nodes and min_delta 0.1 pp: one node (0.067 pp) is below min_delta and must not
    qualify; two nodes (0.133 pp) do."""
    g = 1 / 1500
    p = Plateau(patience=1, min_delta=0.001, granularity=g)
    assert p.threshold == pytest.approx(2 * g)
    p.update(900 * g, 10)
    assert not p.update(901 * g, 20) and p.update(902 * g, 30)


def test_a_trained_run_stops_where_its_smoothed_curve_first_reaches_the_target():
    """End to end on one trajectory: a run of fixed length gives the curve; the same run with ``stop_at`` stops at
    the first point whose trailing mean of ``smoothing`` points reaches the target (later than each point
    alone), and the readers read its crossing on the same mean."""
    from gnnbench.measure.compare import steps_to
    from gnnbench.measure.run.single import run

    free = dataclasses.replace(QUICK, epochs=4, max_steps_per_epoch=None, eval_every=3)
    curve = run(free).curve
    smooth = smoothed_curve(curve, 3)
    # a target the mean reaches some points after a single point first does
    target = max(p.val for p in smooth[: len(smooth) // 2])
    first_raw = next(i for i, p in enumerate(curve) if p.val >= target - 1e-12)
    first_smooth = next(i for i, p in enumerate(smooth) if p.val >= target - 1e-12)
    assert first_raw < first_smooth, [round(p.val, 4) for p in curve]
    stopped = run(dataclasses.replace(free, stop_at=target, smoothing=3))
    assert stopped.stop_reason == "target" and len(stopped.curve) == first_smooth + 1
    assert [p.val for p in stopped.curve] == [p.val for p in curve[: first_smooth + 1]], "the same trajectory"
    assert steps_to(stopped, target) == pytest.approx(steps_to(dataclasses.replace(stopped, curve=curve), target))
    alone = run(dataclasses.replace(free, stop_at=target))
    assert alone.stop_reason == "target" and len(alone.curve) == first_raw + 1
