"""``Batch``: the one mini-batch type every batch source yields and the
training loop consumes (neighbour-sampled, Cluster-GCN or GraphSAINT), and
``BatchSource``: what every batch source gives the trainer."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterator

import torch
from torch import Tensor

__all__ = ["Batch", "BatchSource", "SampledStats", "target_rowptr"]


def target_rowptr(dst: Tensor, num_nodes: int) -> Tensor:
    """CSR offsets over targets for edges already sorted by target: a count, no sort.

    Raises:
        ValueError: if ``dst`` is not sorted (the offsets would not describe the edges).
    """
    if dst.numel() > 1 and not bool((dst[1:] >= dst[:-1]).all()):
        raise ValueError("edges are not sorted by target, so a CSR cannot be read off them; sort them first")
    rowptr = torch.zeros(num_nodes + 1, dtype=dst.dtype, device=dst.device)
    torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0, out=rowptr[1:])
    return rowptr


@dataclass
class SampledStats:
    """The neighbour explosion, measured: per batch, the nodes and edges sampled (per hop where the source
    samples hops) and the share of the graph's nodes a batch's neighbourhood covers.

    Args:
        graph_nodes: Nodes of the graph the batches come from.
    """

    graph_nodes: int
    batches: int = 0
    nodes: int = 0
    edges: int = 0
    hop_nodes: list[int] = field(default_factory=list)  # sums over batches, per hop (hop 0: the seeds)
    hop_edges: list[int] = field(default_factory=list)

    def add(self, batch: "Batch") -> None:
        self.batches += 1
        self.nodes += batch.num_nodes
        self.edges += batch.num_edges
        for sums, per_hop in ((self.hop_nodes, batch.num_sampled_nodes), (self.hop_edges, batch.num_sampled_edges)):
            for i, v in enumerate(per_hop or ()):
                if i == len(sums):
                    sums.append(0)
                sums[i] += int(v)

    def to_dict(self) -> dict[str, Any] | None:
        """Means per batch (``None`` before the first batch)."""
        if not self.batches:
            return None
        b = self.batches
        return {
            "batches": b,
            "nodes_per_batch": self.nodes / b,
            "edges_per_batch": self.edges / b,
            "coverage": self.nodes / b / max(self.graph_nodes, 1),
            "nodes_per_hop": [v / b for v in self.hop_nodes],
            "edges_per_hop": [v / b for v in self.hop_edges],
        }


@dataclass
class Batch:
    """A sampled computation graph.

    Args:
        n_id: ``[n]`` global ids of the batch's nodes (local id = position).
        edge_index: ``[2, e]`` local (source, target) edges; messages flow to targets.
        e_id: ``[e]`` global edge ids (positions in the graph's ``edge_index``).
        target: Local ids of the nodes whose loss is computed.
        num_sampled_nodes: Nodes added per hop, for neighbour sampling.
        num_sampled_edges: Edges added per hop, for neighbour sampling.
        node_norm: ``[len(target)]`` GraphSAINT loss weights, or ``None``.
        edge_label_index: ``[2, b]`` local endpoints of link-prediction pairs, or ``None``.
        edge_label: ``[b]`` 1 for positive pairs, 0 for negatives, or ``None``.
        rowptr: ``[n + 1]`` CSR offsets over targets, when the edges are sorted
            by target and ``Flags.keep_csr`` asks the batch to carry its CSR
            (gnnbench's sampler emits edges so ordered), or ``None``.
        negatives_seconds: Seconds the sampler spent drawing this batch's
            link-prediction negatives (0 for node batches and replayed ones);
            the training loop moves them from ``sample`` to ``negatives``.
        sampled_in_worker: Whether a loader worker process produced the batch
            (its negatives then ran overlapped with training, on the worker's clock).
        edge_weight: ``[e]`` each sampled edge's Horvitz-Thompson weight ``1 / pi`` (LABOR batches: the sum of
            ``edge_weight * h[source]`` over a target's sampled edges estimates its full-neighbourhood sum
            without bias), or ``None`` (every edge counts once).
    """

    n_id: Tensor
    edge_index: Tensor
    e_id: Tensor
    target: Tensor
    num_sampled_nodes: list[int] | None = None
    num_sampled_edges: list[int] | None = None
    node_norm: Tensor | None = None
    edge_label_index: Tensor | None = None
    edge_label: Tensor | None = None
    rowptr: Tensor | None = None
    negatives_seconds: float = 0.0
    sampled_in_worker: bool = False
    edge_weight: Tensor | None = None

    @property
    def num_nodes(self) -> int:
        return self.n_id.numel()

    @property
    def num_edges(self) -> int:
        return self.edge_index.size(1)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Batch":
        names = {f.name for f in fields(cls)}
        missing = {"n_id", "edge_index", "e_id", "target"} - set(d)
        if missing:
            raise ValueError(f"batch record is missing {sorted(missing)}")
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_pyg(cls, data: Any, *, csr: bool = False) -> "Batch":
        """From the ``Data`` that PyG's ``NodeLoader`` yields (``n_id``, ``e_id``, ``batch_size``).

        ``csr``: also carry the CSR over targets (edges must be sorted by target, as gnnbench's sampler
        emits them; checked).
        """
        n_id = data.n_id
        # PyG's loaders widen edge ids to int64 (torch_geometric.loader.node_loader); the batch narrows them
        # back to the graph's index dtype here, once, in the sample phase (a no-op for int64 graphs).
        return cls(
            n_id=n_id,
            edge_index=data.edge_index,
            e_id=data.e_id.to(n_id.dtype),
            target=torch.arange(data.batch_size, dtype=n_id.dtype),
            num_sampled_nodes=list(data.num_sampled_nodes) if data.num_sampled_nodes is not None else None,
            num_sampled_edges=list(data.num_sampled_edges) if data.num_sampled_edges is not None else None,
            rowptr=target_rowptr(data.edge_index[1], n_id.numel()) if csr else None,
            edge_weight=getattr(data, "edge_weight", None),
        )

    def to(self, device: torch.device, *, edge_ids: bool = True) -> "Batch":
        """The batch with its tensors on ``device`` (non-blocking); ``edge_ids=False`` leaves ``e_id`` behind
        (only aggregation with cached coefficients reads it)."""
        moved = {
            k: (v.to(device, non_blocking=True) if isinstance(v, Tensor) and (edge_ids or k != "e_id") else v)
            for k, v in self.to_dict().items()
        }
        return Batch(**moved)

    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.to_dict().values() if isinstance(v, Tensor))


class BatchSource:
    """What every batch source gives the trainer; each source derives from this class.

    Attributes:
        norm_mode: How its batches are GCN-normalized, read by the model layer's
            :class:`~gnnbench.models.aggregation_policy.AggregationPolicy`: ``"batch"`` (each batch subgraph on its
            own), ``"source_degree"``, ``"full"`` (the batch is the whole graph) or ``"estimator"``.
        cache: The :class:`~gnnbench.sampling.cache.BatchCache` the batches replay from, or ``None``.
        measured_steps: For a source of one step per epoch (full batch), the steps a run measures after its
            warm-up; ``None`` otherwise.
    """

    norm_mode: str = "batch"
    cache: Any = None
    measured_steps: int | None = None

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of epoch ``epoch`` (closing the iterator releases its loader and workers)."""
        raise NotImplementedError

    def steps_per_epoch(self) -> int | None:
        """Batches in one epoch when known before it runs (the plateau rule's patience and evaluation cadence
        are in epochs); ``None`` by default: the trainer then learns it from the first epoch."""
        return None

    def min_epochs(self, warmup_steps: int) -> int:
        """The epochs a run needs at least to show this source's regime: 1, or for one step per epoch the
        warm-up plus :attr:`measured_steps`."""
        return 1 if self.measured_steps is None else warmup_steps + self.measured_steps

    def close(self) -> None:
        """Release what the source holds (loader workers, temporary files); nothing by default."""
