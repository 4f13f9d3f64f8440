"""Explicit input cleaning: deduplication, symmetrization, self-loop handling."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor

from gnnbench.graphs.csr import sort_edges_by_target

__all__ = ["SelfLoops", "CleanOptions", "clean_edges"]


class SelfLoops(str, Enum):
    """What to do with self loops ``(i, i)``."""

    KEEP = "keep"  # leave them as they are
    REMOVE = "remove"  # drop every self loop
    ADD = "add"  # ensure every node has exactly one self loop


@dataclass(frozen=True)
class CleanOptions:
    """How raw edges are cleaned before they become a :class:`~gnnbench.graphs.Graph`.

    Args:
        dedupe: Drop repeated ``(src, dst)`` pairs (default ``True``).
        to_undirected: Add the reverse of every edge (default ``False``).
        self_loops: ``"keep"`` (default), ``"remove"`` or ``"add"``.
    """

    dedupe: bool = True  # drop repeated (src, dst) pairs
    to_undirected: bool = False  # add the reverse of every edge
    self_loops: SelfLoops = SelfLoops.KEEP  # keep | remove | add

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "self_loops", SelfLoops(self.self_loops))
        except ValueError:
            accepted = ", ".join(repr(s.value) for s in SelfLoops)
            raise ValueError(
                f"CleanOptions.self_loops must be one of {accepted} (got {self.self_loops!r})"
            ) from None


def clean_edges(edge_index: Tensor, num_nodes: int, options: CleanOptions) -> Tensor:
    """Apply ``options`` and return the edges sorted by (target, source).

    The input must already be validated (ids in ``[0, num_nodes)``).
    """
    ei = edge_index.to(torch.int64)
    if options.to_undirected:
        ei = torch.cat([ei, ei.flip(0)], dim=1)
    if options.self_loops in (SelfLoops.REMOVE, SelfLoops.ADD):
        ei = ei[:, ei[0] != ei[1]]
    if options.self_loops is SelfLoops.ADD:
        loops = torch.arange(num_nodes, dtype=torch.int64, device=ei.device)
        ei = torch.cat([ei, loops.expand(2, -1)], dim=1)
    ei, _ = sort_edges_by_target(ei, num_nodes)
    if options.dedupe and ei.size(1) > 1:
        keep = torch.ones(ei.size(1), dtype=torch.bool, device=ei.device)
        keep[1:] = (ei[:, 1:] != ei[:, :-1]).any(dim=0)
        ei = ei[:, keep]
    return ei.contiguous()
