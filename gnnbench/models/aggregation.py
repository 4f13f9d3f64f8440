"""Neighbour aggregation: the :class:`Aggregator` over one batch's ``edge_index`` (edge_index scatter or one
CSR sparse-matrix product), with the index dtypes each kernel takes. The policy that builds it with the GCN
normalization the flags ask for: :mod:`gnnbench.models.aggregation_policy`. The model layer's availability
answer lives here too: its rules concern aggregation and its normalization.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable

import torch
from torch import Tensor
from torch_geometric.utils import spmm

from gnnbench.flags import AGGREGATIONS, Flags, RunContext, Unavailable
from gnnbench.graphs.norm import GCNNorm, gcn_norm
from gnnbench.models.precision import Precision
from gnnbench.timing import code_path

__all__ = ["Aggregator", "scatter_index", "mkl_index", "unavailable"]


def _csr(crow: Tensor, col: Tensor, values: Tensor, size: tuple[int, int]) -> Tensor:
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)


def _csr_product(adj: Tensor, h: Tensor) -> Tensor:
    """``adj @ h`` for a CSR ``adj``. On CPU through ``addmm`` into an uninitialized output with ``beta=0``
    (the input is then ignored, NaN included): ``torch.sparse.mm`` zero-fills its output first and copies
    around the MKL call, which is slower (measured in ``docs/models.md``). On CUDA ``torch.sparse.mm``
    (cuSPARSE) as it is."""
    if h.device.type != "cpu":
        return torch.sparse.mm(adj, h)
    return torch.addmm(h.new_empty(adj.size(0), h.size(1)), adj, h, beta=0)


def mkl_index(index: Tensor, bound: int) -> Tensor:
    """The CSR index the CPU product takes without a copy: MKL's 32-bit ``MKL_INT``. ATen casts int64 CSR
    indices to int32 inside *every* CPU sparse-dense product (a copy of ``crow`` and ``col`` per call, six
    per step for a 3-layer model, forward and backward); the batch's CSR is cast once instead, when it fits.
    ``bound`` is a known upper bound of the values (the edge count for ``crow``, the node count for ``col``),
    so fitting costs no pass over the index. On CUDA, and when the bound does not fit int32, the index is
    returned as it is."""
    if index.dtype == torch.int64 and index.device.type == "cpu" and bound < 2**31 - 1:
        return index.to(torch.int32)
    return index


class _CSRProduct(torch.autograd.Function):
    """``A @ h`` with a CSR ``A`` (constant values); the backward ``A^T @ grad`` uses the aggregator's
    transposed CSR, built once per batch, instead of torch converting ``A^T`` (a sort) at every layer."""

    @staticmethod
    def forward(ctx, h: Tensor, crow: Tensor, col: Tensor, values: Tensor, agg: "Aggregator") -> Tensor:
        ctx.agg, ctx.values, ctx.h_rows = agg, values, h.size(0)
        return _csr_product(_csr(crow, col, values, (agg.num_nodes, h.size(0))), h)

    @staticmethod
    def backward(ctx, grad: Tensor):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        crow_t, col_t, perm = ctx.agg._transposed()
        adj_t = _csr(crow_t, col_t, ctx.values.index_select(0, perm), (ctx.h_rows, ctx.agg.num_nodes))
        return _csr_product(adj_t, grad.contiguous()), None, None, None, None


def scatter_index(index: Tensor) -> Tensor:
    """The index the scatter path hands to ``index_select`` / ``index_add_``.

    On CUDA both kernels take int32 as it is. ATen's CPU ``index_add_`` (which is also the backward of
    ``index_select``) takes its parallel fast path, through ``scatter_add``, only for int64 indices; with
    int32 it adds slice by slice, serially, several times slower. So on CPU the scatter path widens each
    int32 index once per batch (``Aggregator.widened_bytes`` counts it), and int32 pays where the CPU
    kernel takes it natively: the CSR product (MKL's 32-bit indices). Measurements: ``docs/models.md``.
    """
    if index.dtype == torch.int32 and index.device.type == "cpu":
        return index.to(torch.int64)
    return index


class Aggregator:
    """Neighbour aggregation over one batch's local ``edge_index`` (source -> target).

    Indices keep the batch's dtype (int32 with ``Flags.index_dtype="int32"``) into every kernel that
    takes it at full speed: the CSR sparse-matrix product everywhere, ``index_select`` / ``index_add_``
    on CUDA. On CPU the scatter path widens once per batch (:func:`scatter_index`, counted in
    ``widened_bytes``).

    Args:
        edge_index: ``[2, e]`` local edges (int32 or int64).
        num_nodes: Nodes in the batch.
        mode: ``"scatter"`` (gather messages, sum them into their targets
            with ``index_add_``: PyG's default path) or ``"sparse"`` (one
            sparse-matrix product with a CSR adjacency).
        gcn_weights: Callable returning the GCN normalization for this batch;
            called at every use (so an uncached normalization is recomputed per
            layer, as PyG's ``GCNConv(cached=False)`` does).
        dtype: Dtype of the aggregation (the precision policy's).
        rowptr: ``[num_nodes + 1]`` CSR offsets over targets when the edges
            are already sorted by target (the sampler emits them so with
            ``Flags.keep_csr``); without it the sparse mode sorts the edges
            by target and builds the CSR here, per batch, as a typical PyG
            user's conversion does.
        record: Optional list that receives the dtype of every aggregation input
            (used by tests to prove where aggregation runs).
        target_start: ``None`` (default) when sources and targets are the same
            ``num_nodes`` nodes (a batch); else the targets are rows
            ``target_start .. target_start + num_nodes - 1`` of the source rows
            and ``edge_index[1]`` counts from ``target_start`` (a chunk of
            targets in layer-wise evaluation, :mod:`gnnbench.models.inference`).
    """

    def __init__(
        self,
        edge_index: Tensor,
        num_nodes: int,
        *,
        mode: str = "scatter",
        gcn_weights: Callable[[], GCNNorm] | None = None,
        dtype: torch.dtype = torch.float32,
        rowptr: Tensor | None = None,
        record: list | None = None,
        target_start: int | None = None,
    ) -> None:
        if mode not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(map(repr, AGGREGATIONS))} (got {mode!r})")
        self.src = edge_index[0]
        self.dst = self._dst_native = edge_index[1]
        self.widened_bytes = 0  # bytes of int64 index made from int32 for this batch (scatter path on CPU)
        self.narrowed_bytes = 0  # bytes of int32 CSR index made from int64 for this batch (MKL's index type)
        if mode == "scatter":
            self.src, self.dst = scatter_index(self.src), scatter_index(self.dst)
            if self.src.dtype != edge_index.dtype:
                self.widened_bytes = self.src.nbytes + self.dst.nbytes
        self.num_nodes = num_nodes
        self.mode = mode
        self.gcn_weights = gcn_weights or (lambda: gcn_norm(edge_index, num_nodes, add_self_loops=True))
        self.dtype = dtype
        self.record = record
        self.target_start = target_start
        self._deg: Tensor | None = None
        self._t: tuple[Tensor, Tensor, Tensor] | None = None  # A^T (CSR by source), built at the first backward
        if mode == "sparse":
            if rowptr is not None:  # edges already sorted by target: the CSR is given, nothing to sort
                if rowptr.numel() != num_nodes + 1:
                    raise ValueError(f"rowptr must have num_nodes + 1 = {num_nodes + 1} entries (got {rowptr.numel()})")
                self._perm = None
                # MKL's index type, once per batch (int32 batches are already in it; see mkl_index)
                fits = max(self.src.numel(), num_nodes)  # crow <= edges, col < nodes: one bound for both
                self._crow = mkl_index(rowptr.to(self.src.dtype), fits)
                self._col = mkl_index(self.src, fits)
                self.narrowed_bytes = self._crow.nbytes + self._col.nbytes if self._col.dtype != self.src.dtype else 0
            else:
                with code_path("aggregate.csr_build"):
                    self._perm = torch.argsort(self.dst, stable=True)
                    counts = torch.bincount(self.dst, minlength=num_nodes)
                    self._crow = torch.zeros(num_nodes + 1, dtype=self.src.dtype, device=self.dst.device)
                    torch.cumsum(counts, 0, out=self._crow[1:])
                    self._col = self.src.index_select(0, self._perm)

    def degree(self) -> Tensor:
        """In-degree of every node in this batch (number of its edges), int64. Counted with ``index_add_`` into
        ``num_nodes`` zeros, not ``bincount`` (whose output shape depends on the data, so ``torch.compile``
        broke the graph there): the same counts, a static shape."""
        if self._deg is None:
            if self.mode == "sparse":
                self._deg = self._crow.diff()
            else:
                dst = self._dst_native
                self._deg = torch.zeros(self.num_nodes, dtype=torch.int64, device=dst.device).index_add_(
                    0, dst, torch.ones(dst.numel(), dtype=torch.int64, device=dst.device)
                )
        return self._deg

    def _transposed(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(crow, col, perm)`` of the batch's adjacency by *source* (``A^T`` in CSR), built once per batch
        and shared by every layer's backward: one stable sort of the source ids."""
        if self._t is None:
            n = self.num_nodes  # sources and targets share the batch's local ids
            perm = torch.argsort(self._col, stable=True).to(self._col.dtype)  # argsort returns int64
            crow = torch.zeros(n + 1, dtype=self._crow.dtype, device=self._crow.device)
            torch.cumsum(torch.bincount(self._col, minlength=n), 0, out=crow[1:])
            targets = torch.repeat_interleave(
                torch.arange(self.num_nodes, device=self._crow.device, dtype=self._crow.dtype), self._crow.diff()
            )
            self._t = (crow, targets.index_select(0, perm), perm)
        return self._t

    def _spmm(self, values: Tensor, h: Tensor) -> Tensor:
        if self._perm is not None:  # a typical PyG user's path: CSR built here, torch transposes per call
            with code_path("aggregate.csr_build"):
                values = values.index_select(0, self._perm).to(h.dtype)
            with code_path("aggregate.spmm_converting"):
                return spmm(_csr(self._crow, self._col, values, (self.num_nodes, h.size(0))), h, reduce="sum")
        # the batch carries its CSR: the forward uses it as is, the backward the batch's shared A^T
        with code_path("aggregate.spmm"):
            return _CSRProduct.apply(h, self._crow, self._col, values.to(h.dtype), self)

    def _gather(self, h: Tensor) -> Tensor:
        with code_path("aggregate.gather"):
            return h.index_select(0, self.src)

    def _sum(self, msg: Tensor) -> Tensor:
        with code_path("aggregate.scatter"):
            return msg.new_zeros(self.num_nodes, msg.size(1)).index_add_(0, self.dst, msg)

    def targets(self, h: Tensor) -> Tensor:
        """The rows of the source rows ``h`` that are this aggregator's targets (all of them for a batch)."""
        return h if self.target_start is None else h.narrow(0, self.target_start, self.num_nodes)

    def gcn(self, h: Tensor) -> Tensor:
        """``D^-1/2 (A + I) D^-1/2 h``."""
        h = h.to(self.dtype)
        if self.record is not None:
            self.record.append(h.dtype)
        with code_path("norm.build"):
            norm = self.gcn_weights()
            w = norm.edge_weight.to(h.dtype)
        with code_path("aggregate.self_weight"):
            out = self.targets(h) * norm.self_weight.to(h.dtype).unsqueeze(1)
        if self.mode == "sparse":
            return out + self._spmm(w, h)
        msg = self._gather(h)
        with code_path("aggregate.edge_norm"):
            msg = msg * w.unsqueeze(1)
        return out + self._sum(msg)

    def mean(self, h: Tensor) -> Tensor:
        """Mean of in-neighbours' ``h`` (0 for nodes without neighbours)."""
        h = h.to(self.dtype)
        if self.record is not None:
            self.record.append(h.dtype)
        if self.mode == "sparse":  # the inverse degrees are the CSR's values
            with code_path("aggregate.spmm" if self._perm is None else "aggregate.csr_build"):
                values = (1.0 / self.degree().clamp_min(1).to(h.dtype)).index_select(0, self.dst)
            return self._spmm(values, h)
        with code_path("aggregate.mean_scale"):
            inv = 1.0 / self.degree().clamp_min(1).to(h.dtype)
        total = self._sum(self._gather(h))
        with code_path("aggregate.mean_scale"):
            return total * inv.unsqueeze(1)


@functools.lru_cache(maxsize=None)
def sparse_product_supports(device_type: str, dtype: torch.dtype) -> bool:
    """Whether torch has a CSR sparse x dense product for ``dtype`` on ``device_type`` (probed once)."""
    device = torch.device(device_type)
    crow = torch.tensor([0, 1, 2], device=device)
    col = torch.tensor([1, 0], device=device)
    try:
        with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
            warnings.simplefilter("ignore")
            adj = torch.sparse_csr_tensor(crow, col, torch.ones(2, dtype=dtype, device=device), size=(2, 2))
            torch.sparse.mm(adj, torch.ones(2, 2, dtype=dtype, device=device))
    except (NotImplementedError, RuntimeError):
        return False
    return True


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """The model layer's answer for its fields: ``cached_norm`` needs a model with GCN's normalization;
    sparse aggregation in low precision needs a low-precision sparse kernel on the device."""
    out = []
    for name in ("cached_norm", "norm_estimator"):
        if getattr(flags, name) and ctx.model != "gcn":
            out.append(Unavailable(name, f"{name} concerns GCN's normalization; model {ctx.model!r} has none"))
    if flags.batch_source == "saint_rw":  # its batches always use the full-graph estimator
        for name in ("cached_norm", "norm_estimator"):
            if getattr(flags, name):
                out.append(
                    Unavailable(
                        name,
                        f"{name} would change nothing: GraphSAINT batches always use "
                        "full-graph GCN weights rescaled per batch (the estimator)",
                    )
                )
    if flags.norm_estimator and flags.batch_source == "full":
        out.append(
            Unavailable(
                "norm_estimator",
                "norm_estimator rescales full-graph weights for sampled "
                "batches; full-batch training uses the exact weights (see cached_norm)",
            )
        )
    agg_dtype = Precision(flags.precision, ctx.device.type).aggregation_dtype
    if (
        flags.aggregation == "sparse"
        and agg_dtype != torch.float32
        and not sparse_product_supports(ctx.device.type, agg_dtype)
    ):
        out.append(
            Unavailable(
                "precision",
                f"precision={flags.precision!r} aggregates in {agg_dtype} and torch "
                f"{torch.__version__} has no {agg_dtype} CSR sparse-matrix product on "
                f"{ctx.device.type}; use precision='partial' (aggregation in fp32) or "
                "aggregation='scatter'",
            )
        )
    return out
