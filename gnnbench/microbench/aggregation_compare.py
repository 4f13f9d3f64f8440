"""One aggregation of one sampled batch, four ways, interleaved in one run (``gnnbench aggregation-compare``).

- ``scatter``: gather messages and sum them into their targets (``index_add_``), PyG's default path;
- ``sparse_sort``: CSR sparse-matrix product with the CSR built from COO inside the timing (sort by target,
  count, permute): what a typical PyG user's per-batch conversion costs;
- ``sparse_csr``: the same product on the CSR the sampler emits with the batch (``csr``): no sort;
- ``prebuilt``: ``torch.sparse.mm`` on a CSR tensor built before timing: the floor for the product itself.

Each round times every mode once (a GCN aggregation: normalization excluded, the same weights for all),
in a shuffled order; the report gives medians and per-round ratios (median, min-max).
"""

from __future__ import annotations

import random
import statistics
import time
import warnings

import torch

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.norm import GCNNorm, gcn_norm
from gnnbench.graphs.prepare import prepare
from gnnbench.models.aggregation import Aggregator
from gnnbench.sampling.sources import make_batch_source

__all__ = ["MODES", "aggregation_ratios"]

MODES = ("scatter", "sparse_sort", "sparse_csr", "prebuilt")


def _prebuilt(batch, weights: GCNNorm):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.sparse_csr_tensor(
            batch.rowptr, batch.edge_index[0], weights.edge_weight, size=(batch.num_nodes, batch.num_nodes)
        )


def aggregation_ratios(
    spec: GraphSpec,
    *,
    fanout=(15, 10, 5),
    batch_size: int = 1024,
    features: int = 64,
    index_dtype: str = "int64",
    rounds: int = 15,
    seed: int = 0,
) -> dict:
    """Median seconds per mode and per-round ratios against ``prebuilt`` and ``scatter``."""
    graph = generate(spec)
    flags = Flags(fanout=tuple(fanout), batch_size=batch_size, keep_csr=True, index_dtype=index_dtype)
    batch = next(make_batch_source(prepare(graph, flags), flags, seed=seed).epoch(0))
    n = batch.num_nodes
    weights = gcn_norm(batch.edge_index, n)  # fixed weights: the normalization is not what is compared
    h = torch.randn(n, features, generator=torch.Generator().manual_seed(seed))
    adj = _prebuilt(batch, weights)
    fixed = lambda: weights  # noqa: E731
    fns = {
        "scatter": lambda: Aggregator(batch.edge_index, n, mode="scatter", gcn_weights=fixed).gcn(h),
        "sparse_sort": lambda: Aggregator(batch.edge_index, n, mode="sparse", gcn_weights=fixed).gcn(h),
        "sparse_csr": lambda: Aggregator(
            batch.edge_index, n, mode="sparse", gcn_weights=fixed, rowptr=batch.rowptr
        ).gcn(h),
        "prebuilt": lambda: h * weights.self_weight.unsqueeze(1) + torch.sparse.mm(adj, h),
    }
    ref = fns["scatter"]()
    for name, fn in fns.items():  # warm-up, and the same result every way
        torch.testing.assert_close(fn(), ref, rtol=1e-4, atol=1e-4, msg=f"{name} differs from scatter")
    times: dict[str, list[float]] = {m: [] for m in MODES}
    order = list(MODES)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        for m in order:
            t0 = time.perf_counter()
            fns[m]()
            times[m].append(time.perf_counter() - t0)

    def ratio(a: str, b: str) -> dict:
        r = [x / y for x, y in zip(times[a], times[b])]
        return {"median": statistics.median(r), "min": min(r), "max": max(r)}

    return {
        "batch": {"nodes": n, "edges": batch.num_edges, "features": features, "index_dtype": index_dtype},
        "rounds": rounds,
        "threads": torch.get_num_threads(),
        "median_ms": {m: 1e3 * statistics.median(v) for m, v in times.items()},
        "vs_prebuilt": {m: ratio(m, "prebuilt") for m in MODES},
        "speedup_over_scatter": {m: ratio("scatter", m) for m in MODES},
    }
