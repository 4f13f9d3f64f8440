"""Graph statistics: degree quantiles, tail exponent (Hill), index storage per dtype."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from gnnbench.graphs.container import Graph

__all__ = ["GraphStats", "graph_stats", "hill_exponent", "edge_homophily", "DEGREE_QUANTILES"]

DEGREE_QUANTILES = (0.5, 0.9, 0.99, 0.999)
HILL_TAIL_FRACTION = 0.05  # top fraction of degrees used by the Hill estimate


def hill_exponent(degrees: Tensor, tail_fraction: float = HILL_TAIL_FRACTION, min_tail: int = 20) -> float:
    """Hill estimate of the power-law exponent ``gamma`` of a degree distribution.

    Uses the top ``k = tail_fraction * n`` degrees with the discrete continuity
    correction of Clauset, Shalizi & Newman (2009):
    ``gamma = 1 + k / sum(log(d_i / (d_k - 1/2)))``.

    Returns ``nan`` when fewer than ``min_tail`` positive degrees are available
    or the tail is flat (all equal).
    """
    if not 0.0 < tail_fraction < 1.0:
        raise ValueError(f"tail_fraction must be in (0, 1) (got {tail_fraction})")
    d = degrees[degrees > 0].to(torch.float64)
    k = int(tail_fraction * d.numel())
    if k < min_tail:
        return float("nan")
    top = torch.topk(d, k + 1).values
    x_min = float(top[k])
    if x_min <= 0.5 or float(top[0]) <= x_min:
        return float("nan")
    s = torch.log(top[:k] / (x_min - 0.5)).sum()
    return float(1.0 + k / s)


def edge_homophily(graph: Graph) -> float:
    """Fraction of edges whose endpoints share a label."""
    if graph.num_edges == 0:
        return float("nan")
    ei = graph.edge_index.to(torch.int64)
    return float((graph.y[ei[0]] == graph.y[ei[1]]).double().mean())


@dataclass(frozen=True)
class GraphStats:
    """Summary statistics printed by ``gnnbench graph``."""

    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    avg_degree: float
    degree_quantiles: dict[str, float]
    max_degree: int
    isolated_nodes: int
    hill_exponent: float
    edge_homophily: float
    is_undirected: bool
    index_bytes: dict[str, dict[str, int]]  # dtype -> {"coo": .., "csr_rowptr": .., "total": ..}

    def to_dict(self) -> dict:
        return asdict(self)


def index_bytes_by_dtype(num_nodes: int, num_edges: int) -> dict[str, dict[str, int]]:
    """Index storage of COO (``[2, E]``) plus CSR ``rowptr`` (``[N + 1]``); CSR ``col`` shares COO's row."""
    out = {}
    for name, size in (("int64", 8), ("int32", 4)):
        coo = 2 * num_edges * size
        rowptr = (num_nodes + 1) * size
        out[name] = {"coo": coo, "csr_rowptr": rowptr, "total": coo + rowptr}
    return out


def graph_stats(graph: Graph) -> GraphStats:
    deg = graph.deg
    qs = degree_quantiles(deg)
    return GraphStats(
        num_nodes=graph.num_nodes,
        num_edges=graph.num_edges,
        num_features=graph.num_features,
        num_classes=graph.num_classes,
        avg_degree=graph.num_edges / max(graph.num_nodes, 1),
        degree_quantiles={f"p{q * 100:g}": float(v) for q, v in zip(DEGREE_QUANTILES, qs)},
        max_degree=int(deg.max()) if deg.numel() else 0,
        isolated_nodes=int((deg == 0).sum()),
        hill_exponent=hill_exponent(deg),
        edge_homophily=edge_homophily(graph),
        is_undirected=graph.is_undirected(),
        index_bytes=index_bytes_by_dtype(graph.num_nodes, graph.num_edges),
    )


def degree_quantiles(deg: Tensor, quantiles: tuple[float, ...] = DEGREE_QUANTILES) -> Tensor:
    """Nearest-rank quantiles by sorting (``torch.quantile`` refuses inputs over 16M elements)."""
    if deg.numel() == 0:
        return torch.zeros(len(quantiles), dtype=torch.float64)
    s, _ = torch.sort(deg.to(torch.float64))
    idx = torch.tensor([round(q * (s.numel() - 1)) for q in quantiles])
    return s[idx]
