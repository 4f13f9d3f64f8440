import math

import numpy as np
import pytest
import torch

from gnnbench.measure.stats import (
    DEFAULT_REPEATS,
    RatioInterval,
    holm,
    noise_floor,
    paired_ratio,
    simulate_calibration,
    simulate_step_times,
    t_quantile,
)
from tests.helpers import ROOT

# Student-t quantiles from tables (independent of the implementation under test).
T975_DF2 = 4.302652729911275
T975_DF3 = 3.182446305284263
T975_DF9 = 2.262157162740992


def bootstrap_ratio(
    base: list[float], other: list[float], *, resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """The statistic gnnbench used before: ``median(base) / median(other)`` with a bootstrap over pooled steps.

    ``significant`` is False when the interval contains 1 (no significant difference).
    """
    if not base or not other:
        return {"ratio": float("nan"), "low": float("nan"), "high": float("nan"), "significant": False}
    g = torch.Generator().manual_seed(seed)
    b = torch.tensor(base, dtype=torch.float64)
    o = torch.tensor(other, dtype=torch.float64)
    bi = torch.randint(0, b.numel(), (resamples, b.numel()), generator=g)
    oi = torch.randint(0, o.numel(), (resamples, o.numel()), generator=g)
    ratios = b[bi].median(dim=1).values / o[oi].median(dim=1).values
    alpha = (1 - level) / 2
    low = float(torch.quantile(ratios, alpha))
    high = float(torch.quantile(ratios, 1 - alpha))
    ratio = float(b.median() / o.median())
    return {"ratio": ratio, "low": low, "high": high, "significant": not (low <= 1.0 <= high)}


def test_paired_ratio_hand_computed_not_significant():
    # log ratios: l, l, 2l with l = ln 2 -> mean 4l/3, sample sd l/sqrt(3), n = 3, df = 2.
    r = paired_ratio([2.0, 4.0, 8.0], [1.0, 2.0, 2.0])
    l = math.log(2.0)
    half = T975_DF2 * (l / math.sqrt(3)) / math.sqrt(3)
    assert isinstance(r, RatioInterval)
    assert r.ratio == pytest.approx(2 ** (4 / 3), rel=1e-12)
    assert r.low == pytest.approx(math.exp(4 * l / 3 - half), rel=1e-9)
    assert r.high == pytest.approx(math.exp(4 * l / 3 + half), rel=1e-9)
    assert r.low < 1 < r.high and not r.significant
    assert (r.rounds, r.level) == (3, 0.95)
    assert r.method == "paired-t on per-round log ratios of run medians"


def test_paired_ratio_hand_computed_significant():
    base = [1.10, 1.20, 1.15, 1.25]
    other = [1.0, 1.0, 1.0, 1.0]
    d = [math.log(b) for b in base]
    mean = sum(d) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 3)
    half = T975_DF3 * sd / 2
    r = paired_ratio(base, other)
    assert r.ratio == pytest.approx(math.exp(mean), rel=1e-12)
    assert (r.low, r.high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)), rel=1e-9)
    assert r.low > 1 and r.significant
    # Reversed arguments invert the interval.
    rev = paired_ratio(other, base)
    assert (rev.ratio, rev.low, rev.high) == pytest.approx((1 / r.ratio, 1 / r.high, 1 / r.low), rel=1e-9)
    assert rev.significant
    # A wider level gives a wider interval.
    wide = paired_ratio(base, other, level=0.99)
    assert wide.low < r.low and wide.high > r.high and wide.level == 0.99


def test_paired_ratio_edge_cases():
    one = paired_ratio([2.0], [1.0])
    assert one.ratio == pytest.approx(2.0) and math.isnan(one.low) and math.isnan(one.high)
    assert not one.significant and one.rounds == 1
    empty = paired_ratio([], [])
    assert math.isnan(empty.ratio) and not empty.significant and empty.rounds == 0
    same = paired_ratio([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert (same.ratio, same.low, same.high, same.significant) == (1.0, 1.0, 1.0, False)
    constant = paired_ratio([2.0, 4.0], [1.0, 2.0])  # zero spread: a degenerate interval at 2
    assert constant.low == pytest.approx(2.0) and constant.high == pytest.approx(2.0) and constant.significant
    arrays = paired_ratio(np.array([2.0, 4.0, 8.0]), np.array([1.0, 2.0, 2.0]))
    assert arrays == paired_ratio([2.0, 4.0, 8.0], [1.0, 2.0, 2.0])


@pytest.mark.parametrize(
    "base, other, match",
    [
        ([1.0, -2.0], [1.0, 1.0], r"base\[1\] = -2\.0"),
        ([1.0, 2.0], [0.0, 1.0], r"other\[0\] = 0\.0"),
        ([1.0, float("nan")], [1.0, 1.0], r"base\[1\] = nan"),
        ([1.0, 2.0], [1.0, float("inf")], r"other\[1\] = inf"),
        ([1.0, "fast"], [1.0, 1.0], r"base\[1\] = 'fast'"),
        ([1.0, 2.0], [1.0], r"got 2 and 1"),
    ],
)
def test_paired_ratio_rejects_bad_inputs(base, other, match):
    with pytest.raises(ValueError, match=match):
        paired_ratio(base, other)


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, float("nan")])
def test_paired_ratio_rejects_bad_level(level):
    with pytest.raises(ValueError, match="level"):
        paired_ratio([1.0, 2.0], [1.0, 2.0], level=level)


