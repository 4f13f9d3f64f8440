"""Entries proven to keep the trajectory judged by their time per step, and rounds that stop when decided,
through a real sweep in this process and through compare."""

import dataclasses
import json
import math

import pytest

from gnnbench.measure.compare import (
    DERIVED_LABEL,
    MEASURED_SUFFIX,
    calibrate,
    compare,
    derived_seconds,
    is_derivable,
    short_epochs,
)
from gnnbench.measure.stats import StoppingRule
from gnnbench.measure.sweep import MANIFEST, SweepOptions, run_calibration, run_sweep, sweep_entries
from tests.helpers import QUICK
from tests.measure.compare.test_verdict_budgets import _result


def test_which_entries_are_derived_follows_the_registry():
    assert is_derivable(["int32"]) and is_derivable(["csr", "sparse_agg"])
    assert not is_derivable([]) and not is_derivable(["fanout"]) and not is_derivable(["int32", "fast_dropout"])
    assert short_epochs(20, 3) == 2 and short_epochs(2, 3) == 12 and short_epochs(1, 0) == 20
    with pytest.raises(ValueError, match="steps per epoch"):
        short_epochs(0, 3)


def _calibrated(tmp_path):
    """One calibration run of a quick run to a plateau, in this process: ``(calibration, its runs, the base
    configuration it calibrated)``."""
    base = dataclasses.replace(QUICK, epochs=None, max_steps_per_epoch=None, max_epochs=12, patience=2)
    cal, cal_runs = run_calibration(base, tmp_path, SweepOptions(calibration_runs=1, isolate=False))
    return cal, cal_runs, cal.apply(base)


def test_a_derived_sweep_runs_declared_entries_short_and_derives_their_time_to_accuracy(tmp_path):
    cal, cal_runs, cfg = _calibrated(tmp_path)
    assert cal.steps_per_epoch and cal.median_steps_to_target is not None
    entries = sweep_entries(
        cfg,
        ["int32", "fanout"],
        repeats=2,
        include_all_recommended=False,
        derive_per_epoch=cal.steps_per_epoch,
        also_measured=["int32"],
        target=cal.target,
    )
    # the derived figure's check measures time to accuracy only: it stops at the target in every round
    measured = [e for e in entries if e.label == "int32" + MEASURED_SUFFIX]
    assert len(measured) == 2 and all(e.config.stop_at == cal.target for e in measured)
    assert all(e.config.stop_at is None for e in entries if e.label in ("baseline", "fanout"))
    short = [e for e in entries if e.label == "int32"]
    assert all(
        e.derived
        and e.config.epochs == short_epochs(cal.steps_per_epoch, cfg.warmup_steps)
        and e.config.max_steps is None
        for e in short
    )
    assert not any(e.derived for e in entries if e.label in ("baseline", "fanout", "int32" + MEASURED_SUFFIX))
    with pytest.raises(ValueError, match="also-measure 'fanout'"):
        sweep_entries(
            cfg, ["int32", "fanout"], repeats=1, derive_per_epoch=cal.steps_per_epoch, also_measured=["fanout"]
        )
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=False), calibration=cal)
    c = compare(list(cal_runs) + list(results))  # one sweep: the short runs' lengths are not a second identity
    row = next(r for r in c.rows if r.label == "int32")
    assert row.derived and row.primary == "time to accuracy" and row.tta_reached == "derived"
    assert DERIVED_LABEL in row.tta_note and DERIVED_LABEL in row.acc_point
    # int32 keeps the trajectory bit for bit on this CPU: the same-seed baseline at equal steps agrees exactly
    assert row.acc_delta == 0.0 and row.acc_verdict == "no accuracy cost"
    by = {(r.label, r.round): r for r in results}
    s = cal.median_steps_to_target
    for k in range(2):
        mine = by[("int32", k)]
        assert derived_seconds(mine, s) == pytest.approx(
            mine.setup_seconds + s * sum(mine.epoch_seconds) / mine.steps.total
        )
    assert math.isfinite(row.speedup) and row.rounds == 2
    check = next(ch for ch in c.derived_checks if ch["label"] == "int32")
    m_row = next(r for r in c.rows if r.label == "int32" + MEASURED_SUFFIX)
    assert m_row.status == "ok" and m_row.converged is False and "time to accuracy only" in m_row.acc_point
    assert m_row.stop_reasons.keys() <= {"target", "censored"} and math.isfinite(m_row.acc_delta)
    assert set(check) >= {"derived", "measured", "agrees", "measured_inside"}
    assert next(r for r in c.rows if r.label == "fanout").derived is False
    # the report says which rows are derived, shows the check, and keeps the method below the tables
    from gnnbench.cli import main

    report = tmp_path / "report.html"
    assert main(["report", str(tmp_path), "--asv", str(tmp_path / "no-asv"), "--out", str(report)]) == 0
    html = report.read_text()
    assert DERIVED_LABEL in html and "Derived against measured" in html
    assert html.index("id='method'") > html.index("Derived against measured") > html.index("id='sweep-0'")
    assert "the method, below the tables" in html


