"""gnnbench's sampler behind PyG's ``NeighborSampler`` (:mod:`gnnbench.sampling.pyg_fallback`): the batches a
user's ``NeighborLoader`` / ``LinkNeighborLoader`` yields through it are real neighbourhoods of the graph (every
``edge_index`` column with its ``e_id`` is a graph edge, seeds first, each target with ``min(fanout, in-degree)``
in-edges per hop), seeded by torch's global generator; what it cannot sample it refuses, with the reason.
Where pyg-lib or torch-sparse is installed the same checks run on PyG's native sampler."""

import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader

from gnnbench.sampling.pyg_fallback import FALLBACK, pyg_backend, pyg_sampling_fallback

# PyG warns that its NeighborSampler without pyg-lib is deprecated: the point here (the fallback) is known
pytestmark = pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without a 'pyg-lib':UserWarning")

NATIVE = pyg_backend() != "none"


def _graph(n=200, e=1500, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Data(
        x=torch.randn(n, 4, generator=g),
        edge_index=torch.randint(0, n, (2, e), generator=g),
        y=torch.randint(0, 3, (n,), generator=g),
    )


def _check_batch(data, batch, fanout, seeds):
    """``batch`` is a neighbourhood of ``data``: seeds first, every edge a graph edge with its id, each hop's
    targets with ``min(fanout, in-degree)`` distinct in-edges."""
    src_g, dst_g = data.edge_index
    n_id, (row, col), e_id = batch.n_id, batch.edge_index, batch.e_id
    assert n_id.unique().numel() == n_id.numel(), "a node appears once"
    assert torch.equal(n_id[: seeds.numel()], seeds), "the seeds come first, in order"
    # every sampled edge is the graph edge its e_id names, in the direction PyG passes messages (source -> target)
    assert torch.equal(n_id[row], src_g[e_id]) and torch.equal(n_id[col], dst_g[e_id])
    assert e_id.unique().numel() == e_id.numel(), "no edge drawn twice"
    in_degree = torch.bincount(dst_g, minlength=data.num_nodes)
    nodes_per_hop = list(batch.num_sampled_nodes)
    edges_per_hop = list(batch.num_sampled_edges)
    assert len(edges_per_hop) == len(fanout) and sum(edges_per_hop) == e_id.numel()
    node_start = edge_start = 0
    for hop, k in enumerate(fanout):
        targets = torch.arange(node_start, node_start + nodes_per_hop[hop])
        hop_col = col[edge_start : edge_start + edges_per_hop[hop]]
        assert bool(((hop_col >= targets[0]) & (hop_col <= targets[-1])).all()), f"hop {hop}: edges into its targets"
        per_target = torch.bincount(hop_col - node_start, minlength=targets.numel())
        assert int(per_target.max()) <= k, f"hop {hop}: at most {k} neighbours a target"
        assert torch.equal(per_target, in_degree[n_id[targets]].clamp(max=k)), f"hop {hop}: min(fanout, in-degree)"
        node_start += nodes_per_hop[hop]
        edge_start += edges_per_hop[hop]


@pytest.mark.parametrize("fanout", [[5], [4, 3], [3, 2, 2]])
def test_neighbor_loader_batches_through_the_fallback_are_real_neighbourhoods(fanout):
    data = _graph()
    torch.manual_seed(0)
    with pyg_sampling_fallback() as backend:
        assert backend == (pyg_backend() if NATIVE else FALLBACK)
        loader = NeighborLoader(data, num_neighbors=fanout, batch_size=32, shuffle=True)
        batches = list(loader)
    assert sum(b.batch_size for b in batches) == data.num_nodes
    perm = torch.cat([b.input_id for b in batches])
    assert torch.equal(perm.sort().values, torch.arange(data.num_nodes)), "every node a seed once an epoch"
    for b in batches:
        _check_batch(data, b, fanout, b.input_id)
        assert torch.equal(b.x, data.x[b.n_id]) and torch.equal(b.y, data.y[b.n_id]), "PyG's own gather"


def test_link_neighbor_loader_batches_through_the_fallback_are_real_neighbourhoods():
    data = _graph(n=150, e=1000)
    fanout = [4, 2]
    torch.manual_seed(0)
    with pyg_sampling_fallback():
        loader = LinkNeighborLoader(data, num_neighbors=fanout, batch_size=32, neg_sampling_ratio=1.0, shuffle=True)
        batches = list(loader)
    src_g, dst_g = data.edge_index
    edges = set(zip(src_g.tolist(), dst_g.tolist()))
    for b in batches:
        seeds = b.n_id[: b.num_sampled_nodes[0]]
        _check_batch(data, b, fanout, seeds)
        label_src, label_dst = b.n_id[b.edge_label_index]
        positive = b.edge_label == 1
        assert int(positive.sum()) == b.input_id.numel() and int((~positive).sum()) == b.input_id.numel()
        # the positive labels are the seed edges the batch was drawn for
        assert torch.equal(label_src[positive], src_g[b.input_id]) and torch.equal(
            label_dst[positive], dst_g[b.input_id]
        )
        assert all((s, d) in edges for s, d in zip(label_src[positive].tolist(), label_dst[positive].tolist()))
        # every endpoint of a labelled pair (negatives too) is a seed of the sampled neighbourhood
        assert set(b.edge_label_index.flatten().tolist()) <= set(range(seeds.numel()))


def test_the_draws_follow_torchs_global_seed():
    data = _graph()

    def draw(seed):
        torch.manual_seed(seed)
        with pyg_sampling_fallback():
            return [b.e_id for b in NeighborLoader(data, num_neighbors=[3, 2], batch_size=50, shuffle=True)]

    a, b, c = draw(1), draw(1), draw(2)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(x.numel() == y.numel() and torch.equal(x, y) for x, y in zip(a, c))


def _hetero():
    data = HeteroData()
    data["paper"].x = torch.randn(50, 4)
    data["paper", "cites", "paper"].edge_index = torch.randint(0, 50, (2, 200))
    return NeighborLoader(data, num_neighbors=[3], batch_size=8, input_nodes="paper")


def _weighted():  # PyG refuses a weight_attr without pyg-lib itself; a weight set on the sampler reaches the fallback
    loader = NeighborLoader(_graph(), num_neighbors=[3], batch_size=8)
    loader.node_sampler.edge_weight = torch.rand(1500)
    return loader


def _temporal():
    data = _graph()
    data.time = torch.zeros(data.num_nodes, dtype=torch.long)
    return NeighborLoader(data, num_neighbors=[3], batch_size=8, time_attr="time")


REFUSED = {
    "hetero": (_hetero, "a heterogeneous graph"),
    "temporal": (_temporal, "temporal sampling"),
    "weighted": (_weighted, "weighted sampling"),
    "disjoint": (lambda: NeighborLoader(_graph(), num_neighbors=[3], batch_size=8, disjoint=True), "disjoint=True"),
    "induced": (
        lambda: NeighborLoader(_graph(), num_neighbors=[3], batch_size=8, subgraph_type="induced"),
        "subgraph_type='induced'",
    ),
    "bidirectional": (
        lambda: NeighborLoader(_graph(), num_neighbors=[3], batch_size=8, subgraph_type="bidirectional"),
        "subgraph_type='bidirectional'",
    ),
    "zero hop": (
        lambda: NeighborLoader(_graph(), num_neighbors=[3, 0], batch_size=8),
        r"num_neighbors=\[3, 0\] \(a hop of 0 neighbours\)",
    ),
    "duplicate seeds": (
        lambda: NeighborLoader(_graph(), num_neighbors=[3], batch_size=4, input_nodes=torch.tensor([3, 3, 5, 7])),
        "repeated seed nodes in one batch",
    ),
}


@pytest.mark.skipif(NATIVE, reason="a native PyG sampler is installed: nothing is replaced")
@pytest.mark.parametrize("case", list(REFUSED))
def test_the_fallback_refuses_what_it_cannot_sample_with_the_reason(case):
    make, reason = REFUSED[case]
    with pyg_sampling_fallback():
        loader = make()
        with pytest.raises(ImportError, match=reason) as info:
            next(iter(loader))
    assert "needs pyg-lib or torch-sparse" in str(info.value) and "uniform neighbours" in str(info.value)


@pytest.mark.skipif(NATIVE, reason="a native PyG sampler is installed: nothing is replaced")
def test_the_fallback_is_only_in_place_while_open():
    from torch_geometric.sampler import NeighborSampler

    before = NeighborSampler.__dict__["_sample"]
    with pyg_sampling_fallback():
        assert NeighborSampler.__dict__["_sample"] is not before
    assert NeighborSampler.__dict__["_sample"] is before
    with pytest.raises(ImportError):  # PyG's own refusal without a backend
        next(iter(NeighborLoader(_graph(), num_neighbors=[3], batch_size=8)))


@pytest.mark.skipif(NATIVE, reason="a native PyG sampler is installed: nothing is replaced")
def test_a_nested_fallback_leaves_the_class_alone(monkeypatch):
    """gnnbench.watch opens the fallback inside the user's own: the inner one assigns nothing to the class (an
    assignment to a class undoes the interpreter's specialization of the code that uses it, a cost the watched
    steps paid), and the sampler stays replaced until the outer one closes."""
    import torch_geometric.sampler
    from torch_geometric.sampler import NeighborSampler

    assigned = []

    class Counting(type(NeighborSampler)):
        def __setattr__(cls, name, value):
            assigned.append(name)
            super().__setattr__(name, value)

    sampler = Counting("CountingSampler", (NeighborSampler,), {"_sample": NeighborSampler.__dict__["_sample"]})
    assigned.clear()  # what the class's creation set (abc's bookkeeping)
    monkeypatch.setattr(torch_geometric.sampler, "NeighborSampler", sampler)
    before = sampler.__dict__["_sample"]
    with pyg_sampling_fallback() as outer:
        replaced = sampler.__dict__["_sample"]
        with pyg_sampling_fallback() as inner:
            assert sampler.__dict__["_sample"] is replaced
        assert (outer, inner) == (FALLBACK, FALLBACK) and sampler.__dict__["_sample"] is replaced
        assert assigned == ["_sample"], assigned  # the outer one's assignment only
    assert sampler.__dict__["_sample"] is before and assigned == ["_sample", "_sample"]
