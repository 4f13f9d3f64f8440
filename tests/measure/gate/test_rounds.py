"""Which benchmarks an extra round measures when the budget cannot hold all that need one: the primary tier
first (it alone decides whether a run is inconclusive), then the entries, cheapest first; by spread and cost,
never by ratio. A fake log: no benchmark process runs."""

from __future__ import annotations

import pytest

from gnnbench.measure.gate.benches import Bench
from gnnbench.measure.gate.duet import ALTERNATING, DUET
from gnnbench.measure.gate.rounds import RoundLog
from gnnbench.measure.gate.verdicts import BenchVerdict, GateResult

NAMES = ["baseline", "workers", "micro:gather", "fast_dropout", "cluster_gcn"]
SECONDS = {"baseline": 4.0, "workers": 30.0, "micro:gather": 2.0, "fast_dropout": 5.0, "cluster_gcn": 9.0}


def _verdict(name: str, log_sd: float) -> BenchVerdict:
    # 8 rounds at this spread cannot see 10%; 20 rounds can when log_sd is 0.05, never when it is 0.5
    return BenchVerdict(
        name, "ok", rounds=8, ratio=1.0, log_sd=log_sd, alpha=0.01, threshold=1.03, detectable=1.5, inconclusive=True
    )


def _setup(design: str, spreads: dict[str, float]) -> tuple[list[Bench], RoundLog, GateResult]:
    benches = [Bench(n, None) for n in NAMES]
    log = RoundLog.empty(benches, design=design)
    for n in NAMES:
        log.seconds[n] = [SECONDS[n]] * 8
    log.overhead = [1.0] * 8
    result = GateResult("B", "H", 8, 1, [], benches=[_verdict(n, spreads.get(n, 0.05)) for n in NAMES])
    return benches, log, result


def _picked(design: str, left_s: float, spreads: dict[str, float] | None = None) -> tuple[list[str], dict]:
    benches, log, result = _setup(design, spreads or {})
    return [b.name for b in log.more_rounds(benches, result, 20, left_s)], result.extra_rounds


def test_a_round_that_fits_measures_every_benchmark_that_needs_one_in_the_gates_order():
    picked, extra = _picked(DUET, left_s=100.0)
    assert picked == NAMES and extra == dict.fromkeys(NAMES, 1)


def test_when_not_all_fit_the_primary_tier_goes_first_then_the_cheapest_entries():
    # duet: one side's time a round; overhead 1 + baseline 4 + micro:gather 2 = 7, then fast_dropout 5 = 12,
    # cluster_gcn 9 = 21 > 15; workers 30 never fits
    picked, extra = _picked(DUET, left_s=15.0)
    assert picked == ["baseline", "micro:gather", "fast_dropout"]
    assert set(extra) == set(picked)
    # alternating rounds run both sides one after the other: twice the time
    assert _picked(ALTERNATING, left_s=15.0)[0] == ["baseline", "micro:gather"]


def test_no_round_when_a_primary_that_needs_one_does_not_fit():
    picked, extra = _picked(DUET, left_s=6.0)  # overhead 1 + baseline 4 + micro:gather 2 = 7 > 6
    assert picked == [] and extra == {}


def test_a_benchmark_whose_spread_no_round_could_resolve_gets_none():
    picked, _ = _picked(DUET, left_s=100.0, spreads={"baseline": 0.5, "workers": 0.5})
    assert picked == ["micro:gather", "fast_dropout", "cluster_gcn"]


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
def test_the_choice_reads_no_ratio(ratio):
    benches, log, result = _setup(DUET, {})
    for v in result.benches:
        v.ratio = ratio
    assert [b.name for b in log.more_rounds(benches, result, 20, 15.0)] == ["baseline", "micro:gather", "fast_dropout"]
