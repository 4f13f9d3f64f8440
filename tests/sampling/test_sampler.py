import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from gnnbench.flags import Flags
from gnnbench.graphs import CleanOptions, Graph, GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.microbench.pipeline_check import chi_square_uniform, star_forest, subset_frequencies
from gnnbench.sampling.neighbor import NeighborSampleCore, sample_positions
from gnnbench.sampling.sampler import GnnbenchNeighborSampler, make_neighbor_sampler, native_backend_status


def subset_counts(degree: int, fanout: int, num_centers: int, seed: int = 0):
    return subset_frequencies(degree, fanout, num_centers, seed=seed)


@pytest.fixture(params=["loop", "sorted"])
def far_method(request, monkeypatch):
    """Rows of degree > 2k run Floyd's algorithm step by step up to FLOYD_LOOP_MAX_FANOUT, with one sort above:
    force each."""
    import gnnbench.sampling.neighbor as neighbor

    monkeypatch.setattr(neighbor, "FLOYD_LOOP_MAX_FANOUT", 10**9 if request.param == "loop" else 0)
    return request.param


@pytest.mark.parametrize("degree,fanout", [(2, 1), (5, 2), (6, 3), (7, 6), (30, 1)])
def test_without_replacement_is_uniform_over_subsets(degree, fanout, far_method):
    from math import comb

    num_centers = 4000 * comb(degree, fanout) if comb(degree, fanout) < 50 else 60_000
    observed = subset_counts(degree, fanout, num_centers, seed=degree * 100 + fanout)
    assert observed.numel() == comb(degree, fanout), "every k-subset occurs"
    if degree <= 7:
        p = chisquare(observed.double().numpy()).pvalue
        assert p > 1e-3, f"chi-square p={p:.2e} for degree {degree}, fanout {fanout}"
        # The report's own chi-square agrees with scipy's.
        assert chi_square_uniform(observed, comb(degree, fanout))[1] == pytest.approx(p, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("degree,fanout", [(8, 4), (9, 4), (7, 3)])
def test_every_draw_regime_is_uniform_over_subsets(degree, fanout, far_method):
    """deg <= 2k keeps the k smallest uniform keys; deg > 2k runs Floyd's algorithm, step by step or with one
    sort: all exactly uniform."""
    from math import comb

    categories = comb(degree, fanout)
    observed = subset_counts(degree, fanout, 600 * categories, seed=degree * 10 + fanout)
    assert observed.numel() == categories
    assert chisquare(observed.double().numpy()).pvalue > 1e-3


@settings(max_examples=60, deadline=None)
@given(
    k=st.integers(1, 60), rows=st.lists(st.integers(0, 200), min_size=1, max_size=40), seed=st.integers(0, 2**31 - 1)
)
def test_floyd_sorted_gives_the_loops_positions(k, rows, seed):
    """The sort-based Floyd resolves every step's membership test at once: from the same random numbers it
    keeps exactly what the step-by-step loop keeps (degrees just above 2k make the j-pointer chains common)."""
    import gnnbench.sampling.neighbor as neighbor

    deg = torch.tensor([2 * k + 1 + r for r in rows])
    loop = neighbor._floyd(deg, k, torch.Generator().manual_seed(seed))
    fast = neighbor._floyd_sorted(deg, k, torch.Generator().manual_seed(seed))
    assert torch.equal(loop, fast)
    assert all(row.unique().numel() == k for row in fast)
    assert bool((fast < deg.unsqueeze(1)).all()) and int(fast.min()) >= 0


def test_floyd_sorted_follows_chains_of_kept_js():
    """Rows where step s draws the j an earlier step kept, whose own t was a repeat: the loop's answer needs
    the pointer followed, not only the duplicate test."""
    import gnnbench.sampling.neighbor as neighbor

    k, deg = 8, torch.full((20_000,), 17)  # deg = 2k + 1: t often lands on an earlier j
    gen_seed = 3
    loop = neighbor._floyd(deg, k, torch.Generator().manual_seed(gen_seed))
    j, t = neighbor._floyd_draws(deg, k, torch.Generator().manual_seed(gen_seed))
    kept_j = loop == j
    repeat = torch.tensor([[bool((t[r, :s] == t[r, s]).any()) for s in range(k)] for r in range(200)])
    assert bool((kept_j[:200] & ~repeat).any()), "some steps kept j without a repeated t (a followed pointer)"
    assert torch.equal(loop, neighbor._floyd_sorted(deg, k, torch.Generator().manual_seed(gen_seed)))


def test_single_positions_are_uniform_for_large_degree(far_method):
    # Position marginals for degree 30, fanout 4: each position chosen with probability 4/30.
    rowptr, col = star_forest(20_000, 30)
    out = NeighborSampleCore(rowptr, col, (4,), seed=5).sample(torch.arange(20_000))
    pos = out.edge - rowptr[out.node[out.col]]
    counts = torch.bincount(pos, minlength=30).double()
    assert chisquare(counts.numpy()).pvalue > 1e-3


def test_with_replacement_draws_are_independent_uniform():
    rowptr, col = star_forest(20_000, 3)
    core = NeighborSampleCore(rowptr, col, (2,), replace=True, seed=1)
    out = core.sample(torch.arange(20_000))
    assert out.edge.numel() == 40_000
    pos = (out.edge - rowptr[out.node[out.col]]).view(-1, 2)  # core keeps each node's draws adjacent
    pairs = torch.bincount(pos[:, 0] * 3 + pos[:, 1], minlength=9)
    assert chisquare(pairs.double().numpy()).pvalue > 1e-3  # all 9 ordered pairs, repeats included


@st.composite
def small_graph(draw):
    n = draw(st.integers(2, 60))
    m = draw(st.integers(1, 400))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, m), generator=g)
    graph = Graph.from_edges(
        ei, torch.zeros(n, 1), torch.zeros(n, dtype=torch.long), clean=CleanOptions(to_undirected=draw(st.booleans()))
    )
    fanout = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, -1]), min_size=1, max_size=3)))
    seeds = torch.randperm(n, generator=g)[: draw(st.integers(1, n))]
    return graph, fanout, seeds, draw(st.booleans()), seed


