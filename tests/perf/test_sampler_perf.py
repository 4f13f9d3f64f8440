"""pytest-benchmark: gnnbench's neighbour sampler against torch-sparse's, same graph, same seeds.

Quick (default, timing disabled): ``python -m pytest tests/perf``.
Measured: ``python -m pytest tests/perf --benchmark-enable --benchmark-group-by=group``.
"""

import pytest
import torch

from gnnbench.graphs import GraphSpec, generate
from gnnbench.microbench.sampler_compare import torch_sparse_sampler
from gnnbench.sampling.neighbor import NeighborSampleCore

FANOUTS = (15, 10)
BATCH = 1024


@pytest.fixture(scope="module")
def sampling_graph(request):
    from tests.perf.conftest import measuring

    enabled = measuring(request.config)
    nodes = 200_000 if enabled else 20_000  # the issue's ~200k-node graph when measuring
    g = generate(GraphSpec.preset("small", num_nodes=nodes))
    seeds = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))[:BATCH]
    return g, seeds


def _run(benchmark, fn, seeds, graph, name):
    benchmark.group = f"neighbor_sample n={graph.num_nodes} batch={BATCH} fanouts={list(FANOUTS)}"
    benchmark.extra_info.update(
        {"sampler": name, "nodes": graph.num_nodes, "edges": graph.num_edges, "threads": torch.get_num_threads()}
    )
    benchmark.pedantic(fn, args=(seeds,), rounds=20, warmup_rounds=3, iterations=1)


def test_gnnbench_sampler(benchmark, sampling_graph):
    g, seeds = sampling_graph
    core = NeighborSampleCore(g.rowptr, g.edge_index[0], FANOUTS)
    _run(benchmark, core.sample, seeds, g, "gnnbench")


def test_torch_sparse_sampler(benchmark, sampling_graph):
    g, seeds = sampling_graph
    try:
        sample = torch_sparse_sampler(g.rowptr, g.edge_index[0].contiguous(), FANOUTS)
    except ImportError as exc:
        pytest.skip(f"peer sampler: {exc}")
    _run(benchmark, sample, seeds, g, "torch_sparse")


@pytest.fixture(scope="module")
def dense_frontier(request):
    from tests.perf.conftest import measuring

    enabled = measuring(request.config)
    g = generate(GraphSpec(num_nodes=50_000 if enabled else 5_000, avg_degree=150.0 if enabled else 60.0))
    frontier = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))[: 16_384 if enabled else 512]
    return g, frontier


@pytest.mark.parametrize("fanout", [5, 15, 40, 100])
def test_sampler_time_per_sampled_edge(benchmark, dense_frontier, fanout):
    """One hop from a second hop's frontier: compare the groups' means divided by ``extra_info['edges']``
    across fanouts (flat: drawing distinct neighbours costs work linear in the fanout)."""
    g, frontier = dense_frontier
    core = NeighborSampleCore(g.rowptr, g.edge_index[0].contiguous(), (fanout,))
    edges = core.sample(frontier).edge.numel()
    benchmark.group = f"neighbor_sample one hop n={g.num_nodes} frontier={frontier.numel()}"
    benchmark.extra_info.update({"fanout": fanout, "edges": edges, "threads": torch.get_num_threads()})
    benchmark.pedantic(core.sample, args=(frontier,), rounds=10, warmup_rounds=2, iterations=1)
