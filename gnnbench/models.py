"""Models: GCN and GraphSAGE for node classification, a dot-product link
predictor, with switchable aggregation (edge_index scatter or sparse matrix)
and precision policy.

Layers use PyG's building blocks (``torch_geometric.nn.Linear``,
``torch_geometric.utils.scatter`` and ``spmm``); the split between transform
and aggregation is explicit so that the precision policy can keep the
aggregation in fp32 (``partial``) or not (``full``).
"""

from __future__ import annotations

import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import Linear
from torch_geometric.utils import scatter, spmm

from gnnbench.flags import AGGREGATIONS, PRECISIONS
from gnnbench.graphs.norm import GCNNorm, gcn_norm

__all__ = ["Precision", "Aggregator", "GCN", "GraphSAGE", "build_model", "MODELS", "LinkPredictor",
           "PRECISIONS", "AGGREGATIONS"]


@dataclass(frozen=True)
class Precision:
    """Precision policy.

    - ``off``: everything fp32;
    - ``full``: linear layers and aggregation in low precision (fp16 on CUDA, bf16 elsewhere);
    - ``partial``: linear layers in low precision, aggregation in fp32.
    """

    mode: str = "off"
    device_type: str = "cpu"

    def __post_init__(self) -> None:
        if self.mode not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))} (got {self.mode!r})")

    @property
    def low_dtype(self) -> torch.dtype:
        return torch.float16 if self.device_type == "cuda" else torch.bfloat16

    @property
    def needs_grad_scaler(self) -> bool:
        return self.mode != "off" and self.low_dtype == torch.float16

    def linear_context(self):
        if self.mode == "off":
            return nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.low_dtype)

    @property
    def aggregation_dtype(self) -> torch.dtype:
        return self.low_dtype if self.mode == "full" else torch.float32


class Aggregator:
    """Neighbour aggregation over one batch's local ``edge_index`` (source -> target).

    Args:
        edge_index: ``[2, e]`` local edges.
        num_nodes: Nodes in the batch.
        mode: ``"scatter"`` (gather messages, scatter-add by target: PyG's
            default path) or ``"sparse"`` (one sparse-matrix product with a
            CSR adjacency built once per batch).
        gcn_weights: Callable returning the GCN normalization for this batch;
            called at every use (so an uncached normalization is recomputed per
            layer, as PyG's ``GCNConv(cached=False)`` does).
        dtype: Dtype of the aggregation (the precision policy's).
        record: Optional list that receives the dtype of every aggregation input
            (used by tests to prove where aggregation runs).
    """

    def __init__(self, edge_index: Tensor, num_nodes: int, *, mode: str = "scatter",
                 gcn_weights: Callable[[], GCNNorm] | None = None, dtype: torch.dtype = torch.float32,
                 record: list | None = None) -> None:
        if mode not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(map(repr, AGGREGATIONS))} (got {mode!r})")
        self.src = edge_index[0].to(torch.int64)
        self.dst = edge_index[1].to(torch.int64)
        self.num_nodes = num_nodes
        self.mode = mode
        self.gcn_weights = gcn_weights or (lambda: gcn_norm(edge_index, num_nodes, add_self_loops=True))
        self.dtype = dtype
        self.record = record
        if mode == "sparse":
            order = torch.argsort(self.dst, stable=True)
            self._perm = order
            counts = torch.bincount(self.dst, minlength=num_nodes)
            self._crow = torch.zeros(num_nodes + 1, dtype=torch.int64, device=self.dst.device)
            torch.cumsum(counts, 0, out=self._crow[1:])
            self._col = self.src[order]
            self._deg = counts

    def _spmm(self, values: Tensor, h: Tensor, reduce: str = "sum") -> Tensor:
        with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            adj = torch.sparse_csr_tensor(self._crow, self._col, values[self._perm].to(h.dtype),
                                          size=(self.num_nodes, h.size(0)), check_invariants=False)
        return spmm(adj, h, reduce=reduce)

    def gcn(self, h: Tensor) -> Tensor:
        """``D^-1/2 (A + I) D^-1/2 h``."""
        h = h.to(self.dtype)
        if self.record is not None:
            self.record.append(h.dtype)
        norm = self.gcn_weights()
        w = norm.edge_weight.to(h.dtype)
        out = h * norm.self_weight.to(h.dtype).unsqueeze(1)
        if self.mode == "sparse":
            return out + self._spmm(w, h)
        msg = h.index_select(0, self.src) * w.unsqueeze(1)
        return out + scatter(msg, self.dst, dim=0, dim_size=self.num_nodes, reduce="sum")

    def mean(self, h: Tensor) -> Tensor:
        """Mean of in-neighbours' ``h`` (0 for nodes without neighbours)."""
        h = h.to(self.dtype)
        if self.record is not None:
            self.record.append(h.dtype)
        if self.mode == "sparse":
            inv = (1.0 / self._deg.clamp_min(1).to(h.dtype))[self.dst]
            return self._spmm(inv, h)
        return scatter(h.index_select(0, self.src), self.dst, dim=0, dim_size=self.num_nodes, reduce="mean")


class GCN(nn.Module):
    """Kipf & Welling's GCN: ``H' = D^-1/2 (A+I) D^-1/2 H W`` per layer."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float = 0.5) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.lins = nn.ModuleList(Linear(a, b, bias=False, weight_initializer="glorot")
                                  for a, b in zip(dims[:-1], dims[1:]))
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(b)) for b in dims[1:])
        self.dropout = dropout

    def forward(self, x: Tensor, agg: Aggregator, precision: Precision) -> Tensor:
        for i, (lin, bias) in enumerate(zip(self.lins, self.biases)):
            x = F.dropout(x, self.dropout, self.training)
            with precision.linear_context():
                h = lin(x)
            x = agg.gcn(h).float() + bias
            if i < len(self.lins) - 1:
                x = F.relu(x)
        return x


class GraphSAGE(nn.Module):
    """Hamilton et al.'s GraphSAGE (mean): ``h' = W_l mean(h_N) + W_r h``."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float = 0.5) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.lin_l = nn.ModuleList(Linear(a, b, bias=True) for a, b in zip(dims[:-1], dims[1:]))
        self.lin_r = nn.ModuleList(Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x: Tensor, agg: Aggregator, precision: Precision) -> Tensor:
        for i, (lin_l, lin_r) in enumerate(zip(self.lin_l, self.lin_r)):
            x = F.dropout(x, self.dropout, self.training)
            neigh = agg.mean(x)
            with precision.linear_context():
                out = lin_l(neigh) + lin_r(x)
            x = out.float()
            if i < len(self.lin_l) - 1:
                x = F.relu(x)
        return x


MODELS = {"gcn": GCN, "sage": GraphSAGE}


def build_model(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float = 0.5) -> nn.Module:
    """Instantiate a model by name (``gcn`` or ``sage``)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; accepted: {', '.join(MODELS)}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1 (got {num_layers})")
    return MODELS[name](in_dim, hidden, out_dim, num_layers, dropout)


class LinkPredictor(nn.Module):
    """Dot-product decoder on node embeddings: ``score(u, v) = <z_u, z_v>``."""

    def forward(self, z: Tensor, pairs: Tensor) -> Tensor:
        return (z[pairs[0]] * z[pairs[1]]).sum(-1)
