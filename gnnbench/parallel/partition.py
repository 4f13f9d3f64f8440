"""Node partitions of a graph for partition-parallel training: METIS and degree buckets.

:func:`partition` gives every node one owner part and returns a :class:`Partition` with the
costs that partition implies: the **edge cut** (it sets the halo, so the bytes exchanged every
step, :mod:`gnnbench.parallel.halo`) and the **balance** (it sets the slowest rank). The
partitioners are the ``METHODS`` table: ``metis`` (pymetis k-way: small cut, slow to compute)
and ``degree`` (degree buckets dealt evenly over the parts, ``round_robin`` by default or
``block``: deterministic and fast, no look at the structure beyond the degree). Everything is
tensor code: no Python loop over nodes or edges.

How the degree buckets are dealt and why round robin is the default: ``docs/distributed.md``.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

from gnnbench.graphs.container import Graph
from gnnbench.sampling.subgraph import metis_partition

__all__ = ["DEALS", "METHODS", "Partition", "degree_buckets", "partition"]

DEALS = ("round_robin", "block")


@dataclass(frozen=True, eq=False)
class Partition:
    """Owner part of every node, with the costs it implies.

    Args:
        parts: ``[N]`` int64 owner part of every node, in ``[0, num_parts)``.
        method: The partitioner that made it (a key of :data:`METHODS`), with the deal
            for ``degree`` (``"degree"`` or ``"degree/block"``).
        num_parts: Number of parts.
        seconds: Wall time of the partitioner (setup cost; excludes this object's metrics).
        edge_index: ``[2, E]`` (source, target) edges the metrics count, the graph's own.
    """

    parts: Tensor
    method: str
    num_parts: int
    seconds: float
    edge_index: Tensor = field(repr=False)

    @property
    def num_nodes(self) -> int:
        return self.parts.numel()

    @functools.cached_property
    def _edge_parts(self) -> tuple[Tensor, Tensor]:
        """Owner part of every edge's source and target."""
        ei = self.edge_index.to(torch.int64)
        return self.parts[ei[0]], self.parts[ei[1]]

    @functools.cached_property
    def edge_cut_fraction(self) -> float:
        """Fraction of stored directed edges whose endpoints are in different parts (0 with no edges)."""
        src, dst = self._edge_parts
        return float((src != dst).sum()) / src.numel() if src.numel() else 0.0

    @functools.cached_property
    def nodes_per_part(self) -> Tensor:
        """``[num_parts]`` int64 number of owned nodes."""
        return torch.bincount(self.parts, minlength=self.num_parts)

    @functools.cached_property
    def edges_per_part(self) -> Tensor:
        """``[num_parts]`` int64 number of in-edges of owned nodes (edges counted by their target's owner)."""
        return torch.bincount(self._edge_parts[1], minlength=self.num_parts)

    @property
    def node_balance(self) -> float:
        """Largest part over the mean part, by nodes (1.0 is perfect)."""
        return _max_over_mean(self.nodes_per_part)

    @property
    def edge_balance(self) -> float:
        """Largest part over the mean part, by in-edges of owned nodes (1.0 is perfect, also with no edges)."""
        return _max_over_mean(self.edges_per_part)

    def owned_nodes(self, part: int) -> Tensor:
        """Global ids (ascending) of the nodes ``part`` owns."""
        self._check_part(part)
        return (self.parts == part).nonzero().view(-1)

    def halo_nodes(self, part: int) -> Tensor:
        """Global ids (ascending, distinct) of the remote sources that ``part``'s target nodes aggregate."""
        self._check_part(part)
        src_part, dst_part = self._edge_parts
        need = (dst_part == part) & (src_part != part)
        return torch.unique(self.edge_index[0][need].to(torch.int64))

    @functools.cached_property
    def halo_sizes(self) -> Tensor:
        """``[num_parts]`` int64 halo size of every part, in one pass over the cut edges."""
        src_part, dst_part = self._edge_parts
        cut = src_part != dst_part
        keys = torch.unique(dst_part[cut] * self.num_nodes + self.edge_index[0][cut].to(torch.int64))
        return torch.bincount(keys // self.num_nodes, minlength=self.num_parts)

    def summary(self) -> dict[str, float | int | str]:
        """The numbers a report prints: method, parts, seconds, cut, balances, mean halo."""
        return {
            "method": self.method,
            "parts": self.num_parts,
            "seconds": self.seconds,
            "edge_cut_fraction": self.edge_cut_fraction,
            "node_balance": self.node_balance,
            "edge_balance": self.edge_balance,
            "mean_halo_nodes": float(self.halo_sizes.double().mean()),
        }

    def _check_part(self, part: int) -> None:
        if not (isinstance(part, int) and 0 <= part < self.num_parts):
            raise ValueError(f"part must be an integer in [0, {self.num_parts - 1}] (got {part!r})")


def _max_over_mean(counts: Tensor) -> float:
    total = int(counts.sum())
    return float(counts.max()) * counts.numel() / total if total else 1.0


def degree_buckets(deg: Tensor) -> Tensor:
    """Bucket of every node: ``bit_length(deg)``, i.e. 0 for degree 0 and ``floor(log2 d) + 1`` otherwise."""
    _, exponent = torch.frexp(deg.to(torch.float64))  # d = m * 2**e with m in [0.5, 1): e = bit_length(d)
    return exponent.to(torch.int64)


def _degree_parts(graph: Graph, num_parts: int, seed: int, deal: str) -> Tensor:
    del seed  # deterministic
    if deal not in DEALS:
        raise ValueError(f"unknown degree deal {deal!r}; accepted: {', '.join(DEALS)}")
    n = graph.num_nodes
    deg = graph.deg
    bucket = degree_buckets(deg)
    ids = torch.arange(n)
    parts = torch.empty(n, dtype=torch.int64)
    if deal == "round_robin":
        # Buckets high to low and, inside a bucket, decreasing degree: together one sort by
        # decreasing degree (stable, so ties keep id order). The deal runs on across buckets.
        order = torch.sort(-deg, stable=True).indices
        parts[order] = ids % num_parts
    else:
        order = torch.sort(bucket, stable=True).indices  # bucket by bucket, ids ascending inside
        sizes = torch.bincount(bucket, minlength=int(bucket.max()) + 1)
        start = torch.cumsum(sizes, 0) - sizes
        b = bucket[order]
        pos = ids - start[b]  # position inside the bucket
        parts[order] = pos * num_parts // sizes[b]
    return parts


def _metis_parts(graph: Graph, num_parts: int, seed: int, deal: str) -> Tensor:
    del deal
    return metis_partition(graph.csr, num_parts, seed=seed)


# The partitioners: name -> fn(graph, num_parts, seed, deal) -> [N] int64 parts.
METHODS: dict[str, Callable[[Graph, int, int, str], Tensor]] = {
    "metis": _metis_parts,
    "degree": _degree_parts,
}


def partition(graph: Graph, num_parts: int, method: str, *, seed: int = 0, deal: str = "round_robin") -> Partition:
    """Partition ``graph``'s nodes into ``num_parts`` owner parts.

    Args:
        graph: The graph; edges are read from ``edge_index`` / ``rowptr`` (directed
            graphs are symmetrized for METIS, degrees are in-degrees).
        num_parts: Number of parts, in ``[2, num_nodes]``.
        method: A key of :data:`METHODS`: ``"metis"`` or ``"degree"``.
        seed: METIS's seed (the degree partition is deterministic). Default 0.
        deal: For ``"degree"``: ``"round_robin"`` (default) or ``"block"`` (see
            ``docs/distributed.md``). Ignored by METIS.

    Returns:
        A :class:`Partition`, ``seconds`` holding the partitioner's wall time.

    Raises:
        ValueError: for ``num_parts`` outside ``[2, num_nodes]``, an unknown ``method`` or ``deal``.
    """
    n = graph.num_nodes
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or not 2 <= num_parts <= n:
        raise ValueError(f"num_parts must be an integer in [2, num_nodes = {n}] (got {num_parts!r})")
    if method not in METHODS:
        raise ValueError(f"unknown partition method {method!r}; accepted: {', '.join(METHODS)}")
    if method == "degree" and deal not in DEALS:
        raise ValueError(f"unknown degree deal {deal!r}; accepted: {', '.join(DEALS)}")
    t0 = time.perf_counter()
    parts = METHODS[method](graph, num_parts, seed, deal).to(torch.int64)
    seconds = time.perf_counter() - t0
    label = method if method != "degree" or deal == "round_robin" else f"{method}/{deal}"
    return Partition(parts=parts, method=label, num_parts=num_parts, seconds=seconds, edge_index=graph.edge_index)