def test_t_quantile_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in range(1, 61):
        for p in (0.9, 0.95, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-3), (p, df)
            assert t_quantile(1 - p, df) == pytest.approx(stats.t.ppf(1 - p, df), rel=1e-3), (p, df)
    # Beyond the required tolerance: far tails, large and fractional df.
    for p, df in [(0.9995, 1), (1 - 1e-9, 3), (0.975, 1000), (0.975, 2.5), (0.6, 7)]:
        assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8), (p, df)


def test_t_quantile_known_values_and_errors():
    assert t_quantile(0.975, 2) == pytest.approx(T975_DF2, rel=1e-10)
    assert t_quantile(0.975, 3) == pytest.approx(T975_DF3, rel=1e-10)
    assert t_quantile(0.75, 1) == pytest.approx(1.0, rel=1e-10)  # Cauchy quartile
    assert t_quantile(0.5, 4) == 0.0
    for p in (0.0, 1.0, -0.5, float("nan")):
        with pytest.raises(ValueError, match="p must"):
            t_quantile(p, 5)
    for df in (0, -1, float("inf")):
        with pytest.raises(ValueError, match=f"got {df!r}"):
            t_quantile(0.975, df)


def test_noise_floor():
    runs = [1.0, math.exp(0.1), math.exp(-0.1)]  # sample sd of the logs: 0.1
    assert noise_floor(runs) == pytest.approx(math.exp(T975_DF2 * math.sqrt(2) * 0.1 / math.sqrt(3)), rel=1e-9)
    assert noise_floor(runs, rounds=10) == pytest.approx(
        math.exp(T975_DF9 * math.sqrt(2) * 0.1 / math.sqrt(10)), rel=1e-9
    )
    floors = [noise_floor(runs, rounds=r) for r in range(2, 12)]
    assert all(a > b > 1 for a, b in zip(floors, floors[1:]))  # more rounds resolve smaller effects
    assert noise_floor([1.0, 1.0, 1.0]) == 1.0
    assert math.isnan(noise_floor([1.0])) and math.isnan(noise_floor([]))
    assert math.isnan(noise_floor(runs, rounds=1))
    with pytest.raises(ValueError, match=r"base_runs\[1\] = -1\.0"):
        noise_floor([1.0, -1.0])
    with pytest.raises(ValueError, match="rounds must be a positive integer, got 0"):
        noise_floor(runs, rounds=0)


def test_simulation_shape_ratio_and_determinism():
    x = simulate_step_times(rounds=3, true_ratio=1.25, trials=50, steps=20, seed=1)
    assert x.shape == (50, 3, 2, 20) and (x > 0).all()
    med = np.median(x, axis=-1)
    assert np.exp(np.mean(np.log(med[..., 0] / med[..., 1]))) == pytest.approx(1.25, rel=0.02)
    assert np.array_equal(x, simulate_step_times(rounds=3, true_ratio=1.25, trials=50, steps=20, seed=1))
    assert simulate_calibration(rounds=3, seed=3) == simulate_calibration(rounds=3, seed=3)
    with pytest.raises(ValueError, match="rounds must be a positive integer, got 0"):
        simulate_step_times(rounds=0)
    with pytest.raises(ValueError, match="ar must be in"):
        simulate_step_times(rounds=2, ar=1.0)


def test_calibration_at_default_repeats():
    # The test: run-level offsets (5-8%) and AR(1) step noise; 400 simulated comparisons.
    assert simulate_calibration(rounds=DEFAULT_REPEATS, true_ratio=1.0, trials=400, seed=0) <= 0.07
    assert simulate_calibration(rounds=DEFAULT_REPEATS, true_ratio=1.25, trials=400, seed=0) >= 0.80