def test_a_settled_row_receives_no_further_round_and_the_manifest_says_when(tmp_path):
    base = dataclasses.replace(QUICK, epochs=1)
    entries = sweep_entries(base, ["int32", "fanout"], repeats=3, include_all_recommended=False)
    calls = []

    def after_round(done):
        calls.append(len(done))
        return {"int32"}, False  # int32's verdict settles after the first round

    results = run_sweep(
        entries, tmp_path, SweepOptions(isolate=False), rule=StoppingRule.for_repeats(3), after_round=after_round
    )
    labels = [(r.label, r.round) for r in results]
    assert ("int32", 0) in labels and ("int32", 1) not in labels and ("int32", 2) not in labels
    assert ("fanout", 2) in labels and ("baseline", 2) in labels
    assert results.skipped == 2 and "2 not run" in results.summary()
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["rule"]["max_rounds"] == 3 and manifest["stopped_after_round"]["1"] == ["int32"]
    assert calls == [3, 5], "called after every round but the last, with the results so far"

    def finished(done):
        return set(), True

    fresh = run_sweep(entries, tmp_path / "b", SweepOptions(isolate=False), after_round=finished)
    assert {r.round for r in fresh} == {0}, "a sweep whose every verdict is settled ends"


def test_compare_replays_the_stopping_rule_and_judges_at_its_final_level():
    runs = []
    for k in range(5):
        runs.append(_result("baseline", k, [0.7, 0.86, 0.9], step=0.10 * (1 + 0.01 * ((-1) ** k))))
        runs.append(_result("twice", k, [0.7, 0.86, 0.9], step=0.05 * (1 + 0.01 * ((-1) ** (k // 2)))))
        runs.append(_result("same", k, [0.7, 0.86, 0.9], step=0.10 * (1 + 0.02 * ((-1) ** (k // 2)))))
    # the rows run only the rounds the rule gave them: 'twice' settles at the first look (3 rounds)
    runs = [r for r in runs if not (r.label == "twice" and r.round >= 3)]
    rule = StoppingRule.for_repeats(5)
    c = compare(runs, target_acc=0.85, rule=rule)
    assert c.stops["twice"]["reason"] == "significant" and c.stops["twice"]["look"] == 3
    twice = next(r for r in c.rows if r.label == "twice")
    assert twice.significant and twice.stop.look == 3
    assert c.rule["max_rounds"] == 5 and "every look of the stopping rule" in c.family
    plain = compare(runs, target_acc=0.85)
    assert plain.stops == {} and plain.rule is None
    assert calibrate([], target_acc=0.9).median_steps_to_target is None


def test_a_base_whose_short_run_would_change_the_trajectory_derives_nothing():
    """A cosine schedule's horizon follows the run's length, so a short run would not train as the baseline
    does: nothing is derived, and --also-measure is refused."""
    cosine = dataclasses.replace(QUICK, lr_schedule="cosine")
    entries = sweep_entries(cosine, ["int32"], repeats=1, include_all_recommended=False, derive_per_epoch=7)
    assert not any(e.derived for e in entries)
    with pytest.raises(ValueError, match="also-measure 'int32'"):
        sweep_entries(cosine, ["int32"], repeats=1, derive_per_epoch=7, also_measured=["int32"])


def test_an_also_measure_the_sweep_cannot_derive_is_refused_before_the_calibration(monkeypatch, capsys):
    """--also-measure is checked against the sweep's entries and the registry before anything runs: a
    misspelt or underived name, or --aa without --flags (the A/A check alone), fails at once, naming why."""
    from gnnbench.cli import main
    from gnnbench.measure.sweep import full as sweep_and_compare

    def no_calibration(*args, **kwargs):
        raise AssertionError("the calibration started before --also-measure was checked")

    monkeypatch.setattr(sweep_and_compare, "run_calibration", no_calibration)
    cases = (
        (["--aa", "--also-measure", "sparse_agg"], "A/A check alone"),
        (["--flags", "int32,fanout", "--also-measure", "sparse_agg"], "not an entry of this sweep"),
        (["--flags", "sparse_agg,fanout", "--also-measure", "fanout"], "not declared same_trajectory"),
        (["--flags", "int32", "--lr-schedule", "cosine", "--also-measure", "int32"], "no time to accuracy is derived"),
    )
    for argv, why in cases:
        assert main(["compare", "--preset", "tiny", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert "--also-measure" in err and why in err, (argv, err)


def test_aa_without_flags_says_it_measures_the_pair_only(monkeypatch, capsys, tmp_path):
    """`compare --aa` alone is the A/A check: it says so before it starts, and names how to compare entries."""
    from gnnbench.cli import main
    from gnnbench.measure import sweep

    class Started(Exception):
        pass

    def started(base, names, out_dir, options, **kwargs):
        raise Started(names)

    monkeypatch.setattr(sweep, "sweep_and_compare", started)  # the command takes it from the room
    with pytest.raises(Started) as got:
        main(["compare", "--preset", "tiny", "--aa", "--out-dir", str(tmp_path / "aa")])
    assert got.value.args == ([],)
    err = capsys.readouterr().err
    assert "measures the A/A pair only" in err and "--flags $(gnnbench flags --names)" in err
    with pytest.raises(Started):
        main(["compare", "--preset", "tiny", "--aa", "--flags", "int32", "--out-dir", str(tmp_path / "x")])
    assert "A/A pair only" not in capsys.readouterr().err


def test_an_interleaved_sweep_reads_time_per_step_from_one_process_pairs(tmp_path):
    """With ``interleave``: each round of an entry that keeps the work per step (and can share a process) is timed
    against its round's baseline in one process after its run (in-process here; an isolated sweep's pair has a process of its own), construction order alternating by round; the row
    reads its step ratio and derived time to accuracy from the pairs and says so; the in-process A/A row is
    there, outside Holm's family; an entry that changes the work per step is not paired."""
    from gnnbench.measure.compare import AA_INPROCESS_LABEL, INTERLEAVED_NOTE, in_family
    from gnnbench.measure.run import PairTiming

    cal, cal_runs, cfg = _calibrated(tmp_path)
    entries = sweep_entries(
        cfg,
        ["int32", "fanout"],
        repeats=2,
        aa=True,
        include_all_recommended=False,
        derive_per_epoch=cal.steps_per_epoch,
        target=cal.target,
        interleave=True,
    )
    paired = {e.label: e for e in entries if e.pair_with is not None and e.round == 1}
    assert set(paired) == {"int32", AA_INPROCESS_LABEL}
    assert [e.built_first for e in entries if e.label == "int32"] == ["base", "other"]
    lone = sweep_entries(cfg, ["int32"], repeats=1, include_all_recommended=False, derive_per_epoch=2)
    assert all(e.pair_with is None for e in lone)  # the default: across processes only
    assert lone[1].key() != next(e for e in entries if e.label == "int32" and e.round == 0).key()
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=False), calibration=cal)
    by = {(r.label, r.round): r for r in results}
    pair = PairTiming.from_dict(by[("int32", 1)].interleaved)
    assert pair.built_first == "other" and len(pair.base_seconds) == len(pair.other_seconds) > 0
    assert by[("fanout", 0)].interleaved is None
    c = compare(list(cal_runs) + list(results))
    row = next(r for r in c.rows if r.label == "int32")
    assert row.interleaved and row.derived and INTERLEAVED_NOTE in row.tta_note
    pairs = [PairTiming.from_dict(by[("int32", k)].interleaved) for k in range(2)]
    assert row.step_speedup.log_ratios == pytest.approx([math.log(p.base_step / p.other_step) for p in pairs])
    aa = next(r for r in c.rows if r.label == AA_INPROCESS_LABEL)
    assert aa.status == "ok" and aa.interleaved and not in_family(aa.label)
    assert not next(r for r in c.rows if r.label == "fanout").interleaved
    from gnnbench.cli.tables import format_compare

    text = format_compare(c)
    assert "timed against the baseline in one process, steps interleaved (" in text and "): int32" in text
    assert "A/A in one process (baseline against itself, steps interleaved): step " in text
