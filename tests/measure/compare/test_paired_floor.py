"""gnnbench.measure.compare.paired_floor: the clock's paired noise, each row's floor of its own statistic, and the sd floor
on a row's printed interval."""

import math

import pytest

from gnnbench.measure.compare import (
    AA_LABEL,
    JUDGED_MEASURED,
    JUDGED_PER_STEP,
    ComparisonRow,
    PairedRatio,
    TimeToAccuracy,
    TtaFactors,
    clock_noise_sd,
    floor_of_sd,
    floor_primary,
    row_floors,
)
from gnnbench.measure.stats import paired_ratio, t_quantile


def _ratio(logs, cls=PairedRatio, **extra):
    m = sum(logs) / len(logs)
    return cls(
        ratio=math.exp(m),
        low=math.nan,
        high=math.nan,
        significant=False,
        rounds=len(logs),
        p=math.nan,
        log_ratios=list(logs),
        **extra,
    )


def _tta(logs):
    return _ratio(
        logs, TimeToAccuracy, bound=None, censored=False, reached=len(logs), reached_text="3/3", seconds=1.0, note=None
    )


def _row(label, epoch_logs, tta_logs=None, judged=JUDGED_MEASURED, derived=False):
    factors = TtaFactors("steps", None, None, None, None, None, None, None, None, judged)
    return ComparisonRow(
        label=label,
        derived=derived,
        epoch_speedup=_ratio(epoch_logs),
        primary="time to accuracy",
        tta_speedup=_tta(tta_logs or epoch_logs),
        primary_rounds=list(range(len(epoch_logs))),
        factors=factors,
    )


def test_the_clock_noise_is_pooled_within_rows_so_an_effect_is_not_noise():
    rows = [_row("a", [0.30, 0.32, 0.28]), _row("b", [-0.01, 0.01, 0.0])]  # a: a 35% effect, sd 0.02
    assert clock_noise_sd(rows, [0, 1, 2]) == pytest.approx(math.sqrt((0.0008 + 0.0002) / 4))
    assert clock_noise_sd(rows, [0]) != clock_noise_sd(rows, [0])  # one round: nan


def test_one_disturbed_round_does_not_set_every_rows_floor():
    from gnnbench.measure.compare.paired_floor import pooled_sd

    quiet = [[0.01, -0.01, 0.0, 0.012, -0.012] for _ in range(8)]
    plain = pooled_sd(quiet, math.inf)
    assert pooled_sd(quiet) == pytest.approx(plain), "nothing beyond 3 robust sds: the plain pooled sd"
    disturbed = [list(g) for g in quiet]
    disturbed[2][3] += 0.18  # one process the machine slowed: 18% off where its row agrees within 1.2%
    assert pooled_sd(disturbed, math.inf) > 2.9 * plain, "the plain pooled sd takes the outlier into every floor"
    assert pooled_sd(disturbed) < 1.8 * plain, "clipped at 3 robust sds, the outlier counts as 3 of them"
    # the plain pooled sd is exact without clipping: groups of unequal length, each about its own mean
    groups = [[0.1, 0.3], [1.0, 1.1, 1.5]]
    assert pooled_sd(groups, math.inf) == pytest.approx(math.sqrt((0.02 + 0.14) / 3))
    assert pooled_sd([[0.1], []]) != pooled_sd([[0.1], []]), "no group of two values: nan"
    assert pooled_sd([[0.2, 0.2], [0.1, 0.1]]) == 0.0, "no spread: 0, no clip"


def test_each_row_has_the_floor_of_its_own_statistic():
    rows = [
        _row("per_step", [0.1, 0.12, 0.08], judged=JUDGED_PER_STEP),
        _row("derived", [0.0, 0.02, -0.02], derived=True),
        _row("measured", [0.0, 0.02, -0.02], tta_logs=[0.3, -0.2, 0.1]),
        _row(AA_LABEL, [0.01, -0.01, 0.0], tta_logs=[0.25, -0.25, 0.0]),
    ]
    min_sd, floors, pair_sd = row_floors(rows, [0, 1, 2], [3], 5, [10.0, 12.0, 11.0])
    assert pair_sd == {}, "no row timed in one process"
    s0 = min_sd[3]
    clock = math.exp(t_quantile(0.975, 4) * s0 / math.sqrt(5))
    assert floors["per_step"][3] == pytest.approx(clock) and floors["derived"][3] == pytest.approx(clock)
    assert floors["measured"][3] == pytest.approx(math.exp(t_quantile(0.975, 4) * 0.25 / math.sqrt(5))), (
        "the A/A row's paired time to accuracy"
    )
    assert floors["measured"][3] > clock
    assert floor_of_sd(0.0, 5) != floor_of_sd(0.0, 5), "no spread, no floor"


