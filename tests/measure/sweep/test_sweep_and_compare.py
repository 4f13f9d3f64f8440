"""``sweep_and_compare``: the calibrate -> sweep -> compare sequence in one call, reporting through its progress
object and recording what it was asked to (a tiny sweep in this process)."""

import dataclasses
import json

import pytest

from gnnbench import registry
from gnnbench.measure.sweep import MANIFEST, Entry, SweepOptions, SweepProgress, run_calibration, sweep_and_compare
from tests.helpers import QUICK


class _Events(SweepProgress):
    def __init__(self):
        self.seen = []

    def calibration_started(self, runs):
        self.seen.append(("calibration", runs))

    def calibrated(self, calibration):
        self.seen.append(("calibrated", calibration is not None))

    def sweep_started(self, entries, calibration_runs):
        self.seen.append(("sweep", len(entries), len(calibration_runs)))

    def sweep_run(self, done, total, entry, status):
        if status != "running":
            self.seen.append(("run", entry.label, status))

    def sweep_ended(self):
        self.seen.append(("ended",))


def test_one_call_calibrates_sweeps_compares_and_records_the_outcome(tmp_path):
    events = _Events()
    m = sweep_and_compare(
        QUICK,
        ["int32"],
        tmp_path,
        SweepOptions(repeats=2, calibration_runs=1, include_all_recommended=False, isolate=False, record_outcome=True),
        progress=events,
    )
    assert events.seen[:3] == [("calibration", 1), ("calibrated", True), ("sweep", 4, 1)]
    assert events.seen[-1] == ("ended",) and sum(e[0] == "run" for e in events.seen) == 4
    assert {r.label for r in m.comparison.rows} >= {"baseline", "int32"}
    assert len(m.results) == 4 and len(m.calibration_runs) == 1 and m.base == m.calibration.apply(QUICK)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["calibration"]["seeds"] == m.calibration.seeds
    assert manifest["outcome"]["target_source"] == m.comparison.target_source
    # the equivalence margin is declared before the rounds, and the comparison is judged under it
    assert manifest["equivalence"]["margin"] == 0.10 and "TOST" in manifest["equivalence"]["method"]
    assert m.comparison.equivalence_margin == 0.10
    from gnnbench.report.inputs import sweep_equivalence_margin

    assert sweep_equivalence_margin(tmp_path) == 0.10


def test_a_calibration_made_elsewhere_runs_no_calibration_and_judges_the_rows(tmp_path):
    cal, _ = run_calibration(QUICK, tmp_path / "calibration", SweepOptions(calibration_runs=1, isolate=False))
    base = cal.apply(QUICK)
    events = _Events()
    m = sweep_and_compare(
        base,
        ["int32"],
        tmp_path / "round",
        SweepOptions(repeats=2, calibration_runs=0, include_all_recommended=False, isolate=False),
        calibration=cal,
        progress=events,
    )
    assert events.seen[0] == ("sweep", 4, 0), "no calibration step"
    assert m.calibration is cal and m.calibration_runs == [] and m.base == base
    assert cal.target is not None and m.comparison.target == cal.target
    manifest = json.loads((tmp_path / "round" / MANIFEST).read_text())
    assert manifest["calibration"] is None and "outcome" not in manifest  # its runs are not in this folder


def test_no_margin_declared_judges_every_row_by_its_measured_time(tmp_path):
    from gnnbench.report.inputs import sweep_equivalence_margin

    m = sweep_and_compare(
        QUICK,
        [],
        tmp_path,
        SweepOptions(
            repeats=2,
            calibration_runs=0,
            include_all_recommended=False,
            isolate=False,
            equivalence_margin=None,
            aa=True,
        ),
    )
    assert json.loads((tmp_path / MANIFEST).read_text())["equivalence"] is None
    assert sweep_equivalence_margin(tmp_path) is None and m.comparison.equivalence_margin is None


def test_extra_entries_run_in_the_same_rounds(tmp_path):
    extra = [
        Entry("csr alone", registry.config_for(dataclasses.replace(QUICK, seed=QUICK.seed + r), ["csr"]), ("csr",), r)
        for r in range(2)
    ]
    m = sweep_and_compare(
        QUICK,
        ["int32"],
        tmp_path,
        SweepOptions(repeats=2, calibration_runs=0, include_all_recommended=False, isolate=False),
        extra_entries=extra,
    )
    assert {r.label for r in m.results} == {"baseline", "int32", "csr alone"}
    assert len(m.entries) == 6


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"repeats": 0}, "repeats must be an integer >= 1"),
        ({"repeats": True}, "repeats must be an integer >= 1"),
        ({"calibration_runs": -1}, "calibration_runs must be an integer >= 0"),
        ({"budget_factor": 0.0}, "budget_factor must be a finite number > 0"),
        ({"budget_factor": float("inf")}, "budget_factor must be a finite number > 0"),
        ({"dist_timeout": -5}, "dist_timeout must be a finite number > 0"),
        ({"equivalence_margin": 0}, "equivalence_margin must be a finite number > 0"),
        ({"target_acc": 1.5}, r"target_acc must be a validation accuracy in \(0, 1\]"),
        ({"accuracy_rounds": -1}, "accuracy_rounds must be an integer >= 0"),
        ({"order_seed": "7"}, "order_seed must be an integer"),
    ],
)
def test_sweep_options_refuse_bad_values_by_name(changes, named):
    with pytest.raises(ValueError, match=named):
        SweepOptions(**changes)
    with pytest.raises(ValueError, match=named):  # a copy is checked like a new one
        dataclasses.replace(SweepOptions(), **changes)


def test_sweep_options_are_frozen_and_hold_also_measured_as_a_tuple():
    options = SweepOptions(also_measured=["int32"], repeats=5, accuracy_rounds=3)
    assert options.also_measured == ("int32",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.repeats = 3
    assert options.fixed_accuracy_rounds(True) == 3 and options.fixed_accuracy_rounds(False) is None
    assert (
        dataclasses.replace(options, accuracy_rounds=5).fixed_accuracy_rounds(True) is None
    )  # every round to the plateau
