"""LABOR-0 sampling (gnnbench.sampling.labor): exact inclusion probabilities, shared variates, unbiased
Horvitz-Thompson weights, the SampledSubgraph layout, validation and determinism.

Many independent draws come cheaply from one batch over disjoint copies of a small graph (distinct vertex
ids get independent variates), times a few reseeds.
"""

import pytest
import torch
from scipy.stats import binomtest

from gnnbench.sampling.labor import LaborSampleCore, LaborSubgraph, keyed_uniform, splitmix64
from gnnbench.sampling.neighbor import NeighborSampleCore


def csr_from_lists(neighbours: list[list[int]], dtype=torch.int64) -> tuple[torch.Tensor, torch.Tensor]:
    deg = torch.tensor([len(x) for x in neighbours])
    rowptr = torch.cat([torch.zeros(1, dtype=torch.int64), deg.cumsum(0)])
    col = torch.tensor([t for x in neighbours for t in x], dtype=torch.int64)
    return rowptr.to(dtype), col.to(dtype)


def small_graph(n: int = 30, max_deg: int = 20, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` nodes, in-degrees cycling through 1..max_deg (two of degree 0), distinct neighbours, no loops."""
    g = torch.Generator().manual_seed(seed)
    lists = []
    for s in range(n):
        d = 0 if s in (7, 19) else 1 + (s * 7) % max_deg
        others = torch.randperm(n - 1, generator=g)[:d]
        lists.append([int(t) + (int(t) >= s) for t in others])
    return csr_from_lists(lists)


def tile(rowptr: torch.Tensor, col: torch.Tensor, copies: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``copies`` disjoint copies: node ``c * n + v`` is copy ``c`` of ``v``, edge ``c * E + e`` of ``e``."""
    n = rowptr.numel() - 1
    deg = (rowptr[1:] - rowptr[:-1]).repeat(copies)
    big_rowptr = torch.cat([torch.zeros(1, dtype=torch.int64), deg.cumsum(0)])
    big_col = (col.unsqueeze(0) + n * torch.arange(copies).unsqueeze(1)).reshape(-1)
    return big_rowptr, big_col


def target_degree(rowptr: torch.Tensor) -> torch.Tensor:
    """In-degree of each edge's target, per CSR position."""
    deg = rowptr[1:] - rowptr[:-1]
    return deg.repeat_interleave(deg)


def test_keyed_uniform_is_splitmix64():
    """The variates are SplitMix64's stream (Vigna's reference outputs for seed 1234567), 53 bits each, a
    function of (key, id) only; int64 wrap-around and logical shifts are right."""
    reference = [
        6457827717110365317,
        3203168211198807973,
        9817491932198370423,
        4593380528125082431,
        16408922859458223821,
    ]
    z = splitmix64(torch.arange(5) * -7046029254386353131 + (1234567 - 7046029254386353131))
    assert [int(v) % 2**64 for v in z] == reference
    # id i's variate is output i + 1 of the key's stream, its top 53 bits.
    assert keyed_uniform(torch.arange(5), torch.tensor(1234567)).tolist() == [v // 2**11 * 2.0**-53 for v in reference]
    assert torch.equal(keyed_uniform(torch.arange(5), 1234567), keyed_uniform(torch.arange(5), torch.tensor(1234567)))
    r = keyed_uniform(torch.tensor([0, 3, 3, 2**40, 0]), torch.tensor(-(2**63)))
    assert r[1] == r[2] and r[0] == r[4] and r[0] != r[1] and r.dtype == torch.float64
    u = keyed_uniform(torch.arange(200_000), torch.tensor(-5))
    assert 0 <= float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.005


def test_inclusion_probability_is_min_one_k_over_d():
    """Each edge (t -> s) is kept with probability pi_s = min(1, k / d_s): 4000 draws per edge (250 disjoint
    copies x 16 reseeds), an exact binomial test per edge with a Bonferroni bound (family-wise 1e-3);
    edges of targets with d_s <= k are kept every time."""
    rowptr, col = small_graph()
    k, copies, reseeds = 4, 250, 16
    big_rowptr, big_col = tile(rowptr, col, copies)
    core = LaborSampleCore(big_rowptr, big_col, (k,))
    num_edges = col.numel()
    counts = torch.zeros(num_edges, dtype=torch.int64)
    for r in range(reseeds):
        core.reseed(r)
        out = core.sample(torch.arange(big_rowptr.numel() - 1))
        counts += torch.bincount(out.edge % num_edges, minlength=num_edges)
    draws = copies * reseeds
    pi = (k / target_degree(rowptr).double()).clamp(max=1)
    sure = pi == 1
    assert torch.equal(counts[sure], torch.full_like(counts[sure], draws))
    maybe = (~sure).nonzero().view(-1)
    assert maybe.numel() > 100
    pvalues = [binomtest(int(counts[e]), draws, float(pi[e])).pvalue for e in maybe]
    assert min(pvalues) * maybe.numel() > 1e-3, f"smallest Bonferroni-adjusted p {min(pvalues) * maybe.numel():.2e}"


def test_targets_share_each_source_variate():
    """One variate per source per hop: target s keeps t iff r_t < pi_s, so over all targets of t the kept
    ones have larger pi than the dropped ones; equal pi means kept for all or for none."""
    rowptr, col = tile(*small_graph(), copies=20)
    core = LaborSampleCore(rowptr, col, (4,))
    deg = rowptr[1:] - rowptr[:-1]
    cand_target = torch.arange(deg.numel()).repeat_interleave(deg)
    pi = (4 / deg.clamp(min=1).double()).clamp(max=1)[cand_target]
    checked = 0
    for r in range(5):
        core.reseed(r)
        out = core.sample(torch.arange(deg.numel()))
        kept = torch.zeros(col.numel(), dtype=torch.bool)
        kept[out.edge] = True
        low = torch.full((deg.numel(),), 2.0, dtype=torch.float64).scatter_reduce(0, col[kept], pi[kept], "amin")
        high = torch.full((deg.numel(),), -1.0, dtype=torch.float64).scatter_reduce(0, col[~kept], pi[~kept], "amax")
        both = (low <= 1) & (high >= 0)
        assert bool((high[both] < low[both]).all()), "a source kept by one target and dropped by one with higher pi"
        checked += int(both.sum())
    assert checked > 100


def dense_block() -> tuple[torch.Tensor, torch.Tensor]:
    """Targets 0..39 read all of sources 40..139 (pi = 0.1 at k = 10); targets 140..159 read 40..89 (pi 0.2)."""
    lists = [list(range(40, 140)) for _ in range(40)] + [[] for _ in range(100)]
    lists += [list(range(40, 90)) for _ in range(20)]
    return csr_from_lists(lists)


def test_overlapping_neighbourhoods_pick_the_same_sources():
    rowptr, col = dense_block()
    seeds = torch.cat([torch.arange(40), torch.arange(140, 160)])
    labor = LaborSampleCore(rowptr, col, (10,), seed=3)
    for _ in range(5):
        out = labor.sample(seeds)
        node = out.node.long()
        sets = [set(node[out.row[out.col == s]].tolist()) for s in range(seeds.numel())]
        assert all(x == sets[0] for x in sets[:40]), "equal pi, same neighbourhood: same sources"
        assert all(x == sets[40] for x in sets[40:])
        assert sets[0] & set(range(40, 90)) <= sets[40], "pi 0.1 keeps a subset of what pi 0.2 keeps"


def test_labor_reaches_fewer_distinct_nodes_than_neighbour_sampling():
    """Same fanout, same expected edges per target (min(k, d)), far fewer distinct sources on a dense block:
    ~100 * (1 - 0.9^40) + ... ~ 99 for independent draws against ~10 + 5 for LABOR."""
    rowptr, col = dense_block()
    seeds = torch.cat([torch.arange(40), torch.arange(140, 160)])
    labor, neighbour = LaborSampleCore(rowptr, col, (10,), seed=1), NeighborSampleCore(rowptr, col, (10,), seed=1)
    draws = 30
    lab = [labor.sample(seeds) for _ in range(draws)]
    nbr = [neighbour.sample(seeds) for _ in range(draws)]
    lab_nodes = sum(o.num_sampled_nodes[1] for o in lab) / draws
    nbr_nodes = sum(o.num_sampled_nodes[1] for o in nbr) / draws
    assert lab_nodes < 0.3 * nbr_nodes, (lab_nodes, nbr_nodes)
    # The expected edge count is the same: 60 targets x 10 (LABOR's is random, SE ~ 60 / sqrt(30)).
    lab_edges = sum(o.num_sampled_edges[0] for o in lab) / draws
    assert nbr[0].num_sampled_edges[0] == 600 and abs(lab_edges - 600) < 5 * 60 / draws**0.5 + 1


def test_weighted_sum_is_unbiased():
    """sum over kept edges of weight * h[row], per target, averages to the full neighbour sum A @ h: within
    5 empirical standard errors per (target, feature), over 2000 draws (200 copies x 10 reseeds); targets with
    d <= k are exact. Dividing by d_s gives the unbiased neighbour mean likewise."""
    rowptr, col = small_graph(seed=1)
    n, copies, reseeds, k = rowptr.numel() - 1, 200, 10, 3
    h = torch.randn(n, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    exact = torch.zeros(n, 3, dtype=torch.float64).index_add_(
        0, torch.arange(n).repeat_interleave(rowptr[1:] - rowptr[:-1]), h[col]
    )
    big_rowptr, big_col = tile(rowptr, col, copies)
    core = LaborSampleCore(big_rowptr, big_col, (k,))
    estimates = []
    for r in range(reseeds):
        core.reseed(100 + r)
        out = core.sample(torch.arange(n * copies))
        node = out.node.long()
        msg = out.weight.double().unsqueeze(1) * h[node[out.row] % n]
        est = torch.zeros(n * copies, 3, dtype=torch.float64).index_add_(0, node[out.col], msg)
        estimates.append(est.view(copies, n, 3))
    est = torch.cat(estimates)
    mean, se = est.mean(0), est.std(0) / est.size(0) ** 0.5
    assert bool((se > 0).any())
    z = (mean - exact).abs() / (5 * se + 1e-9)
    assert float(z.max()) <= 1, f"bias up to {float(z.max()) * 5:.1f} standard errors"
    exact_rows = (rowptr[1:] - rowptr[:-1]) <= k
    assert torch.allclose(est[:, exact_rows], exact[exact_rows].expand(est.size(0), -1, -1), atol=1e-9)


def random_csr(n: int, m: int, seed: int, dtype=torch.int64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (m,), generator=g), torch.randint(0, n, (m,), generator=g)
    key = torch.unique(dst * n + src)  # distinct edges, sorted by target
    deg = torch.bincount(key // n, minlength=n)
    rowptr = torch.cat([torch.zeros(1, dtype=torch.int64), deg.cumsum(0)])
    return rowptr.to(dtype), (key % n).to(dtype)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("fanouts", [(5, 3), (-1, 2), (2, -1)])
def test_layout(dtype, fanouts):
    """Seeds first, nodes once, edges grouped by target (col non-decreasing), edge ids are the CSR positions
    of (row -> col), each hop's targets are the previous hop's new nodes, weight = max(1, d / k), CSR dtype."""
    rowptr, col = random_csr(400, 3000, seed=len(fanouts) + fanouts[0], dtype=dtype)
    seeds = torch.randperm(400, generator=torch.Generator().manual_seed(1))[:30]
    out = LaborSampleCore(rowptr, col, fanouts, seed=2).sample(seeds.to(dtype))
    assert isinstance(out, LaborSubgraph)
    assert all(t.dtype == dtype for t in (out.node, out.row, out.col, out.edge))
    assert out.weight.dtype == torch.float32 and out.pi.dtype == torch.float32
    node, row, tgt, edge = (t.long() for t in (out.node, out.row, out.col, out.edge))
    r64, c64 = rowptr.long(), col.long()
    assert torch.equal(node[:30], seeds) and node.unique().numel() == node.numel()
    assert sum(out.num_sampled_nodes) == node.numel() and sum(out.num_sampled_edges) == edge.numel()
    assert bool((tgt[1:] >= tgt[:-1]).all())
    assert torch.equal(c64[edge], node[row])
    assert bool((r64[node[tgt]] <= edge).all() & (edge < r64[node[tgt] + 1]).all())
    assert edge.unique().numel() == edge.numel()
    deg = (r64[1:] - r64[:-1])[node]
    assert out.pi.numel() == node.numel() - out.num_sampled_nodes[-1]
    starts = torch.tensor([0, *out.num_sampled_nodes]).cumsum(0)
    e_starts = torch.tensor([0, *out.num_sampled_edges]).cumsum(0)
    for h, k in enumerate(fanouts):
        e = slice(int(e_starts[h]), int(e_starts[h + 1]))
        lo, hi = int(starts[h]), int(starts[h + 1])
        assert bool(((tgt[e] >= lo) & (tgt[e] < hi)).all()), f"hop {h} targets are hop {h}'s frontier"
        new = torch.arange(hi, int(starts[h + 2]))
        assert bool(torch.isin(new, row[e]).all()), "every new node was reached by this hop's edges"
        expected_w = torch.ones(hi - lo) if k == -1 else (deg[lo:hi].double() / k).clamp(min=1).float()
        assert torch.equal(out.weight[e], expected_w[tgt[e] - lo])
        assert torch.allclose(out.pi[lo:hi] * expected_w, torch.ones(hi - lo))
        per_target = torch.bincount(tgt[e] - lo, minlength=hi - lo)
        if k == -1:
            assert torch.equal(per_target, deg[lo:hi]), "fanout -1 takes every neighbour"
        assert out.hop_stats()[h] == {
            "targets": hi - lo,
            "candidate_edges": int(deg[lo:hi].sum()),
            "sampled_edges": e.stop - e.start,
            "new_nodes": new.numel(),
        }


def test_degree_zero_seeds_give_no_edges():
    rowptr, col = small_graph()
    out = LaborSampleCore(rowptr, col, (3, 2)).sample(torch.tensor([19, 7]))
    assert out.node.tolist() == [19, 7] and out.edge.numel() == 0 and out.weight.numel() == 0
    assert out.num_sampled_edges == [0, 0] and out.num_sampled_nodes == [2, 0, 0]
    assert out.pi.tolist() == [1.0, 1.0]


def test_validation_names_the_bad_value():
    rowptr, col = small_graph()
    for bad in [(0,), (3, -2), ()]:
        with pytest.raises(ValueError, match=rf"fanouts must be .*\(got \[{', '.join(map(str, bad))}\]\)"):
            LaborSampleCore(rowptr, col, bad)
    with pytest.raises(ValueError, match="replace=True"):
        LaborSampleCore(rowptr, col, (3,), replace=True)
    core = LaborSampleCore(rowptr, col, (3,))
    with pytest.raises(ValueError, match="seed nodes must be distinct"):
        core.sample(torch.tensor([1, 4, 1]))
    with pytest.raises(ValueError, match=r"must be in \[0, 29\] \(got min 0, max 30\)"):
        core.sample(torch.tensor([0, 30]))
    assert core.sample(torch.tensor([1, 4])).node[:2].tolist() == [1, 4], "scratch state restored after errors"


def test_same_seed_same_sample_reseed_changes_it():
    rowptr, col = random_csr(500, 5000, seed=3)
    seeds = torch.arange(0, 500, 7)

    def fields(out):
        return out.node, out.row, out.col, out.edge, out.weight

    a = LaborSampleCore(rowptr, col, (4, 3), seed=9).sample(seeds)
    core = LaborSampleCore(rowptr, col, (4, 3), seed=9)
    b = core.sample(seeds)
    assert all(torch.equal(x, y) for x, y in zip(fields(a), fields(b)))
    assert not torch.equal(core.sample(seeds).edge, a.edge), "the next batch draws a new key"
    core.reseed(10)
    assert not torch.equal(core.sample(seeds).edge, a.edge)
    core.reseed(9)
    assert all(torch.equal(x, y) for x, y in zip(fields(a), fields(core.sample(seeds))))


# ------------------------------------------------------------ the registry entry and the explosion figures
def test_the_labor_entry_trains_and_its_batches_carry_their_weights():
    import dataclasses

    from gnnbench import registry
    from gnnbench.graphs import generate
    from gnnbench.graphs.prepare import prepare
    from gnnbench.measure.run import run
    from gnnbench.sampling.sources import make_batch_source
    from tests.helpers import QUICK

    config = registry.config_for(QUICK, ["labor"])
    assert config.flags.sampler == "labor" and registry.get("labor").costs_accuracy
    graph = generate(QUICK.spec)
    r = run(config, graph=graph)
    assert r.status == "ok" and r.sampled["nodes_per_hop"][0] == QUICK.flags.batch_size
    base = run(QUICK, graph=graph)
    assert r.sampled["nodes_per_batch"] < base.sampled["nodes_per_batch"], "fewer distinct vertices per batch"
    for workers in (0, 1):  # the weights travel in PyG's metadata, from a loader worker too
        flags = dataclasses.replace(config.flags, num_workers=workers)
        source = make_batch_source(prepare(graph, flags), flags, seed=0)
        try:
            batch = next(iter(source.epoch(0)))
        finally:
            source.close()
        assert batch.edge_weight is not None and batch.edge_weight.numel() == batch.num_edges
        assert float(batch.edge_weight.min()) >= 1.0


def test_labor_is_refused_where_it_has_no_meaning_with_the_reason():
    import dataclasses

    from gnnbench import registry
    from gnnbench.training import config_unavailable
    from tests.helpers import QUICK

    labor = registry.config_for(QUICK, ["labor"])
    for change, words in (
        ({"sample_replace": True}, "sample_replace=True"),
        ({"batch_source": "cluster_gcn"}, "'cluster_gcn'"),
        ({"sampler_backend": "pyg"}, "sampler_backend='pyg'"),
    ):
        reasons = config_unavailable(dataclasses.replace(labor, flags=dataclasses.replace(labor.flags, **change)))
        assert "sampler" in reasons and words in reasons["sampler"], (change, reasons)
    link = config_unavailable(dataclasses.replace(labor, task="link"))
    assert "LABOR samples neighbour batches of node classification" in link["sampler"]


def test_the_explosion_finding_names_the_entries_that_compute_fewer_vertices():
    from gnnbench.advice.rules import FEWER_VERTICES, RULES, Finding, explosion_finding
    from gnnbench.flags import Flags

    kernels = Finding("kernels", 0.97, None, None, 0.97, "compute phases", "")
    sampling = Finding("sampling", 0.6, None, None, 0.3, "compute phases", "")
    wide = {"coverage": 0.69, "nodes_per_hop": [1024, 14000, 45000, 69000]}
    text = explosion_finding(wide, kernels, flags=Flags())
    assert "69% of the graph's nodes" in text and all(name in text for name in FEWER_VERTICES)
    assert explosion_finding({"coverage": RULES.explosion_at - 0.01}, kernels, flags=Flags()) is None
    assert explosion_finding(wide, sampling, flags=Flags()) is None, "a data-bound step is not decided by it"
    assert explosion_finding(None, kernels, flags=Flags()) is None
