"""Partition-parallel training (gnnbench.parallel.partition_parallel) on 2 gloo ranks over 127.0.0.1.

- each rank's outputs, the summed loss and the all-reduced gradients equal single-process full-batch
  training on the whole graph (GCN and GraphSAGE, both partitioners, scatter and sparse aggregation);
- `gnnbench run --nproc 2` of a partition entry writes one result with the partition's figures;
- what cannot run is refused with the reason.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.measure.run import run_local, survivors
from gnnbench.measure.run.launch import launch
from gnnbench.training import RunConfig, config_unavailable

SPEC = GraphSpec.preset("tiny", num_nodes=600)
METHODS = ["degree"] + (["metis"] if importlib.util.find_spec("pymetis") else [])


def _compare_on_rank(rank: int, world: int, model_name: str, method: str, aggregation: str) -> dict:
    """On each rank: the partition-parallel step against the whole-graph step computed here as reference."""
    from gnnbench.graphs import generate
    from gnnbench.graphs.prepare import prepare
    from gnnbench.models.aggregation_policy import AggregationPolicy
    from gnnbench.models.nets import build_model
    from gnnbench.models.precision import Precision
    from gnnbench.parallel.partition_parallel import PartitionParallel

    graph = generate(SPEC)
    flags = Flags(parallel="partition", partitioner=method, batch_source="full", aggregation=aggregation)
    prepared = prepare(graph, flags)
    precision = Precision("off", "cpu")
    torch.manual_seed(0)
    model = build_model(model_name, graph.num_features, 16, int(graph.y.max()) + 1, 2)
    model.eval()  # no dropout: both sides compute the same function
    # reference: one process, the whole graph
    policy = AggregationPolicy.build(flags, precision, prepared, torch.device("cpu"), source_norm="full")
    out_full = model(prepared.graph.x, policy.for_graph(prepared.graph.edge_index, graph.num_nodes), precision)
    train = graph.train_mask
    loss_full = torch.nn.functional.cross_entropy(out_full[train], graph.y[train])
    loss_full.backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    # partition parallel
    part = PartitionParallel(prepared.graph, prepared.gcn_norm(), flags, torch.device("cpu"), precision)
    out = part.forward(model, precision)
    loss = part.loss(out)
    loss.backward()
    total = part.allreduce(list(model.parameters()), loss)
    owned = part.plan.owned
    return {
        "out": (out.detach() - out_full.detach()[owned]).abs().max().item(),
        "loss": abs(total.item() - loss_full.item()),
        "grad": max((p.grad - g).abs().max().item() for p, g in zip(model.parameters(), ref_grads)),
        "grad_scale": max(g.abs().max().item() for g in ref_grads),
        "owned": owned.numel(),
        "halo": part.plan.num_halo,
        "halo_calls": len(part.comm._intervals),  # forward and backward exchanges + the all-reduce
    }


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
@pytest.mark.parametrize("method", METHODS)
def test_partition_step_equals_whole_graph_step(model_name, method):
    aggregation = "sparse" if model_name == "sage" else "scatter"
    ranks = run_local(_compare_on_rank, 2, model_name, method, aggregation, timeout=20.0, wall_timeout=120.0)
    assert not survivors("gnnbench-ranks-")
    assert sum(r["owned"] for r in ranks) == SPEC.num_nodes and all(r["halo"] > 0 for r in ranks)
    for r in ranks:
        assert r["out"] < 1e-5 and r["loss"] < 1e-6, r
        assert r["grad"] < 1e-5 * max(1.0, r["grad_scale"]), r
        # two layers: two forward exchanges, one backward exchange per layer whose rows need a gradient (all
        # of GCN's, which exchanges x W; SAGE's second only, its first carries the raw features), one all-reduce
        assert r["halo_calls"] == 2 + (2 if model_name == "gcn" else 1) + 1


@pytest.mark.slow
def test_partition_run_writes_one_result_with_the_partition_figures(tmp_path):
    cfg = RunConfig(
        spec=SPEC, epochs=4, warmup_steps=1, nproc=2, flags=registry.flags_for(["partition_degree"], Flags())
    )
    r = launch(cfg, tmp_path / "result.json")
    assert not survivors("gnnbench-ranks-")
    assert r["status"] == "ok" and 0 <= r["accuracy"]["test"] <= 1  # 4 full-batch steps: too few to learn
    d = r["distributed"]
    assert d["world_size"] == 2 and d["parallel"] == "partition" and 0 < d["comm_share"] < 1
    p = d["partition"]
    assert p["method"] == "degree" and p["parts"] == 2 and 0 < p["edge_cut_fraction"] < 1
    assert p["halo_rows_per_step"] > 0 and p["halo_bytes_per_step"] > 0 and p["grad_bytes_per_step"] > 0
    assert [x["rank"] for x in d["per_rank"]] == [0, 1]
    assert sum(x["part"]["owned_rows"] for x in d["per_rank"]) == SPEC.num_nodes


def test_partition_refusals_name_the_reason():
    base = RunConfig(spec=SPEC, nproc=2, flags=registry.flags_for(["partition_degree"], Flags()))
    assert config_unavailable(base) == {}
    sampled = dataclasses.replace(base, flags=dataclasses.replace(base.flags, batch_source="neighbor"))
    assert "needs batch_source='full' (got 'neighbor'" in config_unavailable(sampled)["batch_source"]
    link = dataclasses.replace(base, task="link")
    assert "trains node classification" in config_unavailable(link)["parallel"]
    compiled = dataclasses.replace(base, flags=dataclasses.replace(base.flags, compile=True))
    assert "torch.compile is not applied" in config_unavailable(compiled)["compile"]
    placed = dataclasses.replace(base, flags=dataclasses.replace(base.flags, pin_memory=True))
    assert (
        "feature placement, pinning and prefetch apply to sampled batches"
        in config_unavailable(placed)["feature_placement"]
    )


def test_partition_parallel_refuses_the_sampled_batch_feature_store_options():
    from gnnbench.flags import Flags, RunContext
    from gnnbench.parallel.partition_parallel import unavailable

    ctx = RunContext(device="cpu", world_size=2)
    for changes, field in (({"pipeline_depth": 2}, "pipeline_depth"), ({"feature_dtype": "float16"}, "feature_dtype")):
        flags = Flags(parallel="partition", batch_source="full", **changes)
        assert any(u.field == field and "sampled batches" in u.reason for u in unavailable(flags, ctx)), changes
