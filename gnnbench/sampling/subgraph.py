"""Subgraph batch sources: Cluster-GCN (METIS parts) and GraphSAINT random walks.

Both yield :class:`~gnnbench.sampling.batch.Batch` objects whose loss targets
are the training nodes inside the subgraph, so the same training loop drives
them and the neighbour sampler.
"""

from __future__ import annotations

import math
import time
from typing import Iterator

import numpy as np
import torch
from torch import Tensor

from gnnbench.graphs.csr import CSR
from gnnbench.graphs.index import check_index_fits
from gnnbench.sampling.batch import Batch, BatchSource, target_rowptr

__all__ = ["induced_subgraph", "metis_partition", "ClusterGCNBatches", "SaintRandomWalkBatches"]


def _expand_rows(rowptr: Tensor, nodes: Tensor) -> tuple[Tensor, Tensor]:
    """All CSR positions of ``nodes``' rows: ``(owner, edge_id)`` with owner = index into ``nodes``."""
    start = rowptr[nodes].to(torch.int64)
    deg = rowptr[nodes + 1].to(torch.int64) - start
    owner = torch.arange(nodes.numel(), device=nodes.device).repeat_interleave(deg)
    first = torch.cumsum(deg, 0) - deg
    eid = start[owner] + torch.arange(owner.numel(), device=nodes.device) - first[owner]
    return owner, eid


