"""GCN normalization policies: cached_norm is exact where it is used, the estimator is named and bounded.

- full-batch + cached_norm equals PyG's ``GCNConv(cached=True)`` (same weights, same output);
- sampled batches + cached_norm (once per batch, shared by layers) equals per-layer recomputation;
- the estimator (norm_estimator) is a different model on sampled batches, equal on the full graph.
"""

import dataclasses

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.measure.run import run
from gnnbench.models.aggregation_policy import AggregationPolicy
from gnnbench.models.nets import GCN
from gnnbench.models.precision import Precision
from gnnbench.sampling.sources import make_batch_source
from gnnbench.training import RunConfig

SPEC = GraphSpec.preset("tiny", num_nodes=2000)


@pytest.fixture(scope="module")
def graph():
    return generate(SPEC)


def _forward(graph, flags: Flags, batch, model: GCN) -> torch.Tensor:
    prepared = prepare(graph, flags)
    source = make_batch_source(prepared, flags)
    policy = AggregationPolicy.build(flags, Precision(), prepared, torch.device("cpu"), source_norm=source.norm_mode)
    agg = policy.for_batch(batch.edge_index, batch.n_id, batch.e_id, batch.rowptr)
    return model(graph.x.index_select(0, batch.n_id), agg, Precision())


def test_full_batch_cached_norm_equals_pyg_gcnconv_cached(graph):
    from torch_geometric.nn import GCNConv

    flags = Flags(batch_source="full", cached_norm=True, fanout=(1,))
    prepared = prepare(graph, flags)
    source = make_batch_source(prepared, flags)
    batch = next(source.epoch(0))
    assert batch.n_id.numel() == graph.num_nodes and batch.edge_index.size(1) == graph.num_edges
    policy = AggregationPolicy.build(flags, Precision(), prepared, torch.device("cpu"), source_norm=source.norm_mode)
    torch.manual_seed(0)
    model = GCN(graph.num_features, 16, 16, 1, dropout=0.0).eval()
    conv = GCNConv(graph.num_features, 16, cached=True, bias=True).eval()
    with torch.no_grad():
        conv.lin.weight.copy_(model.lins[0].weight)
        conv.bias.copy_(model.biases[0])
        ours = [
            model(graph.x, policy.for_batch(batch.edge_index, batch.n_id, batch.e_id), Precision()) for _ in range(2)
        ]
        pyg = [conv(graph.x, graph.edge_index) for _ in range(2)]
    assert conv._cached_edge_index is not None, "PyG cached its normalization"
    torch.testing.assert_close(ours[0], pyg[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ours[1], pyg[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["scatter", "sparse"])
def test_cached_norm_on_sampled_batches_is_the_same_computation(graph, mode):
    base = Flags(fanout=(5, 3), batch_size=128, aggregation=mode, keep_csr=mode == "sparse")
    batch = next(make_batch_source(prepare(graph, base), base).epoch(0))
    torch.manual_seed(0)
    model = GCN(graph.num_features, 16, 8, 2, dropout=0.0).eval()
    with torch.no_grad():
        recomputed = _forward(graph, base, batch, model)
        cached = _forward(graph, base.replace(cached_norm=True), batch, model)
    torch.testing.assert_close(cached, recomputed, rtol=0, atol=0)


def test_estimator_is_a_different_model_on_sampled_batches(graph):
    base = Flags(fanout=(5, 3), batch_size=128)
    batch = next(make_batch_source(prepare(graph, base), base).epoch(0))
    torch.manual_seed(0)
    model = GCN(graph.num_features, 16, 8, 2, dropout=0.0).eval()
    with torch.no_grad():
        per_batch = _forward(graph, base, batch, model)
        estimated = _forward(graph, base.replace(norm_estimator=True), batch, model)
    assert not torch.allclose(per_batch, estimated, atol=1e-3), "the estimator must not pose as exact"
    assert registry.get("norm_estimator").costs_accuracy and not registry.get("cached_norm").costs_accuracy


def test_estimator_accuracy_within_tolerance_on_the_sampled_path(graph):
    cfg = RunConfig(spec=SPEC, flags=Flags(fanout=(5, 3), batch_size=128), epochs=3, hidden=32, lr=0.02)
    base = run(cfg, graph=graph)
    est = run(dataclasses.replace(cfg, flags=cfg.flags.replace(norm_estimator=True)), graph=graph)
    assert base.ok and est.ok
    assert abs(base.accuracy.test - est.accuracy.test) < 0.15, (base.accuracy, est.accuracy)


def test_full_batch_training_runs_and_learns(graph):
    cfg = RunConfig(
        spec=SPEC,
        flags=Flags(fanout=(1, 1), batch_source="full", cached_norm=True, keep_csr=True, aggregation="sparse"),
        epochs=40,
        warmup_steps=2,
        hidden=32,
        lr=0.05,
    )
    r = run(cfg, graph=graph)
    assert r.ok and r.steps.total == 40, "one step per epoch"
    assert r.accuracy.test > 0.5
    link = run(dataclasses.replace(cfg, task="link"), graph=graph)
    assert link.status == "unavailable" and "link prediction" in link.unavailable["batch_source"]
