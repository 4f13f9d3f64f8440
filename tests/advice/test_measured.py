"""``diagnose``'s measured candidates: which it picks, the verdict rules (pure), the text, and the command end to
end on a quick graph (its words and JSON, never its figures: timings a busy machine shifts decide nothing here)."""

from __future__ import annotations

import json
import math

import pytest

from gnnbench import registry
from gnnbench.advice.diagnose import Diagnosis
from gnnbench.advice.measured import (
    AA_LABEL,
    MARGIN,
    VERDICTS,
    Measured,
    MeasuredRow,
    format_measured,
    pick,
    verdict,
)
from gnnbench.advice.recommend import Recommendation
from gnnbench.advice.rules import Finding
from gnnbench.measure.run import PairTiming
from gnnbench.measure.stats import RatioInterval


def _diagnosis(names: list[str]) -> Diagnosis:
    recs = [Recommendation(n, "kernels", "", "", registry.get(n).costs_accuracy) for n in names]
    return Diagnosis(
        config={},
        device="cpu",
        steps=1,
        step_ms={"mean": 1.0, "median": 1.0, "min": 1.0, "max": 1.0},
        phase_ms={},
        shares={"kernels": 1.0},
        data_wait_share=0.0,
        finding=Finding("kernels", 1.0, None, None, 1.0, "compute phases", ""),
        expected="",
        recommendations=recs,
    )


def test_pick_keeps_the_order_and_skips_what_cannot_share_or_changes_work():
    process = [o.name for o in registry.REGISTRY.values() if not o.shares_process][:2]
    work = [o.name for o in registry.REGISTRY.values() if o.shares_process and o.changes_work][:1]
    shared = [o.name for o in registry.REGISTRY.values() if o.shares_process and not o.changes_work][:4]
    ranked = [process[0], shared[0], work[0], shared[1], process[1], shared[2], shared[3]]
    chosen, skipped = pick(_diagnosis(ranked), top=3)
    assert chosen == shared[:3]
    assert set(skipped) == {process[0], work[0], process[1]}
    assert "process of its own" in skipped[process[0]] and "work per step" in skipped[work[0]]
    assert pick(_diagnosis(ranked), top=0) == ([], {})


def _iv(r, low, high, significant):
    return RatioInterval(r, low, high, 8, significant, 0.95)


@pytest.mark.parametrize(
    "iv, equivalent, aa, expected",
    [
        (_iv(1.40, 1.30, 1.50, True), False, 1.0, VERDICTS[0]),
        (_iv(1.01, 1.005, 1.015, True), True, 1.02, VERDICTS[2]),  # significant, but inside the A/A's reading
        (_iv(1.01, 1.005, 1.015, True), False, 1.02, VERDICTS[3]),
        (_iv(0.80, 0.75, 0.85, True), False, 1.0, VERDICTS[1]),
        (_iv(1.00, 0.98, 1.02, False), True, 1.0, VERDICTS[2]),
        (_iv(1.05, 0.90, 1.20, False), False, 1.0, VERDICTS[3]),
        (_iv(1.0, math.nan, math.nan, False), False, 1.0, VERDICTS[3]),
    ],
)
def test_verdicts(iv, equivalent, aa, expected):
    assert verdict(iv, equivalent, aa) == expected


def test_an_interval_that_excludes_one_is_never_called_equivalent_to_no_difference():
    for v in (verdict(_iv(1.3, 1.2, 1.4, True), False), verdict(_iv(0.7, 0.6, 0.8, True), False)):
        assert v in VERDICTS[:2]


def _row(name, base, other, v):
    pair = PairTiming(base, other, "ABBABAAB")
    return MeasuredRow(name, pair, pair.interval(), False, v, "a note")


