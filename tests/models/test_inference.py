"""Layer-wise, chunked full-neighbourhood evaluation: same predictions as the whole-graph forward, memory
bounded by the chunk budget (checked structurally), bad budgets refused."""

import dataclasses
import math
import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from gnnbench.flags import Flags
from gnnbench.graphs.csr import rowptr_from_sorted_targets, sort_edges_by_target
from gnnbench.graphs.norm import gcn_inv_sqrt_degree, gcn_norm, gcn_norm_targets
from gnnbench.graphs.prepare import prepare
from gnnbench.models.aggregation_policy import AggregationPolicy
from gnnbench.models.inference import LayerwiseInference, plan_chunks
from gnnbench.models.nets import build_model
from gnnbench.models.precision import Precision
from tests.graphs_strategies import random_edges
from tests.helpers import QUICK, skip_unless_runs

CPU = torch.device("cpu")
BUDGET = 4 * 2**20  # ~7k edges per chunk on tiny: ~30 chunks per layer


def _setup(graph, model_name, flags, precision_mode, *, source_norm="batch", hidden=32, out=10, seed=0):
    prepared = prepare(graph, flags)
    precision = Precision(precision_mode, "cpu")
    policy = AggregationPolicy.build(flags, precision, prepared, CPU, source_norm=source_norm)
    torch.manual_seed(seed)
    model = build_model(model_name, graph.num_features, hidden, out, len(flags.fanout)).eval()
    return prepared, precision, policy, model


def _whole_graph(prepared, precision, policy, model):
    with torch.no_grad():
        agg = policy.for_graph(prepared.edge_index, prepared.num_nodes)
        return model(prepared.graph.x, agg, precision)


CASES = [
    (m, agg, p, cached)
    for m in ("gcn", "sage")
    for agg in ("scatter", "sparse")
    for p in ("off", "partial", "full")
    for cached in ((False, True) if m == "gcn" else (False,))
]


@pytest.mark.parametrize("model_name,aggregation,precision_mode,cached", CASES)
def test_layerwise_equals_whole_graph_forward(tiny_graph, model_name, aggregation, precision_mode, cached):
    # cached: full-graph coefficients held by the policy (cached_norm with full-batch training); else
    # computed from full-graph degrees at evaluation, as the whole-graph path does
    flags = Flags(aggregation=aggregation, cached_norm=cached, batch_source="full" if cached else "neighbor")
    skip_unless_runs(flags.replace(precision=precision_mode), model=model_name)  # e.g. no bf16 CSR product on CPU
    prepared, precision, policy, model = _setup(
        tiny_graph, model_name, flags, precision_mode, source_norm="full" if cached else "batch"
    )
    assert (policy.norm is not None) == cached
    # evaluation aggregates with its own kernel (AggregationPolicy.evaluation_mode): the reference uses it too
    ref = _whole_graph(prepared, precision, dataclasses.replace(policy, mode=policy.evaluation_mode("cpu")), model)
    infer = LayerwiseInference(prepared.edge_index, prepared.graph.rowptr, policy, CPU, chunk_bytes=BUDGET)
    got = infer(model, prepared.graph.x, precision)
    assert infer.plan(max(model.dims)).num_chunks > 10
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if precision_mode == "full":  # bf16 sums: a different order rounds differently
        torch.testing.assert_close(got, ref, rtol=0.05, atol=0.05)
        assert (got.argmax(-1) == ref.argmax(-1)).float().mean() > 0.99
    else:
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
        assert torch.equal(got.argmax(-1), ref.argmax(-1))