@pytest.mark.parametrize("rounds", [3, 4, 5, 6])
def test_false_positive_rate_is_nominal(rounds):
    # 2000 trials: Monte Carlo sd about 0.5% around the nominal 5%.
    assert simulate_calibration(rounds=rounds, trials=2000, seed=11) <= 0.07


def test_default_repeats_is_the_smallest_with_power_at_the_worst_spread():
    worst = dict(true_ratio=1.25, trials=2000, process_sd=(0.08, 0.08), seed=5)
    assert simulate_calibration(rounds=DEFAULT_REPEATS, **worst) >= 0.80
    assert simulate_calibration(rounds=DEFAULT_REPEATS - 1, **worst) < 0.80


def test_per_step_bootstrap_is_overconfident_on_the_same_data():
    torch = pytest.importorskip("torch")

    trials = 40
    x = simulate_step_times(rounds=5, true_ratio=1.0, trials=trials, seed=0)
    with torch.inference_mode():
        boot = (
            sum(
                bootstrap_ratio(t[:, 0].ravel().tolist(), t[:, 1].ravel().tolist(), resamples=500)["significant"]
                for t in x
            )
            / trials
        )
    med = np.median(x, axis=-1)
    paired = sum(paired_ratio(m[:, 0], m[:, 1]).significant for m in med) / trials
    assert boot > 0.4  # about two thirds of identical configurations called different
    assert paired <= 0.1


# ------------------------------------------------------------------ many rows, heavy tails
def _null_sweeps(
    rng, sweeps: int, rows: int, rounds: int, spread: float, outliers: float = 0.0, slow: float = 1.3
) -> list[list[float]]:
    """p-values of ``rows`` null configurations against one shared baseline per sweep: each process's run
    summary is ``exp(N(0, spread))`` times ``slow`` for a fraction ``outliers`` of processes (a heavy tail)."""

    def processes(n):
        t = np.exp(rng.normal(0.0, spread, n))
        return np.where(rng.random(n) < outliers, t * slow, t)

    out = []
    for _ in range(sweeps):
        base = processes(rounds)
        out.append([paired_ratio(base.tolist(), processes(rounds).tolist()).p_value for _ in range(rows)])
    return out


def test_holm_keeps_25_null_rows_at_the_family_wise_rate():
    rng = np.random.default_rng(11)
    sweeps = _null_sweeps(rng, 300, 25, 5, 0.08)
    any_holm = np.mean([any(holm(ps)) for ps in sweeps])
    any_per_row = np.mean([any(p < 0.05 for p in ps) for ps in sweeps])
    assert any_holm <= 0.08, f"family-wise false positives {any_holm:.1%}"
    assert any_per_row > 0.4, f"per-row tests alone: {any_per_row:.1%} of sweeps call some null row significant"


def test_holm_rejects_in_order_and_ignores_nan():
    assert holm([0.001, 0.06, 0.012, float("nan")]) == [True, False, True, False]  # 0.012 <= 0.05 / 2
    assert holm([0.001, 0.04, 0.012]) == [True, True, True]  # the last one against 0.05 / 1
    assert holm([0.03, 0.03]) == [False, False] and holm([]) == []
    with pytest.raises(ValueError, match="alpha"):
        holm([0.1], alpha=1.5)


@pytest.mark.parametrize("outliers", [0.1, 0.2])
def test_a_heavy_tail_of_slow_processes_does_not_inflate_false_positives(outliers):
    """10-20% of processes 1.3x slower (a busy neighbour, a throttled core): one A/A row's false-positive rate
    stays near the nominal 5% (the paired t-test reads the outliers as spread, so it loses power, not
    calibration). This is the case the Gaussian simulation above cannot test."""
    rng = np.random.default_rng(5)
    sweeps = _null_sweeps(rng, 2000, 1, 5, 0.05, outliers=outliers)
    rate = np.mean([ps[0] < 0.05 for ps in sweeps])
    assert rate <= 0.075, f"{rate:.1%} of A/A comparisons significant with {outliers:.0%} slow processes"


def test_false_positives_at_the_committed_references_own_spread():
    """The spread of the committed reference's baseline processes (step medians over its rounds), with a heavy
    tail on top: one row's false-positive rate stays near 5%."""
    import glob
    import json

    # one sweep's baseline processes (the small reference; the tiny one where it is absent), never two graphs mixed
    reference = ROOT / "results" / "reference"
    files = sorted(glob.glob(str(reference / "compare-small-cpu" / "baseline-r*.json"))) or sorted(
        glob.glob(str(reference / "compare-tiny-cpu" / "baseline-r*.json"))
    )
    medians = [json.load(open(f))["step_seconds"]["median"] for f in files]
    if len(medians) < 3:
        pytest.skip("no committed reference sweep with 3 or more baseline rounds")
    spread = float(np.std(np.log(medians), ddof=1))
    rng = np.random.default_rng(7)
    sweeps = _null_sweeps(rng, 2000, 1, len(medians), spread, outliers=0.1)
    rate = np.mean([ps[0] < 0.05 for ps in sweeps])
    assert rate <= 0.075, f"{rate:.1%} at the reference's spread {spread:.1%}"


