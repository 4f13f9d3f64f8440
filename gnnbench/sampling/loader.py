"""Batch sources: one ``epoch(e) -> Iterator[Batch]`` interface over neighbour
sampling (PyG's ``NodeLoader`` + a ``BaseSampler``), Cluster-GCN and
GraphSAINT, optionally behind the on-disk batch cache.

Loader flags (``num_workers``, ``prefetch_factor``, ``persistent_workers``,
``pin_memory``) are passed to PyTorch's ``DataLoader`` through PyG's
``NodeLoader`` unchanged: the measured behaviour is PyTorch's own.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator, Protocol

import torch
from torch import Tensor

from gnnbench.flags import Flags
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.sampling.batch import Batch
from gnnbench.sampling.cache import BatchCache, default_cache_dir
from gnnbench.sampling.sampler import make_neighbor_sampler
from gnnbench.sampling.subgraph import ClusterGCNBatches, SaintRandomWalkBatches

__all__ = ["BatchSource", "NeighborBatches", "shutdown_loader", "CachedBatches", "make_batch_source", "graph_fingerprint",
           "SAMPLING_FIELDS"]

# Flags that determine which batches are sampled (and so key the batch cache).
SAMPLING_FIELDS = ("index_dtype", "fanout", "sample_replace", "sampler_backend", "batch_size", "batch_source",
                   "cluster_size", "clusters_per_batch", "repartition_every", "saint_roots", "saint_walk_length")


class BatchSource(Protocol):
    def epoch(self, epoch: int) -> Iterator[Batch]: ...


def graph_fingerprint(prepared: PreparedGraph) -> str:
    """A stable id of the graph's structure and training split."""
    g = prepared.graph
    spec = g.meta.get("spec")
    h = hashlib.sha256()
    if spec is not None:
        h.update(json.dumps(spec, sort_keys=True).encode())
    else:
        h.update(g.edge_index.to(torch.int64).cpu().numpy().tobytes())
        h.update(g.train_mask.cpu().numpy().tobytes())
    h.update(f"{g.num_nodes}:{g.num_edges}:{'link' if g.meta.get('link_split') else 'node'}".encode())
    return h.hexdigest()[:20]


def shutdown_loader(loader) -> None:
    """Shut down a DataLoader's workers (persistent ones live until this is called)."""
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    loader._iterator = None


class NeighborBatches:
    """Neighbour-sampled batches of the training nodes through PyG's ``NodeLoader``.

    Args:
        prepared: The prepared graph.
        flags: Sampling and loader flags.
        input_nodes: Seed nodes (default: the training nodes).
        seed: Seed of the sampler and of the shuffle.
    """

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None,
                 seed: int = 0) -> None:
        from torch_geometric.data import Data
        from torch_geometric.loader import NodeLoader

        reasons = flags.unavailable("cuda" if torch.cuda.is_available() else "cpu")
        if "pin_memory" in reasons:
            from gnnbench.features import Unavailable

            raise Unavailable(reasons["pin_memory"])
        self.sampler = make_neighbor_sampler(prepared, flags.fanout, backend=flags.sampler_backend,
                                             replace=flags.sample_replace, seed=seed)
        if input_nodes is None:
            input_nodes = prepared.graph.train_mask.nonzero().view(-1)
        # Features are served by the FeatureStore, so the loader carries structure only.
        data = Data(edge_index=prepared.edge_index, num_nodes=prepared.num_nodes)
        self.loader = NodeLoader(
            data, node_sampler=self.sampler, input_nodes=input_nodes, batch_size=flags.batch_size, shuffle=True,
            num_workers=flags.num_workers, prefetch_factor=flags.prefetch_factor,
            persistent_workers=flags.persistent_workers, pin_memory=flags.pin_memory,
            generator=torch.Generator().manual_seed(seed), filter_per_worker=flags.num_workers > 0,
        )

    def __len__(self) -> int:
        return len(self.loader)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        for data in self.loader:
            yield Batch.from_pyg(data)

    def close(self) -> None:
        shutdown_loader(self.loader)


class CachedBatches:
    """Any batch source behind a :class:`BatchCache` of ``flags.batch_cache_epochs`` epochs."""

    def __init__(self, source: BatchSource, cache: BatchCache) -> None:
        self.source = source
        self.cache = cache

    def epoch(self, epoch: int) -> Iterator[Batch]:
        return self.cache.epoch(epoch, lambda: self.source.epoch(epoch))

    def close(self) -> None:
        if hasattr(self.source, "close"):
            self.source.close()


class _SubgraphSource:
    def __init__(self, impl) -> None:
        self.impl = impl

    def epoch(self, epoch: int) -> Iterator[Batch]:
        return self.impl.epoch(epoch)


def make_batch_source(prepared: PreparedGraph, flags: Flags, *, seed: int = 0,
                      cache_dir: str | Path | None = None, input_nodes: Tensor | None = None,
                      task: str = "node") -> BatchSource:
    """The batch source ``flags`` ask for, wrapped in the batch cache when ``batch_cache_epochs > 0``.

    ``task="link"`` yields edge batches (positives plus negatives) for link prediction.
    """
    g = prepared.graph
    if task == "link":
        from gnnbench.linkpred import LinkBatches

        source: BatchSource = LinkBatches(prepared, flags, seed=seed)
    elif flags.batch_source == "neighbor":
        source = NeighborBatches(prepared, flags, input_nodes=input_nodes, seed=seed)
    elif flags.batch_source == "cluster_gcn":
        source = _SubgraphSource(ClusterGCNBatches(
            prepared.neighbours(), g.train_mask, cluster_size=flags.cluster_size,
            clusters_per_batch=flags.clusters_per_batch, repartition_every=flags.repartition_every, seed=seed))
    elif flags.batch_source == "saint_rw":
        source = _SubgraphSource(SaintRandomWalkBatches(
            prepared.neighbours(), g.train_mask, num_roots=flags.saint_roots,
            walk_length=flags.saint_walk_length, coverage=20, seed=seed))
    else:  # Flags validation makes this unreachable
        raise ValueError(f"unknown batch source {flags.batch_source!r}")
    if flags.batch_cache_epochs > 0:
        material = {"graph": graph_fingerprint(prepared), "seed": seed, "task": task,
                    "flags": {k: v for k, v in flags.to_dict().items() if k in SAMPLING_FIELDS},
                    "input_nodes": None if input_nodes is None else hashlib.sha256(
                        input_nodes.cpu().numpy().tobytes()).hexdigest()[:16]}
        cache = BatchCache(cache_dir or default_cache_dir(), material, epochs=flags.batch_cache_epochs, seed=seed)
        return CachedBatches(source, cache)
    return source
