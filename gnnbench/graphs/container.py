"""The :class:`Graph` container: COO + CSR + degrees, features, labels, splits."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from gnnbench.graphs.checks import (  # the checks are re-exported: importers name them from here
    GraphError,
    as_tensor_checked,
    check_disjoint,
    check_held_out,
    check_mask,
    random_split_masks,
)
from gnnbench.graphs.clean import CleanOptions, clean_edges
from gnnbench.graphs.csr import CSR, rowptr_from_sorted_targets
from gnnbench.graphs.index import to_index_dtype

__all__ = ["Graph", "GraphError", "check_disjoint", "check_held_out", "check_mask", "random_split_masks"]


@dataclass
class Graph:
    """A node-classification graph, with held-out edges for link prediction.

    Edges are stored once, sorted by (target, source), so that the CSR column
    array is ``edge_index[0]`` itself and keeping CSR beside COO costs only
    ``rowptr``. Build from raw data with :meth:`from_edges`, which validates
    and cleans; the constructor trusts its input to be sorted.

    Args:
        edge_index: ``[2, E]`` integer COO (source, target), sorted by target.
        rowptr: ``[N + 1]`` in-neighbour CSR offsets matching ``edge_index``.
        x: ``[N, F]`` float node features.
        y: ``[N]`` int64 labels.
        train_mask, val_mask, test_mask: ``[N]`` bool node splits.
        lp_val_pos, lp_test_pos: ``[2, k]`` held-out positive edges (undirected
            pairs, ``u < v``) for link prediction, or ``None``.
        meta: Free-form provenance (spec, source file, timings).
    """

    edge_index: Tensor
    rowptr: Tensor
    x: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor
    lp_val_pos: Tensor | None = None
    lp_test_pos: Tensor | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.x.size(0)
        if self.edge_index.dim() != 2 or self.edge_index.size(0) != 2:
            raise GraphError(f"edge_index must have shape [2, E] (got {list(self.edge_index.shape)})")
        if self.rowptr.shape != (n + 1,):
            raise GraphError(f"rowptr must have shape [{n + 1}] (got {list(self.rowptr.shape)})")
        if int(self.rowptr[-1]) != self.edge_index.size(1):
            raise GraphError(
                f"rowptr[-1] must equal the number of edges {self.edge_index.size(1)} (got {int(self.rowptr[-1])})"
            )
        for name in ("y", "train_mask", "val_mask", "test_mask"):
            t = getattr(self, name)
            if t.shape != (n,):
                raise GraphError(f"{name} must have shape [{n}] like x's first dim (got {list(t.shape)})")

    # ------------------------------------------------------------------ views
    @property
    def num_nodes(self) -> int:
        return self.x.size(0)

    @property
    def num_edges(self) -> int:
        """Number of stored (directed) edges."""
        return self.edge_index.size(1)

    @property
    def num_features(self) -> int:
        return self.x.size(1)

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1 if self.y.numel() else 0

    @property
    def index_dtype(self) -> torch.dtype:
        return self.edge_index.dtype

    @property
    def csr(self) -> CSR:
        """In-neighbour CSR; ``col`` is a view of ``edge_index[0]``."""
        return CSR(rowptr=self.rowptr, col=self.edge_index[0])

    @property
    def deg(self) -> Tensor:
        """In-degree of every node (int64); equals the degree for undirected graphs."""
        return self.rowptr.diff().to(torch.int64)

    def index_bytes(self, with_csr: bool = True) -> int:
        """Bytes of index storage: COO, plus ``rowptr`` when ``with_csr``."""
        return self.edge_index.nbytes + (self.rowptr.nbytes if with_csr else 0)

    def nbytes(self) -> int:
        """Bytes held by all tensors of the graph."""
        tensors = [
            self.edge_index,
            self.rowptr,
            self.x,
            self.y,
            self.train_mask,
            self.val_mask,
            self.test_mask,
            self.lp_val_pos,
            self.lp_test_pos,
        ]
        return sum(t.nbytes for t in tensors if t is not None)

    def is_undirected(self) -> bool:
        """Whether every edge's reverse is present (vectorized check)."""
        n = self.num_nodes
        ei = self.edge_index.to(torch.int64)
        fwd = ei[1] * n + ei[0]  # sorted by construction
        rev, _ = torch.sort(ei[0] * n + ei[1])
        return bool(torch.equal(fwd, rev))

    # --------------------------------------------------------- construction
    @classmethod
    def from_edges(
        cls,
        edge_index: Tensor,
        x: Tensor,
        y: Tensor,
        *,
        num_nodes: int | None = None,
        train_mask: Tensor | None = None,
        val_mask: Tensor | None = None,
        test_mask: Tensor | None = None,
        clean: CleanOptions = CleanOptions(),
        split_seed: int = 0,
        train_frac: float = 0.2,
        val_frac: float = 0.1,
        meta: dict[str, Any] | None = None,
    ) -> "Graph":
        """Validate, clean and assemble a graph from raw tensors.

        Args:
            edge_index: ``[2, E]`` integer (source, target) pairs, any order.
            x: ``[N, F]`` finite float features.
            y: ``[N]`` integer labels ``>= 0``.
            num_nodes: Defaults to ``x.size(0)``; must match it if given.
            train_mask, val_mask, test_mask: Optional ``[N]`` bool (or 0/1 integer)
                splits, each non-empty and pairwise disjoint; when all are missing a
                random split is drawn with ``split_seed``.
            clean: Input cleaning options (dedupe, to_undirected, self loops).
            split_seed: Seed of the random split.
            train_frac, val_frac: Fractions of the random split.
            meta: Provenance to keep with the graph.

        Raises:
            GraphError: naming the problem, for out-of-range or negative node
                ids, shape mismatches, non-numeric arrays, non-integer labels,
                NaN/Inf features, and empty or overlapping masks.
        """
        edge_index = as_tensor_checked(edge_index, "edge_index")
        x = as_tensor_checked(x, "features x")
        y = as_tensor_checked(y, "labels y")
        if x.dim() != 2:
            raise GraphError(f"features x must have shape [num_nodes, num_features] (got {list(x.shape)})")
        n = x.size(0) if num_nodes is None else int(num_nodes)
        if x.size(0) != n:
            raise GraphError(f"features x have {x.size(0)} rows but num_nodes is {n}")
        if n < 1:
            raise GraphError(f"a graph needs at least one node (got num_nodes={n})")
        if not x.is_floating_point():
            raise GraphError(f"features x must be floating point (got dtype {x.dtype})")
        finite = torch.isfinite(x)
        if not bool(finite.all()):
            bad = (~finite).nonzero()[0].tolist()
            kind = "NaN" if bool(torch.isnan(x).any()) else "Inf"
            raise GraphError(
                f"features x contain {kind} values ({int((~finite).sum())} entries; first at row {bad[0]}, column {bad[1]})"
            )
        if y.shape != (n,):
            raise GraphError(f"labels y must have shape [{n}] (got {list(y.shape)}); one integer class per node")
        if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
            raise GraphError(f"labels y must be integers (got dtype {y.dtype})")
        if n and int(y.min()) < 0:
            raise GraphError(f"labels y must be >= 0 (got {int(y.min())})")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise GraphError(f"edge_index must have shape [2, num_edges] (got {list(edge_index.shape)})")
        if edge_index.is_floating_point() or edge_index.is_complex() or edge_index.dtype == torch.bool:
            raise GraphError(f"edge_index must hold integers (got dtype {edge_index.dtype})")
        if edge_index.numel():
            lo, hi = int(edge_index.min()), int(edge_index.max())
            if lo < 0:
                raise GraphError(f"edge_index holds a negative node id {lo}; ids must be in [0, {n - 1}]")
            if hi >= n:
                raise GraphError(
                    f"edge_index holds node id {hi}, out of range for num_nodes={n}; ids must be in [0, {n - 1}]"
                )

        given = [m for m in (train_mask, val_mask, test_mask) if m is not None]
        if given and len(given) != 3:
            raise GraphError("give all three of train_mask, val_mask, test_mask, or none of them")
        if given:
            masks = [
                check_mask(m, name, n)
                for name, m in zip(("train_mask", "val_mask", "test_mask"), (train_mask, val_mask, test_mask))
            ]
            check_disjoint(masks)
        else:
            g = torch.Generator().manual_seed(split_seed)
            masks = list(random_split_masks(n, train_frac, val_frac, g))

        ei = clean_edges(edge_index, n, clean)
        rowptr = rowptr_from_sorted_targets(ei[1], n)
        return cls(
            edge_index=ei,
            rowptr=rowptr,
            x=x.to(torch.float32) if x.dtype == torch.float64 else x,
            y=y.to(torch.int64),
            train_mask=masks[0],
            val_mask=masks[1],
            test_mask=masks[2],
            meta=dict(meta or {}),
        )

    # --------------------------------------------------------------- derived
    def with_index_dtype(self, dtype: torch.dtype) -> "Graph":
        """The same graph with ``edge_index`` and ``rowptr`` in ``dtype``.

        Guarded: converting to int32 raises when a node id or an edge offset
        does not fit (see :func:`gnnbench.graphs.index.check_index_fits`).
        """
        if dtype == self.index_dtype and self.rowptr.dtype == dtype:
            return self
        return replace(
            self,
            edge_index=to_index_dtype(self.edge_index, dtype, what="node id", max_value=self.num_nodes - 1),
            rowptr=to_index_dtype(self.rowptr, dtype, what="edge offset", max_value=self.num_edges),
        )

    def link_split(self) -> "Graph":
        """The graph with the held-out link-prediction positives removed (both directions).

        Message passing for link prediction must run on this graph so that the
        evaluated edges are never seen as input.
        """
        held = [t for t in (self.lp_val_pos, self.lp_test_pos) if t is not None and t.numel()]
        if not held:
            return self
        n = self.num_nodes
        pairs = torch.cat(held, dim=1).to(torch.int64)
        drop = torch.cat([pairs[1] * n + pairs[0], pairs[0] * n + pairs[1]])
        drop, _ = torch.sort(drop)
        ei = self.edge_index.to(torch.int64)
        key = ei[1] * n + ei[0]
        pos = torch.searchsorted(drop, key).clamp_max(drop.numel() - 1)
        keep = drop[pos] != key
        kept = self.edge_index[:, keep]
        rowptr = rowptr_from_sorted_targets(kept[1].to(torch.int64), n).to(self.rowptr.dtype)
        meta = dict(self.meta, link_split=True)
        return replace(self, edge_index=kept, rowptr=rowptr, meta=meta)

    def to_pyg(self) -> Any:
        """Convert to a :class:`torch_geometric.data.Data`."""
        from torch_geometric.data import Data

        data = Data(
            x=self.x,
            y=self.y,
            edge_index=self.edge_index,
            num_nodes=self.num_nodes,
            train_mask=self.train_mask,
            val_mask=self.val_mask,
            test_mask=self.test_mask,
        )
        if self.lp_val_pos is not None:
            data.lp_val_pos = self.lp_val_pos
        if self.lp_test_pos is not None:
            data.lp_test_pos = self.lp_test_pos
        return data

    @classmethod
    def from_pyg(cls, data: Any, *, clean: CleanOptions = CleanOptions(), split_seed: int = 0) -> "Graph":
        """Build from a :class:`torch_geometric.data.Data` with ``x``, ``y`` and ``edge_index``."""
        missing = [k for k in ("x", "y", "edge_index") if getattr(data, k, None) is None]
        if missing:
            raise GraphError(f"PyG Data is missing {missing}; gnnbench needs x, y and edge_index")
        masks = {k: getattr(data, k, None) for k in ("train_mask", "val_mask", "test_mask")}
        if any(m is None for m in masks.values()):
            masks = {}
        y = as_tensor_checked(data.y, "labels y")
        graph = cls.from_edges(
            data.edge_index,
            data.x,
            y.view(-1) if y.dim() == 2 and y.size(1) == 1 else y,
            num_nodes=data.num_nodes,
            clean=clean,
            split_seed=split_seed,
            **masks,
        )
        for key in ("lp_val_pos", "lp_test_pos"):
            value = getattr(data, key, None)
            if value is not None:
                setattr(graph, key, check_held_out(value, key, graph.num_nodes))
        return graph
