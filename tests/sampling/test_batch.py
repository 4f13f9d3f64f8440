"""``SampledStats`` (gnnbench.sampling.batch): the neighbour explosion's figures, on hand-made batches whose
counts are known: nodes and edges per batch, the share of the graph a batch covers, and the per-hop means."""

import pytest
import torch

from gnnbench.sampling.batch import Batch, SampledStats


def hand_made(
    hop_nodes: list[int] | None, hop_edges: list[int] | None, *, nodes: int | None = None, edges: int | None = None
) -> Batch:
    """A batch of ``sum(hop_nodes)`` nodes and ``sum(hop_edges)`` edges (or ``nodes`` and ``edges`` for a batch
    without per-hop figures); only the counts matter to the statistics."""
    n = sum(hop_nodes) if hop_nodes is not None else nodes
    e = sum(hop_edges) if hop_edges is not None else edges
    return Batch(
        n_id=torch.arange(n),
        edge_index=torch.zeros(2, e, dtype=torch.int64),
        e_id=torch.arange(e),
        target=torch.arange(hop_nodes[0] if hop_nodes else n),
        num_sampled_nodes=hop_nodes,
        num_sampled_edges=hop_edges,
    )


def test_before_the_first_batch_there_is_nothing_to_report():
    assert SampledStats(graph_nodes=100).to_dict() is None


def test_coverage_and_per_hop_means_of_hand_made_batches():
    """Two batches on a 100-node graph: 4 seeds each; 30 and 20 nodes, 42 and 22 edges."""
    stats = SampledStats(graph_nodes=100)
    stats.add(hand_made([4, 10, 16], [12, 30]))
    stats.add(hand_made([4, 6, 10], [8, 14]))
    d = stats.to_dict()
    assert d["batches"] == 2
    assert d["nodes_per_batch"] == 25 and d["edges_per_batch"] == 32
    assert d["coverage"] == pytest.approx(0.25)  # 25 nodes per batch of the graph's 100
    assert d["nodes_per_hop"] == [4, 8, 13]  # hop 0: the seeds
    assert d["edges_per_hop"] == [10, 22]
    # the per-hop means add up to the per-batch ones
    assert sum(d["nodes_per_hop"]) == d["nodes_per_batch"] and sum(d["edges_per_hop"]) == d["edges_per_batch"]
    assert (stats.hop_nodes, stats.hop_edges) == ([8, 16, 26], [20, 44]), "sums over batches"


def test_a_batch_without_hops_covers_what_it_holds():
    """A full batch (or a subgraph batch) has no per-hop figures: coverage is its share of the graph, and the
    per-hop lists stay empty."""
    stats = SampledStats(graph_nodes=50)
    stats.add(hand_made(None, None, nodes=50, edges=400))
    d = stats.to_dict()
    assert d["coverage"] == 1.0 and d["nodes_per_batch"] == 50 and d["edges_per_batch"] == 400
    assert d["nodes_per_hop"] == [] and d["edges_per_hop"] == []


def test_the_figures_of_a_real_sampled_batch(quick_graph):
    """On a batch gnnbench's sampler drew: the per-hop counts the batch carries are its nodes and edges."""
    from gnnbench.flags import Flags
    from gnnbench.graphs.prepare import prepare
    from gnnbench.sampling.sources import make_batch_source

    flags = Flags(fanout=(5, 3), batch_size=96)
    source = make_batch_source(prepare(quick_graph, flags), flags, seed=0)
    try:
        batch = next(iter(source.epoch(0)))
    finally:
        source.close()
    stats = SampledStats(graph_nodes=quick_graph.num_nodes)
    stats.add(batch)
    d = stats.to_dict()
    assert d["nodes_per_hop"][0] == 96 and len(d["nodes_per_hop"]) == 3 and len(d["edges_per_hop"]) == 2
    assert sum(d["nodes_per_hop"]) == batch.num_nodes and sum(d["edges_per_hop"]) == batch.num_edges
    assert d["coverage"] == pytest.approx(batch.num_nodes / quick_graph.num_nodes)