class _Observer(TorchDispatchMode):
    """Records the shape and dtype of every dense tensor an operator returns (an observer: nothing is changed). Sparse
    CSR tensors are left out: their numel is the logical rows x columns, their storage is the recorded parts."""

    def __init__(self):
        super().__init__()
        self.shapes = []
        self.dtypes = []  # (operator, dtype and dimensions of its output)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                self.shapes.append((tuple(t.shape), str(func)))
                self.dtypes.append((str(func), t.dtype, t.dim()))
        return out

    def beyond(self, n, width, chunk_edges):
        """Tensors that are neither node-sized (``n`` or ``n + 1`` rows, up to ``width`` columns) nor within one
        chunk: no dimension longer than ``chunk_edges``, at most ``chunk_edges x width`` elements."""
        return [
            (s, f)
            for s, f in self.shapes
            if s
            and not (
                (max(s) in (n, n + 1) and math.prod(s) <= (n + 1) * width)
                or (max(s) <= chunk_edges and math.prod(s) <= chunk_edges * width)
            )
        ]


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
@pytest.mark.slow
def test_layerwise_respects_the_precision_policy(tiny_graph, model_name, monkeypatch):
    # observed on the scatter path (its index_add shows the aggregation dtype): evaluation's own kernel choice
    # (AggregationPolicy.evaluation_mode) is set aside here; tests/measure/compare/test_time_to_accuracy_rounds.py
    # covers it
    monkeypatch.setattr(AggregationPolicy, "evaluation_mode", lambda self, device_type: self.mode)
    for mode, agg_dtype in (("off", torch.float32), ("partial", torch.float32), ("full", torch.bfloat16)):
        prepared, precision, policy, model = _setup(tiny_graph, model_name, Flags(), mode)
        linears = []
        for m in model.modules():
            if m.__class__.__name__ == "Linear":
                m.register_forward_hook(lambda mod, inp, out, seen=linears: seen.append(out.dtype))
        with _Observer() as ops:  # the scatter path sums [edges, features] messages into targets with index_add
            LayerwiseInference(prepared.edge_index, prepared.graph.rowptr, policy, CPU, chunk_bytes=BUDGET)(
                model, prepared.graph.x, precision
            )
        assert set(linears) == {torch.float32 if mode == "off" else torch.bfloat16}, mode
        assert {d for f, d, dim in ops.dtypes if "index_add" in f and dim == 2} == {agg_dtype}, mode


def test_layerwise_int32_graph_and_link_split(tiny_graph):
    flags = Flags(index_dtype="int32", aggregation="sparse")
    prepared, precision, policy, model = _setup(tiny_graph.link_split(), "gcn", flags, "off")
    assert prepared.edge_index.dtype == torch.int32
    ref = _whole_graph(prepared, precision, policy, model)
    got = LayerwiseInference(prepared.edge_index, prepared.graph.rowptr, policy, CPU, chunk_bytes=BUDGET)(
        model, prepared.graph.x, precision
    )
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@given(random_edges(max_nodes=40, max_edges=200), st.integers(1, 7))
def test_chunked_gcn_weights_equal_the_whole_graphs_bit_for_bit(edges, cuts):
    edge_index, n = edges
    edge_index, _ = sort_edges_by_target(edge_index, n)  # self loops and repeated loops kept
    rowptr = rowptr_from_sorted_targets(edge_index[1], n)
    whole = gcn_norm(edge_index, n)
    bounds = sorted({0, n, *torch.linspace(0, n, cuts + 1).long().tolist()})
    chunks = [(lo, hi, int(rowptr[lo]), int(rowptr[hi])) for lo, hi in zip(bounds[:-1], bounds[1:])]
    dinv = torch.cat([gcn_inv_sqrt_degree(edge_index[:, a:b], hi - lo, target_start=lo) for lo, hi, a, b in chunks])
    parts = [
        gcn_norm_targets(edge_index[:, a:b], dinv, target_start=lo, num_targets=hi - lo) for lo, hi, a, b in chunks
    ]
    assert torch.equal(torch.cat([p.edge_weight for p in parts]), whole.edge_weight)
    assert torch.equal(torch.cat([p.self_weight for p in parts]), whole.self_weight)


@pytest.mark.parametrize("aggregation", ["scatter", "sparse"])
@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_chunking_bounds_every_intermediate(tiny_graph, model_name, aggregation):
    prepared, precision, policy, model = _setup(
        tiny_graph, model_name, Flags(aggregation=aggregation), "off", hidden=64
    )
    n, e, width = tiny_graph.num_nodes, tiny_graph.num_edges, max(model.dims)
    infer = LayerwiseInference(prepared.edge_index, prepared.graph.rowptr, policy, CPU, chunk_bytes=BUDGET)
    plan = infer.plan(width)
    assert plan.edge_bounds[-1] == e and plan.node_bounds[-1] == n and plan.num_chunks > 20
    assert all(plan.cost(*c) <= plan.budget_bytes for c in plan if c[1] - c[0] > 1)
    assert plan.max_edges * 20 < e  # a chunk's edges are a small slice of the graph's
    with _Observer() as chunked:
        infer(model, prepared.graph.x, precision)
    # every intermediate is node-sized (a layer's messages or output) or at most one chunk's edges x features
    assert chunked.shapes and chunked.beyond(n, width, plan.max_edges) == []
    # the same observer on the whole-graph forward sees edge-sized tensors: edges x features per layer on the
    # scatter path, one weight per edge (the normalization, or the mean's edge values) on the sparse one
    with _Observer() as whole:
        _whole_graph(prepared, precision, policy, model)
    over = whole.beyond(n, width, plan.max_edges)
    assert over and max(math.prod(s) for s, _ in over) >= (e * min(model.dims) if aggregation == "scatter" else e)


