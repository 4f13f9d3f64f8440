"""LABOR-0 layer-neighbour sampling over CSR (:class:`LaborSampleCore`), vectorized, on any device.

Balin & Çatalyürek, "Layer-Neighbor Sampling — Defusing Neighborhood Explosion in GNNs" (NeurIPS 2023),
the ``labor`` sampler of DGL GraphBolt. Per hop, every candidate source ``t`` (a neighbour of some frontier
node) gets one uniform variate ``r_t`` shared by the whole batch, and target ``s`` of degree ``d_s`` keeps
its edge from ``t`` iff ``r_t < pi_s = min(1, k / d_s)`` (the paper writes ``<=``: equal in measure, and
``<`` makes ``pi = 1`` keep always). Each edge is kept with probability exactly ``pi_s`` (so ``min(d_s, k)``
neighbours in expectation, not exactly ``k``), and targets whose neighbourhoods overlap keep the same
sources: one hop reaches far fewer distinct nodes than independent per-target draws.
``1 / pi_s`` is the edge's Horvitz-Thompson weight (:attr:`LaborSubgraph.weight`).

Variates are fresh per hop (the paper allows either; independent hops keep each hop's estimator the
one-hop one). They are not drawn per node: ``r_t`` is the ``t``-th output of a SplitMix64 stream keyed by
the hop's key, itself the hop's output of a stream keyed by one 64-bit key drawn from the sampler's
generator per batch (:func:`keyed_uniform`). So the work is ``O(candidate edges)`` with no ``num_nodes``
vector and no sort, the key never visits the host, every appearance of ``t`` in a hop sees the same
variate, and a batch key gives the same sample on every device. ``replace=True`` has no meaning here and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import Tensor

from gnnbench.sampling.neighbor import NeighborSampleCore, SampledSubgraph, sample_positions
from gnnbench.timing import in_code_path

__all__ = ["LaborSubgraph", "LaborSampleCore", "keyed_uniform", "splitmix64"]


def _signed(x: int) -> int:
    """The int64 with the low 64 bits of ``x`` (two's complement)."""
    x %= 1 << 64
    return x - (1 << 64) if x >= 1 << 63 else x


_GOLDEN = _signed(0x9E3779B97F4A7C15)  # SplitMix64's stream increment (2^64 / golden ratio, odd)
_MIX1 = _signed(0xBF58476D1CE4E5B9)
_MIX2 = _signed(0x94D049BB133111EB)


def _shr(x: Tensor, s: int) -> Tensor:
    """Logical right shift of int64 bits (torch's ``>>`` is arithmetic)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def splitmix64(z: Tensor) -> Tensor:
    """SplitMix64's output mix (Steele, Lea & Flood 2014), a bijection on 64-bit words, in wrapping int64 ops."""
    z = (z ^ _shr(z, 30)) * _MIX1
    z = (z ^ _shr(z, 27)) * _MIX2
    return z ^ _shr(z, 31)


def keyed_uniform(ids: Tensor, key: Tensor | int) -> Tensor:
    """float64 uniforms in ``[0, 1)`` (53 bits) of ``ids``' shape, each a function of ``(key, id)`` only.

    ``ids[i]``'s variate is output ``ids[i] + 1`` of the SplitMix64 stream seeded with ``key``: equal ids get
    equal variates, distinct ids (fewer than ``2^64``) independent-looking ones.

    Args:
        ids: int64 ids (any shape).
        key: int64 key: a 0-d tensor on ``ids``' device, or a Python int in int64 range.
    """
    offset = _signed(key + _GOLDEN) if isinstance(key, int) else key + _GOLDEN  # a Python int wraps as int64 does
    z = splitmix64(ids * _GOLDEN + offset)
    return _shr(z, 11).to(torch.float64) * 2.0**-53


@dataclass
class LaborSubgraph(SampledSubgraph):
    """A LABOR sample: :class:`SampledSubgraph`'s layout (seeds first, edges sorted by target, CSR dtype) plus
    each edge's inclusion weight.

    Args:
        weight: ``[e]`` float32 ``1 / pi`` of the edge's target: ``sum(weight * h[row])`` per target is an
            unbiased estimate of its full neighbour sum, and ``weight / d_target`` of its neighbour mean.
        pi: ``[n - num_sampled_nodes[-1]]`` float32 inclusion probability ``min(1, k / d)`` of every node
            that was a target (local ids ``0 ..``; the last hop's new nodes are never targets); 1 for degree 0.
        num_candidate_edges: Edges examined per hop (every in-edge of the hop's targets).
    """

    weight: Tensor = field(default_factory=lambda: torch.empty(0))
    pi: Tensor = field(default_factory=lambda: torch.empty(0))
    num_candidate_edges: list[int] = field(default_factory=list)

    def hop_stats(self) -> list[dict[str, int]]:
        """Per hop: targets, candidate edges, sampled edges and newly reached nodes."""
        return [
            {
                "targets": self.num_sampled_nodes[h],
                "candidate_edges": self.num_candidate_edges[h],
                "sampled_edges": self.num_sampled_edges[h],
                "new_nodes": self.num_sampled_nodes[h + 1],
            }
            for h in range(len(self.num_sampled_edges))
        ]


class LaborSampleCore(NeighborSampleCore):
    """LABOR-0 multi-hop sampling over a CSR ``(rowptr, col)`` on any device.

    Same construction, :meth:`reseed` and relabelling (so the same thread-safety note) as
    :class:`~gnnbench.sampling.neighbor.NeighborSampleCore`.

    Args:
        rowptr: ``[N + 1]`` CSR offsets (int32 or int64).
        col: ``[E]`` neighbour ids, grouped by node.
        fanouts: Expected neighbours per hop, e.g. ``(15, 10)``; ``-1`` takes all (weight 1).
        replace: Must be ``False``: LABOR keeps each edge at most once.
        seed: Seed of the sampler's own generator (one 64-bit key per batch).
    """

    def __init__(
        self, rowptr: Tensor, col: Tensor, fanouts: Sequence[int], *, replace: bool = False, seed: int = 0
    ) -> None:
        if replace:
            raise ValueError(f"LABOR samples each edge at most once; replace must be False (got replace={replace!r})")
        super().__init__(rowptr, col, fanouts, replace=False, seed=seed)

    def _batch_key(self) -> Tensor:
        """One int64 key for the batch, on the device (no host read)."""
        return torch.randint(-(2**63), 2**63 - 1, (), generator=self.generator, device=self.device, dtype=torch.int64)

    @in_code_path("sample")
    def sample(self, seeds: Tensor, *, check: bool = True) -> LaborSubgraph:
        """Sample the multi-hop LABOR-0 neighbourhood of distinct ``seeds`` (global ids).

        ``check=False`` skips the range and distinctness checks, as in
        :meth:`NeighborSampleCore.sample <gnnbench.sampling.neighbor.NeighborSampleCore.sample>`.
        """
        keys: list[Tensor] = []  # the batch's key, drawn once its seeds are placed
        weights, pis, num_cand = [], [], []

        def draw(hop: int, k: int, start: Tensor, deg: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            d = deg.clamp_min(1).to(torch.float64)
            pi = torch.ones_like(d) if k < 0 else (k / d).clamp_max_(1.0)
            owner, pos = sample_positions(deg, -1, False, None)  # every candidate edge, grouped by owner
            eid = start.index_select(0, owner).add_(pos)
            nbr = self.col.index_select(0, eid).to(torch.int64)
            num_cand.append(eid.numel())
            if not keys:
                keys.append(self._batch_key())
            if k >= 0:
                hop_key = splitmix64(keys[0] + _signed((hop + 1) * _GOLDEN))
                # r < pi: probability pi to within 2^-53, and pi = 1 always keeps.
                keep = (keyed_uniform(nbr, hop_key) < pi.index_select(0, owner)).nonzero().view(-1)
                owner, eid, nbr = (t.index_select(0, keep) for t in (owner, eid, nbr))
            weights.append((1.0 / pi).to(torch.float32).index_select(0, owner))
            pis.append(pi.to(torch.float32))
            return owner, eid, nbr

        hops = self.walk_hops(seeds, check, draw)
        return LaborSubgraph(**hops, weight=torch.cat(weights), pi=torch.cat(pis), num_candidate_edges=num_cand)
