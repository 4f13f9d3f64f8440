"""Verdicts only from what was measured to its end: accuracy at convergence only
from runs that converged, else at equal steps, said so; a round that reaches the target after its budget is
censored; ranking reads the family-wise verdict in both directions."""

from dataclasses import replace

import pytest

from gnnbench.measure.compare import ComparisonRow, compare, equal_steps_test, rank_key, time_to
from gnnbench.measure.run import RunResult
from tests.helpers import result_of

TARGET = 0.85


def _result(
    label: str,
    rnd: int,
    vals: list[float],
    *,
    tests: list[float] | None = None,
    every: int = 10,
    step: float = 0.1,
    stop: str = "plateau",
    censor: float | None = None,
    max_steps: int | None = None,
    setup: float = 0.5,
) -> RunResult:
    tests = tests if tests is not None else [v - 0.01 for v in vals]
    curve = [
        {"step": every * (i + 1), "epoch": i, "seconds": setup + step * every * (i + 1), "val": v, "test": t}
        for i, (v, t) in enumerate(zip(vals, tests))
    ]
    return result_of(
        {
            "label": label,
            "round": rnd,
            "optimizations": [],
            "status": "ok",
            "step_seconds_all": [step] * 4,
            "step_seconds": {"median": step},
            "epoch_seconds": [step * every],
            "setup_seconds": setup,
            "accuracy": {"test": tests[-1]},
            "phases": {"sample": {"median": step / 2}},
            "transfer": {"bytes_h2d_per_batch": 0},
            "graph": {},
            "curve": curve,
            "stop_reason": stop,
            "config": {"seed": rnd, "epochs": None, "censor_seconds": censor, "max_steps": max_steps},
        }
    )


def test_a_round_that_reaches_the_target_after_its_budget_is_censored():
    run = _result("x", 0, [0.5, 0.7, 0.8, 0.86], step=0.31, censor=12.03)  # reaches at 0.5 + 12.4 = 12.9 s
    assert time_to(run, TARGET) is None, "reached after the budget: censored, not reached"
    run.config["censor_seconds"] = 13.0
    assert time_to(run, TARGET) == pytest.approx(0.5 + 0.31 * 40)


def test_a_row_cut_by_its_step_budget_is_compared_at_equal_steps_never_at_convergence():
    """The slow row climbs like the baseline but stops at its step budget (30 steps) before its plateau; read
    at convergence it would 'cost' 5 pp (its last point against the baseline's plateau); at equal steps it
    costs nothing."""
    base_vals = [0.70, 0.80, 0.85, 0.90, 0.90, 0.90]
    runs = []
    for k in range(3):
        runs.append(_result("baseline", k, base_vals, max_steps=30))
        runs.append(_result("slow", k, base_vals[:3], step=0.5, stop="max_steps", max_steps=30))
    c = compare(runs, target_acc=TARGET)
    row = next(r for r in c.rows if r.label == "slow")
    assert not row.converged
    assert "not converged within 30 steps (3 of 3 rounds)" in row.acc_point
    assert "at equal steps" in row.acc_point and "at convergence" not in row.acc_point
    assert row.acc_delta == pytest.approx(0.0, abs=1e-12)
    assert row.stop_reasons == {"max_steps": 3}
    # the same runs read at convergence would have shown a loss: the equal-steps reading is what changed it
    b, m = runs[0], runs[1]
    assert equal_steps_test(b, m) == (pytest.approx(0.84), pytest.approx(0.84), 30)


def test_rows_that_converged_are_read_at_convergence():
    runs = [
        r
        for k in range(3)
        for r in (_result("baseline", k, [0.7, 0.86, 0.9, 0.9]), _result("same", k, [0.7, 0.86, 0.88, 0.88]))
    ]
    row = next(r for r in compare(runs, target_acc=TARGET).rows if r.label == "same")
    assert row.converged and row.acc_point.startswith("at convergence")
    assert row.acc_delta == pytest.approx(-0.02)


def test_a_slowdown_ranks_as_one_only_when_family_wise_significant():
    slower = ComparisonRow(
        label="slower",
        significant=False,
        significant_per_row=True,
        speedup_low=0.80,
        speedup_high=0.95,
        speedup=0.87,
        censored=False,
    )
    unclear = ComparisonRow(
        label="unclear", significant=False, speedup_low=0.7, speedup_high=1.2, speedup=0.9, censored=False
    )
    assert rank_key(slower)[2] == rank_key(unclear)[2] == 1, (
        "a per-row interval below 1 that Holm does not keep ranks with the rows not resolved"
    )
    assert rank_key(replace(slower, significant=True))[2] == 2
    assert rank_key(replace(slower, significant=True, speedup_low=1.1, speedup_high=1.3))[2] == 0
