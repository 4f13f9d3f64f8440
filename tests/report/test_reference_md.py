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