@settings(max_examples=60)
@given(small_graph(), st.sampled_from(["int64", "int32"]))
def test_sampled_subgraph_invariants(case, index_dtype):
    graph, fanout, seeds, replace, seed = case
    prepared = prepare(graph, Flags(index_dtype=index_dtype, keep_csr=True))
    csr = prepared.neighbours()
    out = NeighborSampleCore(csr.rowptr, csr.col, fanout, replace=replace, seed=seed).sample(seeds)
    node, row, col, edge = out.node, out.row, out.col, out.edge
    # Relabelling: seeds first, every node once, local ids in range.
    assert torch.equal(node[: seeds.numel()], seeds)
    assert node.unique().numel() == node.numel()
    assert sum(out.num_sampled_nodes) == node.numel() and sum(out.num_sampled_edges) == edge.numel()
    if edge.numel():
        assert int(row.max()) < node.numel() and int(col.max()) < node.numel()
    # Every sampled edge exists: its id points at (neighbour -> target) in the graph.
    ei = graph.edge_index
    assert torch.equal(ei[0][edge], node[row]) and torch.equal(ei[1][edge], node[col])
    # Hop by hop: fanout bounds, no duplicates without replacement, -1 takes all.
    deg = graph.deg
    hop_nodes = torch.split(node, out.num_sampled_nodes)
    hop_edges = torch.split(torch.arange(edge.numel()), out.num_sampled_edges)
    start_local = 0
    for h, k in enumerate(fanout):
        frontier = hop_nodes[h]
        local_ids = torch.arange(start_local, start_local + frontier.numel())
        start_local += frontier.numel()
        e = hop_edges[h]
        per_target = (
            torch.bincount(col[e] - local_ids[0], minlength=frontier.numel())
            if e.numel()
            else torch.zeros(frontier.numel(), dtype=torch.long)
        )
        d = deg[frontier]
        if k == -1:
            expected = d
        elif replace:
            expected = torch.where(d > 0, torch.full_like(d, k), torch.zeros_like(d))
        else:
            expected = torch.minimum(d, torch.full_like(d, k))
        assert torch.equal(per_target, expected), f"hop {h}"
        if not replace:
            pairs = col[e] * graph.num_edges + edge[e]
            assert pairs.unique().numel() == pairs.numel(), "no repeated neighbour edge per target"


def test_same_seed_same_sample_and_errors():
    g = generate(GraphSpec.preset("tiny", num_nodes=2000))
    p = prepare(g, Flags(keep_csr=True))
    csr = p.neighbours()
    a = NeighborSampleCore(csr.rowptr, csr.col, (5, 3), seed=9).sample(torch.arange(100))
    b = NeighborSampleCore(csr.rowptr, csr.col, (5, 3), seed=9).sample(torch.arange(100))
    assert torch.equal(a.node, b.node) and torch.equal(a.edge, b.edge)
    core = NeighborSampleCore(csr.rowptr, csr.col, (5,))
    with pytest.raises(ValueError, match="seed nodes must be distinct"):
        core.sample(torch.tensor([1, 1]))
    with pytest.raises(ValueError, match=r"seed node ids must be in \[0, 1999\]"):
        core.sample(torch.tensor([2000]))
    # The scratch state is restored after errors: a normal call still works.
    assert core.sample(torch.tensor([1, 2])).node[:2].tolist() == [1, 2]
    with pytest.raises(ValueError, match="fanouts must be"):
        NeighborSampleCore(csr.rowptr, csr.col, (0,))


