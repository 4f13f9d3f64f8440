"""``scripts/trajectory_threads.py``'s comparison of a rerun with its stored run, without running anything."""

from __future__ import annotations

from tests.helpers import load_script

trajectory_threads = load_script("trajectory_threads")


def _run(vals, steps, test, threads=1, step=0.5):
    return {
        "curve": [{"step": 7 * (i + 1), "val": v} for i, v in enumerate(vals)],
        "steps": {"total": steps},
        "accuracy": {"test": test},
        "step_seconds": {"median": step},
        "environment": {"threads": threads},
    }


def test_a_rerun_is_compared_with_its_stored_run_at_the_steps_both_evaluated():
    got = trajectory_threads._compare(_run([0.5, 0.8, 0.81], 21, 0.88), _run([0.5, 0.7995, 0.81, 0.82], 28, 0.87, 2))
    assert (got["steps"], got["stored_steps"], got["evaluations"], got["stored_evaluations"]) == (21, 28, 3, 4)
    assert abs(got["max_val_difference"] - 0.0005) < 1e-12 and got["first_differing_step"] == 14
    assert (got["test"], got["stored_test"], got["step_ms"], got["threads"]) == (0.88, 0.87, 500.0, 1)
    same = trajectory_threads._compare(_run([0.5, 0.8], 14, 0.88), _run([0.5, 0.8], 14, 0.88))
    assert same["max_val_difference"] == 0.0 and same["first_differing_step"] is None
