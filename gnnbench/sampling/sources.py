"""Batch sources: one ``epoch(e) -> Iterator[Batch]`` interface over neighbour
sampling (PyG's ``NodeLoader`` + a ``BaseSampler``), Cluster-GCN, GraphSAINT
and link-prediction edge batches, optionally behind the on-disk batch cache.

Sources are a lookup table (:data:`SOURCES`): each entry builds itself from a
prepared graph and the flags, and answers for what it cannot run
(``unavailable``). :func:`make_batch_source` picks from it, or the per-rank split
of data parallel (:mod:`gnnbench.sampling.sharded`), or sampling on the device
(:mod:`gnnbench.sampling.device_sampling`). Loader flags (``num_workers``, ``prefetch_factor``,
``persistent_workers``, ``pin_memory``) are passed to PyTorch's ``DataLoader``
through PyG's loaders unchanged: the measured behaviour is PyTorch's own.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Iterator

import torch
from torch import Tensor

from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.sampling.batch import Batch, BatchSource
from gnnbench.sampling.cache import BatchCache, sampling_code_version, tensor_digest
from gnnbench.sampling.device_sampling import DeviceNeighborBatches, device_sampling_reasons
from gnnbench.sampling.loaders import LinkBatches, NeighborBatches
from gnnbench.sampling.sharded import ShardedNeighborBatches, rank_and_world
from gnnbench.sampling.subgraph import ClusterGCNBatches, SaintRandomWalkBatches

__all__ = [
    "BatchSource",
    "ClusterGCNSource",
    "SaintSource",
    "FullGraphSource",
    "CachedBatches",
    "SOURCES",
    "make_batch_source",
    "graph_fingerprint",
    "unavailable",
    "SAMPLING_FIELDS",
    "SHARDED_SOURCES",
]

# Flags that determine which batches are sampled (and so key the batch cache), as declared on the fields.
SAMPLING_FIELDS = Flags.batch_key_fields()


def graph_fingerprint(prepared: PreparedGraph) -> str:
    """A content hash of what sampling reads: ``edge_index``, ``train_mask`` and ``num_nodes`` (chunked
    BLAKE2b, see :func:`~gnnbench.sampling.cache.tensor_digest`), so two graphs with one spec but different
    contents (a changed generator, a loaded file) never share cached batches."""
    g = prepared.graph
    h = hashlib.sha256(tensor_digest(g.edge_index, g.train_mask).encode())
    h.update(f"{g.num_nodes}:{g.num_edges}:{'link' if g.meta.get('link_split') else 'node'}".encode())
    return h.hexdigest()[:20]


def _main_process_only(kind: str, flags: Flags) -> list[Unavailable]:
    """Subgraph batches are built in the main process by gnnbench's own code."""
    out = []
    if flags.num_workers:
        out.append(
            Unavailable(
                "num_workers",
                f"{kind} batches are built in the main process; loader workers apply to neighbour sampling only",
            )
        )
    if flags.sampler_backend != "gnnbench":
        out.append(
            Unavailable(
                "sampler_backend",
                f"{kind} batches do not use a neighbour sampler; sampler backends apply to neighbour sampling only",
            )
        )
    return out


class ClusterGCNSource(ClusterGCNBatches):
    """Cluster-GCN batches built from the flags (METIS through pymetis)."""

    norm_mode = "batch"

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        out = _main_process_only("cluster_gcn", flags)
        if importlib.util.find_spec("pymetis") is None:
            out.append(
                Unavailable(
                    "batch_source",
                    "Cluster-GCN partitions with METIS through pymetis, which is not installed: pip install pymetis",
                )
            )
        return out

    def __init__(
        self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None, seed: int = 0
    ) -> None:
        super().__init__(
            prepared.neighbours(),
            prepared.graph.train_mask,
            cluster_size=flags.cluster_size,
            clusters_per_batch=flags.clusters_per_batch,
            repartition_every=flags.repartition_every,
            seed=seed,
            emit_csr=flags.keep_csr,
        )


