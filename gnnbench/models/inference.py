"""Layer-wise full-neighbourhood inference, a chunk of target nodes at a time (PyG's layer-wise inference).

Running the whole model on the whole graph materializes an ``edges x features`` message tensor per layer.
:class:`LayerwiseInference` instead computes each layer for every node before the next layer starts, the
aggregation a chunk of target nodes at a time (a chunk's in-edges are a contiguous slice of the
target-sorted graph), so memory is node-sized plus one chunk's temporaries, which :func:`plan_chunks` keeps
within a byte budget (:class:`ChunkPlan`). The precision policy applies as in training, and GCN's
normalization uses full-graph degrees, bit-identical to :func:`~gnnbench.graphs.norm.gcn_norm` on the whole
graph.

The two passes per layer, the sizes involved and where GCN's coefficients come from: ``docs/memory.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import Tensor, nn

from gnnbench.graphs.norm import gcn_inv_sqrt_degree
from gnnbench.models.aggregation_policy import AggregationPolicy
from gnnbench.models.precision import Precision

__all__ = [
    "ChunkPlan",
    "plan_chunks",
    "chunk_cost",
    "check_chunk_bytes",
    "LayerwiseInference",
    "DEFAULT_CHUNK_BYTES",
    "MIN_CHUNK_BYTES",
]

DEFAULT_CHUNK_BYTES = 256 * 2**20  # one chunk's temporaries: ~400k edges at width 64, degree 20 (~50 chunks on medium)
MIN_CHUNK_BYTES = 64 * 2**10  # below this a chunk holds a handful of edges and only adds per-chunk overhead


def check_chunk_bytes(value: object, what: str = "chunk_bytes") -> int:
    """``value`` as a chunk budget in bytes; raises ``ValueError`` naming ``what`` and the value otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_CHUNK_BYTES:
        raise ValueError(f"{what} must be an integer number of bytes >= {MIN_CHUNK_BYTES} (64 KiB) (got {value!r})")
    return value


def chunk_cost(width: int) -> tuple[int, int]:
    """``(bytes per edge, bytes per node)`` of one chunk's temporaries at ``width`` features (fp32 counted).

    Per edge: the gathered source rows and their weighted copy (``2 * width * 4``), the local edge index,
    the int64 copy the CPU scatter path makes of it, and the edge weights with their temporaries (64).
    Per node: the aggregate, the self term, the layer's output and its activation copies (``6 * width * 4``),
    plus the CSR offset and degree (16).
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be an integer >= 1 (got {width!r})")
    return 2 * width * 4 + 64, 6 * width * 4 + 16


@dataclass(frozen=True)
class ChunkPlan:
    """Chunks of target nodes and the slices of the edge list that hold their in-edges.

    Chunk ``k`` covers targets ``node_bounds[k]:node_bounds[k + 1]`` and edges
    ``edge_bounds[k]:edge_bounds[k + 1]``. Each chunk's estimated temporaries
    (``edges * bytes_per_edge + nodes * bytes_per_node``) stay within ``budget_bytes``, except a single
    node whose in-edges alone exceed it (a chunk is never smaller than one node).

    Args:
        node_bounds: ``num_chunks + 1`` increasing node ids, from 0 to ``num_nodes``.
        edge_bounds: ``rowptr`` at those ids.
        budget_bytes: The budget the plan was made for.
        bytes_per_edge: Estimated temporaries per edge (:func:`chunk_cost`).
        bytes_per_node: Estimated temporaries per target node.
    """

    node_bounds: tuple[int, ...]
    edge_bounds: tuple[int, ...]
    budget_bytes: int
    bytes_per_edge: int
    bytes_per_node: int

    def __iter__(self) -> Iterator[tuple[int, int, int, int]]:
        """``(lo, hi, edge_lo, edge_hi)`` per chunk."""
        n, e = self.node_bounds, self.edge_bounds
        return iter(zip(n[:-1], n[1:], e[:-1], e[1:]))

    @property
    def num_chunks(self) -> int:
        return len(self.node_bounds) - 1

    @property
    def max_edges(self) -> int:
        """Edges of the largest chunk."""
        return max((b - a for _, _, a, b in self), default=0)

    @property
    def max_nodes(self) -> int:
        """Targets of the largest chunk."""
        return max((hi - lo for lo, hi, _, _ in self), default=0)

    def cost(self, lo: int, hi: int, edge_lo: int, edge_hi: int) -> int:
        """Estimated bytes of one chunk's temporaries."""
        return (edge_hi - edge_lo) * self.bytes_per_edge + (hi - lo) * self.bytes_per_node