# Values of the hand-written Student t (bisection on the regularized incomplete beta) that scipy.stats replaced:
# the library must give the same figures, so every interval, p-value and power computed before stays put.
HAND_WRITTEN_QUANTILES = [
    (0.975, 1, 12.70620473617464),
    (0.975, 2, 4.302652729749411),
    (0.975, 4, 2.776445105197695),
    (0.95, 2, 2.919985580353682),
    (0.99, 9, 2.8214379250258617),
    (0.996875, 2, 12.589740561191775),
    (0.75, 3, 0.7648923284043292),
    (0.025, 7, -2.3646242515927725),
]
HAND_WRITTEN_TAILS = [
    (1.0, 2, 0.2113248654051873),
    (2.5, 4, 0.03338327240599406),
    (6.9, 2, 0.010182292258462794),
    (0.3, 9, 0.3854953518707626),
    (12.0, 1, 0.026464676059589864),
]


def test_scipy_student_t_keeps_the_hand_written_values():
    from gnnbench.measure.stats import detectable_shift, t_test_power, t_upper_tail

    for p, df, old in HAND_WRITTEN_QUANTILES:
        assert t_quantile(p, df) == pytest.approx(old, rel=1e-9), (p, df)
    for t, df, old in HAND_WRITTEN_TAILS:
        assert t_upper_tail(t, df) == pytest.approx(old, rel=1e-9), (t, df)
    r = paired_ratio([1.0, 1.1, 0.95, 1.2], [0.9, 1.0, 0.93, 1.0])
    assert (r.low, r.high, r.p_value) == pytest.approx(
        (0.9962457607058044, 1.2286255794014944, 0.05463705872652327), rel=1e-9
    )
    assert t_test_power(2.0, 4, 0.05) == pytest.approx(0.3359651039346967, abs=1e-6)  # quadrature before
    assert detectable_shift(4, 0.05) == pytest.approx(3.761059553704796, abs=1e-5)


def test_equivalence_tost():
    from gnnbench.measure.stats import equivalence

    same = equivalence([0.0, 0.0, 0.0], 0.10)  # identical steps in every round: no spread, inside the margin
    assert same.equivalent and same.p_value == 0.0 and same.ratio == 1.0
    assert not equivalence([0.2, 0.2, 0.2], 0.10).equivalent  # no spread, outside the margin
    wide = equivalence([-0.2, 0.0, 0.18], 0.10)  # fast_dropout's rounds on small: far from shown
    assert not wide.equivalent and wide.p_value > 0.2
    tight = equivalence([0.01, -0.02, 0.0, 0.015, -0.005], 0.10)
    assert tight.equivalent
    # the 90% interval inside the margin is the same decision
    assert (1 / 1.1 < tight.low and tight.high < 1.1) == tight.equivalent
    # against scipy's one-sided t-tests directly
    stats = pytest.importorskip("scipy.stats")
    xs = np.array([0.05, -0.03, 0.02, 0.08])
    d = math.log(1.1)
    p_low = stats.ttest_1samp(xs, -d, alternative="greater").pvalue
    p_high = stats.ttest_1samp(xs, d, alternative="less").pvalue
    assert equivalence(xs, 0.10).p_value == pytest.approx(max(p_low, p_high), rel=1e-9)
    one = equivalence([0.0], 0.10)
    assert not one.equivalent and one.p_value != one.p_value
    assert equivalence([0.0, float("nan"), 0.01, -0.01], 0.10).rounds == 3
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="margin"):
            equivalence([0.0, 0.1], bad)


def test_equivalence_false_equivalent_rate_at_the_margin():
    """A true ratio exactly at the margin is called equivalent at most alpha of the time (3 and 5 rounds)."""
    from gnnbench.measure.stats import equivalence

    rng = np.random.default_rng(0)
    for n in (3, 5):
        for sd in (0.02, 0.1):
            hits = sum(equivalence(rng.normal(math.log(1.1), sd, n), 0.10).equivalent for _ in range(2000))
            assert hits / 2000 <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000), (n, sd, hits)