def test_the_text_gives_each_row_its_ratio_interval_and_verdict_then_the_aa_and_what_is_not_in_the_intervals():
    rows = [_row("sparse_agg", (1.0, 1.1, 1.0, 1.05), (0.7, 0.75, 0.72, 0.7), VERDICTS[0])]
    aa = _row(AA_LABEL, (1.0, 1.0, 1.0, 1.0), (1.0, 1.01, 0.99, 1.0), VERDICTS[2])
    lines = format_measured(Measured(aa=aa, rows=rows, skipped={"workers": "needs a process of its own"}, blocks=2))
    text = "\n".join(lines)
    assert lines[0].startswith("measured here, each against the baseline in this process")
    assert "sparse_agg" in lines[1] and "per step" in lines[1] and lines[1].endswith(VERDICTS[0])
    assert AA_LABEL in text and "the spread from one process to the next is not in them" in text
    assert "not measured here: workers: needs a process of its own" in text
    assert format_measured(Measured(aa=None)) == []
    assert f"±{MARGIN:.0%}" in VERDICTS[2]


def test_diagnose_opens_with_its_measured_candidates(capsys):
    """The main job end to end on a quick graph: the measured block comes first, every row has a verdict of
    the vocabulary, the ranked list marks what was measured, and --json carries the pairs."""
    from gnnbench.cli import main

    args = ["diagnose", "--preset", "tiny", "--fanout", "5,3", "--batch-size", "64", "--steps", "4", "--warmup", "1"]
    assert main([*args, "--measure", "2", "--measure-blocks", "2"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[2].startswith("measured here, each against the baseline in this process"), text
    measured = [x for x in lines if x.startswith("  ") and " per step (" in x]
    assert len(measured) == 2 and all(x.endswith(VERDICTS) for x in measured), measured
    assert text.index("measured here") < text.index("phase ") < text.index("try, in this order:")
    assert text.count("[measured above: ") == 2
    assert main([*args, "--measure", "1", "--measure-blocks", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    row = out["measured"]["rows"][0]
    assert row["verdict"] in VERDICTS and row["blocks"] == 2 and len(row["pair"]["sequence"]) == 8
    assert out["measured"]["aa"]["name"] == AA_LABEL
    assert main([*args, "--measure", "0"]) == 0
    assert "measured here" not in capsys.readouterr().out


@pytest.mark.parametrize("bad, message", [("-1", "--measure must be an integer >= 0"), ("x", "(got 'x')")])
def test_bad_measure_counts_are_refused_by_name(bad, message, capsys):
    from gnnbench.cli import main

    with pytest.raises(SystemExit):
        main(["diagnose", "--measure", bad])
    assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["diagnose", "--measure-blocks", "1"])
    assert "--measure-blocks must be an integer >= 2: an interval needs two blocks (got '1')" in capsys.readouterr().err


def test_a_candidate_that_refuses_while_building_is_listed_not_raised(monkeypatch):
    """A layer that finds out only while building (a zero-copy view the driver refuses, say): the candidate is
    listed as not measured with the reason, and the others are measured."""
    import dataclasses

    from gnnbench.advice import measured as m
    from gnnbench.flags import UnavailableError
    from tests.helpers import QUICK

    real = m.time_pair
    shared = [o.name for o in registry.REGISTRY.values() if o.shares_process and not o.changes_work][:2]

    def refusing(base, other, **kw):
        if other.flags == registry.config_for(base, [shared[0]]).flags:
            raise UnavailableError([])
        return real(base, other, **kw)

    monkeypatch.setattr(m, "time_pair", refusing)
    got = m.measure_top(dataclasses.replace(QUICK, warmup_steps=1), _diagnosis(shared), top=2, blocks=2)
    assert [r.name for r in got.rows] == shared[1:] and got.skipped[shared[0]].startswith("could not be timed here")


def test_diagnose_says_why_it_measures_nothing_when_its_baseline_cannot_be_paired(monkeypatch, capsys):
    """A refusal found only while building the A/A pair (whole epochs too long, say) is a line, never a
    traceback."""
    import argparse

    from gnnbench.advice import measured
    from gnnbench.cli import commands
    from gnnbench.measure.run import PairRefused
    from tests.helpers import QUICK

    def refuse(*a, **k):
        raise PairRefused("whole epochs of both sides (129 and 129 steps an epoch) take 258 measured steps a side")

    monkeypatch.setattr(measured, "measure_top", refuse)
    args = argparse.Namespace(measure=3, measure_blocks=8, json=False)
    assert commands._measure_top(args, QUICK, None, None) is None
    assert "diagnose: not measuring in this process: whole epochs of both sides" in capsys.readouterr().err
