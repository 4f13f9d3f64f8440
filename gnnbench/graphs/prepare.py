"""Graph preparation: apply the graph-layer flags (index dtype, cached GCN
normalization, CSR beside COO) and report what they cost and save."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs.container import Graph
from gnnbench.graphs.csr import CSR, coo_to_csr
from gnnbench.graphs.index import INDEX_DTYPE_BY_NAME, IndexOverflowError, check_index_fits, to_index_dtype
from gnnbench.graphs.norm import GCNNorm, gcn_norm

# The index helpers live in gnnbench.graphs.index; they are re-exported here.
__all__ = [
    "PreparedGraph",
    "prepare",
    "unavailable",
    "check_index_fits",
    "to_index_dtype",
    "IndexOverflowError",
    "INDEX_DTYPE_BY_NAME",
]


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


def prepare(graph: Graph, flags: Flags) -> PreparedGraph:
    """Apply the graph-layer flags to ``graph``.

    - ``index_dtype``: converts ``edge_index`` and CSR offsets, raising
      :class:`IndexOverflowError` when the largest node id or edge offset does
      not fit (never a silent wrap);
    - ``keep_csr``: keeps the CSR (its column array is COO's source row, so it
      costs ``N + 1`` offsets);
    - ``cached_norm`` with full-batch training: computes the graph's GCN
      normalization once (PyG's ``GCNConv(cached=True)``). On sampled batches
      ``cached_norm`` normalizes each batch once for all layers instead
      (:class:`gnnbench.models.aggregation_policy.AggregationPolicy`), so nothing is
      precomputed here.

    The baseline ``Flags()`` keeps int64 COO only and recomputes on demand.
    """
    t0 = time.perf_counter()
    # Like for like: the index structures the graph holds (COO and CSR offsets) at int64.
    before = 8 * (graph.edge_index.numel() + graph.rowptr.numel())
    g = graph.with_index_dtype(INDEX_DTYPE_BY_NAME[flags.index_dtype])
    t_index = time.perf_counter()
    csr = g.csr if flags.keep_csr else None
    full_graph_weights = flags.cached_norm and flags.batch_source == "full"
    norm = gcn_norm(g.edge_index, g.num_nodes, add_self_loops=True) if full_graph_weights else None
    t_end = time.perf_counter()
    after = g.edge_index.nbytes + g.rowptr.nbytes
    return PreparedGraph(
        graph=g,
        flags=flags,
        csr=csr,
        norm=norm,
        index_bytes_before=before,
        index_bytes_after=after,
        prepare_seconds=t_end - t0,
        stats={"index_cast_seconds": t_index - t0, "norm_and_csr_seconds": t_end - t_index},
    )


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """The graph layer's answer to "can these flags run here?".

    Only ``index_dtype`` can be refused: ``"int32"`` when the graph's largest
    node id (``num_nodes - 1``) or largest CSR offset (``num_edges``) does not
    fit int32. Sizes that are not known yet (``None``) are not refused;
    :func:`prepare` guards the conversion again once the graph exists.

    Args:
        flags: The configuration to check.
        ctx: Where and what it runs; ``num_nodes`` and ``num_edges`` are read.

    Returns:
        ``[Unavailable("index_dtype", reason)]`` with the same message
        :func:`prepare` would raise as :class:`IndexOverflowError`, or ``[]``.
    """
    dtype = INDEX_DTYPE_BY_NAME[flags.index_dtype]
    if dtype == torch.int64:
        return []
    try:
        if ctx.num_nodes is not None:
            check_index_fits(ctx.num_nodes - 1, dtype, "node id")
        if ctx.num_edges is not None:
            check_index_fits(ctx.num_edges, dtype, "edge offset")
    except IndexOverflowError as exc:
        return [Unavailable("index_dtype", str(exc))]
    return []
