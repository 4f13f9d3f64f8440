"""gnnbench.measure.compare.factors through compare(): time to accuracy as steps to the target x time per step, and
convergence judged against the equivalence margin the sweep declared."""

import math

import pytest

from gnnbench.measure.compare import EPOCHS, JUDGED_MEASURED, JUDGED_PER_STEP, STEPS, compare
from tests.helpers import result_of

NOISE = (1.0, 1.02, 0.98, 1.01, 0.99)
BASE_CROSS = (54.0, 60.0, 72.0, 57.0, 66.0)  # the baseline's steps to the target per round (its seed)


def _run(label, rnd, per_step, cross, optimizations=(), setup=0.5, spe=20, total=200, every=6):
    """A run that learns linearly to ``cross`` steps at 0.8 (target 0.8), evaluated every ``every`` steps."""
    curve = [
        {"step": s, "seconds": setup + per_step * s, "epoch": s // spe, "val": 0.8 * s / cross, "test": 0.8}
        for s in range(every, total + 1, every)
    ]
    for p in curve:
        p["val"] = min(p["val"], 0.95)
    return result_of(
        {
            "label": label,
            "round": rnd,
            "optimizations": list(optimizations),
            "status": "ok",
            "config": {"epochs": 10},
            "step_seconds_all": [per_step] * 5,
            "step_seconds": {"median": per_step},
            "epoch_seconds": [per_step * spe] * (total // spe),
            "steps_per_epoch": spe,
            "steps": {"total": total},
            "setup_seconds": setup,
            "accuracy": {"test": 0.8},
            "curve": curve,
            "phases": {"sample": {"median": per_step / 2}},
            "transfer": {"bytes_h2d_per_batch": 0},
            "graph": {},
        }
    )


def _sweep():
    runs = []
    for r, (n, c) in enumerate(zip(NOISE, BASE_CROSS)):
        runs.append(_run("baseline", r, 0.25 * n, c))
        runs.append(_run("full_amp", r, 0.20 * n * (1.01 if r % 2 else 0.99), c, ["full_amp"]))  # same trajectory
        other = BASE_CROSS[(r + 2) % 5]  # its own trajectory: crosses where another seed's baseline does
        runs.append(_run("fast_dropout", r, 0.20 * n, other, ["fast_dropout"]))
        runs.append(_run("full_batch", r, 2.0 * n, 2 * c / 20, ["full_batch"], spe=1, total=20, every=1))
    return runs


def test_factors_multiply_to_the_time_to_accuracy():
    c = compare(_sweep(), target_acc=0.8)
    rows = {r.label: r for r in c.rows}
    fa = rows["full_amp"]
    f = fa.factors
    assert f.unit == STEPS and f.judged_by == JUDGED_MEASURED, "no margin declared: measured, as before"
    assert f.steps.ratio == pytest.approx(1.0) and f.per_step.ratio == pytest.approx(1.25, rel=0.02)
    assert f.steps_to_target == pytest.approx(60.0) and f.base_steps_to_target == pytest.approx(60.0)
    for rnd, lr in enumerate(fa.tta_speedup.log_ratios):  # setup + steps x per step is the time, round by round
        n, cross = NOISE[rnd], BASE_CROSS[rnd]
        mine = 0.5 + cross * 0.20 * n * (1.01 if rnd % 2 else 0.99)
        assert lr == pytest.approx(math.log((0.5 + cross * 0.25 * n) / mine))
    fb = rows["full_batch"].factors
    assert fb.unit == EPOCHS and fb.steps.ratio == pytest.approx(1.0 / 2.0), "twice the epochs"
    assert fb.per_step.ratio == pytest.approx(5.0 / 2.0), "an epoch of 20 x 0.25 s against one 2 s step"
    assert rows["fast_dropout"].factors.steps.log_ratios[0] == pytest.approx(math.log(54 / 72))


def test_steps_shown_equivalent_are_judged_by_time_per_step_x_the_baseline_steps():
    plain = {r.label: r for r in compare(_sweep(), target_acc=0.8).rows}
    c = compare(_sweep(), target_acc=0.8, equivalence_margin=0.10)
    rows = {r.label: r for r in c.rows}
    fa = rows["full_amp"]
    assert fa.factors.judged_by == JUDGED_PER_STEP and fa.factors.equivalence["equivalent"]
    assert fa.measured_tta_speedup.ratio == pytest.approx(plain["full_amp"].tta_speedup.ratio)
    assert "judged by time per step" in fa.tta_note and fa.primary == "time to accuracy"
    assert fa.speedup == pytest.approx(fa.tta_speedup.ratio) and fa.significant
    fd = rows["fast_dropout"]  # a trajectory of its own: steps not shown equivalent, judged as measured
    assert fd.factors.judged_by == JUDGED_MEASURED and not fd.factors.equivalence["equivalent"]
    assert fd.measured_tta_speedup is None and fd.tta_speedup.ratio == pytest.approx(plain["fast_dropout"].speedup)
    fb = rows["full_batch"]  # changes the work per step: never judged per step
    assert fb.factors.judged_by == JUDGED_MEASURED and fb.factors.equivalence is None
    again = type(fa).from_dict(fa.to_dict())
    assert again.factors == fa.factors and again.measured_tta_speedup == fa.measured_tta_speedup


PROCESS = (1.0, 1.3, 0.8, 1.2, 0.9)  # a process's speed, round by round: what a pair cancels


def _paired(run, base_step, other_step, setup=(0.5, 0.5)):
    from gnnbench.measure.run import PairTiming

    pair = PairTiming((base_step,) * 8, (other_step,) * 8, "ABBABAAB" * 2, setup_seconds=setup)
    data = run.to_dict()
    data["interleaved"] = pair.to_dict()
    return result_of(data)


def _noisy_sweep(miss_round=None):
    """Runs whose own clocks carry each process's speed (PROCESS), and, for the two numerics rows, pairs timed in
    one process that do not: ``fast_dropout`` steps 1.25x faster in every pair, on a trajectory of its own."""
    runs = []
    for r, (n, c) in enumerate(zip(PROCESS, BASE_CROSS)):
        runs.append(_run("baseline", r, 0.25 * n, c))
        amp = _run("full_amp", r, 0.20 * PROCESS[(r + 1) % 5], c, ["full_amp"])
        runs.append(_paired(amp, 0.25, 0.20))
        other = 10_000 if r == miss_round else BASE_CROSS[(r + 2) % 5]  # 10000: never reaches the target
        fd = _run("fast_dropout", r, 0.20 * PROCESS[(r + 3) % 5], other, ["fast_dropout"])
        runs.append(_paired(fd, 0.25, 0.20))
    return runs


def test_a_row_of_its_own_trajectory_with_pairs_is_judged_by_its_own_steps_x_its_paired_step():
    from gnnbench.measure.compare import JUDGED_FACTORS

    c = compare(_noisy_sweep(), target_acc=0.8, equivalence_margin=0.10)
    fd = {r.label: r for r in c.rows}["fast_dropout"]
    assert fd.factors.judged_by == JUDGED_FACTORS and not fd.factors.equivalence["equivalent"]
    for rnd, lr in enumerate(fd.tta_speedup.log_ratios):  # each side's own steps x its paired step, per round
        mine, base = BASE_CROSS[(rnd + 2) % 5], BASE_CROSS[rnd]
        assert lr == pytest.approx(math.log((0.5 + base * 0.25) / (0.5 + mine * 0.20)))
    assert fd.factors.per_step.ratio == pytest.approx(1.25) and fd.factors.per_step.log_ratios == pytest.approx(
        [math.log(1.25)] * 5
    ), "time per step from the pairs, not from the runs' own clocks"
    measured = fd.measured_tta_speedup  # the runs' own clocks, each process's speed in them, kept beside it
    assert measured is not None and measured.log_ratios != pytest.approx(fd.tta_speedup.log_ratios)
    assert "judged by its steps to the target x its time per step" in fd.tta_note
    assert fd.primary == "time to accuracy" and fd.speedup == pytest.approx(fd.tta_speedup.ratio)
    # steps shown equivalent still take the baseline's steps
    assert {r.label: r for r in c.rows}["full_amp"].factors.judged_by == JUDGED_PER_STEP
    again = type(fd).from_dict(fd.to_dict())
    assert again.factors == fd.factors and again.tta_speedup == fd.tta_speedup


def test_a_round_that_missed_the_target_keeps_the_measured_bound():
    c = compare(_noisy_sweep(miss_round=2), target_acc=0.8, equivalence_margin=0.10)
    fd = {r.label: r for r in c.rows}["fast_dropout"]
    assert fd.factors.judged_by == JUDGED_MEASURED and fd.measured_tta_speedup is None
    assert fd.tta_speedup.bound is not None and fd.censored
