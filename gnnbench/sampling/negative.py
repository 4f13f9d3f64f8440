"""Negative sampling for link prediction: uniform or degree-weighted (deg^0.75),
with vectorized rejection of existing edges.

Membership is a binary search of 64-bit pair keys in the graph's own edge
order (edges are stored sorted by ``target * N + source``), so no hash set and
no Python loop over edges is needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum

import torch
from torch import Tensor

__all__ = ["NegativeMode", "NegativeSampler", "NegativeStats", "edge_keys"]

DEGREE_POWER = 0.75  # word2vec-style smoothing of the degree distribution


class NegativeMode(str, Enum):
    UNIFORM = "uniform"  # endpoints uniform over nodes
    DEGREE = "degree"  # endpoints proportional to degree ** 0.75


def edge_keys(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Sorted int64 keys ``target * N + source`` of ``edge_index``."""
    keys = edge_index[1].to(torch.int64) * num_nodes + edge_index[0].to(torch.int64)
    if keys.numel() > 1 and not bool((keys[1:] >= keys[:-1]).all()):
        keys, _ = torch.sort(keys)
    return keys


@dataclass
class NegativeStats:
    """Running cost of negative sampling."""

    negatives: int = 0
    seconds: float = 0.0
    rejected: int = 0
    rounds: list[int] = field(default_factory=list)

    @property
    def seconds_per_1k(self) -> float:
        return 1000.0 * self.seconds / self.negatives if self.negatives else float("nan")


class NegativeSampler:
    """Draw node pairs that are not edges of a graph.

    Args:
        edge_index: ``[2, E]`` positive (training) edges; in strict mode no
            negative equals one of them. For link prediction pass the
            training graph (``Graph.link_split()``), whose edges are stored in
            both directions.
        num_nodes: Number of nodes.
        mode: ``"uniform"`` (default) or ``"degree"`` (``deg ** 0.75``).
        strict: Reject candidates that are positives (default ``True``).
            Without it candidates are only checked for self loops, as PyG's
            own negative sampler does.
        max_rounds: Bounded re-draw rounds for rejected candidates.
        seed: Seed of the sampler's generator.
    """

    def __init__(
        self,
        edge_index: Tensor,
        num_nodes: int,
        *,
        mode: NegativeMode | str = "uniform",
        strict: bool = True,
        max_rounds: int = 20,
        seed: int = 0,
    ) -> None:
        try:
            self.mode = NegativeMode(mode)
        except ValueError:
            raise ValueError(
                f"negative sampling mode must be one of {', '.join(repr(m.value) for m in NegativeMode)} (got {mode!r})"
            ) from None
        if num_nodes < 2:
            raise ValueError(f"negative sampling needs at least 2 nodes (got {num_nodes})")
        self.num_nodes = num_nodes
        self.strict = strict
        self.max_rounds = max_rounds
        self.device = edge_index.device
        self.keys = edge_keys(edge_index, num_nodes) if strict else None
        self.cum: Tensor | None = None
        if self.mode is NegativeMode.DEGREE:
            deg = torch.bincount(edge_index[0].to(torch.int64), minlength=num_nodes).to(torch.float64)
            deg += torch.bincount(edge_index[1].to(torch.int64), minlength=num_nodes).to(torch.float64)
            w = deg.pow_(DEGREE_POWER)
            if float(w.sum()) == 0:
                w = torch.ones(num_nodes, dtype=torch.float64, device=self.device)
            self.cum = torch.cumsum(w, 0)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.stats = NegativeStats()

    def _draw(self, count: int) -> Tensor:
        if self.cum is None:
            return torch.randint(0, self.num_nodes, (count,), device=self.device, generator=self.generator)
        u = torch.rand(count, device=self.device, generator=self.generator, dtype=torch.float64)
        u *= float(self.cum[-1])
        return torch.searchsorted(self.cum, u, right=True).clamp_max_(self.num_nodes - 1)

    def is_edge(self, src: Tensor, dst: Tensor) -> Tensor:
        """Whether each ``(src, dst)`` is a positive edge (strict mode only)."""
        if self.keys is None:
            raise RuntimeError("is_edge needs strict=True (the positive keys are not kept otherwise)")
        if self.keys.numel() == 0:
            return torch.zeros(src.numel(), dtype=torch.bool, device=src.device)
        key = dst.to(torch.int64) * self.num_nodes + src.to(torch.int64)
        pos = torch.searchsorted(self.keys, key).clamp_max_(self.keys.numel() - 1)
        return self.keys[pos] == key

    def _invalid(self, src: Tensor, dst: Tensor) -> Tensor:
        bad = src == dst
        if self.strict:
            bad |= self.is_edge(src, dst)
        return bad

    def sample(self, num: int, src: Tensor | None = None) -> Tensor:
        """Draw ``num`` negatives as a ``[2, num]`` tensor.

        Args:
            num: Number of negative pairs.
            src: Optional ``[num]`` sources to corrupt (only destinations are
                drawn); by default both endpoints are drawn.

        Raises:
            RuntimeError: if rejection does not converge within ``max_rounds``
                (the graph is too dense for the requested negatives).
        """
        t0 = time.perf_counter()
        src_given = src is not None
        if src is not None:
            src = src.to(self.device, torch.int64)
            if src.numel() != num:
                raise ValueError(f"src must hold num={num} node ids (got {src.numel()})")
        else:
            src = self._draw(num)
        dst = self._draw(num)
        bad = self._invalid(src, dst)
        rounds, rejected = 0, 0
        while bool(bad.any()):
            rounds += 1
            if rounds > self.max_rounds:
                raise RuntimeError(
                    f"negative sampling did not converge: {int(bad.sum())} of {num} candidates still hit "
                    f"positives or self loops after {self.max_rounds} rounds (graph too dense; "
                    f"use strict=False or fewer negatives)"
                )
            idx = bad.nonzero().view(-1)
            rejected += idx.numel()
            if not src_given:  # a source may have no valid partner: redraw the whole pair
                src[idx] = self._draw(idx.numel())
            dst[idx] = self._draw(idx.numel())
            bad[idx] = self._invalid(src[idx], dst[idx])
        out = torch.stack([src, dst])
        self.stats.negatives += num
        self.stats.rejected += rejected
        self.stats.rounds.append(rounds)
        self.stats.seconds += time.perf_counter() - t0
        return out