def plan_chunks(
    edge_index: Tensor, rowptr: Tensor, *, width: int, budget_bytes: int = DEFAULT_CHUNK_BYTES
) -> ChunkPlan:
    """Cut the target nodes into consecutive chunks whose temporaries fit ``budget_bytes``.

    Greedy over the cumulative cost ``rowptr[i] * bytes_per_edge + i * bytes_per_node``: each chunk takes
    as many following nodes as fit. Each chunk's edges are checked to be exactly its targets' in-edges in
    CSR order (the layout :class:`~gnnbench.graphs.Graph` stores); anything else is refused.

    Args:
        edge_index: ``[2, E]`` (source, target), sorted by target.
        rowptr: ``[N + 1]`` CSR offsets over targets matching ``edge_index``.
        width: Widest layer input or output (features).
        budget_bytes: Bytes for one chunk's temporaries (default :data:`DEFAULT_CHUNK_BYTES`).

    Raises:
        ValueError: for a bad budget, or edges that are not grouped by target as ``rowptr`` says.
    """
    budget_bytes = check_chunk_bytes(budget_bytes, "budget_bytes")
    per_edge, per_node = chunk_cost(width)
    n = rowptr.numel() - 1
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or int(rowptr[-1]) != edge_index.size(1):
        raise ValueError(f"edge_index must be [2, rowptr[-1]] = [2, {int(rowptr[-1])}] (got {list(edge_index.shape)})")
    rowptr = rowptr.to("cpu", torch.int64)
    cum = rowptr * per_edge + torch.arange(n + 1, dtype=torch.int64) * per_node
    bounds = [0]
    while bounds[-1] < n:
        lo = bounds[-1]
        hi = int(torch.searchsorted(cum, cum[lo : lo + 1] + budget_bytes, right=True)) - 1
        bounds.append(min(n, max(hi, lo + 1)))
    edges = rowptr[bounds].tolist()
    plan = ChunkPlan(tuple(bounds), tuple(edges), budget_bytes, per_edge, per_node)
    dst = edge_index[1]
    for lo, hi, a, b in plan:  # every edge of the chunk targets it, in CSR order
        local = dst[a:b].to(torch.int64) - lo
        ok = local.numel() == 0 or (
            int(local[0]) >= 0
            and int(local[-1]) < hi - lo
            and bool((local.diff() >= 0).all())
            and torch.equal(torch.bincount(local.cpu(), minlength=hi - lo), rowptr[lo + 1 : hi + 1] - rowptr[lo:hi])
        )
        if not ok:
            raise ValueError(
                f"edges {a}:{b} are not the in-edges of nodes {lo}:{hi} in target order; layer-wise "
                "evaluation needs edges sorted by target with a matching rowptr (Graph's layout)"
            )
    return plan


