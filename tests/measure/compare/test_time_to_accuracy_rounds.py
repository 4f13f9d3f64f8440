"""What an honest verdict costs: after its accuracy rounds a sweep's later rounds only measure
time to accuracy (they stop at the target, or past the censoring budget without it), and accuracy is read from
the rounds that trained to the plateau; evaluation runs the fastest kernel whatever the run trains with."""

import dataclasses

import pytest
import torch

from gnnbench.cli.parser import build_parser
from gnnbench.measure.compare import compare, identity_problem, short_epochs, time_to_accuracy_run
from gnnbench.measure.run import RunResult
from gnnbench.measure.sweep import sweep_entries
from gnnbench.models.aggregation import Aggregator, sparse_product_supports
from gnnbench.models.aggregation_policy import AggregationPolicy
from gnnbench.models.inference import LayerwiseInference
from gnnbench.training import RunConfig, Trainer
from tests.helpers import QUICK
from tests.measure.compare.test_verdict_budgets import _result

TARGET = 0.85


# ------------------------------------------------------------------ the trainer's target stop
def _train(cfg: RunConfig) -> Trainer:
    t = Trainer(cfg)
    try:
        list(t.steps(evaluate=True))
    finally:
        t.close()
    return t


def test_a_time_to_accuracy_run_stops_at_its_first_point_at_the_target():
    base = dataclasses.replace(QUICK, epochs=None, max_steps_per_epoch=None, max_epochs=40, eval_every=2)
    full = _train(base)
    vals = [p.val for p in full.curve]
    target = sorted(vals)[len(vals) // 2]  # a level the run reaches part-way
    first = next(p.step for p in full.curve if p.val >= target - 1e-12)
    t = _train(dataclasses.replace(base, stop_at=target))
    assert t.stop_reason == "target"
    assert t.steps_taken == first == t.curve[-1].step, "stopped at the first point at the target, same seed"
    assert [p.val for p in t.curve] == pytest.approx(vals[: len(t.curve)]), "the same run up to there"
    # never before min_steps: the epochs a same-round short run is read against
    late = _train(dataclasses.replace(base, stop_at=target, min_steps=first + 4))
    assert late.stop_reason == "target" and late.steps_taken >= first + 4


def test_a_time_to_accuracy_run_stops_past_its_censoring_budget_without_the_target():
    cfg = dataclasses.replace(
        QUICK, epochs=None, max_steps_per_epoch=None, max_epochs=40, eval_every=2, stop_at=1.0, censor_seconds=1e-3
    )
    t = _train(cfg)
    assert t.stop_reason == "censored" and t.steps_taken < 40 * t.steps_per_epoch
    with pytest.raises(ValueError, match=r"stop_at must be None or a validation target in \(0, 1\]"):
        dataclasses.replace(QUICK, stop_at=1.5)


# ------------------------------------------------------------------ the sweep's rounds
def test_rounds_after_the_accuracy_rounds_stop_at_the_target_and_short_runs_stay_short():
    base = dataclasses.replace(QUICK, epochs=None, eval_every=2, min_steps=60, max_steps=400)
    entries = sweep_entries(
        base, ["csr", "fanout"], repeats=5, aa=True, derive_per_epoch=4, accuracy_rounds=3, target=TARGET
    )
    keep = short_epochs(4, base.warmup_steps) * 4  # the steps of a short run, which its baseline must cover
    for e in entries:
        later = e.round >= 3
        if e.derived:
            assert e.config.stop_at is None and e.config.epochs is not None, "a short run is fixed-length"
        elif later:
            assert e.config.stop_at == TARGET and e.config.min_steps == keep, (e.label, e.config.min_steps)
        else:
            assert e.config.stop_at is None and e.config.min_steps == 60, e.label
    assert {e.label for e in entries if e.round == 4} == {e.label for e in entries if e.round == 0}
    with pytest.raises(ValueError, match="accuracy_rounds must be an integer >= 2"):
        sweep_entries(base, ["csr"], repeats=5, accuracy_rounds=1, target=TARGET)
    with pytest.raises(ValueError, match="needs the calibrated target"):
        sweep_entries(base, ["csr"], repeats=5, accuracy_rounds=3)
    args = build_parser().parse_args(["compare", "--preset", "tiny"])
    assert args.accuracy_rounds == 3
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compare", "--accuracy-rounds", "1"])


def _tta_only(run: RunResult, stop: str = "target") -> RunResult:
    run.config["stop_at"] = TARGET
    run.stop_reason = stop
    return run


def test_accuracy_is_read_from_the_rounds_that_trained_to_the_plateau_and_time_from_all():
    """Rounds 0-2 train to the plateau (the entry costs 2 pp there); rounds 3-4 stop at the target, where
    their last point says nothing about the plateau: reading them would have shown no cost at all."""
    runs = []
    for k in range(5):
        if k < 3:
            runs.append(_result("baseline", k, [0.7, 0.86, 0.90, 0.90]))
            runs.append(_result("entry", k, [0.7, 0.86, 0.88, 0.88], step=0.05))
        else:
            runs.append(_tta_only(_result("baseline", k, [0.7, 0.86], tests=[0.69, 0.90])))
            runs.append(_tta_only(_result("entry", k, [0.7, 0.86], tests=[0.69, 0.90], step=0.05)))
    assert identity_problem(runs) is None, "a time-to-accuracy round is part of the same sweep"
    row = next(r for r in compare(runs, target_acc=TARGET).rows if r.label == "entry")
    assert row.rounds == 5 and row.accuracy_rounds == 3
    assert row.tta_speedup.rounds == 5, "time to accuracy from every round"
    assert row.acc_delta == pytest.approx(-0.02) and row.converged
    assert row.acc_point.startswith("at convergence")
    assert "2 later round(s) stopped at the target" in row.acc_point
    assert row.stop_reasons == {"plateau": 3, "target": 2}
    assert time_to_accuracy_run(runs[-1]) and not time_to_accuracy_run(runs[0])


def test_a_censored_time_to_accuracy_round_counts_at_its_budget():
    runs = []
    for k in range(4):
        runs.append(_result("baseline", k, [0.7, 0.86, 0.9, 0.9], censor=4.0))
        if k < 3:  # reaches the target at 3.2 s, within the budget
            runs.append(_result("slow", k, [0.6, 0.7, 0.86, 0.88], step=0.09, censor=4.0))
        else:  # stopped past its budget without the target
            runs.append(_tta_only(_result("slow", k, [0.6, 0.7, 0.8, 0.84, 0.84], step=0.09, censor=4.0), "censored"))
    row = next(r for r in compare(runs, target_acc=TARGET).rows if r.label == "slow")
    assert row.tta_speedup.reached == 3 and row.tta_speedup.bound == "at most"
    assert row.accuracy_rounds == 3


# ------------------------------------------------------------------ evaluation's kernel
@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_evaluation_runs_the_csr_product_and_agrees_with_the_runs_own_kernel(monkeypatch, model):
    assert AggregationPolicy(mode="scatter").evaluation_mode("cpu") == "sparse"
    half = "sparse" if sparse_product_supports("cpu", torch.bfloat16) else "scatter"  # no such kernel: its own
    assert AggregationPolicy(mode="scatter", dtype=torch.bfloat16).evaluation_mode("cpu") == half
    t = Trainer(dataclasses.replace(QUICK, epochs=1, model=model))
    try:
        list(t.steps(evaluate=False))
        p = t.pipeline
        assert p.policy.mode == "scatter", "the run trains with the scatter kernel"
        g = p.prepared.graph
        p.model.eval()  # no dropout: both passes compute the same function
        inference = LayerwiseInference(g.edge_index, g.rowptr, p.policy, p.device)
        modes = []
        real = Aggregator.__init__

        def spy(self, *args, **kwargs):
            modes.append(kwargs.get("mode"))
            real(self, *args, **kwargs)

        monkeypatch.setattr(Aggregator, "__init__", spy)
        fast = inference(p.model, p.graph.x, p.precision)
        assert set(modes) == {"sparse"}
        monkeypatch.setattr(AggregationPolicy, "evaluation_mode", lambda self, device_type: self.mode)
        modes.clear()
        own = inference(p.model, p.graph.x, p.precision)
        assert set(modes) == {"scatter"}
    finally:
        t.close()
    torch.testing.assert_close(fast, own, atol=1e-5, rtol=1e-4)
