"""The slowdowns ``scripts/gate_error_rates.py`` injects as work (``--injection work``): the path's own work done
again ``frac`` times per call on average, its side effects undone, so counted instructions see it and the
training trajectory does not move."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import load_script


def _script():
    return load_script("gate_error_rates")


def test_work_repeats_the_call_frac_times_on_average_and_keeps_the_samplers_draws():
    script = _script()

    class NeighborSampleCore:  # stands in for the sampler: its draws come from its own generator
        calls = 0

        def __init__(self):
            self.generator = torch.Generator().manual_seed(0)

        def sample(self, n):
            NeighborSampleCore.calls += 1
            return torch.rand(n, generator=self.generator)

    plain = NeighborSampleCore()
    expected = [plain.sample(3) for _ in range(8)]
    NeighborSampleCore.calls = 0
    ns = {"NeighborSampleCore": NeighborSampleCore}
    exec(script.slow_source("sample", 5, 0.75, "work"), ns)
    slowed = NeighborSampleCore()
    got = [slowed.sample(3) for _ in range(8)]
    assert NeighborSampleCore.calls == 8 + 6  # 0.75 more per call: 6 repeats over 8 calls
    assert all(torch.equal(a, b) for a, b in zip(expected, got)), "the repeats left the draws unchanged"


def test_work_for_the_gather_and_the_optimizer_changes_no_result():
    script = _script()
    ns: dict = {}
    exec(script.slow_source("gather", 10, 2.5, "work"), ns)
    table, ids = torch.arange(12.0).reshape(6, 2), torch.tensor([4, 0, 4])
    assert torch.equal(ns["_gate_slow_rows"](table, ids), table.index_select(0, ids))
    assert "torch.no_grad" not in script.slow_source("gather", 10, 2.5, "spin")  # the timed variant stays

    p = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.Adam([p], lr=0.1)
    ns = {"torch": torch}
    exec(script.slow_source("optimizer", 5, 1.5, "work"), ns)
    try:
        p.grad = torch.full((4,), 0.5)
        opt.step()
        after_one = p.detach().clone()
        ref = torch.nn.Parameter(torch.ones(4))
        ref_opt = torch.optim.Adam([ref], lr=0.1)
        ref.grad = torch.full((4,), 0.5)
        ns["_gate_orig"](ref_opt)  # the original step, once
        assert torch.equal(after_one, ref.detach()), "one step, not two: the extra work leaves the parameters"
        assert torch.equal(p.grad, torch.full((4,), 0.5))
    finally:
        torch.optim.Adam.step = ns["_gate_orig"]


def test_the_loss_path_repeats_the_loss_without_a_graph_and_returns_the_same_loss():
    """The slowdown only the end-to-end step shows (no micro-benchmark times the loss): the node task's loss
    computed again under ``no_grad``; the returned loss, and so the gradients, are the original's."""
    script = _script()
    assert script.PATHS["loss"][1] == "NodeClassification" and "loss" not in script.CARRIERS

    class NodeClassification:
        calls, grad_modes = 0, []

        def loss(self, out, batch):
            NodeClassification.calls += 1
            NodeClassification.grad_modes.append(torch.is_grad_enabled())
            return torch.nn.functional.cross_entropy(out, batch)

    out = torch.randn(5, 3, requires_grad=True)
    labels = torch.tensor([0, 2, 1, 1, 0])
    expected = NodeClassification().loss(out, labels)
    NodeClassification.calls, NodeClassification.grad_modes = 0, []
    ns = {"NodeClassification": NodeClassification}
    exec(script.slow_source("loss", 10, 2.5, "work"), ns)
    got = [NodeClassification().loss(out, labels) for _ in range(2)]
    assert NodeClassification.calls == 2 + 5  # 2.5 more per call
    assert NodeClassification.grad_modes == [True, False, False, True, False, False, False]
    assert all(torch.equal(g, expected) and g.requires_grad for g in got)
    spin = script.slow_source("loss", 10, 2.5, "spin")
    assert "NodeClassification.loss = _gate_slow" in spin and "no_grad" not in spin


def test_a_pilot_that_cannot_tell_the_size_from_the_ask_does_not_rescale_it():
    script = _script()
    assert script.delivered_as_asked({"slowdown": 0.056, "low": 0.05, "high": 0.062}, 5)  # within a point
    assert script.delivered_as_asked({"slowdown": 0.107, "low": 0.031, "high": 0.189}, 5)  # noisy: holds 5%
    assert not script.delivered_as_asked({"slowdown": 0.107, "low": 0.08, "high": 0.13}, 5)  # clearly too big
    assert not script.delivered_as_asked({"slowdown": 0.02, "low": 0.01, "high": 0.03}, 10)


def test_the_non_work_injections_wait_after_the_call_busy_or_idle():
    """``spin`` busy-waits and ``sleep`` sleeps the same extra time after each call (the gather inside its timed
    statement); both compile, and an unknown injection is refused with the accepted names."""
    script = _script()
    for path in ("aggregation", "gather"):
        spin, sleep = (script.slow_source(path, 10, 0.5, kind) for kind in ("spin", "sleep"))
        assert "while _gate_time.perf_counter() < until" in spin and "_gate_time.sleep(" not in spin
        assert "_gate_time.sleep(max(0.0, until - _gate_time.perf_counter()))" in sleep and "while" not in sleep
        for text in (spin, sleep):
            compile(text, path, "exec")
    with pytest.raises(SystemExit, match="spin, sleep, work"):
        script.slow_source("sample", 5, 0.5, "nap")