class LayerwiseInference:
    """Full-neighbourhood inference of a GCN or GraphSAGE over a whole graph, layer by layer in chunks of
    target nodes (see the module docstring).

    The model provides the split of a layer: ``messages(i, x, precision)`` (node-wise, for every node) and
    ``combine(i, messages, agg, precision)`` (aggregate into ``agg``'s targets and finish the layer), with
    ``dims`` (widths) and ``num_layers``. The plan is made once (for the model's widest layer) and reused by
    later calls.

    Args:
        edge_index: ``[2, E]`` graph edges (source, target), sorted by target, on the host or the device;
            each chunk's slice is moved to ``device`` when it is used.
        rowptr: ``[N + 1]`` in-neighbour CSR offsets matching ``edge_index``.
        policy: The run's aggregation policy (mode, aggregation dtype, cached full-graph GCN weights).
        device: Compute device.
        chunk_bytes: Budget for one chunk's temporaries (default :data:`DEFAULT_CHUNK_BYTES`, 256 MiB).
    """

    def __init__(
        self,
        edge_index: Tensor,
        rowptr: Tensor,
        policy: AggregationPolicy,
        device: torch.device,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ) -> None:
        self.chunk_bytes = check_chunk_bytes(chunk_bytes)
        self.edge_index = edge_index
        self.rowptr = rowptr
        self.num_nodes = rowptr.numel() - 1
        self.policy = policy
        self.device = torch.device(device)
        self._plans: dict[int, ChunkPlan] = {}

    def plan(self, width: int) -> ChunkPlan:
        """The chunk plan for layers up to ``width`` features (made once per width)."""
        if width not in self._plans:
            self._plans[width] = plan_chunks(self.edge_index, self.rowptr, width=width, budget_bytes=self.chunk_bytes)
        return self._plans[width]

    @torch.no_grad()
    def __call__(self, model: nn.Module, x: Tensor, precision: Precision) -> Tensor:
        """Output of ``model`` for every node (``[N, out]``), as ``model(x, whole-graph aggregator, precision)``."""
        if x.size(0) != self.num_nodes:
            raise ValueError(f"x must have one row per node ({self.num_nodes}) (got {x.size(0)})")
        plan = self.plan(max(model.dims))
        memo: list[Tensor] = []

        def inv_sqrt_deg() -> Tensor:  # full-graph D^-1/2, once per call, only if a layer asks for GCN weights
            if not memo:
                memo.append(self._inv_sqrt_degree(plan))
            return memo[0]

        h = x.to(self.device)
        for i in range(model.num_layers):
            # messages in fp32; the lambdas run inside _per_chunk, in this iteration (B023 does not apply)
            msgs = self._per_chunk(plan, lambda c: model.messages(i, h[c[0] : c[1]].float(), precision))  # noqa: B023
            msgs = msgs.to(self.policy.dtype)  # the aggregation's dtype once here, not per chunk
            h = None  # the layer's input is done with (the combine reads the messages): two node tensors at a time

            def combine(c, i=i, msgs=msgs):  # the layer's messages, bound: no reference outlives the layer
                return model.combine(i, msgs, self._aggregator(c, inv_sqrt_deg), precision)

            h = self._per_chunk(plan, combine)
            del combine, msgs
        return h

    def _per_chunk(self, plan: ChunkPlan, f: Callable[[tuple[int, int, int, int]], Tensor]) -> Tensor:
        """``f(chunk)`` for every chunk, written into one ``[N, d]`` tensor (rows ``lo:hi`` per chunk)."""
        out = None
        for chunk in plan:
            y = f(chunk)
            if out is None:
                out = torch.empty((self.num_nodes, y.size(1)), dtype=y.dtype, device=y.device)
            out[chunk[0] : chunk[1]] = y
        return out

    def _edges(self, chunk: tuple[int, int, int, int]) -> tuple[Tensor, Tensor]:
        """The chunk's in-edges and their CSR offsets (from 0), on the compute device."""
        lo, hi, a, b = chunk
        crow = self.rowptr[lo : hi + 1] - self.rowptr[lo]
        return self.edge_index[:, a:b].to(self.device), crow.to(self.device)

    def _aggregator(self, chunk: tuple[int, int, int, int], inv_sqrt_deg: Callable[[], Tensor]):
        edge_index, crow = self._edges(chunk)
        return self.policy.for_targets(
            edge_index, crow, target_start=chunk[0], edge_start=chunk[2], inv_sqrt_deg=inv_sqrt_deg
        )

    def _inv_sqrt_degree(self, plan: ChunkPlan) -> Tensor:
        """The whole graph's ``D^-1/2`` of GCN's normalization (self loops added), a chunk of targets at a time."""
        out = torch.empty(self.num_nodes, dtype=torch.float32, device=self.device)
        for chunk in plan:
            lo, hi = chunk[0], chunk[1]
            out[lo:hi] = gcn_inv_sqrt_degree(self._edges(chunk)[0], hi - lo, target_start=lo)
        return out