def test_bad_chunk_budgets_are_refused(tiny_graph):
    prepared, _, policy, _ = _setup(tiny_graph, "gcn", Flags(), "off")
    for bad in (0, -5, 1000, 2.5e8, "256MiB", True, None):
        with pytest.raises(
            ValueError,
            match=r"chunk_bytes must be an integer number of bytes >= 65536 \(64 KiB\) "
            rf"\(got {re.escape(repr(bad))}\)",
        ):
            LayerwiseInference(prepared.edge_index, prepared.graph.rowptr, policy, CPU, chunk_bytes=bad)
    with pytest.raises(ValueError, match=r"budget_bytes must be .* \(got 10\)"):
        plan_chunks(prepared.edge_index, prepared.graph.rowptr, width=32, budget_bytes=10)


def test_edges_not_sorted_by_target_are_refused(tiny_graph):
    g = tiny_graph
    perm = torch.randperm(g.num_edges, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="not the in-edges of nodes .* in target order"):
        plan_chunks(g.edge_index[:, perm], g.rowptr, width=32, budget_bytes=2**20)
    with pytest.raises(ValueError, match="width must be an integer >= 1 \\(got 0\\)"):
        plan_chunks(g.edge_index, g.rowptr, width=0)


def test_trainer_evaluation_equals_the_whole_graph_forward_and_reports_its_memory():
    from gnnbench.cli.tables import format_run
    from gnnbench.measure.run import run
    from gnnbench.training import Trainer

    for task in ("node", "link"):
        cfg = dataclasses.replace(QUICK, task=task, max_steps_per_epoch=3, warmup_steps=1, eval_chunk_bytes=2**20)
        trainer = Trainer(cfg)
        for _ in trainer.steps():
            pass
        metrics, _ = trainer.evaluate()
        p = trainer.pipeline
        assert trainer.evaluation.inference.plan(max(p.model.dims)).num_chunks > 3
        with torch.no_grad():
            agg = p.policy.for_graph(p.prepared.edge_index, p.graph.num_nodes)
            whole = p.task.evaluate(lambda: p.model(p.graph.x, agg, p.precision))  # noqa: B023 - called here
        for key in ("val", "test"):
            assert abs(metrics[key] - whole[key]) <= 1e-4, (task, key, metrics, whole)
        trainer.close()
    r = run(cfg)
    m = r.memory
    assert m.train_peak_bytes > 0 and m.eval_peak_bytes > 0 and m.eval_rise_bytes >= 0
    assert m.host_peak_bytes >= max(m.train_peak_bytes, m.eval_peak_bytes) - 2**20
    assert "outside evaluation" in format_run(r) and "evaluation" in m.peak_method


def test_eval_chunk_option_and_config_refuse_bad_sizes(capsys):
    from gnnbench.cli import main
    from gnnbench.cli.options import parse_eval_chunk
    from gnnbench.training import RunConfig

    assert parse_eval_chunk("64MiB") == 64 * 2**20 and parse_eval_chunk("1GB") == 10**9
    assert parse_eval_chunk("65536") == 65536
    for bad, says in (
        ("12XB", "must be a size such as 256MiB"),
        ("1KiB", "must be at least 64KiB"),
        ("-5MiB", "must be at least 64KiB"),
        ("nan", "must be a size"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["run", "--preset", "tiny", f"--eval-chunk={bad}"])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert re.search(says, err) and repr(bad) in err, err
    with pytest.raises(
        ValueError,
        match=r"RunConfig.eval_chunk_bytes must be an integer number of bytes >= 65536 "
        r"\(64 KiB\) \(got 0\)",
    ):
        RunConfig(eval_chunk_bytes=0)


def test_link_pair_scores_in_chunks_equal_the_whole_product():
    from gnnbench.models.tasks import pair_scores

    g = torch.Generator().manual_seed(0)
    z = torch.randn(50, 8, generator=g)
    pairs = torch.randint(0, 50, (2, 103), generator=g)
    whole = (z[pairs[0]] * z[pairs[1]]).sum(-1)
    for chunk in (1, 7, 103, 1000):
        assert torch.equal(pair_scores(z, pairs, chunk=chunk), whole)
    assert pair_scores(z, pairs[:, :0]).numel() == 0
    with pytest.raises(ValueError, match=r"chunk must be an integer >= 1 \(got 0\)"):
        pair_scores(z, pairs, chunk=0)
