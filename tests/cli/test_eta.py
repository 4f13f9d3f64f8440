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


def test_a_sweep_keeps_its_own_timed_log_that_sweep_time_reads(tmp_path, capsys):
    """``compare`` appends its progress lines to the sweep folder's ``compare.log`` (every finished run, even
    where a terminal shows the bar), opening with a stamped start, so where the wall time went can be read back."""
    from types import SimpleNamespace

    from gnnbench.cli.progress import SweepLines
    from gnnbench.report.sweep_time import logged_runs

    log = tmp_path / "sweep" / "compare.log"
    lines = SweepLines(log=log)
    lines.calibration_started(1)
    lines.calibration_run(1, 1, None, "ok")
    entries = [SimpleNamespace(label="baseline", round=0), SimpleNamespace(label="int32", round=0)]
    lines.sweep_started(entries, [])
    for i, e in enumerate(entries, 1):
        lines.sweep_run(i, 2, e, "running")
        lines.sweep_run(i, 2, e, "ok")
    lines.sweep_ended()
    text = log.read_text()
    assert text.splitlines()[0].endswith("calibration: the baseline on 1 seed(s) of its own, to a plateau")
    runs, invocations = logged_runs(text)
    assert invocations == 1 and [(r.label, r.status) for r in runs] == [
        ("calibration", "ok"),
        ("baseline", "ok"),
        ("int32", "ok"),
    ]
    assert all(r.seconds is not None for r in runs)  # the stamped start times the first run too
    SweepLines(log=log).calibration_started(1)  # a resumed sweep appends
    assert log.read_text().startswith(text) and logged_runs(log.read_text())[1] == 2


def test_a_resumed_sweep_estimates_from_its_kept_runs_durations_not_the_first_guess():
    """A run kept from an earlier invocation brings its stored duration: the estimate of a resumed sweep is its
    own runs' (here 10 s a run), not the calibration's first guess (100 s), and a kept run without one adds none."""
    eta = Eta(["a", "a", "b", "b"], seed_seconds=100.0)
    eta.update("a", "kept", 10.0)
    eta.update("b", "kept", None)
    assert eta.seconds_left() == 20.0  # one a and one b left, each at the mean of what is known (10 s)
    eta.update("a", "kept", 30.0)
    assert eta.seconds_left() == 20.0  # one b left, at the mean of every known run: 20 s


def test_a_resumed_calibration_estimates_from_its_kept_runs(capsys):
    from gnnbench.cli.progress import SweepLines

    lines = SweepLines()
    lines.calibration_started(3)
    lines.calibration_run(1, 3, None, "kept", seconds=60.0)
    assert "calibration left about 2.0 min" in capsys.readouterr().err  # two left at the kept run's 60 s
