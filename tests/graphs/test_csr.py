import torch
from hypothesis import given

from gnnbench.graphs import CleanOptions, Graph
from gnnbench.graphs.csr import coo_to_csr, csr_to_coo, sort_edges_by_target
from tests.graphs_strategies import random_edges


@given(random_edges())
def test_coo_csr_round_trip_and_degrees(edges):
    edge_index, n = edges
    csr, perm = coo_to_csr(edge_index, n)
    assert csr.num_nodes == n and csr.num_edges == edge_index.size(1)
    # Degrees from CSR equal a histogram of targets.
    assert torch.equal(csr.degree(), torch.bincount(edge_index[1], minlength=n))
    # Back to COO gives the same multiset of edges, in CSR order = COO permuted by perm.
    back = csr_to_coo(csr)
    assert torch.equal(back, edge_index[:, perm])
    assert sorted(map(tuple, back.t().tolist())) == sorted(map(tuple, edge_index.t().tolist()))
    # Each node's neighbour list holds exactly its in-neighbours.
    for i in range(n):
        nbrs = csr.col[csr.rowptr[i] : csr.rowptr[i + 1]]
        expected = edge_index[0][edge_index[1] == i]
        assert sorted(nbrs.tolist()) == sorted(expected.tolist())


@given(random_edges())
def test_graph_csr_is_view_of_sorted_coo(edges):
    edge_index, n = edges
    g = Graph.from_edges(
        edge_index, torch.zeros(n, 2), torch.zeros(n, dtype=torch.long), clean=CleanOptions(dedupe=False)
    )
    csr = g.csr
    assert csr.col.data_ptr() == g.edge_index[0].data_ptr()  # no second copy of the column array
    assert torch.equal(csr_to_coo(csr), g.edge_index)
    assert torch.equal(g.deg, torch.bincount(edge_index[1], minlength=n))
    derived, _ = coo_to_csr(edge_index, n)
    assert torch.equal(derived.rowptr, csr.rowptr)
    # Same neighbour multisets per node (order within a node may differ).
    sorted_ei, _ = sort_edges_by_target(edge_index, n)
    assert torch.equal(sorted_ei, g.edge_index)