def test_the_printed_interval_is_never_narrower_than_the_clock_allows():
    row = _row("workers", [-0.136, -0.137, -0.135], derived=True)
    row.speedup_low = row.speedup_high = None
    floor_primary(row, 0.067)
    r = row.tta_speedup
    assert r.ratio == pytest.approx(math.exp(-0.136)) and r.high / r.low > 1.05
    assert (row.speedup_low, row.speedup_high) == (r.low, r.high)
    wide = _row("noisy", [0.3, -0.3, 0.1])
    floor_primary(wide, 0.067)
    own = paired_ratio([math.exp(x) for x in [0.3, -0.3, 0.1]], [1.0] * 3)
    assert (wide.tta_speedup.low, wide.tta_speedup.high) == pytest.approx((own.low, own.high)), (
        "an sd above the floor is the row's own"
    )


def test_rows_timed_in_one_process_take_the_in_process_clock():
    """A derived row whose rounds were timed against the baseline in one process is floored at the pooled sd of
    such rows' step log ratios, not at the across-process epoch clock's; a row timed across processes keeps the
    clock's, and an interleaved row judged by its measured time to accuracy keeps the floor of that."""
    import dataclasses

    from gnnbench.measure.compare import reads_pairs

    def paired(label, epoch_logs, step_logs, **kw):
        return dataclasses.replace(_row(label, epoch_logs, **kw), interleaved=True, step_speedup=_ratio(step_logs))

    rows = [
        paired("inproc", [0.2, -0.2, 0.1], [0.40, 0.41, 0.39], derived=True),  # 50% effect, sd 0.01 in one process
        paired("aa-inproc", [0.1, -0.15, 0.05], [0.0, 0.01, -0.01], derived=True),
        _row("across", [0.2, -0.2, 0.1], derived=True),
        paired("measured", [0.0, 0.02, -0.02], [0.0, 0.01, -0.01], tta_logs=[0.3, -0.2, 0.1]),
    ]
    assert [reads_pairs(r) for r in rows] == [True, True, False, False]
    s_pair = clock_noise_sd(rows, [0, 1, 2], interleaved=True)
    assert s_pair == pytest.approx(0.01)  # the pooled within-row sd of the step log ratios of the paired rows
    assert s_pair < clock_noise_sd(rows, [0, 1, 2])
    min_sd, floors, pair_sd = row_floors(rows, [0, 1, 2], [3], 5, [10.0, 12.0, 11.0])
    assert set(pair_sd) == {"inproc", "aa-inproc"} and pair_sd["inproc"][3] == pytest.approx(s_pair)
    assert floors["inproc"][3] == pytest.approx(floor_of_sd(s_pair, 5))
    assert floors["inproc"][3] < floors["across"][3]
    assert floors["across"][3] == pytest.approx(floor_of_sd(min_sd[3], 5))


def test_the_a_a_spreads_are_read_for_each_design_the_sweep_ran():
    """The header's A/A line: per design, the sd and the mean of the step's per-round log ratio (the in-process
    mean is the bias left after counterbalancing); no line without an A/A row."""
    from gnnbench.measure.compare import (
        AA_INPROCESS_LABEL,
        AA_LABEL,
        ComparisonRow,
        PairedRatio,
        aa_spread_line,
        aa_spreads,
    )

    def row(label, logs):
        ratio = PairedRatio(math.exp(sum(logs) / len(logs)), 0.9, 1.1, False, len(logs), 0.5, logs)
        return ComparisonRow(label=label, step_speedup=ratio)

    rows = [row(AA_INPROCESS_LABEL, [0.01, 0.03, float("nan")]), row(AA_LABEL, [0.1, -0.1, 0.0])]
    got = aa_spreads(rows)
    assert list(got) == ["one process", "across processes"]
    assert got["one process"]["rounds"] == 2 and got["one process"]["mean"] == pytest.approx(0.02)
    assert got["one process"]["sd"] == pytest.approx(0.01414, abs=1e-4) and got["across processes"]["sd"] == 0.1
    line = aa_spread_line(rows)
    assert "one process sd 0.014 (mean +0.020, 2 rounds)" in line and "across processes sd 0.100" in line
    assert aa_spread_line([row("int32", [0.0, 0.1])]) is None
