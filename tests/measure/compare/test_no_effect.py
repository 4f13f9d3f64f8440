""" "No effect beyond +-margin": the equivalence test of a row's primary ratio against the margin the sweep declared,
floored as its interval is, family-wise over the rows tested."""

from __future__ import annotations

import math

import pytest

from gnnbench.measure.compare import EPOCH_TIME, ComparisonRow, PairedRatio, no_effect_text, no_effect_verdicts
from gnnbench.measure.stats import equivalence, sd_floor


def _row(label, ratios, *, significant=False, censored=False):
    logs = [math.log(x) for x in ratios]
    mean = sum(logs) / len(logs)
    ratio = PairedRatio(math.exp(mean), math.nan, math.nan, significant, len(logs), math.nan, logs)
    return ComparisonRow(
        label=label,
        status="ok",
        primary=EPOCH_TIME,
        epoch_speedup=ratio,
        speedup=ratio.ratio,
        significant=significant,
        censored=censored,
    )


def test_a_tight_null_row_is_shown_within_the_margin_and_a_wide_one_is_not():
    tight = _row("csr", [0.99, 1.01, 1.00, 0.995, 1.005])
    wide = _row("cached_norm", [0.85, 1.15, 1.0, 0.9, 1.1])
    fast = _row("sparse_agg", [1.3, 1.35, 1.32], significant=True)  # significant: a verdict already
    cut = _row("fanout", [1.0, 1.0, 1.0], censored=True)  # censored: its ratio is a bound
    baseline = _row("baseline", [1.0, 1.0])
    assert no_effect_verdicts([tight, wide, fast, cut, baseline], 0.10) == 2
    assert tight.no_effect["equivalent"] and tight.no_effect["family"] == 2
    assert not wide.no_effect["equivalent"]
    assert fast.no_effect is None and cut.no_effect is None and baseline.no_effect is None
    text = no_effect_text(tight)
    assert text.startswith("no effect beyond +-10% (90% interval [") and "Holm over 2 rows" in text
    assert no_effect_text(wide) is None
    assert no_effect_verdicts([tight], None) == 0, "no margin declared: nothing is tested"


def test_the_clock_floor_makes_rounds_that_agree_by_chance_settle_nothing():
    lucky = _row("int32", [1.001, 1.0, 0.999])  # three rounds within 0.2%
    no_effect_verdicts([lucky], 0.10)
    assert lucky.no_effect["equivalent"]
    floored = _row("int32", [1.001, 1.0, 0.999])
    no_effect_verdicts([floored], 0.10, clock_sd=0.3)  # a clock this noisy cannot show +-10% in 3 rounds
    assert not floored.no_effect["equivalent"]
    xs = floored.epoch_speedup.log_ratios
    assert floored.no_effect["p_value"] == pytest.approx(equivalence(xs, 0.10, min_sd=sd_floor(0.3, 3)).p_value)


def test_holm_over_the_rows_tested_keeps_the_family_wise_rate():
    ratios = [1.0 + 0.02 * d for d in (0.9, -0.7, 1.1, -1.2, 0.4)]  # TOST p about 0.003 at +-5%
    alone = [_row("r0", ratios)]
    no_effect_verdicts(alone, 0.05)
    assert alone[0].no_effect["equivalent"] and alone[0].no_effect["p_value"] * 40 > 0.05
    many = [_row(f"r{i}", ratios) for i in range(40)]  # each alone passes; Holm over 40 asks p < 0.05 / 40
    no_effect_verdicts(many, 0.05)
    assert all(r.no_effect["equivalent_per_row"] for r in many)
    assert not any(r.no_effect["equivalent"] for r in many)


def test_equivalence_min_sd_only_makes_the_test_harder():
    xs = [0.01, -0.01, 0.005, -0.004]
    plain = equivalence(xs, 0.10)
    floored = equivalence(xs, 0.10, min_sd=0.2)
    assert floored.p_value >= plain.p_value and floored.high - floored.low > plain.high - plain.low


def test_every_family_row_ends_with_one_verdict_and_the_summary_counts_them():
    from gnnbench.measure.compare import verdict_of, verdict_summary

    fast = _row("sparse_agg", [1.3, 1.35, 1.32], significant=True)
    fast.speedup_low, fast.speedup_high = 1.25, 1.4
    slow = _row("workers", [0.8, 0.82, 0.81], significant=True)
    slow.speedup_low, slow.speedup_high = 0.78, 0.84
    flat = _row("csr", [0.99, 1.01, 1.00, 0.995, 1.005])
    wide = _row("cached_norm", [0.85, 1.15, 1.0, 0.9, 1.1])
    rows = [_row("baseline", [1.0, 1.0]), fast, slow, flat, wide]
    no_effect_verdicts(rows, 0.10)
    assert [verdict_of(r) for r in rows] == [None, "faster", "slower", "no effect beyond the margin", "not resolved"]
    assert verdict_summary(rows) == (
        "verdicts for 3 of 4 rows (1 faster, 1 slower, 1 no effect beyond +-10%); not resolved: cached_norm"
    )


def test_a_row_gets_the_same_verdict_words_in_compare_s_table_the_report_and_the_reference_block():
    """One vocabulary: a row significant alone but not family-wise reads 'not resolved (significant alone, not
    family-wise)' in the terminal table, the report's cell and first screen, and the words of docs/reference.md's
    block (never 'no significant difference', which would say its interval contains 1)."""
    from gnnbench.cli.tables import _verdict_notes
    from gnnbench.measure.compare import ComparisonRow, verdict_words
    from gnnbench.report.sections.table import _speedup_cell

    row = ComparisonRow(
        label="fast_dropout",
        significant=False,
        significant_per_row=True,
        speedup=1.43,
        speedup_low=1.24,
        speedup_high=1.64,
        censored=False,
        acc_verdict="no accuracy cost",
    )
    words = verdict_words(row)
    assert words == "not resolved (significant alone, not family-wise)"
    assert words in _verdict_notes(row, base=False)
    cell = _speedup_cell(row, {})
    assert words in cell and "no significant difference" not in cell
    from gnnbench.report.sections.summary import _verdict_row

    first = _verdict_row(row, 26, {}, "epoch time")  # the report's first screen
    assert words in first and "no significant difference" not in first
    assert verdict_words(ComparisonRow(label="baseline (A/A)", speedup=1.0)) is None
