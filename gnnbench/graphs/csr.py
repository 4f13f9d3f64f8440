"""Compressed sparse row (CSR) neighbour lists and their conversion to and from COO.

Convention: ``edge_index[0]`` is the source and ``edge_index[1]`` the target of
an edge, as in PyG (messages flow source -> target). The CSR is indexed by the
*target*: ``col[rowptr[i]:rowptr[i + 1]]`` are the sources whose messages node
``i`` aggregates (its in-neighbours). For undirected graphs these are simply
the neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["CSR", "coo_to_csr", "csr_to_coo", "rowptr_from_sorted_targets", "sort_edges_by_target"]


@dataclass(frozen=True)
class CSR:
    """In-neighbour lists in CSR form.

    Args:
        rowptr: ``[num_nodes + 1]`` offsets into ``col``.
        col: ``[num_edges]`` source node of each edge, grouped by target.
    """

    rowptr: Tensor
    col: Tensor

    @property
    def num_nodes(self) -> int:
        return self.rowptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.col.numel()

    def degree(self) -> Tensor:
        """In-degree of each node (int64)."""
        return self.rowptr.diff().to(torch.int64)

    def nbytes(self) -> int:
        return self.rowptr.nbytes + self.col.nbytes


def rowptr_from_sorted_targets(dst: Tensor, num_nodes: int) -> Tensor:
    """CSR offsets for targets ``dst`` that are already sorted ascending."""
    counts = torch.bincount(dst, minlength=num_nodes)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.int64, device=dst.device)
    torch.cumsum(counts, 0, out=rowptr[1:])
    return rowptr.to(dst.dtype)


def sort_edges_by_target(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """Sort edges by (target, source) and return ``(sorted_edge_index, perm)``."""
    key = edge_index[1].to(torch.int64) * num_nodes + edge_index[0].to(torch.int64)
    key, perm = torch.sort(key, stable=True)
    return edge_index[:, perm], perm


def coo_to_csr(edge_index: Tensor, num_nodes: int) -> tuple[CSR, Tensor]:
    """Derive in-neighbour CSR from an arbitrary (unsorted) COO edge list.

    This is what a pipeline that keeps no CSR pays whenever it needs neighbour
    lists: a stable sort of the targets plus a histogram.

    Returns:
        ``(csr, perm)`` where ``perm`` maps CSR positions to COO edge ids.
    """
    dst = edge_index[1]
    _, perm = torch.sort(dst, stable=True)
    col = edge_index[0][perm]
    rowptr = rowptr_from_sorted_targets(dst[perm], num_nodes)
    return CSR(rowptr=rowptr, col=col), perm


def csr_to_coo(csr: CSR) -> Tensor:
    """Expand CSR back to a ``[2, num_edges]`` COO edge list in CSR order."""
    deg = csr.rowptr.diff().to(torch.int64)
    dst = torch.repeat_interleave(torch.arange(csr.num_nodes, device=csr.rowptr.device, dtype=csr.col.dtype), deg)
    return torch.stack([csr.col, dst])
