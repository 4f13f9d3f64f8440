"""``regress`` as library calls: the bisection probes each commit with the same gate, over the benchmarks that
regressed (the gate and the trees replaced here; the real ones: test_regress.py)."""

from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from gnnbench.measure.gate import Bench, GateOptions, GateRun
from gnnbench.measure.gate import run as gate_run


def test_bisect_probes_each_commit_with_the_same_gate_over_the_regressed_benchmarks(monkeypatch):
    probes = []

    @contextmanager
    def trees_for(base, head):
        yield {"base": base, "head": head}

    def gate(pair, benches, options):
        probes.append((pair["base"], pair["head"], [b.name for b in benches], options))
        crashed = SimpleNamespace(kind="crashed") if pair["head"] == "c2" else None
        return SimpleNamespace(regressed=[], failure=crashed)

    def bisect(good, bad, is_bad, log):
        assert (good, bad) == ("v1", "v2")
        return next(c for c in ("c1", "c2", "c3") if is_bad(c)), 2

    monkeypatch.setattr(gate_run, "trees_for", trees_for)
    monkeypatch.setattr(gate_run, "gate", gate)
    monkeypatch.setattr(gate_run, "bisect", bisect)
    result = SimpleNamespace(regressed=[SimpleNamespace(name="int32")])
    options = GateOptions(rounds=2)
    run = GateRun("v1", "v2", result, [Bench("baseline", None), Bench("int32", None)], options)
    lines = []
    assert run.regressed == ["int32"]
    assert run.bisect(log=lines.append) == ("c2", 2), "a commit whose benchmark process crashes is bad"
    assert probes == [("v1", "c1", ["int32"], options), ("v1", "c2", ["int32"], options)]
    assert lines == ["c2: its benchmark process crashed"]
    with pytest.raises(ValueError, match="needs a HEAD commit"):
        GateRun("v1", ".", result, [], options).bisect()


def test_bisect_follows_a_regression_seen_only_in_counted_instructions(monkeypatch):
    """A benchmark that regressed by counts alone (its wall clock could not see it) is bisected too: each probe
    counts again (the run's options), and a commit whose counts regress is bad."""
    probes = []

    @contextmanager
    def trees_for(base, head):
        yield {"base": base, "head": head}

    def gate(pair, benches, options):
        probes.append((pair["head"], [b.name for b in benches], options.counts))
        grew = [SimpleNamespace(name="baseline")] if pair["head"] in ("c2", "c3") else []
        return SimpleNamespace(regressed=[], failure=None, count_regressions=grew)

    def bisect(good, bad, is_bad, log):
        return next(c for c in ("c1", "c2", "c3") if is_bad(c)), 2

    monkeypatch.setattr(gate_run, "trees_for", trees_for)
    monkeypatch.setattr(gate_run, "gate", gate)
    monkeypatch.setattr(gate_run, "bisect", bisect)
    result = SimpleNamespace(regressed=[], count_regressions=[SimpleNamespace(name="baseline")])
    run = GateRun("v1", "v2", result, [Bench("baseline", None), Bench("int32", None)], GateOptions(counts=1))
    assert run.regressed == ["baseline"]
    lines = []
    assert run.bisect(log=lines.append) == ("c2", 2)
    assert probes == [("c1", ["baseline"], 1), ("c2", ["baseline"], 1)]
    assert lines == ["c2: counted instructions grew in baseline"]
