"""Graph preparation: apply the graph-layer flags (index dtype, cached GCN
normalization, CSR beside COO) and report what they cost and save."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from gnnbench.flags import Flags
from gnnbench.graphs.container import Graph
from gnnbench.graphs.csr import CSR, coo_to_csr
from gnnbench.graphs.norm import GCNNorm, gcn_norm

__all__ = ["PreparedGraph", "prepare", "check_index_fits", "to_index_dtype", "IndexOverflowError",
           "INDEX_DTYPE_BY_NAME"]

INDEX_DTYPE_BY_NAME = {"int64": torch.int64, "int32": torch.int32}


class IndexOverflowError(ValueError):
    """An index value does not fit the requested index dtype."""


def check_index_fits(max_value: int, dtype: torch.dtype, what: str = "index") -> None:
    """Raise :class:`IndexOverflowError` if ``max_value`` does not fit ``dtype``.

    Args:
        max_value: The largest value that will be stored (e.g. ``num_nodes - 1``
            for node ids, ``num_edges`` for CSR offsets).
        dtype: ``torch.int32`` or ``torch.int64``.
        what: What the value is, for the message.
    """
    if dtype not in (torch.int32, torch.int64):
        raise ValueError(f"index dtype must be torch.int32 or torch.int64 (got {dtype})")
    limit = torch.iinfo(dtype).max
    if max_value > limit:
        raise IndexOverflowError(
            f"largest {what} {max_value} does not fit {str(dtype).replace('torch.', '')} "
            f"(max {limit}); use index_dtype='int64' for this graph"
        )


def to_index_dtype(t: Tensor, dtype: torch.dtype, *, what: str = "index", max_value: int | None = None) -> Tensor:
    """Convert an index tensor to ``dtype``, never wrapping silently.

    ``max_value`` is the largest value ``t`` may hold (known from the graph's
    size); when omitted it is computed from ``t``.
    """
    if t.dtype == dtype:
        return t
    if max_value is None:
        max_value = int(t.max()) if t.numel() else 0
    check_index_fits(max_value, dtype, what)
    return t.to(dtype)


@dataclass
class PreparedGraph:
    """A graph ready for a pipeline, with the graph-layer flags applied.

    Consumers ask for neighbour lists and GCN weights through
    :meth:`neighbours` and :meth:`gcn_norm`; whether those are kept or
    recomputed on each call is decided here by the flags, nowhere else.

    Args:
        graph: The graph, with indices in the flagged dtype.
        flags: The flags applied.
        csr: In-neighbour CSR when ``flags.keep_csr``, else ``None``.
        norm: Cached GCN normalization when ``flags.cached_norm``, else ``None``.
        index_bytes_before: Bytes of the graph's index structures (COO and CSR
            offsets; CSR's column array is COO's source row) at int64.
        index_bytes_after: Bytes they take in the flagged dtype. ``keep_csr``
            does not change them: it decides whether consumers use the kept
            CSR or derive (sort) their own copy, see :meth:`neighbours`.
        prepare_seconds: Wall time of :func:`prepare`.
    """

    graph: Graph
    flags: Flags
    csr: CSR | None
    norm: GCNNorm | None
    index_bytes_before: int
    index_bytes_after: int
    prepare_seconds: float
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def edge_index(self) -> Tensor:
        return self.graph.edge_index

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    def neighbours(self) -> CSR:
        """In-neighbour CSR: the kept one, or derived from COO now (a full sort)."""
        if self.csr is not None:
            return self.csr
        csr, _ = coo_to_csr(self.graph.edge_index, self.graph.num_nodes)
        return csr

    def gcn_norm(self) -> GCNNorm:
        """GCN weights aligned with ``edge_index``: the cached ones, or recomputed now."""
        if self.norm is not None:
            return self.norm
        return gcn_norm(self.graph.edge_index, self.graph.num_nodes, add_self_loops=True)

    def to(self, device: torch.device | str) -> "PreparedGraph":
        """Move index and normalization tensors to ``device`` (features stay where the feature store puts them)."""
        dev = torch.device(device)
        g = self.graph
        moved = Graph(
            edge_index=g.edge_index.to(dev), rowptr=g.rowptr.to(dev), x=g.x, y=g.y,
            train_mask=g.train_mask, val_mask=g.val_mask, test_mask=g.test_mask,
            lp_val_pos=g.lp_val_pos, lp_test_pos=g.lp_test_pos, meta=g.meta,
        )
        csr = CSR(moved.rowptr, moved.edge_index[0]) if self.csr is not None else None
        norm = (GCNNorm(self.norm.edge_weight.to(dev), self.norm.self_weight.to(dev))
                if self.norm is not None else None)
        return PreparedGraph(moved, self.flags, csr, norm, self.index_bytes_before,
                             self.index_bytes_after, self.prepare_seconds, dict(self.stats))


def prepare(graph: Graph, flags: Flags) -> PreparedGraph:
    """Apply the graph-layer flags to ``graph``.

    - ``index_dtype``: converts ``edge_index`` and CSR offsets, raising
      :class:`IndexOverflowError` when the largest node id or edge offset does
      not fit (never a silent wrap);
    - ``keep_csr``: keeps the CSR (its column array is COO's source row, so it
      costs ``N + 1`` offsets);
    - ``cached_norm``: computes the GCN normalization once.

    The baseline ``Flags()`` keeps int64 COO only and recomputes on demand.
    """
    t0 = time.perf_counter()
    # Like for like: the index structures the graph holds (COO and CSR offsets) at int64.
    before = 8 * (graph.edge_index.numel() + graph.rowptr.numel())
    g = graph.with_index_dtype(INDEX_DTYPE_BY_NAME[flags.index_dtype])
    t_index = time.perf_counter()
    csr = g.csr if flags.keep_csr else None
    norm = gcn_norm(g.edge_index, g.num_nodes, add_self_loops=True) if flags.cached_norm else None
    t_end = time.perf_counter()
    after = g.edge_index.nbytes + g.rowptr.nbytes
    return PreparedGraph(
        graph=g, flags=flags, csr=csr, norm=norm,
        index_bytes_before=before, index_bytes_after=after,
        prepare_seconds=t_end - t0,
        stats={"index_cast_seconds": t_index - t0, "norm_and_csr_seconds": t_end - t_index},
    )
