"""The report's first screen and charts, as pure functions (no browser, no runs): the plain reason an unresolved
row gets, the accuracy axis' scale, label sides, the factor directions, the command to copy and the plotly bundle
the page inlines."""

from __future__ import annotations

import pytest

from gnnbench.measure.compare import (
    TIME_TO_ACCURACY,
    VERDICT_GLOSSARY,
    ComparisonRow,
    TimeToAccuracy,
    plain_reason,
    verdict_words,
)
from gnnbench.measure.stats import Stop


def _row(low, high, **kw) -> ComparisonRow:
    ratio = (low * high) ** 0.5
    return ComparisonRow(
        label=kw.pop("label", "int32"), speedup=ratio, speedup_low=low, speedup_high=high, rounds=3, **kw
    )


def _stop(reason: str, look: int = 3) -> Stop:
    return Stop(reason=reason, look=look, rounds=look, ratio=1.0, low=0.8, high=1.2, p_value=0.5, alpha=0.01)


def test_an_unresolved_row_says_why_in_plain_words():
    futile = _row(0.73, 1.47, stop=_stop("futile"))
    assert verdict_words(futile) == "not resolved (futile after round 3)"
    assert plain_reason(futile, 26) == (
        "could not tell it from the baseline within +-47% on this machine in 3 rounds; more rounds were unlikely "
        "to settle it"
    )
    floor = _row(0.91, 1.05, stop=_stop("below the floor", 4))
    assert "within this machine's noise" in plain_reason(floor) and "after 4 rounds" in plain_reason(floor)
    alone = _row(1.1, 1.4, significant_per_row=True)
    assert plain_reason(alone, 26).startswith("faster on its own test, but not after the correction for the 26 rows")
    slower_alone = _row(0.7, 0.9, significant_per_row=True)
    assert plain_reason(slower_alone).startswith("slower on its own test")
    censored = _row(0.5, 1.5)
    censored.primary = TIME_TO_ACCURACY
    censored.tta_speedup = TimeToAccuracy(
        ratio=0.87,
        low=0.5,
        high=1.5,
        significant=False,
        rounds=3,
        p=0.6,
        log_ratios=[],
        bound="at most",
        censored=True,
        reached=2,
        reached_text="2/3",
        seconds=None,
        note=None,
    )
    assert "upper bound" in plain_reason(censored)
    assert (
        plain_reason(_row(0.9, 1.1)) == "could not tell it from the baseline within +-10% on this machine in 3 rounds"
    )


def test_a_row_with_a_verdict_or_outside_the_family_has_no_reason():
    assert plain_reason(_row(1.2, 1.5, significant=True)) is None
    assert plain_reason(_row(0.8, 1.2, label="baseline")) is None
    assert plain_reason(ComparisonRow(label="int32", status="unavailable")) is None


def test_the_glossary_defines_each_verdict_word_once():
    terms = [t for t, _ in VERDICT_GLOSSARY]
    assert len(terms) == len(set(terms))
    for word in ("faster / slower (family-wise)", "not resolved", "derived", "judged by", "time to accuracy"):
        assert word in terms
    assert any(t.startswith("no effect beyond") for t in terms)


def test_the_accuracy_axis_is_set_where_the_decision_is_made():
    from gnnbench.report.sections.charts import accuracy_scale

    assert accuracy_scale([0.1, -0.2, 0.05]) == 1.0, "at least 1 pp: the +-0.5 pp band fills half the axis"
    assert accuracy_scale([0.1, 1.6, -6.53]) == pytest.approx(1.92), "fanout's -6.5 pp does not set the scale"
    assert accuracy_scale([float("nan"), -2.5]) == pytest.approx(3.0)
    assert accuracy_scale([]) == 1.0


def test_the_label_column_keeps_the_points_order_a_gap_apart_and_on_the_axis():
    from gnnbench.report.sections.charts import label_column

    # four points near 0 pp (the allocators near 1.2x) and one far above: each label as near its point as the
    # others allow, in the points' order, at least the gap apart
    ys = [0.0, 0.0, 0.1, -0.05, 0.9]
    at = label_column(ys, limit=1.0, gap=0.2)
    assert at[4] == 0.9 and at[2] == 0.1, "a label with room sits at its point"
    order = sorted(range(len(ys)), key=lambda i: -ys[i])
    column = [at[i] for i in order]
    assert all(a - b >= 0.2 - 1e-9 for a, b in zip(column, column[1:])), column
    # a column that runs off the bottom is pushed up, and one that cannot fit at the gap shrinks it
    assert label_column([-1.0, -1.0, -1.0], limit=1.0, gap=0.3) == pytest.approx([-0.4, -0.7, -1.0])
    packed = label_column([0.0] * 11, limit=1.0, gap=0.5)
    assert min(packed) >= -1.0 - 1e-9 and max(packed) <= 1.0 + 1e-9
    assert min(abs(a - b) for a, b in zip(sorted(packed), sorted(packed)[1:])) >= 0.2 - 1e-9
    assert label_column([], 1.0, 0.1) == []


def test_factor_directions_say_what_a_ratio_means():
    from gnnbench.report.sections.table import factor_direction

    assert factor_direction(0.27, "steps") == " (3.70x the baseline's steps)"
    assert factor_direction(1.44, "step") == " (each step 1.44x faster)"
    assert factor_direction(0.5, "epoch") == " (each epoch 2.00x slower)"
    assert factor_direction(None, "steps") == ""


def test_the_command_to_copy_and_a_process_entry_line():
    from gnnbench.process.allocators import shell_prefix
    from gnnbench.report.sections.summary import _process_lines, run_command

    assert run_command("full_amp+fast_dropout", "small") == "gnnbench run --preset small --flags full_amp,fast_dropout"
    assert run_command("int32", None) == "gnnbench run --flags int32"
    lines = _process_lines("full_amp+tcmalloc")
    assert len(lines) == 1 and lines[0].startswith(shell_prefix("tcmalloc")) and "tcmalloc" in lines[0]
    assert _process_lines("full_amp+fast_dropout") == []


def test_the_page_inlines_the_basic_plotly_bundle_when_it_matches():
    import plotly.offline

    from gnnbench.report.bundle import BASIC_TRACES, bundle_version, plotly_bundle

    wanted = bundle_version(plotly.offline.get_plotlyjs())
    chosen = plotly_bundle({"scatter", "bar"})
    assert chosen.name == "basic", chosen.note
    assert bundle_version(chosen.js) == wanted and len(chosen.js) < 2_000_000
    full = plotly_bundle({"scatter", "heatmap"})
    assert full.name == "full" and "heatmap" in full.note and "heatmap" not in BASIC_TRACES


def test_a_tampered_or_missing_basic_bundle_falls_back_to_the_full_one(tmp_path, monkeypatch):
    from gnnbench.report import bundle

    copy = tmp_path / "plotly-basic.min.js"
    copy.write_bytes(bundle.BASIC_BUNDLE.read_bytes() + b"\n//")
    monkeypatch.setattr(bundle, "BASIC_BUNDLE", copy)
    assert bundle.plotly_bundle().name == "full" and "SHA-256" in bundle.plotly_bundle().note
    monkeypatch.setattr(bundle, "BASIC_BUNDLE", tmp_path / "absent.js")
    assert "missing" in bundle.plotly_bundle().note


def test_trace_types_are_read_from_the_charts():
    from gnnbench.report.html import trace_types

    page = "<div class='chart' data-traces='bar,scatter'></div><div class='chart' data-traces='scatter'></div>"
    assert trace_types(page) == {"bar", "scatter"}
