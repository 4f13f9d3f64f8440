"""Subgraph batch sources (gnnbench/sampling/subgraph.py): exact induced subgraphs, Cluster-GCN's METIS
parts and batches, GraphSAINT's random walks and loss normalization."""

import pytest
import torch

from gnnbench.sampling.subgraph import ClusterGCNBatches, SaintRandomWalkBatches, induced_subgraph, metis_partition
from tests.helpers import check_batch_edges


def test_induced_subgraph_is_exact(graph):
    nodes = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[:500]
    edge_index, e_id = induced_subgraph(graph.csr, nodes)
    inside = torch.zeros(graph.num_nodes, dtype=torch.bool)
    inside[nodes] = True
    expected = (inside[graph.edge_index[0]] & inside[graph.edge_index[1]]).nonzero().view(-1)
    assert torch.equal(torch.sort(e_id).values, expected)
    assert torch.equal(graph.edge_index[:, e_id], nodes[edge_index])


def test_cluster_gcn_parts_and_batches(graph):
    src = ClusterGCNBatches(graph.csr, graph.train_mask, cluster_size=500, clusters_per_batch=2, seed=0)
    sizes = src.part_sizes()
    assert src.num_parts == 8 and int(sizes.sum()) == graph.num_nodes
    assert int(sizes.max()) <= 1.1 * 500 + 1  # METIS balance
    # METIS keeps far more edges inside parts than a random partition would.
    p = src.part
    intra = (p[graph.edge_index[0]] == p[graph.edge_index[1]]).float().mean()
    assert intra > 3 * (1 / src.num_parts)
    batches = list(src.epoch(0))
    assert len(batches) == 4
    assert torch.equal(torch.sort(torch.cat([b.n_id for b in batches])).values, torch.arange(graph.num_nodes))
    for b in batches:
        check_batch_edges(graph, b)
        assert graph.train_mask[b.n_id[b.target]].all()
    assert int(sum(b.target.numel() for b in batches)) == int(graph.train_mask.sum())


def test_cluster_gcn_repartitions_every_n_epochs(graph):
    src = ClusterGCNBatches(graph.csr, graph.train_mask, cluster_size=1000, repartition_every=2, seed=0)
    part0 = src.part.clone()
    list(src.epoch(1))
    assert torch.equal(src.part, part0) and len(src.partition_seconds) == 1
    list(src.epoch(2))
    assert len(src.partition_seconds) == 2 and not torch.equal(src.part, part0)


def test_metis_partition_needs_valid_parts(graph):
    assert metis_partition(graph.csr, 1).unique().tolist() == [0]
    with pytest.raises(ValueError, match="num_parts must be >= 1"):
        metis_partition(graph.csr, 0)


def test_graphsaint_walks_and_normalization(graph):
    src = SaintRandomWalkBatches(graph.csr, graph.train_mask, num_roots=300, walk_length=2, coverage=50, seed=0)
    assert src.node_norm is not None and torch.isfinite(src.node_norm).all()
    batches = list(src.epoch(0))
    assert len(batches) == src.batches_per_epoch
    for b in batches:
        check_batch_edges(graph, b)
        assert b.n_id.unique().numel() == b.n_id.numel()
        assert b.node_norm.shape == b.target.shape
    # Unbiasedness of the loss norm: E[sum over batch of node_norm] = 1 (mean over training nodes).
    totals = torch.tensor(
        [float(b.node_norm.sum()) for b in src.epoch(1)] + [float(b.node_norm.sum()) for b in src.epoch(2)]
    )
    assert abs(float(totals.mean()) - 1.0) < 0.1


def test_random_walk_steps_follow_edges(graph):
    src = SaintRandomWalkBatches(graph.csr, graph.train_mask, num_roots=50, walk_length=1, seed=1)
    nodes = src.walk_nodes(torch.Generator().manual_seed(0))
    assert nodes.numel() <= 100 and nodes.unique().numel() == nodes.numel()