def test_sample_positions_edge_cases():
    owner, pos = sample_positions(torch.tensor([0, 3, 1]), 2, False, None)
    assert owner.tolist().count(0) == 0 and owner.tolist().count(1) == 2 and owner.tolist().count(2) == 1
    owner, pos = sample_positions(torch.tensor([0, 3]), 2, True, None)
    assert owner.tolist() == [1, 1]
    owner, pos = sample_positions(torch.tensor([4, 2]), -1, False, None)
    assert pos.tolist() == [0, 1, 2, 3, 0, 1]


def test_pyg_node_loader_drives_our_sampler():
    from torch_geometric.data import Data
    from torch_geometric.loader import NodeLoader

    g = generate(GraphSpec.preset("tiny", num_nodes=3000))
    p = prepare(g, Flags())
    sampler = GnnbenchNeighborSampler(p, (4, 3), seed=0)
    loader = NodeLoader(
        Data(edge_index=g.edge_index, num_nodes=g.num_nodes),
        node_sampler=sampler,
        input_nodes=g.train_mask.nonzero().view(-1),
        batch_size=128,
        shuffle=True,
    )
    seen = 0
    for data in loader:
        assert torch.equal(g.edge_index[:, data.e_id], data.n_id[data.edge_index])
        seen += data.batch_size
    assert seen == int(g.train_mask.sum())


def test_native_backend_selection():
    g = generate(GraphSpec.preset("tiny", num_nodes=500))
    p = prepare(g, Flags())
    reason = native_backend_status()
    if reason is None:
        sampler = make_neighbor_sampler(p, (3, 2), backend="pyg")
        assert sampler.__class__.__name__ == "NeighborSampler"
    else:
        with pytest.raises(RuntimeError, match="pyg-lib or torch-sparse"):
            make_neighbor_sampler(p, (3, 2), backend="pyg")
    with pytest.raises(ValueError, match="unknown sampler backend 'fast'"):
        make_neighbor_sampler(p, (3, 2), backend="fast")


@pytest.mark.cuda
def test_same_code_runs_on_cuda():
    g = generate(GraphSpec.preset("tiny", num_nodes=3000))
    csr = g.csr
    core = NeighborSampleCore(csr.rowptr.cuda(), csr.col.cuda(), (5, 3), seed=0)
    seeds = torch.arange(0, 3000, 7).cuda()
    out = core.sample(seeds)
    assert out.node.is_cuda and torch.equal(out.node[: seeds.numel()], seeds)
    ei = g.edge_index.cuda()
    assert torch.equal(ei[0][out.edge], out.node[out.row]) and torch.equal(ei[1][out.edge], out.node[out.col])


@pytest.mark.skipif(native_backend_status() is not None, reason="needs pyg-lib or torch-sparse")
def test_native_backend_batches_are_real_edges():
    from torch_geometric.data import Data
    from torch_geometric.loader import NodeLoader

    g = generate(GraphSpec.preset("tiny", num_nodes=2000))
    sampler = make_neighbor_sampler(prepare(g, Flags()), (4, 3), backend="pyg")
    loader = NodeLoader(
        Data(edge_index=g.edge_index, num_nodes=g.num_nodes),
        node_sampler=sampler,
        input_nodes=torch.arange(300),
        batch_size=100,
    )
    for data in loader:
        assert torch.equal(g.edge_index[:, data.e_id], data.n_id[data.edge_index])


def test_scratch_buffers_restored_after_error_mid_hop(monkeypatch):
    import gnnbench.sampling.neighbor as nb

    g = generate(GraphSpec.preset("tiny", num_nodes=2000))
    core = NeighborSampleCore(g.rowptr, g.edge_index[0], (5, 3), seed=0)
    real = nb.sample_positions
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # fail in the second hop, after the first hop relabelled nodes
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(nb, "sample_positions", flaky)
    with pytest.raises(RuntimeError, match="boom"):
        core.sample(torch.arange(50))
    monkeypatch.setattr(nb, "sample_positions", real)
    assert (core._local == -1).all() and (core._first == torch.iinfo(torch.int64).max).all()
    out = core.sample(torch.tensor([0]))
    assert torch.equal(g.edge_index[0][out.edge], out.node[out.row])
