import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gnnbench.graphs.norm import gcn_norm
from tests.graphs_strategies import random_edges


def dense_reference(edge_index, n, add_self_loops):
    """float64 D^-1/2 (A + I) D^-1/2 with A[target, source] (multi-edges summed), zero-degree masked."""
    A = torch.zeros(n, n, dtype=torch.float64)
    A.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.float64), accumulate=True)
    if add_self_loops:
        # "remaining" self loops: exactly one per node (weight 1 here), repeated loops count once
        torch.diagonal(A).fill_(1.0)
    deg = A.sum(1)
    dinv = torch.where(deg > 0, deg.pow(-0.5), torch.zeros_like(deg))
    return dinv[:, None] * A * dinv[None, :]


def dense_from_norm(norm, edge_index, n):
    M = torch.zeros(n, n, dtype=torch.float64)
    M.index_put_((edge_index[1], edge_index[0]), norm.edge_weight.double(), accumulate=True)
    M += torch.diag(norm.self_weight.double())
    return M


@given(random_edges(), st.booleans(), st.sampled_from([torch.int64, torch.int32]))
def test_norm_matches_dense_float64_reference(edges, add_self_loops, index_dtype):
    edge_index, n = edges
    norm = gcn_norm(edge_index.to(index_dtype), n, add_self_loops=add_self_loops)
    assert norm.edge_weight.shape == (edge_index.size(1),) and norm.self_weight.shape == (n,)
    got = dense_from_norm(norm, edge_index, n)
    torch.testing.assert_close(got, dense_reference(edge_index, n, add_self_loops), rtol=1e-5, atol=1e-6)


@given(random_edges(), st.booleans())
def test_norm_finite_with_isolated_nodes(edges, add_self_loops):
    edge_index, n = edges
    n_total = n + 3  # three extra nodes that no edge touches
    norm = gcn_norm(edge_index, n_total, add_self_loops=add_self_loops)
    assert torch.isfinite(norm.edge_weight).all() and torch.isfinite(norm.self_weight).all()
    isolated = norm.self_weight[n:]
    assert torch.equal(isolated, torch.ones(3) if add_self_loops else torch.zeros(3))


def test_repeated_self_loops_count_once_like_pyg():
    from torch_geometric.nn.conv.gcn_conv import gcn_norm as pyg_gcn_norm

    edge_index = torch.tensor([[0, 0, 1], [0, 0, 0]])  # two loops on node 0 and one in-edge
    ref_ei, ref_w = pyg_gcn_norm(edge_index, None, 2, add_self_loops=True)
    ref = torch.zeros(2, 2, dtype=torch.float64)
    ref.index_put_((ref_ei[1], ref_ei[0]), ref_w.double(), accumulate=True)
    ours = dense_from_norm(gcn_norm(edge_index, 2), edge_index, 2)
    torch.testing.assert_close(ours, ref)
    assert ours[0, 0] == pytest.approx(0.5)


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_norm_matches_pyg(add_self_loops):
    from torch_geometric.nn.conv.gcn_conv import gcn_norm as pyg_gcn_norm

    g = torch.Generator().manual_seed(3)
    n = 40
    edge_index = torch.randint(0, 30, (2, 200), generator=g)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    ref_ei, ref_w = pyg_gcn_norm(edge_index, None, n, add_self_loops=add_self_loops)
    ref = torch.zeros(n, n, dtype=torch.float64)
    ref.index_put_((ref_ei[1], ref_ei[0]), ref_w.double(), accumulate=True)
    ours = dense_from_norm(gcn_norm(edge_index, n, add_self_loops=add_self_loops), edge_index, n)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


def test_gcn_norm_traces_as_one_graph_without_breaks():
    """Static shapes only (no nonzero(), no branch on the data): torch.compile traces it whole, so a compiled
    GCN forward is not split around it. fullgraph=True raises on any graph break."""
    import torch._dynamo

    torch._dynamo.reset()
    compiled = torch.compile(gcn_norm, backend="eager", fullgraph=True)
    ei = torch.tensor([[0, 1, 1, 2, 2], [1, 0, 1, 2, 2]])  # node 1 one loop, node 2 two (the last one kept)
    out, ref = compiled(ei, 4), gcn_norm(ei, 4)
    assert torch.equal(out.edge_weight, ref.edge_weight) and torch.equal(out.self_weight, ref.self_weight)
    assert float(ref.edge_weight[3]) == 0.0 and float(ref.self_weight[2]) == 0.0  # the repeated loop is dropped
