"""Partitioners (METIS, degree buckets): ownership, edge cut, balance and halo against direct counts."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gnnbench.graphs import CleanOptions, Graph, GraphSpec, generate
from gnnbench.parallel.partition import DEALS, METHODS, degree_buckets, partition
from tests.graphs_strategies import random_edges

CONFIGS = [("metis", "round_robin")] + [("degree", deal) for deal in DEALS]


def _graph(edge_index: torch.Tensor, n: int) -> Graph:
    """Directed, duplicates and self loops kept: the partitioners must cope with both."""
    return Graph.from_edges(
        edge_index, torch.zeros(n, 1), torch.zeros(n, dtype=torch.int64), clean=CleanOptions(dedupe=False)
    )


def _dense_counts(edge_index: torch.Tensor, parts: np.ndarray, k: int) -> np.ndarray:
    """``[k, k]`` count of stored edges from a source part (row) to a target part (column)."""
    counts = np.zeros((k, k), dtype=np.int64)
    src, dst = edge_index.numpy()
    np.add.at(counts, (parts[src], parts[dst]), 1)
    return counts


def _check_against_direct_count(g: Graph, p, k: int) -> None:
    parts = p.parts.numpy()
    # Every node in exactly one part: one entry per node, in range, and the owned sets tile the nodes.
    assert p.parts.dtype == torch.int64 and p.parts.shape == (g.num_nodes,)
    assert parts.min() >= 0 and parts.max() < k
    owned = torch.cat([p.owned_nodes(i) for i in range(k)])
    assert torch.equal(owned.sort().values, torch.arange(g.num_nodes))

    counts = _dense_counts(g.edge_index, parts, k)
    total = counts.sum()
    cut = (total - np.trace(counts)) / total if total else 0.0
    assert p.edge_cut_fraction == pytest.approx(cut, abs=1e-12)
    nodes = np.bincount(parts, minlength=k)
    assert p.node_balance == pytest.approx(nodes.max() / nodes.mean())
    by_target = counts.sum(axis=0)
    assert p.edge_balance == pytest.approx(by_target.max() / by_target.mean() if total else 1.0)

    # Halo: dense adjacency, a node is in part i's halo when it is remote and feeds some target of part i.
    adj = np.zeros((g.num_nodes, g.num_nodes), dtype=bool)
    adj[g.edge_index[0].numpy(), g.edge_index[1].numpy()] = True
    for i in range(k):
        expected = np.flatnonzero(adj[:, parts == i].any(axis=1) & (parts != i))
        np.testing.assert_array_equal(p.halo_nodes(i).numpy(), expected)
        assert int(p.halo_sizes[i]) == expected.size


@given(random_edges(max_nodes=40, max_edges=160), st.integers(2, 5), st.sampled_from(CONFIGS), st.integers(0, 3))
def test_partition_invariants_on_random_graphs(edges, k, config, seed):
    edge_index, n = edges
    if n < k:
        n = k  # extra isolated nodes
    g = _graph(edge_index, n)
    method, deal = config
    p = partition(g, k, method, seed=seed, deal=deal)
    assert p.num_parts == k and p.seconds >= 0
    _check_against_direct_count(g, p, k)
    if method == "degree" and deal == "round_robin":
        nodes = p.nodes_per_part
        assert int(nodes.max() - nodes.min()) <= 1
        # each round of k nodes goes out in decreasing degree: the excess is at most the largest degree
        assert int(p.edges_per_part.max() - p.edges_per_part.min()) <= int(g.deg.max())


@pytest.fixture(scope="module")
def sbm():
    return generate(GraphSpec(num_nodes=3000, avg_degree=10.0, feature_dim=4, homophily=0.9, seed=1))


@pytest.mark.parametrize("method,deal", CONFIGS)
@pytest.mark.parametrize("k", [2, 4])
def test_partition_direct_count_on_generated_graph(sbm, method, deal, k):
    p = partition(sbm, k, method, deal=deal)
    _check_against_direct_count(sbm, p, k)
    assert p.node_balance < 1.05


def test_metis_cuts_less_than_degree_buckets_on_a_homophilous_graph(sbm):
    metis, degree = partition(sbm, 4, "metis"), partition(sbm, 4, "degree")
    # degree buckets ignore structure: about 1 - 1/k of the edges are cut; METIS finds the classes
    assert degree.edge_cut_fraction == pytest.approx(0.75, abs=0.05)
    assert metis.edge_cut_fraction < 0.6 * degree.edge_cut_fraction
    assert degree.edge_balance < 1.05


def test_degree_bucket_rule():
    deg = torch.tensor([0, 1, 2, 3, 4, 7, 8, 1023, 1024])
    assert degree_buckets(deg).tolist() == [0, 1, 2, 2, 3, 3, 4, 10, 11]


def test_degree_block_deal_splits_each_bucket_into_contiguous_blocks():
    # ten nodes of degree 1 (a directed ring), one bucket: blocks of ids 0-4 and 5-9
    ring = torch.stack([torch.arange(10), (torch.arange(10) + 1) % 10])
    p = partition(_graph(ring, 10), 2, "degree", deal="block")
    assert p.parts.tolist() == [0] * 5 + [1] * 5
    assert p.method == "degree/block"
    rr = partition(_graph(ring, 10), 2, "degree")
    assert rr.parts.tolist() == [0, 1] * 5 and rr.method == "degree"
    assert p.edge_cut_fraction == pytest.approx(0.2) and rr.edge_cut_fraction == 1.0


def test_metis_is_seeded():
    g = generate(GraphSpec(num_nodes=500, avg_degree=6.0, feature_dim=2))
    assert torch.equal(partition(g, 3, "metis", seed=5).parts, partition(g, 3, "metis", seed=5).parts)


@pytest.mark.parametrize(
    "k,match",
    [(1, r"num_parts .*\[2, num_nodes = 6\].*got 1"), (7, r"num_parts .*got 7"), (2.0, r"num_parts .*got 2\.0")],
)
def test_bad_num_parts_is_refused(k, match):
    g = _graph(torch.tensor([[0, 1], [1, 2]]), 6)
    with pytest.raises(ValueError, match=match):
        partition(g, k, "degree")


def test_unknown_method_and_deal_are_refused():
    g = _graph(torch.tensor([[0, 1], [1, 2]]), 6)
    with pytest.raises(ValueError, match=r"unknown partition method 'kl'; accepted: metis, degree"):
        partition(g, 2, "kl")
    with pytest.raises(ValueError, match=r"unknown degree deal 'snake'; accepted: round_robin, block"):
        partition(g, 2, "degree", deal="snake")
    with pytest.raises(ValueError, match=r"part must be an integer in \[0, 1\] \(got 2\)"):
        partition(g, 2, "degree").halo_nodes(2)
    assert set(METHODS) == {"metis", "degree"}
