"""Data-pipeline self-check: sampler uniformity, negative-sampling cost, batch-cache behaviour.

``gnnbench pipeline`` prints it; each function is also usable on its own.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import torch

from gnnbench.flags import Flags
from gnnbench.graphs.container import Graph
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.sampling.negative import NegativeSampler
from gnnbench.sampling.neighbor import NeighborSampleCore

__all__ = [
    "star_forest",
    "subset_frequencies",
    "chi_square_uniform",
    "uniformity_report",
    "negative_costs",
    "cache_behaviour",
]


def star_forest(num_centers: int, degree: int) -> tuple[torch.Tensor, torch.Tensor]:
    """CSR of ``num_centers`` centers with ``degree`` private leaves each (leaves have no neighbours)."""
    rowptr = torch.cat(
        [torch.arange(0, num_centers * degree + 1, degree), torch.full((num_centers * degree,), num_centers * degree)]
    )
    col = num_centers + torch.arange(num_centers * degree)
    return rowptr, col


def subset_frequencies(degree: int, fanout: int, num_centers: int, seed: int = 0) -> torch.Tensor:
    """How often each k-subset of a ``degree``-neighbour list is drawn, over ``num_centers`` independent draws.

    Returns the counts of the ``C(degree, fanout)`` subsets that occurred
    (indexed by subset bitmask, zeros removed).
    """
    rowptr, col = star_forest(num_centers, degree)
    out = NeighborSampleCore(rowptr, col, (fanout,), seed=seed).sample(torch.arange(num_centers))
    pos = out.edge - rowptr[out.node[out.col]]
    codes = torch.zeros(num_centers, dtype=torch.int64).index_add_(0, out.col, 1 << pos)
    return torch.unique(codes, return_counts=True)[1]  # by bitmask; no 2**degree table


def chi_square_uniform(counts: torch.Tensor, categories: int) -> tuple[float, float]:
    """Pearson's chi-square statistic against the uniform distribution, and its p-value."""
    observed = torch.zeros(categories, dtype=torch.float64)
    observed[: counts.numel()] = counts.to(torch.float64)
    expected = observed.sum() / categories
    stat = float(((observed - expected) ** 2 / expected).sum())
    dof = categories - 1
    p = float(
        torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64))
    )
    return stat, p


def uniformity_report(
    cases=((2, 1), (5, 2), (6, 3), (10, 5)), draws_per_subset: int = 2000, seed: int = 0
) -> list[dict]:
    """Chi-square test of uniform sampling without replacement for each (degree, fanout)."""
    rows = []
    for degree, fanout in cases:
        subsets = math.comb(degree, fanout)
        counts = subset_frequencies(degree, fanout, draws_per_subset * subsets, seed=seed)
        stat, p = chi_square_uniform(counts, subsets)
        rows.append(
            {
                "degree": degree,
                "fanout": fanout,
                "subsets": subsets,
                "seen": int(counts.numel()),
                "draws": int(counts.sum()),
                "chi2": stat,
                "p_value": p,
            }
        )
    return rows


def negative_costs(graph: Graph, num: int = 100_000, repeats: int = 5, seed: int = 0) -> list[dict]:
    """Seconds per 1k negatives for uniform/degree x strict/non-strict, on ``graph``'s edges (median of repeats)."""
    rows = []
    for mode in ("uniform", "degree"):
        for strict in (True, False):
            sampler = NegativeSampler(graph.edge_index, graph.num_nodes, mode=mode, strict=strict, seed=seed)
            sampler.sample(1000)  # warm-up
            times = []
            for _ in range(repeats):
                before = sampler.stats.seconds
                sampler.sample(num)
                times.append(sampler.stats.seconds - before)
            times.sort()
            rows.append(
                {
                    "mode": mode,
                    "strict": strict,
                    "negatives": num,
                    "ms_per_1k": 1e6 * times[len(times) // 2] / num,
                    "ms_per_1k_min": 1e6 * times[0] / num,
                    "ms_per_1k_max": 1e6 * times[-1] / num,
                    "rejected_fraction": sampler.stats.rejected / max(sampler.stats.negatives, 1),
                }
            )
    return rows


def cache_behaviour(
    prepared: PreparedGraph, flags: Flags, epochs: int = 7, cache_dir: str | Path | None = None
) -> list[dict]:
    """Per-epoch time, hits and misses of the batch cache (``flags.batch_cache_epochs`` > 0)."""
    from gnnbench.sampling.sources import make_batch_source

    if flags.batch_cache_epochs < 1:
        raise ValueError(f"cache_behaviour needs flags.batch_cache_epochs >= 1 (got {flags.batch_cache_epochs})")
    with tempfile.TemporaryDirectory() as tmp:
        source = make_batch_source(prepared, flags, cache_dir=cache_dir or tmp)
        cache = source.cache
        rows = []
        for epoch in range(epochs):
            hits, misses, corrupt = cache.stats.hits, cache.stats.misses, cache.stats.corrupt
            t0 = time.perf_counter()
            n = sum(1 for _ in source.epoch(epoch))
            rows.append(
                {
                    "epoch": epoch,
                    "window": cache.window(epoch),
                    "batches": n,
                    "seconds": time.perf_counter() - t0,
                    "hits": cache.stats.hits - hits,
                    "misses": cache.stats.misses - misses,
                    "corrupt": cache.stats.corrupt - corrupt,
                    "cache_bytes": cache.size_bytes(),
                }
            )
        return rows