class SaintSource(SaintRandomWalkBatches):
    """GraphSAINT random-walk batches built from the flags; aggregation uses the full-graph estimator."""

    norm_mode = "estimator"  # models.AggregationPolicy rescales full-graph GCN coefficients per batch

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        return _main_process_only("saint_rw", flags)

    def __init__(
        self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None, seed: int = 0
    ) -> None:
        super().__init__(
            prepared.neighbours(),
            prepared.graph.train_mask,
            num_roots=flags.saint_roots,
            walk_length=flags.saint_walk_length,
            coverage=20,
            seed=seed,
            emit_csr=flags.keep_csr,
        )


FULL_BATCH_MEASURED_STEPS = 10  # full-batch runs last at least warm-up + 10 epochs: 10 measured steps


class FullGraphSource(BatchSource):
    """Full-batch training: every epoch is one step on the whole graph, the loss on the training nodes.

    The "node classification on a small or medium graph" case of the rules of thumb (``docs/rules.md``), where the bottleneck is the
    kernels, not sampling. Batch ids are global ids; with ``keep_csr`` the batch carries the graph's own CSR
    (its edges are stored sorted by target), so sparse aggregation never sorts.
    """

    norm_mode = "full"  # the batch is the whole graph: cached coefficients are exact (GCNConv(cached=True))
    measured_steps = FULL_BATCH_MEASURED_STEPS  # one step per epoch: a run lasts warm-up + this many epochs

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        return _main_process_only("full", flags)

    def __init__(
        self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None, seed: int = 0
    ) -> None:
        g = prepared.graph
        idx = g.edge_index.dtype
        target = (input_nodes if input_nodes is not None else g.train_mask.nonzero().view(-1)).to(idx)
        self.batch = Batch(
            n_id=torch.arange(g.num_nodes, dtype=idx),
            edge_index=g.edge_index,
            e_id=torch.arange(g.num_edges, dtype=idx),
            target=target,
            rowptr=g.rowptr.to(idx) if flags.keep_csr else None,
        )

    def steps_per_epoch(self) -> int | None:
        return 1

    def epoch(self, epoch: int) -> Iterator[Batch]:
        yield self.batch


# kind -> source: the Flags.batch_source values, plus "link" (chosen by the link-prediction task).
SOURCES = {
    "neighbor": NeighborBatches,
    "cluster_gcn": ClusterGCNSource,
    "saint_rw": SaintSource,
    "full": FullGraphSource,
    "link": LinkBatches,
}
# kind -> source of parallel="data": each rank's share of every global batch.
SHARDED_SOURCES = {"neighbor": ShardedNeighborBatches}


def unavailable(flags: Flags, ctx: RunContext, kind: str | None = None) -> list[Unavailable]:
    """The sampling layer's answer: what the source of ``kind`` (default ``flags.batch_source``) cannot run."""
    kind = kind or flags.batch_source
    out = (
        SOURCES[kind].unavailable(flags, ctx) + device_sampling_reasons(flags, ctx, kind) + _labor_reasons(flags, kind)
    )
    if flags.parallel == "data":
        if kind not in SHARDED_SOURCES:
            out.append(
                Unavailable(
                    "parallel",
                    f"data parallel splits neighbour-sampled seed batches across ranks; "
                    f"the {kind!r} batch source has no per-rank split (use batch_source='neighbor' "
                    "with node classification)",
                )
            )
        if flags.batch_size < ctx.world_size:
            out.append(
                Unavailable(
                    "batch_size",
                    f"data parallel splits each batch of {flags.batch_size} seeds across "
                    f"{ctx.world_size} ranks; it needs a batch size >= the number of ranks",
                )
            )
    return out


