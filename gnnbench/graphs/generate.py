"""Vectorized generator of degree-corrected SBM graphs with power-law degrees.

:func:`generate` turns a :class:`~gnnbench.graphs.spec.GraphSpec` into an undirected :class:`Graph`:
Karrer & Newman's degree-corrected stochastic block model with Pareto degree propensities
(:func:`power_law_propensities`), a ``homophily`` share of intra-class edges, and features that are a
class mean plus Gaussian noise. Everything is tensor code (inverse-CDF sampling with ``searchsorted``,
dedupe with a sort of 64-bit pair keys), and the same spec (seed included) gives identical tensors.

The sampling model step by step: ``docs/graphs.md``.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from gnnbench.graphs.container import Graph, random_split_masks
from gnnbench.graphs.csr import rowptr_from_sorted_targets
from gnnbench.graphs.spec import GraphSpec

__all__ = ["generate", "power_law_propensities"]

_MAX_TOPUP_ROUNDS = 4  # bounded re-draw rounds for edges lost to dedupe / self loops
_FEATURE_CHUNK = 1 << 16  # rows per chunk when adding class means (bounds peak memory)


def power_law_propensities(num_nodes: int, exponent: float, cap_ratio: float, generator: torch.Generator) -> Tensor:
    """Pareto(``exponent``) draws with minimum 1, capped at ``cap_ratio`` times their mean.

    Args:
        num_nodes: Number of draws.
        exponent: Density exponent ``gamma`` (``p(t) ~ t^-gamma``, ``t >= 1``).
        cap_ratio: Largest allowed ``theta / mean(theta)``.
        generator: Source of randomness.
    """
    u = torch.rand(num_nodes, generator=generator, dtype=torch.float64)
    theta = (1.0 - u).pow_(-1.0 / (exponent - 1.0))
    # Cap relative to the mean; the mean drops when the cap bites, so settle it twice.
    for _ in range(2):
        theta.clamp_(max=cap_ratio * float(theta.mean()))
    return theta


def _sample_pairs(
    count: int,
    cum: Tensor,
    class_lo: Tensor,
    class_w: Tensor,
    cls_sorted: Tensor,
    homophily: float,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Draw ``count`` endpoint pairs as positions in class-sorted node order."""
    total = float(cum[-1])
    last = cum.numel() - 1
    u = torch.rand(count, generator=generator, dtype=torch.float64).mul_(total)
    src = torch.searchsorted(cum, u, right=True).clamp_(max=last)
    c = cls_sorted[src]
    lo = class_lo[c]
    w = class_w[c]
    intra = torch.rand(count, generator=generator) < homophily
    r = torch.rand(count, generator=generator, dtype=torch.float64)
    # Intra-class: uniform in the class's slice of the cumulative weights.
    # Inter-class: uniform in the complement, skipping over the class's slice.
    inter_u = r * (total - w)
    inter_u = torch.where(inter_u >= lo, inter_u + w, inter_u)
    u = torch.where(intra, lo + r * w, inter_u)
    del inter_u, r, intra, lo, w, c
    dst = torch.searchsorted(cum, u, right=True).clamp_(max=last)
    return src, dst


def _pair_keys(src: Tensor, dst: Tensor, order: Tensor, n: int) -> Tensor:
    """Canonical undirected keys ``min * n + max`` of node pairs, self loops dropped."""
    a = order[src]
    b = order[dst]
    keep = a != b
    a, b = a[keep], b[keep]
    return torch.minimum(a, b) * n + torch.maximum(a, b)


def generate(spec: GraphSpec) -> Graph:
    """Generate the graph described by ``spec``.

    Returns:
        An undirected :class:`Graph` without self loops or duplicate edges,
        with class labels, features, node splits and held-out link-prediction
        positives. ``graph.meta`` records the spec and the generation time.
    """
    t0 = time.perf_counter()
    n, C = spec.num_nodes, spec.num_classes
    g = torch.Generator().manual_seed(spec.seed)

    y = torch.randint(0, C, (n,), generator=g)
    theta = power_law_propensities(n, spec.exponent, spec.degree_cap / spec.avg_degree, g)

    # Lay nodes out class by class so each class owns a contiguous slice of the CDF.
    order = torch.argsort(y, stable=True)
    cls_sorted = y[order]
    cum = torch.cumsum(theta[order], 0)
    del theta
    counts = torch.bincount(y, minlength=C)
    ends = torch.cumsum(counts, 0)
    cum0 = torch.cat([cum.new_zeros(1), cum])
    class_lo = cum0[ends - counts]
    class_w = cum0[ends] - class_lo
    del cum0

    m = spec.num_edges // 2
    keys = torch.empty(0, dtype=torch.int64)
    want = m
    for _ in range(_MAX_TOPUP_ROUNDS + 1):
        # Over-draw a little so that rounds after the first are rare.
        draw = int(want * 1.05) + 16 if keys.numel() == 0 else int(want * 1.5) + 16
        src, dst = _sample_pairs(draw, cum, class_lo, class_w, cls_sorted, spec.homophily, g)
        new = _pair_keys(src, dst, order, n)
        del src, dst
        keys = torch.unique(torch.cat([keys, new]))  # sorted, deduplicated
        del new
        if keys.numel() >= m:
            break
        want = m - keys.numel()
    if keys.numel() > m:
        # Keep a uniformly random subset of exactly m pairs (then restore sorted order).
        pick = torch.randperm(keys.numel(), generator=g)[:m]
        keys = keys[torch.sort(pick).values]
        del pick
    del cum, order, cls_sorted

    # Held-out link-prediction positives: a random subset of undirected pairs.
    n_pairs = keys.numel()
    n_lp_val = int(spec.lp_val_frac * n_pairs)
    n_lp_test = int(spec.lp_test_frac * n_pairs)
    lp_pick = torch.randperm(n_pairs, generator=g)[: n_lp_val + n_lp_test]
    lp_keys = keys[lp_pick]
    del lp_pick
    lp_pairs = torch.stack([lp_keys // n, lp_keys % n])
    del lp_keys

    # Both directions, sorted by (target, source): key = target * n + source.
    lo = keys // n
    hi = keys - lo * n
    del keys
    both = torch.cat([lo * n + hi, hi * n + lo])
    del lo, hi
    both, _ = torch.sort(both)
    dst = both // n
    edge_index = torch.empty(2, both.numel(), dtype=torch.int64)
    torch.sub(both, dst * n, out=edge_index[0])
    edge_index[1] = dst
    del both
    rowptr = rowptr_from_sorted_targets(dst, n)
    del dst

    # Features: class mean (norm = snr) plus unit Gaussian noise, added in chunks.
    means = torch.randn(C, spec.feature_dim, generator=g)
    means = means / means.norm(dim=1, keepdim=True).clamp_min(1e-12) * spec.feature_snr
    x = torch.randn(n, spec.feature_dim, generator=g)
    for start in range(0, n, _FEATURE_CHUNK):
        stop = min(start + _FEATURE_CHUNK, n)
        x[start:stop] += means[y[start:stop]]

    train_mask, val_mask, test_mask = random_split_masks(n, spec.train_frac, spec.val_frac, g)
    return Graph(
        edge_index=edge_index,
        rowptr=rowptr,
        x=x,
        y=y,
        train_mask=train_mask,
        val_mask=val_mask,
        test_mask=test_mask,
        lp_val_pos=lp_pairs[:, :n_lp_val].contiguous(),
        lp_test_pos=lp_pairs[:, n_lp_val:].contiguous(),
        meta={"source": "generated", "spec": spec.to_dict(), "generate_seconds": time.perf_counter() - t0},
    )
