"""The time a sweep has left (gnnbench.cli.eta): per label from its finished runs, settled runs drop out."""

import time

from gnnbench.cli.eta import Eta, duration


def test_the_estimate_uses_each_labels_own_runs_and_a_first_guess_before_any():
    eta = Eta(["baseline", "baseline", "int32", "int32"], seed_seconds=50.0)
    assert eta.seconds_left() == 200.0 and "4 runs left" in eta.text()
    eta.update("baseline", "running")
    time.sleep(0.05)
    eta.update("baseline", "ok")
    left = eta.seconds_left()  # one baseline (its own mean) + two int32 (the mean of every finished run)
    assert 0.1 <= left <= 0.5
    eta.update("int32", "settled")  # a settled row's round drops out, and is not a duration
    assert eta.seconds_left() < left and "2 runs left" in eta.text()
    assert Eta(["a"]).text() == "1 runs left, time not estimated yet"


def test_durations_read_as_a_person_reads_them():
    assert (duration(45), duration(750), duration(4000)) == ("45 s", "12.5 min", "1 h 06 min")
