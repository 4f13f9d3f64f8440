"""The reference block (docs/reference.md, README's headline) is generated from a sweep folder: its wall time from the sweep's log."""

from gnnbench.report.reference_md import sweep_minutes


def test_sweep_minutes_spans_the_stamped_lines_across_midnight(tmp_path):
    log = tmp_path / "compare.log"
    log.write_text(
        "calibration: the baseline on 3 seed(s)\n23:50:00 calibration 1/3: ok\nno stamp here\n"
        "23:59:30 runs 1/9: round 0 baseline: ok\n00:20:00 runs 9/9: round 4 csr: ok\n"
    )
    assert sweep_minutes(log) == 30.0
    log.write_text("23:50:00 only one stamped line\n")
    assert sweep_minutes(log) is None
    assert sweep_minutes(tmp_path / "missing.log") is None


def test_where_the_wall_time_went_leaves_out_the_gaps_between_invocations(tmp_path):
    from gnnbench.report.sweep_time import logged_runs, sweep_time

    log = tmp_path / "compare.log"
    log.write_text(
        "23:50:00 calibration: the baseline on 2 seed(s) of its own, to a plateau\n"  # a stamped start
        "23:52:00 calibration 1/2: ok; calibration left about 2 min\n"
        "23:54:00 calibration 2/2: ok\n"
        "target: validation 0.87 (...)\n"
        "23:55:00 runs 1/6: round 0 baseline: ok; 5 runs left\n"
        "23:55:00 runs 2/6: round 0 pin_memory: unavailable; 4 runs left\n"
        "00:01:00 runs 3/6: round 0 full_batch: ok; 3 runs left\n"  # across midnight
        "\n# resumed by hand, an hour later\n"
        "calibration: the baseline on 2 seed(s) of its own, to a plateau\n"  # an unstamped start (older logs)
        "01:30:00 calibration 1/2: kept\n"
        "01:30:00 calibration 2/2: kept\n"
        "01:30:00 runs 1/6: round 0 baseline: kept; 5 runs left\n"
        "01:31:00 runs 4/6: round 1 int32: ok; 2 runs left\n"
        "01:33:00 runs 5/6: round 1 fast_dropout: ok; 1 runs left\n"
        "01:33:30 best set: int32+fast_dropout, measured against the baseline in rounds of its own\n"
        "01:35:30 runs 1/2: round 0 int32+fast_dropout: ok; 1 runs left\n"
    )
    runs, invocations = logged_runs(log.read_text())
    assert invocations == 2 and [r.seconds for r in runs if r.seconds is None] == [None]  # the unstamped start's
    t = sweep_time(log)
    assert t.invocations == 2 and t.untimed == 1
    assert t.by_kind == {
        "calibration": (2, 240.0),
        "baseline": (1, 60.0),  # the kept baseline ran nothing in the second invocation
        "derived from short runs": (1, 60.0),
        "trained to the target: numerics change": (1, 120.0),
        "trained to the target: work per step changes": (1, 360.0),
        "best set": (1, 150.0),  # choosing the set (after the last sweep run) included
    }
    assert t.seconds == 240 + 60 + 360 + 60 + 120 + 150
    assert t.by_round == {0: 420.0, 1: 180.0}
    assert t.text().startswith("16 minutes of measuring (2 invocations, the gaps between them left out; 1 run untimed")
    assert sweep_time(tmp_path / "missing.log") is None
    # a sweep without calibration prints no start line: its runs counted afresh mark the resumed invocation
    log.write_text(
        "10:00:00 runs 1/3: round 0 baseline: ok\n10:02:00 runs 2/3: round 0 int32: ok\n"
        "12:00:00 runs 1/3: round 0 baseline: kept\n12:00:00 runs 2/3: round 0 int32: kept\n"
        "12:03:00 runs 3/3: round 0 baseline (A/A): ok\n"
    )
    t = sweep_time(log)
    assert (t.invocations, t.untimed, t.seconds) == (2, 2, 300.0)
    assert t.by_kind == {"A/A and end-to-end baselines": (1, 180.0), "derived from short runs": (1, 120.0)}
