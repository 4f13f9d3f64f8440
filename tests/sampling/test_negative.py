import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnbench.graphs import GraphSpec, generate
from gnnbench.sampling.negative import NegativeSampler


@pytest.fixture(scope="module")
def lp_graph():
    return generate(GraphSpec.preset("tiny", num_nodes=3000, avg_degree=30.0)).link_split()


@pytest.mark.parametrize("mode", ["uniform", "degree"])
def test_strict_negatives_are_never_training_positives(lp_graph, mode):
    g = lp_graph
    neg = NegativeSampler(g.edge_index, g.num_nodes, mode=mode, strict=True, seed=1)
    pairs = neg.sample(50_000)
    positives = set((g.edge_index[0] * g.num_nodes + g.edge_index[1]).tolist())
    drawn = (pairs[0] * g.num_nodes + pairs[1]).tolist()
    assert not any(k in positives for k in drawn)
    assert (pairs[0] != pairs[1]).all()
    assert neg.stats.negatives == 50_000 and neg.stats.seconds_per_1k > 0
    assert neg.stats.rejected > 0, "a dense-enough graph must trigger rejections"


def test_corrupting_given_sources(lp_graph):
    g = lp_graph
    neg = NegativeSampler(g.edge_index, g.num_nodes, seed=2)
    src = g.edge_index[0][:1000]
    pairs = neg.sample(1000, src=src)
    assert torch.equal(pairs[0], src)
    assert not neg.is_edge(pairs[0], pairs[1]).any()


def test_is_edge_matches_set_membership(lp_graph):
    g = lp_graph
    neg = NegativeSampler(g.edge_index, g.num_nodes)
    gen = torch.Generator().manual_seed(0)
    u = torch.randint(0, g.num_nodes, (20_000,), generator=gen)
    v = torch.randint(0, g.num_nodes, (20_000,), generator=gen)
    u = torch.cat([u, g.edge_index[0][:500]])
    v = torch.cat([v, g.edge_index[1][:500]])
    positives = set((g.edge_index[0] * g.num_nodes + g.edge_index[1]).tolist())
    expected = torch.tensor([k in positives for k in (u * g.num_nodes + v).tolist()])
    assert torch.equal(neg.is_edge(u, v), expected)


def test_degree_weighting_follows_degree_power(lp_graph):
    g = lp_graph
    deg = torch.bincount(g.edge_index[0], minlength=g.num_nodes) * 2.0
    neg = NegativeSampler(g.edge_index, g.num_nodes, mode="degree", strict=False, seed=3)
    pairs = neg.sample(400_000)
    freq = torch.bincount(pairs[1], minlength=g.num_nodes).double()
    w = deg.double().pow(0.75)
    expected = w / w.sum() * pairs.size(1)
    hubs = torch.topk(deg, 20).indices
    rel = (freq[hubs] - expected[hubs]).abs() / expected[hubs]
    assert float(rel.max()) < 0.15
    uniform = NegativeSampler(g.edge_index, g.num_nodes, mode="uniform", strict=False, seed=3).sample(400_000)
    assert torch.bincount(uniform[1], minlength=g.num_nodes)[hubs].sum() < freq[hubs].sum() / 3


@settings(max_examples=20)
@given(st.integers(3, 12), st.integers(0, 1000))
def test_dense_graph_rejection_converges_or_says_why(n, seed):
    # The complete graph minus one pair: only that pair (both ways) is a valid negative.
    ii, jj = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = (ii != jj) & ~(((ii == 0) & (jj == 1)) | ((ii == 1) & (jj == 0)))
    ei = torch.stack([ii[keep], jj[keep]])
    neg = NegativeSampler(ei, n, seed=seed, max_rounds=2000)
    pairs = neg.sample(4)
    assert set(map(tuple, pairs.t().tolist())) <= {(0, 1), (1, 0)}
    full = torch.stack([ii[ii != jj], jj[ii != jj]])
    with pytest.raises(RuntimeError, match="did not converge.*too dense"):
        NegativeSampler(full, n, seed=seed, max_rounds=3).sample(5)


def test_bad_mode_is_named():
    with pytest.raises(ValueError, match="mode must be one of 'uniform', 'degree' \\(got 'hard'\\)"):
        NegativeSampler(torch.zeros(2, 0, dtype=torch.long), 5, mode="hard")


def test_link_loader_with_our_sampler_and_strict_negatives(lp_graph):
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkLoader
    from torch_geometric.sampler import NegativeSampling

    from gnnbench.flags import Flags
    from gnnbench.graphs.prepare import prepare
    from gnnbench.sampling.sampler import GnnbenchNeighborSampler

    g = lp_graph
    p = prepare(g, Flags())
    negs = NegativeSampler(g.edge_index, g.num_nodes, seed=0)
    sampler = GnnbenchNeighborSampler(p, (5, 3), negatives=negs)
    data = Data(edge_index=g.edge_index, num_nodes=g.num_nodes)
    for mode in ("binary", "triplet"):
        loader = LinkLoader(
            data,
            link_sampler=sampler,
            edge_label_index=g.edge_index[:, :600],
            batch_size=200,
            neg_sampling=NegativeSampling(mode, amount=1),
        )
        batch = next(iter(loader))
        if mode == "binary":
            ends = batch.n_id[batch.edge_label_index]
            assert torch.equal(ends[:, :200], g.edge_index[:, batch.input_id])
            assert batch.edge_label[:200].eq(1).all() and batch.edge_label[200:].eq(0).all()
            assert not negs.is_edge(ends[0, 200:], ends[1, 200:]).any()
        else:
            src, pos, neg = (
                batch.n_id[batch.src_index],
                batch.n_id[batch.dst_pos_index],
                batch.n_id[batch.dst_neg_index],
            )
            assert torch.equal(torch.stack([src, pos]), g.edge_index[:, batch.input_id])
            assert not negs.is_edge(src, neg).any()