def induced_subgraph(csr: CSR, nodes: Tensor, scratch: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Edges among ``nodes`` (distinct global ids), relabelled to positions in ``nodes``.

    Args:
        csr: In-neighbour CSR of the graph.
        nodes: ``[n]`` distinct global node ids; local id = position.
        scratch: Optional ``[N]`` int64 buffer filled with -1, reused and restored.

    Returns:
        ``(edge_index, e_id)``: local ``[2, e]`` (source, target) and global edge ids, sorted by target.
    """
    nodes = nodes.to(torch.int64)
    local = scratch if scratch is not None else torch.full((csr.num_nodes,), -1, dtype=torch.int64, device=nodes.device)
    local[nodes] = torch.arange(nodes.numel(), device=nodes.device)
    try:
        owner, eid = _expand_rows(csr.rowptr, nodes)
        src_local = local[csr.col[eid].to(torch.int64)]
        keep = src_local >= 0
        edge_index = torch.stack([src_local[keep], owner[keep]])
        return edge_index, eid[keep]
    finally:
        local[nodes] = -1


def metis_partition(csr: CSR, num_parts: int, seed: int = 0) -> Tensor:
    """METIS k-way partition (through pymetis) of a graph given by its CSR.

    Self loops are dropped and the adjacency symmetrized, as METIS requires.

    Returns:
        ``[N]`` int64 part id of every node.
    """
    try:
        import pymetis
    except ImportError:  # pragma: no cover - pymetis is a dependency
        raise ImportError("Cluster-GCN needs pymetis: pip install pymetis") from None
    n = csr.num_nodes
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1 (got {num_parts})")
    if num_parts == 1:
        return torch.zeros(n, dtype=torch.int64)
    dst = torch.repeat_interleave(torch.arange(n), csr.rowptr.diff().to(torch.int64))
    src = csr.col.to(torch.int64).cpu()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    key = torch.unique(torch.cat([dst * n + src, src * n + dst]))  # symmetric, sorted by row
    rows = key // n
    xadj = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(rows, minlength=n), 0, out=xadj[1:])
    check_index_fits(max(n, key.numel()), torch.int32, "METIS adjacency index (pymetis takes int32)")
    adjncy = (key - rows * n).numpy().astype(np.int32)
    # METIS maps nearby seeds to the same stream (0 and 1 partition identically): spread them.
    opts = pymetis.Options(seed=int((seed * 2_654_435_761 + 12_345) % 2**31))
    adjacency = pymetis.CSRAdjacency(adj_starts=xadj.numpy().astype(np.int32), adjacent=adjncy)
    _, membership = pymetis.part_graph(num_parts, adjacency=adjacency, options=opts)
    return torch.as_tensor(np.asarray(membership), dtype=torch.int64)


class ClusterGCNBatches(BatchSource):
    """Cluster-GCN batches: METIS parts of about ``cluster_size`` nodes,
    ``clusters_per_batch`` random parts merged per batch, edges between them kept.

    Args:
        csr: In-neighbour CSR of the graph.
        train_mask: ``[N]`` bool; training nodes are each batch's loss targets.
        cluster_size: Target nodes per part (Cluster-GCN uses 2,000-5,000).
        clusters_per_batch: Parts per batch ("stochastic multiple partitions").
        repartition_every: Re-run METIS with a new seed every N epochs (0 = never).
        seed: Seed of the partition and of the batch order.
        emit_csr: Batches carry their CSR over targets (``Flags.keep_csr``).
    """

    def __init__(
        self,
        csr: CSR,
        train_mask: Tensor,
        *,
        cluster_size: int = 3000,
        clusters_per_batch: int = 4,
        repartition_every: int = 0,
        seed: int = 0,
        emit_csr: bool = False,
    ) -> None:
        if cluster_size < 1 or clusters_per_batch < 1 or repartition_every < 0:
            raise ValueError(
                "cluster_size and clusters_per_batch must be >= 1 and repartition_every >= 0 "
                f"(got {cluster_size}, {clusters_per_batch}, {repartition_every})"
            )
        self.csr = csr
        self.emit_csr = emit_csr
        self.train_mask = train_mask
        self.num_parts = max(1, math.ceil(csr.num_nodes / cluster_size))
        self.clusters_per_batch = clusters_per_batch
        self.repartition_every = repartition_every
        self.seed = seed
        self.partition_seconds: list[float] = []
        self._scratch = torch.full((csr.num_nodes,), -1, dtype=torch.int64)
        self._partition_for = -1
        self._repartition(0)

    def _repartition(self, generation: int) -> None:
        t0 = time.perf_counter()
        self.part = metis_partition(self.csr, self.num_parts, seed=self.seed + generation)
        self.order = torch.argsort(self.part, stable=True)  # nodes grouped by part
        counts = torch.bincount(self.part, minlength=self.num_parts)
        self.part_ptr = torch.zeros(self.num_parts + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=self.part_ptr[1:])
        self._partition_for = generation
        self.partition_seconds.append(time.perf_counter() - t0)

    def part_sizes(self) -> Tensor:
        return self.part_ptr.diff()

    def steps_per_epoch(self) -> int | None:
        return math.ceil(self.num_parts / self.clusters_per_batch)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of ``epoch`` (re-partitioning first when due)."""
        generation = epoch // self.repartition_every if self.repartition_every else 0
        if generation != self._partition_for:
            self._repartition(generation)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        parts = torch.randperm(self.num_parts, generator=g)
        for i in range(0, self.num_parts, self.clusters_per_batch):
            chosen = parts[i : i + self.clusters_per_batch]
            nodes = torch.cat([self.order[self.part_ptr[p] : self.part_ptr[p + 1]] for p in chosen.tolist()])
            edge_index, e_id = induced_subgraph(self.csr, nodes, self._scratch)
            target = self.train_mask[nodes].nonzero().view(-1)
            yield _batch(self.csr, nodes, edge_index, e_id, target, self.emit_csr)


class SaintRandomWalkBatches(BatchSource):
    """GraphSAINT random-walk subgraphs with its normalization.

    Each subgraph is the node set visited by ``num_roots`` walks of
    ``walk_length`` steps from uniformly drawn roots, with all edges among
    those nodes. The walks are vectorized: one gather per step for all walks.
    With ``coverage > 0`` subgraphs are pre-sampled to estimate GraphSAINT's
    loss normalization (``node_norm``, so the loss is an unbiased estimate of
    the mean over training nodes). The aggregation is corrected by the model
    layer's estimator (:class:`~gnnbench.models.aggregation_policy.AggregationPolicy`:
    per-target ``deg / sampled`` rescaling of full-graph GCN weights), not by
    GraphSAINT's per-edge ``alpha_uv``, whose variance on hub edges makes
    training diverge (``docs/models.md``).

    Args:
        csr: In-neighbour CSR.
        train_mask: ``[N]`` bool; training nodes are the loss targets.
        num_roots: Walks per subgraph.
        walk_length: Steps per walk.
        batches_per_epoch: Subgraphs per epoch (default: as many as make ``N``
            walk visits in all, ``ceil(N / (roots * (length + 1)))``).
        coverage: Pre-sampled subgraphs per node for the normalization estimate
            (GraphSAINT's ``sample_coverage``; 0 disables normalization).
        seed: Seed of the walks.
        emit_csr: Batches carry their CSR over targets (``Flags.keep_csr``).
    """

    def __init__(
        self,
        csr: CSR,
        train_mask: Tensor,
        *,
        num_roots: int = 2000,
        walk_length: int = 2,
        batches_per_epoch: int | None = None,
        coverage: int = 0,
        seed: int = 0,
        emit_csr: bool = False,
    ) -> None:
        if num_roots < 1 or walk_length < 1:
            raise ValueError(f"num_roots and walk_length must be >= 1 (got {num_roots}, {walk_length})")
        self.csr = csr
        self.emit_csr = emit_csr
        self.train_mask = train_mask
        self.num_roots = num_roots
        self.walk_length = walk_length
        n = csr.num_nodes
        self.batches_per_epoch = batches_per_epoch or max(1, math.ceil(n / (num_roots * (walk_length + 1))))
        self.seed = seed
        self._scratch = torch.full((n,), -1, dtype=torch.int64)
        self.node_norm: Tensor | None = None
        if coverage > 0:
            self._estimate_norm(coverage)

    def walk_nodes(self, generator: torch.Generator) -> Tensor:
        """Distinct nodes visited by one subgraph's walks."""
        n = self.csr.num_nodes
        cur = torch.randint(0, n, (self.num_roots,), generator=generator)
        visited = [cur]
        rowptr, col = self.csr.rowptr, self.csr.col
        for _ in range(self.walk_length):
            start = rowptr[cur].to(torch.int64)
            deg = rowptr[cur + 1].to(torch.int64) - start
            step = (torch.rand(cur.numel(), generator=generator) * deg).to(torch.int64)
            nxt = col[(start + torch.minimum(step, (deg - 1).clamp_min(0))).clamp_max(col.numel() - 1)]
            cur = torch.where(deg > 0, nxt.to(torch.int64), cur)  # a dead end stays put
            visited.append(cur)
        return torch.unique(torch.cat(visited))

    def _estimate_norm(self, coverage: int) -> None:
        n = self.csr.num_nodes
        node_count = torch.zeros(n, dtype=torch.float64)
        g = torch.Generator().manual_seed(self.seed + 7_919)
        num_samples, sampled_nodes = 0, 0
        while sampled_nodes < coverage * n:
            nodes = self.walk_nodes(g)
            node_count[nodes] += 1
            num_samples += 1
            sampled_nodes += nodes.numel()
        # Loss norm: weight 1 / (p_v * N_train) with p_v = count_v / num_samples.
        n_train = max(int(self.train_mask.sum()), 1)
        self.node_norm = torch.where(
            node_count > 0, num_samples / (node_count.clamp_min(1) * n_train), torch.zeros_like(node_count)
        ).float()
        self.norm_samples = num_samples

    def steps_per_epoch(self) -> int | None:
        return self.batches_per_epoch

    def epoch(self, epoch: int) -> Iterator[Batch]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        for _ in range(self.batches_per_epoch):
            nodes = self.walk_nodes(g)
            edge_index, e_id = induced_subgraph(self.csr, nodes, self._scratch)
            target = self.train_mask[nodes].nonzero().view(-1)
            yield _batch(
                self.csr,
                nodes,
                edge_index,
                e_id,
                target,
                self.emit_csr,
                node_norm=self.node_norm[nodes[target]] if self.node_norm is not None else None,
            )


def _batch(
    csr: CSR,
    nodes: Tensor,
    edge_index: Tensor,
    e_id: Tensor,
    target: Tensor,
    emit_csr: bool,
    node_norm: Tensor | None = None,
) -> Batch:
    """A subgraph batch in the graph's index dtype; with ``emit_csr`` its CSR over targets (a count: the
    induced subgraph's edges come sorted by target)."""
    idx = csr.col.dtype
    edge_index = edge_index.to(idx)
    return Batch(
        n_id=nodes.to(idx),
        edge_index=edge_index,
        e_id=e_id.to(idx),
        target=target.to(idx),
        node_norm=node_norm,
        rowptr=target_rowptr(edge_index[1], nodes.numel()) if emit_csr else None,
    )
