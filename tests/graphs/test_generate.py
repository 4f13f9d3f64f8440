import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.stats import edge_homophily, graph_stats, hill_exponent


def _tensors(g):
    return [g.edge_index, g.rowptr, g.x, g.y, g.train_mask, g.val_mask, g.test_mask, g.lp_val_pos, g.lp_test_pos]


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(50, 400), deg=st.integers(2, 12))
def test_same_seed_same_tensors(seed, n, deg):
    spec = GraphSpec(num_nodes=n, avg_degree=float(deg), num_classes=3, feature_dim=4, seed=seed)
    a, b = generate(spec), generate(spec)
    for ta, tb in zip(_tensors(a), _tensors(b)):
        assert torch.equal(ta, tb)
    c = generate(dataclasses.replace(spec, seed=seed + 1))
    assert not torch.equal(a.x, c.x)


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(30, 300), deg=st.integers(2, 10))
def test_generated_graph_is_simple_undirected_and_on_target(seed, n, deg):
    spec = GraphSpec(num_nodes=n, avg_degree=float(deg), num_classes=3, feature_dim=4, seed=seed)
    g = generate(spec)
    ei = g.edge_index
    assert (ei[0] != ei[1]).all(), "no self loops"
    keys = ei[1] * n + ei[0]
    assert torch.equal(keys, torch.unique(keys)), "sorted by target, no duplicates"
    assert g.is_undirected()
    # The top-up rounds land on the target unless the graph is nearly complete.
    assert g.num_edges <= spec.num_edges
    assert g.num_edges >= 0.9 * spec.num_edges
    assert torch.equal(g.rowptr[1:] - g.rowptr[:-1], torch.bincount(ei[1], minlength=n))


def test_splits_are_disjoint_and_cover(tiny_graph):
    g = tiny_graph
    total = g.train_mask.long() + g.val_mask.long() + g.test_mask.long()
    assert torch.equal(total, torch.ones_like(total))
    assert abs(g.train_mask.float().mean().item() - 0.2) < 0.01
    assert abs(g.val_mask.float().mean().item() - 0.1) < 0.01


def test_link_prediction_holdout(tiny_graph):
    g = tiny_graph
    n, m_undirected = g.num_nodes, g.num_edges // 2
    assert g.lp_val_pos.size(1) == int(0.05 * m_undirected)
    assert g.lp_test_pos.size(1) == int(0.1 * m_undirected)
    held = torch.cat([g.lp_val_pos, g.lp_test_pos], 1)
    assert (held[0] < held[1]).all()
    all_keys = set((g.edge_index[1] * n + g.edge_index[0]).tolist())
    held_keys = (held[1] * n + held[0]).tolist()
    assert all(k in all_keys for k in held_keys), "held-out positives are real edges"
    assert len(set(held_keys)) == len(held_keys)
    train = g.link_split()
    assert train.num_edges == g.num_edges - 2 * held.size(1)
    train_keys = set((train.edge_index[1] * n + train.edge_index[0]).tolist())
    assert not any(k in train_keys for k in held_keys)
    assert not any(k in train_keys for k in (held[0] * n + held[1]).tolist()), "reverse direction removed too"
    assert train.is_undirected()


def test_homophily_follows_spec():
    for h in (0.2, 0.9):
        g = generate(GraphSpec.preset("tiny", homophily=h, num_nodes=5000))
        assert abs(edge_homophily(g) - h) < 0.05


def test_features_carry_class_signal_at_configured_snr():
    g = generate(GraphSpec.preset("tiny", feature_snr=2.0))
    means = torch.stack([g.x[g.y == c].mean(0) for c in range(10)])
    assert torch.allclose(means.norm(dim=1), torch.full((10,), 2.0), atol=0.25)
    noise = g.x - means[g.y]
    assert abs(noise.std().item() - 1.0) < 0.05


@pytest.mark.parametrize("exponent", [2.1, 2.5, 3.0])
def test_degree_distribution_is_heavy_tailed(exponent):
    g = generate(GraphSpec(num_nodes=50_000, avg_degree=20.0, exponent=exponent, feature_dim=2, seed=1))
    est = hill_exponent(g.deg)
    assert abs(est - exponent) < 0.25, f"Hill estimate {est:.2f} for configured {exponent}"
    stats = graph_stats(g)
    assert stats.max_degree > 20 * stats.degree_quantiles["p50"]


def test_hill_recovers_exact_pareto():
    gen = torch.Generator().manual_seed(0)
    u = torch.rand(200_000, generator=gen, dtype=torch.float64)
    samples = torch.floor(5 * (1 - u).pow(-1 / 1.4))  # discrete power law, gamma = 2.4
    assert abs(hill_exponent(samples) - 2.4) < 0.1


def test_hill_rejects_degenerate_input():
    assert hill_exponent(torch.full((1000,), 7)) != hill_exponent(torch.full((1000,), 7))  # nan
    with pytest.raises(ValueError, match="tail_fraction"):
        hill_exponent(torch.arange(100), tail_fraction=1.5)


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("num_nodes", 1, "num_nodes"),
        ("exponent", 2.0, r"exponent must be a number in \(2, 5\] \(got 2.0\)"),
        ("homophily", 1.5, "homophily"),
        ("num_classes", 1, "num_classes"),
        ("avg_degree", 0.0, "avg_degree"),
        ("feature_dim", 0, "feature_dim"),
        ("train_frac", 0.0, "train_frac"),
        ("feature_snr", float("nan"), "feature_snr"),
    ],
)
def test_spec_rejects_bad_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        GraphSpec(**{field: value})


def test_presets_and_overrides():
    assert GraphSpec.preset("small").num_nodes == 100_000
    assert GraphSpec.preset("small").num_edges == 2_000_000
    assert GraphSpec.preset("medium").num_edges == 20_000_000
    assert GraphSpec.preset("large").num_edges == 200_000_000
    spec = GraphSpec.preset("tiny", num_nodes=500, seed=None)
    assert spec.num_nodes == 500 and spec.seed == 0 and spec.name == "tiny+custom"
    with pytest.raises(ValueError, match="unknown graph preset 'huge'; accepted: tiny, small, medium, large"):
        GraphSpec.preset("huge")
    with pytest.raises(ValueError, match="unknown GraphSpec field"):
        GraphSpec.preset("tiny", nodes=5)
