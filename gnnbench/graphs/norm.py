"""Symmetric GCN normalization ``D^-1/2 (A + I) D^-1/2``, zero-degree safe.

The result is aligned with the graph's own ``edge_index`` (one weight per
stored edge) plus one weight per node for the added self loop, so edge ids stay
valid: a sampler that returns edge ids can look up the weights of a cached
normalization directly.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

# torch flags index_reduce_ as beta on every call; gcn_norm's self-loop pass uses it on every batch
warnings.filterwarnings("ignore", message=r"index_reduce\(\) is in beta")

__all__ = ["GCNNorm", "gcn_norm", "gcn_inv_sqrt_degree", "gcn_norm_targets"]


@dataclass(frozen=True)
class GCNNorm:
    """Normalized weights for ``out = sum_j w_ij x_j + s_i x_i``.

    Args:
        edge_weight: ``[E]`` weight of each stored edge (source -> target).
        self_weight: ``[N]`` weight of the self loop added to each node; 0 where
            the node already had a self loop (its weight is in ``edge_weight``)
            or when self loops were not added.
    """

    edge_weight: Tensor
    self_weight: Tensor

    def nbytes(self) -> int:
        return self.edge_weight.nbytes + self.self_weight.nbytes


def _loop_weights(
    src: Tensor,
    dst: Tensor,
    num_targets: int,
    target_start: int,
    add_self_loops: bool,
    edge_weight: Tensor | None,
    dtype: torch.dtype,
) -> tuple[Tensor, Tensor]:
    """``(w, self_fill)``: each edge's input weight (repeated self loops zeroed) and each target's added
    self-loop weight, for edges whose targets are ``target_start .. target_start + num_targets - 1``."""
    device = dst.device
    w = torch.ones(src.numel(), dtype=dtype, device=device) if edge_weight is None else edge_weight.to(dtype)
    self_fill = torch.zeros(num_targets, dtype=dtype, device=device)
    if add_self_loops:
        self_fill.fill_(1.0)
        loops = (src == dst).nonzero().view(-1)
        if loops.numel():
            # As PyG's add_remaining_self_loops: one loop per node, the last one's weight;
            # repeated loops of a node are dropped (weight 0).
            node = dst[loops].to(torch.int64) - target_start
            last = torch.full((num_targets,), -1, dtype=torch.int64, device=device)
            last.scatter_reduce_(0, node, loops, reduce="amax")
            w = w.clone()
            w[loops[last[node] != loops]] = 0.0
            self_fill[node] = 0.0  # the kept loop carries the node's self weight
    return w, self_fill


def _inv_sqrt(deg: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.where(deg > 0, deg.clamp_min(torch.finfo(dtype).tiny).rsqrt(), torch.zeros_like(deg))


def gcn_norm(
    edge_index: Tensor,
    num_nodes: int,
    *,
    add_self_loops: bool = True,
    edge_weight: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> GCNNorm:
    """Compute GCN's symmetric normalization for the edges ``edge_index``.

    Degrees are in-degrees (summed over targets ``edge_index[1]``), as in PyG's
    ``gcn_norm`` with ``flow="source_to_target"``. With ``add_self_loops``,
    a self loop of weight 1 is added to every node that lacks one and repeated
    loops of a node count once (PyG's "remaining" self loops). Nodes of zero degree get weight 0 everywhere: no
    NaN or Inf is produced, with or without self loops.

    Args:
        edge_index: ``[2, E]`` int32 or int64 (source, target) pairs.
        num_nodes: Number of nodes.
        add_self_loops: Add the identity ``I`` (default ``True``).
        edge_weight: Optional ``[E]`` input weights (default all ones).
        dtype: Floating dtype of the result (default float32).
    """
    # Written out rather than through _loop_weights / _inv_sqrt, and with static shapes only (no nonzero(), no
    # branch on the data): this runs inside torch.compile'd training steps, where either breaks the graph. The
    # chunk functions below compute the same (bit for bit, tested).
    src, dst = edge_index[0], edge_index[1]
    device = edge_index.device
    w = torch.ones(src.numel(), dtype=dtype, device=device) if edge_weight is None else edge_weight.to(dtype)
    if add_self_loops:
        # As PyG's add_remaining_self_loops: one loop per node, the last one's weight; repeated loops of a node
        # are dropped (weight 0), and a node without a loop gets one of weight 1.
        # index_reduce_ takes the batch's index dtype as it is (int32 stays int32; scatter_reduce_ needs int64)
        is_loop = src == dst
        edge = torch.arange(src.numel(), dtype=dst.dtype, device=device)
        last = torch.full((num_nodes,), -1, dtype=dst.dtype, device=device)
        last.index_reduce_(0, dst, torch.where(is_loop, edge, torch.full_like(edge, -1)), "amax")
        w = torch.where(is_loop & (last.index_select(0, dst) != edge), torch.zeros_like(w), w)
        self_fill = (last < 0).to(dtype)  # the kept loop carries the node's self weight
    else:
        self_fill = torch.zeros(num_nodes, dtype=dtype, device=device)
    deg = self_fill.clone().index_add_(0, dst, w)
    dinv = torch.where(deg > 0, deg.clamp_min(torch.finfo(dtype).tiny).rsqrt(), torch.zeros_like(deg))
    return GCNNorm(edge_weight=dinv[src] * w * dinv[dst], self_weight=dinv * self_fill * dinv)


def gcn_inv_sqrt_degree(
    edge_index: Tensor,
    num_targets: int,
    *,
    target_start: int = 0,
    add_self_loops: bool = True,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """``D^-1/2`` of :func:`gcn_norm` for the targets ``target_start .. target_start + num_targets - 1``.

    ``edge_index`` must hold *all* in-edges of those targets (and may hold no other edge), e.g. a chunk of
    a graph sorted by target; then the result equals the matching slice of the whole graph's, bit for bit.

    Args:
        edge_index: ``[2, e]`` (source, target) with global ids.
        num_targets: Number of targets.
        target_start: First target's id.
        add_self_loops: As :func:`gcn_norm`.
        dtype: Floating dtype of the result.
    """
    src, dst = edge_index[0], edge_index[1]
    w, self_fill = _loop_weights(src, dst, num_targets, target_start, add_self_loops, None, dtype)
    return _inv_sqrt(self_fill.clone().index_add_(0, dst - target_start, w), dtype)


def gcn_norm_targets(
    edge_index: Tensor, inv_sqrt_deg: Tensor, *, target_start: int = 0, num_targets: int, add_self_loops: bool = True
) -> GCNNorm:
    """:func:`gcn_norm`'s weights for the in-edges of a range of targets, from the whole graph's ``D^-1/2``.

    With ``edge_index`` holding all in-edges of targets ``target_start .. target_start + num_targets - 1``
    (in the graph's order) and ``inv_sqrt_deg`` the whole graph's (:func:`gcn_inv_sqrt_degree`), the result
    equals the slice of ``gcn_norm(whole graph)`` for those edges and targets, bit for bit.

    Args:
        edge_index: ``[2, e]`` (source, target) with global ids.
        inv_sqrt_deg: ``[N]`` the whole graph's ``D^-1/2``.
        target_start: First target's id.
        num_targets: Number of targets.
        add_self_loops: As :func:`gcn_norm`.
    """
    src, dst = edge_index[0], edge_index[1]
    w, self_fill = _loop_weights(src, dst, num_targets, target_start, add_self_loops, None, inv_sqrt_deg.dtype)
    d = inv_sqrt_deg[target_start : target_start + num_targets]
    return GCNNorm(edge_weight=inv_sqrt_deg[src] * w * inv_sqrt_deg[dst], self_weight=d * self_fill * d)
