"""Rounds on several machines: submitit jobs, one round each, through its local executor
(Slurm's jobs are the same jobs); the results are one sweep, and the stopping rule reads them round by round."""

import dataclasses
import json

import pytest

from gnnbench.measure.compare import compare
from gnnbench.measure.sweep import MANIFEST, SweepOptions, run_sweep, sweep_entries
from tests.helpers import QUICK

submitit = pytest.importorskip("submitit")

from gnnbench.measure.sweep import RoundExecutor  # noqa: E402


@pytest.mark.slow
def test_rounds_run_as_jobs_are_one_sweep_and_equal_to_rounds_run_here(tmp_path):
    base = dataclasses.replace(QUICK, epochs=1)
    entries = sweep_entries(base, ["int32"], repeats=2, include_all_recommended=False)
    executor = RoundExecutor("local", tmp_path / "jobs", machines=2, timeout_min=10)
    jobs = run_sweep(entries, tmp_path / "jobs-sweep", SweepOptions(isolate=False, executor=executor))
    here = run_sweep(entries, tmp_path / "here", SweepOptions(isolate=False))
    key = lambda r: (r.label, r.round)  # noqa: E731
    assert sorted(map(key, jobs)) == sorted(map(key, here)) and jobs.measured == len(entries)
    for a, b in zip(sorted(jobs, key=key), sorted(here, key=key)):  # the same training, wherever it ran
        assert a.status == b.status == "ok" and a.curve[-1].val == b.curve[-1].val
        assert a.environment["hardware_class"] == b.environment["hardware_class"]
    assert compare(list(jobs)).rows[0].label == "baseline"
    manifest = json.loads((tmp_path / "jobs-sweep" / MANIFEST).read_text())
    assert manifest["executor"]["kind"] == "local" and manifest["executor"]["machines"] == 2


@pytest.mark.slow
def test_a_round_measured_beside_the_one_that_settled_its_row_is_discarded(tmp_path):
    base = dataclasses.replace(QUICK, epochs=1)
    entries = sweep_entries(base, ["int32"], repeats=3, include_all_recommended=False)
    executor = RoundExecutor("local", tmp_path / "jobs", machines=2, timeout_min=10)
    results = run_sweep(
        entries,
        tmp_path / "s",
        SweepOptions(isolate=False, executor=executor),
        after_round=lambda done: ({"int32"}, False),
    )  # int32 settles after round 1
    rounds = sorted(r.round for r in results if r.label == "int32")
    assert rounds == [0], "round 2 ran beside round 1 on another machine, but int32 had settled: discarded"
    assert results.discarded == 1 and results.skipped == 1
    assert sorted(r.round for r in results if r.label == "baseline") == [0, 1, 2]


def test_bad_executor_settings_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="unknown executor 'pbs'"):
        RoundExecutor("pbs", tmp_path)
    with pytest.raises(ValueError, match="machines must be an integer >= 1 \\(got 0\\)"):
        RoundExecutor("local", tmp_path, machines=0)
