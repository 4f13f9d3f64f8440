"""gnnbench.measure.compare.rows: a comparison row is a dataclass read by attribute, and written as compare's JSON has
always written it (``compare --json``, ``diagnose --verify --json``, ``tune --json``): the same keys in the same
order, a row not measured with its reason only, the family's figures only where they were set."""

import dataclasses
import json

from gnnbench.advice.tune import TuneResult
from gnnbench.measure.compare import AA_LABEL, BASELINE, Comparison, ComparisonRow, PairedRatio, TimeToAccuracy, compare
from gnnbench.measure.stats import StoppingRule
from tests.measure.compare.test_verdict_budgets import _result
from tests.measure.sweep.test_sweep import _sweep

EVERY_ROW = ["label", "optimizations", "derived", "timing_mode", "status"]
MEASURED = EVERY_ROW + [
    "rounds",
    "same_work",
    "step_ms",
    "step_speedup",
    "epoch_s",
    "epoch_speedup",
    "setup_s",
    "tta_s",
    "tta_reached",
    "tta_speedup",
    "censored",
    "tta_note",
    "factors",
    "measured_tta_speedup",
    "primary",
    "speedup",
    "speedup_low",
    "speedup_high",
    "significant",
    "acc_point",
    "converged",
    "convergence",
    "primary_rounds",
    "stop_reasons",
    "accuracy_rounds",
    "sampled",
    "test_acc",
    "acc_delta",
    "acc_delta_low",
    "acc_delta_high",
    "acc_delta_spread",
    "acc_verdict",
    "seeds",
    "phases",
    "compile",
    "device_busy",
    "h2d_bytes_per_batch",
    "device_phase_ms",
    "distributed",
    "interleaved",
    "pair_design",
]
RATIO = ["ratio", "low", "high", "significant", "rounds", "p", "log_ratios"]
TTA = RATIO + ["bound", "censored", "reached", "reached_text", "seconds", "note"]


def _with_a_failed_entry() -> list[dict]:
    runs = _sweep()
    broken = dataclasses.replace(runs[0], label="broken", status="unavailable", unavailable={"device": "needs CUDA"})
    return runs + [broken]


def test_a_row_writes_the_keys_compare_has_always_written_in_their_order():
    c = compare(_with_a_failed_entry())
    rows = {r.label: r.to_dict() for r in c.rows}
    assert list(rows[BASELINE]) == MEASURED, "the baseline is no verdict of the family"
    assert list(rows["sparse_agg"]) == MEASURED + ["p_value", "significant_per_row"]
    assert list(rows["broken"]) == EVERY_ROW + ["reason"] and "needs CUDA" in rows["broken"]["reason"]
    assert list(rows["sparse_agg"]["step_speedup"]) == RATIO and list(rows["sparse_agg"]["tta_speedup"]) == TTA
    assert rows["fanout"]["step_speedup"] is None, "changes the work per step: no per-step ratio"
    whole = c.to_dict()
    assert list(whole) == [
        "rows",
        "rounds",
        "target",
        "target_source",
        "floors",
        "aa",
        "calibration",
        "family",
        "derived_checks",
        "rule",
        "stops",
        "clock_sd",
        "equivalence_margin",
    ]
    assert whole["rows"] == [r.to_dict() for r in c.rows] and whole["aa"]["label"] == AA_LABEL
    text = json.dumps(whole)  # JSON-ready as it is
    assert json.dumps(Comparison.from_dict(json.loads(text)).to_dict()) == text


def test_a_stopped_row_writes_its_stop_last_and_every_row_reads_back():
    runs = []
    for k in range(5):
        runs.append(_result("baseline", k, [0.7, 0.86, 0.9], step=0.10 * (1 + 0.01 * ((-1) ** k))))
        runs.append(_result("twice", k, [0.7, 0.86, 0.9], step=0.05 * (1 + 0.01 * ((-1) ** (k // 2)))))
    runs = [r for r in runs if not (r.label == "twice" and r.round >= 3)]
    c = compare(runs, target_acc=0.85, rule=StoppingRule.for_repeats(5))
    twice = next(r for r in c.rows if r.label == "twice")
    d = twice.to_dict()
    assert list(d)[-3:] == ["p_value", "significant_per_row", "stop"] and d["stop"] == c.stops["twice"]
    for row in compare(_with_a_failed_entry()).rows + c.rows:
        text = json.dumps(row.to_dict())
        back = ComparisonRow.from_dict(json.loads(text))
        assert json.dumps(back.to_dict()) == text, row.label
        assert type(back.tta_speedup) is type(row.tta_speedup) and type(back.stop) is type(row.stop)


def test_the_primary_ratio_and_its_bound_are_read_from_the_row():
    c = compare(_sweep())
    rows = {r.label: r for r in c.rows}
    assert isinstance(rows["sparse_agg"].primary_ratio, TimeToAccuracy) and rows["sparse_agg"].bound is None
    assert rows["fanout"].bound == "at most", "never reached: censored, an upper bound"
    epoch = ComparisonRow(
        label="x", primary="epoch time", epoch_speedup=PairedRatio(1.1, 1.0, 1.2, False, 3, 0.2, [0.1, 0.1, 0.1])
    )
    assert epoch.primary_ratio is epoch.epoch_speedup and epoch.bound is None


def test_tune_writes_its_final_row_as_compare_does():
    row = next(r for r in compare(_sweep()).rows if r.label == "sparse_agg")
    d = TuneResult(chosen=["sparse_agg"], final=row).to_dict()
    assert d["final"] == row.to_dict() and list(d)[3] == "final"
    assert TuneResult(chosen=[]).to_dict()["final"] is None
