"""How a batch's aggregator is built: the :class:`AggregationPolicy`, the model layer's one decision point for
GCN normalization (per layer, once per batch, the graph's cached weights, the estimator, source degrees), over the
kernels of :mod:`gnnbench.models.aggregation`. Why each mode: ``docs/models.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from gnnbench.flags import Flags
from gnnbench.graphs.norm import GCNNorm, gcn_inv_sqrt_degree, gcn_norm, gcn_norm_targets
from gnnbench.models.aggregation import Aggregator, sparse_product_supports
from gnnbench.models.precision import Precision
from gnnbench.timing import code_path

__all__ = ["AggregationPolicy"]


@dataclass(frozen=True)
class AggregationPolicy:
    """How a batch's (or the whole graph's) aggregator is built: the model layer's one decision point
    for GCN normalization.

    - baseline: each layer normalizes the batch subgraph anew (PyG's ``GCNConv(cached=False)``);
    - ``cached_norm`` on sampled batches: the batch subgraph is normalized once and the weights shared by
      every layer (the same computation, done once per batch instead of once per layer: exact);
    - ``cached_norm`` with full-batch training: the graph's weights are computed once and reused every step,
      exactly PyG's ``GCNConv(cached=True)``, valid because the graph never changes;
    - the estimator (``norm_estimator``, and always for GraphSAINT batches): each sampled edge keeps its
      full-graph coefficient, rescaled by ``deg / sampled`` of its target, so the sum over sampled
      neighbours estimates the full-neighbourhood sum. It is a different model from the baseline's (costs
      accuracy). GraphSAINT batches use it instead of GraphSAINT's own per-edge ``alpha_uv``, whose variance
      on hub edges makes training diverge (``docs/models.md``).
    - source degrees (``source_norm="source_degree"``, link-prediction batches): as the baseline, except that
      each edge's *source* factor is the source's full-graph ``(d + 1)^-1/2`` instead of its degree in the
      batch (1 for the outermost sampled nodes, whose own neighbours are not in the batch). Per-batch
      normalization inflates those nodes' messages, and a dot-product link decoder reads the resulting scale
      (held-out AUC below chance without source degrees: ``docs/models.md``).

    Args:
        mode: ``"scatter"`` or ``"sparse"`` (``Flags.aggregation``).
        dtype: Aggregation dtype (the precision policy's).
        norm: Full-graph GCN coefficients on the device (full batch or estimator), or ``None``.
        deg_full: Full-graph in-degrees on the device (estimator only), or ``None``.
        once_per_batch: Normalize each sampled batch once, shared by all layers (``cached_norm``).
        source_inv_sqrt_deg: Full-graph ``D^-1/2`` (``[N]``, self loops counted) for source factors of sampled
            batches (``source_norm="source_degree"``), or ``None``.
    """

    mode: str = "scatter"
    dtype: torch.dtype = torch.float32
    norm: GCNNorm | None = None
    deg_full: Tensor | None = None
    once_per_batch: bool = False
    source_inv_sqrt_deg: Tensor | None = None

    @classmethod
    def build(
        cls, flags: Flags, precision: Precision, prepared, device: torch.device, *, source_norm: str = "batch"
    ) -> "AggregationPolicy":
        """The policy for ``flags`` and the batch source's normalization mode
        (``"batch"``, ``"source_degree"``, ``"full"`` or ``"estimator"``: ``norm_mode`` of the source)."""
        if source_norm not in ("batch", "source_degree", "full", "estimator"):
            raise ValueError(
                f"source_norm must be 'batch', 'source_degree', 'full' or 'estimator' (got {source_norm!r})"
            )
        per_batch = source_norm in ("batch", "source_degree")
        estimator = source_norm == "estimator" or (flags.norm_estimator and per_batch)
        norm = deg = src_inv = None
        if estimator or (flags.cached_norm and source_norm == "full"):
            cached = prepared.gcn_norm()
            norm = GCNNorm(cached.edge_weight.to(device), cached.self_weight.to(device))
            deg = prepared.graph.deg.to(device) if estimator else None
        elif source_norm == "source_degree":
            src_inv = gcn_inv_sqrt_degree(prepared.edge_index, prepared.num_nodes).to(device)
        return cls(
            flags.aggregation,
            precision.aggregation_dtype,
            norm,
            deg,
            once_per_batch=flags.cached_norm and per_batch,
            source_inv_sqrt_deg=src_inv,
        )

    @property
    def needs_edge_ids(self) -> bool:
        """Whether batches must bring their global edge ids (to look up full-graph coefficients)."""
        return self.deg_full is not None

    def for_batch(
        self, edge_index: Tensor, n_id: Tensor, e_id: Tensor | None, rowptr: Tensor | None = None
    ) -> Aggregator:
        """The aggregator of one batch (local ``edge_index`` over nodes ``n_id``; ``rowptr`` when the batch
        carries its CSR)."""
        n = n_id.numel()
        if self.norm is not None and self.deg_full is None:  # full batch: the graph's own cached weights
            return self._with_weights(edge_index, n, rowptr, lambda: self.norm)
        if self.deg_full is None:
            if self.source_inv_sqrt_deg is None:
                fresh = lambda: gcn_norm(edge_index, n, add_self_loops=True)  # noqa: E731
            else:
                fresh = lambda: self._source_degree_norm(edge_index, n, n_id)  # noqa: E731
            if not self.once_per_batch:
                if self.source_inv_sqrt_deg is None:
                    return Aggregator(edge_index, n, mode=self.mode, dtype=self.dtype, rowptr=rowptr)
                return self._with_weights(edge_index, n, rowptr, fresh)  # recomputed per layer, as the baseline
            memo: list[GCNNorm] = []

            def once() -> GCNNorm:  # computed at the first layer, shared by the others
                if not memo:
                    memo.append(fresh())
                return memo[0]

            return self._with_weights(edge_index, n, rowptr, once)
        weights: list[GCNNorm] = []
        agg = self._with_weights(edge_index, n, rowptr, lambda: weights[0])
        with code_path("norm.build"):
            w = self.norm.edge_weight.index_select(0, e_id)
            scale = self.deg_full.index_select(0, n_id).to(w.dtype) / agg.degree().clamp_min(1).to(w.dtype)
            weights.append(
                GCNNorm(w * scale.index_select(0, edge_index[1]), self.norm.self_weight.index_select(0, n_id))
            )
        return agg

    def for_graph(self, edge_index: Tensor, num_nodes: int) -> Aggregator:
        """The aggregator of the whole graph at once: full-graph coefficients when the policy holds them, else
        one normalization shared by the layers. Its scatter path materializes ``edges x features`` per
        layer; evaluation runs layer-wise in chunks instead (:meth:`for_targets`), equal to this."""
        norm = self.norm
        if norm is None:
            norm = gcn_norm(edge_index, num_nodes, add_self_loops=True)
        return self._with_weights(edge_index, num_nodes, None, lambda: norm)

    def for_targets(
        self,
        edge_index: Tensor,
        rowptr: Tensor,
        *,
        target_start: int,
        edge_start: int,
        inv_sqrt_deg: Callable[[], Tensor],
    ) -> Aggregator:
        """The aggregator of one chunk of targets in layer-wise full-neighbourhood evaluation
        (:mod:`gnnbench.models.inference`): sources are every node of the graph, targets the chunk's.

        GCN weights are full-graph ones, formed when a layer first asks: the slice of the policy's
        coefficients where it holds them, else from the whole graph's ``D^-1/2`` (equal either way).

        Args:
            edge_index: ``[2, e]`` all in-edges of the chunk's targets, global (source, target) ids, in the
                graph's order (sorted by target).
            rowptr: ``[n + 1]`` their CSR offsets, from 0 (``n`` targets).
            target_start: First target's id.
            edge_start: Position of the chunk's first edge in the graph's edge list.
            inv_sqrt_deg: Returns the whole graph's ``D^-1/2`` (``[N]``); called only without held coefficients.
        """
        n, e = rowptr.numel() - 1, edge_index.size(1)
        memo: list[GCNNorm] = []

        def weights() -> GCNNorm:
            if not memo:
                if self.norm is not None:
                    memo.append(
                        GCNNorm(
                            self.norm.edge_weight[edge_start : edge_start + e],
                            self.norm.self_weight[target_start : target_start + n],
                        )
                    )
                else:
                    memo.append(gcn_norm_targets(edge_index, inv_sqrt_deg(), target_start=target_start, num_targets=n))
            return memo[0]

        local = torch.stack([edge_index[0], edge_index[1] - target_start])
        return Aggregator(
            local,
            n,
            mode=self.evaluation_mode(edge_index.device.type),
            dtype=self.dtype,
            rowptr=rowptr,
            gcn_weights=weights,
            target_start=target_start,
        )

    def evaluation_mode(self, device_type: str) -> str:
        """The kernel of full-neighbourhood evaluation: the CSR sparse-matrix product whenever torch has one for
        the aggregation dtype on the device, whatever the run trains with. Evaluation is off the clock, so its
        kernel decides no verdict; the two kernels sum the same terms in another order (equal up to float
        reassociation), and the CSR product is the faster one on the whole graph (about 2.5x on ``small``:
        ``docs/measurement.md``, 'What evaluation costs'). Without such a kernel: the run's own mode."""
        if self.dtype == torch.float32 or sparse_product_supports(device_type, self.dtype):
            return "sparse"
        return self.mode

    def _source_degree_norm(self, edge_index: Tensor, n: int, n_id: Tensor) -> GCNNorm:
        """The batch's :func:`gcn_norm` with each edge's source factor ``D_batch^-1/2`` replaced by the source's
        full-graph ``D^-1/2`` (targets and self loops keep the batch's)."""
        norm = gcn_norm(edge_index, n, add_self_loops=True)
        inv_batch = gcn_inv_sqrt_degree(edge_index, n, dtype=norm.edge_weight.dtype)
        ratio = self.source_inv_sqrt_deg.index_select(0, n_id).to(inv_batch.dtype)
        ratio = torch.where(
            inv_batch > 0, ratio / inv_batch.clamp_min(torch.finfo(inv_batch.dtype).tiny), torch.zeros_like(ratio)
        )
        return GCNNorm(norm.edge_weight * ratio.index_select(0, edge_index[0]), norm.self_weight)

    def _with_weights(self, edge_index: Tensor, n: int, rowptr: Tensor | None, weights) -> Aggregator:
        return Aggregator(edge_index, n, mode=self.mode, dtype=self.dtype, rowptr=rowptr, gcn_weights=weights)