def _labor_reasons(flags: Flags, kind: str) -> list[Unavailable]:
    """Why ``flags.sampler="labor"`` cannot run with this batch source (empty for the neighbour sampler)."""
    if flags.sampler == "neighbor":
        return []
    out = []
    if kind != "neighbor":
        out.append(
            f"LABOR samples neighbour batches of node classification (batch_source='neighbor'); this run's "
            f"batches are {kind!r}"
        )
    if flags.sampler_backend != "gnnbench":
        out.append(f"LABOR is gnnbench's sampler; got sampler_backend={flags.sampler_backend!r}")
    if flags.sample_replace:
        out.append(
            "LABOR-0 keeps each neighbour at most once (an inclusion probability per edge); "
            "sample_replace=True has no LABOR form"
        )
    return [Unavailable("sampler", r) for r in out]


class CachedBatches(BatchSource):
    """Any batch source behind a :class:`BatchCache` of ``flags.batch_cache_epochs`` epochs."""

    def __init__(self, source: BatchSource, cache: BatchCache) -> None:
        self.source = source
        self.cache = cache
        self.norm_mode = source.norm_mode

    def epoch(self, epoch: int) -> Iterator[Batch]:
        return self.cache.epoch(epoch, lambda: self.source.epoch(epoch))

    def steps_per_epoch(self) -> int | None:
        return self.source.steps_per_epoch()

    def attach_background(self, work) -> None:
        """Its source's loader workers are suspended during evaluation too."""
        attach = getattr(self.source, "attach_background", None)
        if attach is not None:
            attach(work)

    def min_epochs(self, warmup_steps: int) -> int:
        """K + 1: K - 1 epochs replay (the cache's window)."""
        return self.cache.min_epochs

    def close(self) -> None:
        self.source.close()
        self.cache.close()  # a per-run temporary cache directory goes with the run


def make_batch_source(
    prepared: PreparedGraph,
    flags: Flags,
    *,
    kind: str | None = None,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    input_nodes: Tensor | None = None,
    device: torch.device | str | None = None,
) -> BatchSource:
    """The batch source of ``kind`` (default ``flags.batch_source``; ``"link"`` for edge batches), with
    ``parallel="data"`` this rank's share of each global batch (:class:`~gnnbench.sampling.sharded.SeedShards`,
    rank and world size from the initialized process group), wrapped in the batch cache when
    ``batch_cache_epochs > 0``: in ``cache_dir`` (shared across runs) or, when ``None``, in a fresh temporary
    directory removed by the source's ``close()``."""
    kind = kind or flags.batch_source
    if kind not in SOURCES:
        raise ValueError(f"unknown batch source {kind!r}; accepted: {', '.join(SOURCES)}")
    shard = None
    if flags.parallel == "data":  # each rank samples its share of every global batch
        if kind not in SHARDED_SOURCES:
            raise ValueError(f"data parallel has no per-rank split for batch source {kind!r}")
        rank, world = rank_and_world()
        shard = [rank, world]
        source = SHARDED_SOURCES[kind](prepared, flags, input_nodes=input_nodes, seed=seed, rank=rank, world_size=world)
    elif flags.sampler_device != "host" and kind == "neighbor":  # sampled where the model computes
        if device is None:
            raise ValueError(f"sampler_device={flags.sampler_device!r} needs the device to sample on")
        source = DeviceNeighborBatches(prepared, flags, device=device, input_nodes=input_nodes, seed=seed)
    else:
        source = SOURCES[kind](prepared, flags, input_nodes=input_nodes, seed=seed)
    if flags.batch_cache_epochs > 0:
        material = {
            "shard": shard,
            "graph": graph_fingerprint(prepared),
            "code": sampling_code_version(),
            "seed": seed,
            "kind": kind,
            "flags": {k: v for k, v in flags.to_dict().items() if k in SAMPLING_FIELDS},
            "input_nodes": None
            if input_nodes is None
            else hashlib.sha256(input_nodes.cpu().numpy().tobytes()).hexdigest()[:16],
        }
        cache = BatchCache(cache_dir, material, epochs=flags.batch_cache_epochs, seed=seed)
        return CachedBatches(source, cache)
    return source
