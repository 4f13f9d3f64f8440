"""scripts/verdict_replay.py on the committed reference's stored rounds: the paired floors stop no real effect as
noise, and three rounds that agree by chance do not settle a row."""

import importlib.util
import math
import random

import pytest

from gnnbench.measure.run import RunResult
from tests.helpers import ROOT

REFERENCE = (
    ROOT / "results" / "reference" / "compare-small-cpu-0671164"
)  # the previous reference, run under the rule before


def _script():
    spec = importlib.util.spec_from_file_location("verdict_replay", ROOT / "scripts" / "verdict_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_reference_replayed_under_the_paired_floors():
    table = _script().replay(REFERENCE, 0.10)
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table.splitlines() if line.startswith("| ")}
    # as it ran: full_amp and prefetch stopped below the floor although their intervals exclude 1
    assert rows["full_amp"][1].startswith("below the floor") and rows["prefetch"][1].startswith("below the floor")
    assert rows["workers"][1].startswith("significant (slower) after round 3")
    # now: neither is stopped as noise, full_amp is judged per step (its steps equivalent), workers stays open
    for label in ("full_amp", "prefetch", "workers"):
        assert rows[label][2].startswith("open after round 3"), rows[label]
    assert rows["full_amp"][3].startswith("time per step x the baseline's steps")
    assert rows["fast_dropout"][3].startswith("measured time to accuracy")
    assert rows["sparse_agg"][2].startswith("significant (faster)")


@pytest.mark.slow
def test_interpolation_removes_quantization_on_the_reference_curves():
    text = _script().quantization(REFERENCE)
    first = float(text.split("first evaluation at or above: mean ")[1].split("rms ")[1].split()[0])
    interp = float(text.split("interpolated:")[1].split("rms ")[1].split()[0])
    assert interp < first


def test_rounds_a_verdict_needs_grow_with_the_clocks_noise():
    s = _script()
    quiet, noisy = s.rounds_for_equivalence(0.03, 0.10, 0.05), s.rounds_for_equivalence(0.10, 0.10, 0.05)
    assert quiet is not None and noisy is not None and quiet < noisy
    assert s.rounds_for_equivalence(0.5, 0.10, 0.05, most=10) is None  # out of reach: said, not guessed
    # a 15% effect at sd 0.05 through Holm's first step of 26 rows: the noncentral t power crosses 80% there
    n = s.rounds_for_effect(0.05, 1.15, 0.05 / 26)
    assert s.t_test_power(math.log(1.15) / (0.05 / math.sqrt(n)), n - 1, 0.05 / 26) >= 0.8
    assert s.t_test_power(math.log(1.15) / (0.05 / math.sqrt(n - 1)), n - 2, 0.05 / 26) < 0.8
    assert s.rounds_for_effect(0.10, 1.15, 0.05 / 26) > n


def _run(label, k, step):
    return RunResult(status="ok", config={}, label=label, round=k, step_seconds_all=[step] * 8)


def test_neighbouring_runs_that_share_their_noise_show_in_the_lag_correlation():
    rng = random.Random(3)
    labels = [f"row{i}" for i in range(12)]
    by, order = {}, []
    for k in range(4):
        drift, seq = 0.0, labels[:]
        rng.shuffle(seq)
        order.append(seq)
        for lb in seq:  # a slow random walk: neighbours in a round share most of their noise
            drift += rng.gauss(0.0, 0.05)
            by.setdefault(lb, {})[k] = _run(lb, k, math.exp(drift + rng.gauss(0.0, 0.005)))
    corr = _script().lag_correlation({"rounds": order}, by, lags=(1,))
    assert corr[1][0] > 0.5 and corr[1][1] == 4 * 11
    sd, df = _script().pooled_sd({"baseline": by["row0"], "row1": by["row1"]}, lambda r: r.step_seconds_all[0])
    assert df == 3 and sd > 0


@pytest.mark.slow
def test_the_noise_table_in_the_docs_is_the_commands_output():
    text = _script().noise(ROOT / "results" / "reference" / "compare-small-cpu-62e05ae", 0.10)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    docs = (ROOT / "docs" / "statistics.md").read_text()
    assert len(table) == 4 and all(line in docs for line in table[1:]), table
    epoch = table[1].strip("| ").split(" | ")
    assert (
        epoch[0].startswith("epoch") and int(epoch[2]) > 5 and int(epoch[3]) > 5
    )  # the sweep's 5 rounds cannot give either verdict here


@pytest.mark.slow
def test_the_smoothing_table_reads_every_row_trained_to_its_plateau():
    """``--smoothing`` on a committed sweep: a row per entry trained beside its baseline, each with its rounds,
    the pooled sd per window, and the crossing of the baseline's smoothed curve later than its own."""
    folder = ROOT / "results" / "reference" / "compare-small-cpu-next"
    text = _script().smoothing(folder)
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
    assert {"compile", "fast_dropout", "baseline (A/A)"} <= set(rows) and "sparse_agg" not in rows  # derived: no curve
    pooled = [float(x.strip(" |")) for x in rows["pooled"][2:]]
    assert len(pooled) == 4 and all(0 < x < 1 for x in pooled)
    delays = [float(x.strip(" |")) for x in rows["the baseline's crossing later than the curve's, median steps"][2:]]
    assert delays[0] == 0 and delays == sorted(delays)
