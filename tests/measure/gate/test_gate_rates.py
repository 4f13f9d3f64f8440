"""The regression gate's measured error rates: Wilson intervals, the summary of a gate_error_rates.py document
(family-wise false alarms, detection per size and path, detection at a default run's strictest Holm step), and
their section of the report."""

import json

import pytest

from gnnbench.measure.gate import summarize
from gnnbench.measure.gate.rates import format_rates, wilson


def test_wilson_interval_matches_known_values():
    low, high = wilson(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.2775, abs=1e-3)
    low, high = wilson(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-3), pytest.approx(0.7634, abs=1e-3))
    assert wilson(0, 0) != wilson(0, 0)  # nan: no runs, no rate
    with pytest.raises(ValueError, match="k must be in"):
        wilson(3, 2)


def _run(flagged, ratio=0.9, p=0.001, high=0.95, threshold=1.04, phase="sample", per_bench=None):
    return {
        "seconds": 30.0,
        "flagged": flagged,
        "ratio": ratio,
        "low": 0.85,
        "high": high,
        "p_value": p,
        "threshold": threshold,
        "phase": phase,
        "measured": 1,
        "per_bench": per_bench,
    }


def _doc():
    null_bench = {"baseline": [1.0, 0.98, 1.02, 1.04, 0.5], "int32": [1.0, 0.98, 1.02, 1.04, 0.5]}
    nulls = [_run([], 1.0, 0.5, 1.02, per_bench=null_bench) for _ in range(3)]
    nulls.append(_run(["int32"], per_bench=null_bench))
    slow10 = [_run(["baseline"]) for _ in range(3)] + [_run([], 0.97, 0.2, 1.01)]
    # flagged alone, but not at alpha / 20 (p = 0.01): a default run's strictest step would miss it
    slow5 = [_run(["baseline"], 0.95, 0.01, 0.98, phase="forward"), _run([], 0.98, 0.3, 1.01)]
    return {
        "machine": "m",
        "base": "abc",
        "settings": {"rounds": 5, "steps": 20},
        "complete": True,
        "wall_seconds": 600.0,
        "shares": {"sample": 0.2},
        "benches": {"null": [f"b{i}" for i in range(20)], "slow": ["baseline"]},
        "results": {
            "null-comment": {"runs": 4, "flagged": 1, "right_phase": 0, "detail": nulls},
            "slow-sample-10": {"runs": 4, "flagged": 3, "right_phase": 3, "detail": slow10},
            "slow-sample-5": {"runs": 2, "flagged": 1, "right_phase": 0, "detail": slow5},
        },
    }


def test_summary_counts_false_alarms_detection_and_the_strict_step():
    s = summarize(_doc())
    assert (s["false_alarm"]["k"], s["false_alarm"]["n"]) == (1, 4)
    assert (s["false_alarm_per_bench"]["k"], s["false_alarm_per_bench"]["n"]) == (1, 8)
    ten, five = s["sizes"][10], s["sizes"][5]
    assert (ten["detect"]["k"], ten["detect"]["n"], ten["right_phase"]["k"]) == (3, 4, 3)
    assert ten["detect_in_default_set"]["k"] == 3  # p = 0.001 <= 0.05 / 20
    assert (five["detect"]["k"], five["detect_in_default_set"]["k"], five["right_phase"]["k"]) == (1, 0, 0)
    text = format_rates(s)
    assert "false alarms per default gate run (20 benchmarks, Holm): 1/4 = 25%" in text
    assert "sample (20% of the step): 5%: 1/2 (right phase 0); 10%: 3/4 (right phase 3)" in text
    with pytest.raises(ValueError, match="no gate runs"):
        summarize({"results": {}})


def test_the_report_shows_the_rates_and_refuses_a_file_that_is_not_json(tmp_path, capsys):
    from gnnbench.cli import main

    doc = tmp_path / "rates.json"
    doc.write_text(json.dumps(_doc()))
    out = tmp_path / "report.html"
    assert (
        main(
            [
                "report",
                str(tmp_path / "none"),
                "--asv",
                str(tmp_path / "none"),
                "--gate-rates",
                str(doc),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    html = out.read_text()
    assert "How often the regression gate is wrong" in html
    assert "false alarm per default gate run (20 benchmarks, Holm; null commits)</td><td class='num'>1/4 = 25%" in html
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["report", "--gate-rates", str(bad), "--out", str(out)]) == 2
    assert "is not a readable JSON file" in capsys.readouterr().err


def test_change_points_over_stored_gate_runs_name_the_commit(tmp_path):
    """Stored gate runs (regress --out) over 10 commits, the head step 30% slower from the 6th: the report's
    history finds the step at that commit; runs are ordered by when they finished, not by file name."""
    import random

    from gnnbench.report import build_report, load_inputs

    rng = random.Random(0)
    folder = tmp_path / "gates"
    folder.mkdir()
    for i in range(10):
        ms = (10.0 if i < 5 else 13.0) * (1 + 0.01 * rng.uniform(-1, 1))
        doc = {
            "base": "main",
            "head": ".",
            "rounds": 5,
            "threads": 1,
            "orders": [],
            "seconds": 1.0,
            "finished": f"2026-12-01T10:{i:02d}:00Z",
            "commits": {"base": "a" * 40, "head": f"{i:02d}" * 20},
            "regression": False,
            "benches": [{"name": "baseline", "status": "ok", "head_ms": ms, "base_ms": ms}],
        }
        (folder / f"run-{9 - i}.json").write_text(json.dumps(doc))  # file names in the reverse order
    inputs = load_inputs(gate_runs=[folder])
    assert [d["finished"][14:16] for d in inputs.gate_runs] == [f"{i:02d}" for i in range(10)]
    html = build_report(inputs, tmp_path / "report.html").read_text()
    section = html[html.index("id='gate-change-points'") :]
    assert "<td>baseline</td><td><code>050505050505</code></td>" in section
