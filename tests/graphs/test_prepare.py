import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gnnbench import registry
from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs import CleanOptions, Graph, index
from gnnbench.graphs.norm import gcn_norm
from gnnbench.graphs.prepare import IndexOverflowError, check_index_fits, prepare, to_index_dtype, unavailable
from tests.graphs_strategies import random_edges

INT32_MAX = 2**31 - 1


@given(st.integers(0, 2**40))
def test_int32_guard_raises_exactly_past_the_limit(max_value):
    if max_value > INT32_MAX:
        with pytest.raises(IndexOverflowError, match=f"largest node id {max_value} does not fit int32"):
            check_index_fits(max_value, torch.int32, "node id")
    else:
        check_index_fits(max_value, torch.int32, "node id")
    check_index_fits(max_value, torch.int64, "node id")


@given(st.integers(-5, 5))
def test_int32_conversion_never_wraps(offset):
    value = INT32_MAX + offset
    t = torch.tensor([0, value], dtype=torch.int64)
    if value > INT32_MAX:
        with pytest.raises(IndexOverflowError):
            to_index_dtype(t, torch.int32)
    else:
        out = to_index_dtype(t, torch.int32)
        assert out.dtype == torch.int32 and torch.equal(out.to(torch.int64), t)


def test_int32_guard_uses_graph_size_not_only_present_ids():
    # A graph whose node count exceeds int32 must be refused even if its edges use small ids.
    ei = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(IndexOverflowError, match="node id 2147483648"):
        to_index_dtype(ei, torch.int32, what="node id", max_value=2**31)


@given(random_edges())
def test_prepare_int32_preserves_graph_and_halves_index_bytes(edges):
    edge_index, n = edges
    g = Graph.from_edges(edge_index, torch.zeros(n, 2), torch.zeros(n, dtype=torch.long))
    for flags in (registry.flags_for(["int32"]), registry.flags_for(["int32", "csr"])):
        p = prepare(g, flags)
        assert p.graph.edge_index.dtype == torch.int32 and p.graph.rowptr.dtype == torch.int32
        assert torch.equal(p.graph.edge_index.to(torch.int64), g.edge_index)
        assert p.index_bytes_after * 2 == p.index_bytes_before
    base = prepare(g, Flags())
    assert base.index_bytes_after == base.index_bytes_before == g.edge_index.nbytes + g.rowptr.nbytes


@given(random_edges(), st.sampled_from(["int64", "int32"]))
def test_cached_and_recomputed_agree(edges, index_dtype):
    edge_index, n = edges
    g = Graph.from_edges(
        edge_index, torch.zeros(n, 2), torch.zeros(n, dtype=torch.long), clean=CleanOptions(self_loops="keep")
    )
    base = prepare(g, Flags(index_dtype=index_dtype))
    opt = prepare(g, Flags(index_dtype=index_dtype, cached_norm=True, keep_csr=True, batch_source="full"))
    assert base.norm is None and base.csr is None
    assert opt.norm is not None and opt.csr is not None
    assert opt.gcn_norm() is opt.gcn_norm(), "cached: the same object every call"
    torch.testing.assert_close(opt.gcn_norm().edge_weight, base.gcn_norm().edge_weight)
    torch.testing.assert_close(opt.gcn_norm().self_weight, base.gcn_norm().self_weight)
    derived, kept = base.neighbours(), opt.neighbours()
    assert torch.equal(derived.rowptr, kept.rowptr)
    assert torch.equal(derived.col, kept.col)  # edges are target-sorted, the stable sort keeps order


def test_prepared_graph_on_tiny(tiny_graph):
    p = prepare(tiny_graph, registry.flags_for(registry.names()))
    ref = gcn_norm(tiny_graph.edge_index, tiny_graph.num_nodes)
    torch.testing.assert_close(p.norm.edge_weight, ref.edge_weight)
    assert p.index_bytes_before == 8 * (tiny_graph.edge_index.numel() + tiny_graph.num_nodes + 1)
    assert p.index_bytes_after * 2 == p.index_bytes_before


def test_prepare_reexports_the_index_helpers():
    assert IndexOverflowError is index.IndexOverflowError
    assert check_index_fits is index.check_index_fits
    assert to_index_dtype is index.to_index_dtype


@pytest.mark.parametrize(
    "num_nodes, num_edges, what, value",
    [
        (2**31 + 1, 10, "node id", 2**31),
        (10, 2**31, "edge offset", 2**31),
    ],
)
def test_unavailable_refuses_int32_when_the_graph_does_not_fit(num_nodes, num_edges, what, value):
    ctx = RunContext(num_nodes=num_nodes, num_edges=num_edges)
    with pytest.raises(IndexOverflowError) as raised:
        check_index_fits(value, torch.int32, what)
    assert unavailable(Flags(index_dtype="int32"), ctx) == [Unavailable("index_dtype", str(raised.value))]
    assert unavailable(Flags(), ctx) == [], "int64 always fits"


@pytest.mark.parametrize(
    "num_nodes, num_edges",
    [
        (None, None),
        (2**31, None),
        (None, INT32_MAX),
        (2**31, INT32_MAX),
        (1, 0),
    ],
)
def test_unavailable_accepts_int32_when_sizes_fit_or_are_unknown(num_nodes, num_edges):
    ctx = RunContext(num_nodes=num_nodes, num_edges=num_edges)
    assert unavailable(Flags(index_dtype="int32"), ctx) == []
