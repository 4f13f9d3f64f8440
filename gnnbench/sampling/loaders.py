"""Batch sources over PyG's loaders (``NodeLoader``, ``LinkLoader``) driving gnnbench's samplers.

Loader flags (``num_workers``, ``prefetch_factor``, ``persistent_workers``,
``pin_memory``) are passed to PyTorch's ``DataLoader`` unchanged: the measured
behaviour is PyTorch's own.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch
from torch import Tensor
from torch_geometric.loader import LinkLoader, NodeLoader

from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.process.threads import WorkerPin, affinity_of, plan_for
from gnnbench.sampling.batch import Batch, BatchSource, target_rowptr
from gnnbench.sampling.negative import NegativeSampler
from gnnbench.sampling.sampler import (
    GnnbenchNeighborSampler,
    NegativeTiming,
    make_neighbor_sampler,
    native_backend_status,
)

__all__ = [
    "NeighborBatches",
    "LinkBatches",
    "TimedLinkLoader",
    "WeightedNodeLoader",
    "EpochShuffle",
    "training_pairs",
    "shutdown_loader",
    "worker_placement",
    "worker_settings",
]


def _set_epoch(loader, epoch: int) -> None:
    """Key ``loader``'s next epoch: its shuffle (:class:`EpochShuffle`, or a data-parallel batch sampler) and its
    sampler's draws (:meth:`GnnbenchNeighborSampler.set_epoch`), both in this process before the epoch starts,
    so every batch of epoch ``epoch`` is the same whichever process samples it. PyG's native sampler has no
    epoch (its draws follow its own random state)."""
    for part in (loader.batch_sampler, getattr(loader, "node_sampler", None), getattr(loader, "link_sampler", None)):
        if hasattr(part, "set_epoch"):
            part.set_epoch(epoch)


def worker_placement(flags: Flags) -> WorkerPin | None:
    """The loader's ``worker_init_fn`` for ``flags.thread_placement``: with ``"split"``, each worker pins itself
    to its own core (:mod:`gnnbench.process.threads`); else ``None`` (workers run where the kernel puts them)."""
    if flags.thread_placement == "shared" or flags.num_workers == 0:
        return None
    return WorkerPin(plan_for(flags.thread_placement, flags.num_workers).worker_cores)


def worker_settings(flags: Flags, *, place_workers: bool = True) -> dict[str, Any]:
    """The loader flags as PyG loader keywords, one set for every loader here: ``num_workers``,
    ``prefetch_factor``, ``persistent_workers`` and ``pin_memory`` passed on unchanged, ``filter_per_worker``
    (PyG builds each batch in the worker that sampled it, when there are workers) and, with ``place_workers``,
    the ``worker_init_fn`` of ``flags.thread_placement`` (:func:`worker_placement`).

    Args:
        flags: The loader flags.
        place_workers: Whether the workers place themselves as ``flags.thread_placement`` says (default True;
            False leaves ``worker_init_fn`` to the loader's default).
    """
    settings: dict[str, Any] = {
        "num_workers": flags.num_workers,
        "prefetch_factor": flags.prefetch_factor,
        "persistent_workers": flags.persistent_workers,
        "pin_memory": flags.pin_memory,
        "filter_per_worker": flags.num_workers > 0,
    }
    if place_workers:
        settings["worker_init_fn"] = worker_placement(flags)
    return settings


def shutdown_loader(loader) -> None:
    """Shut down a DataLoader's workers (persistent ones live until this is called)."""
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    loader._iterator = None


class _SuspendableWorkers:
    """A loader-backed batch source whose worker processes are suspended while the training loop evaluates
    (:class:`gnnbench.background.BackgroundWork`: otherwise they would sample batches for free meanwhile)."""

    loader: Any
    _live: Any = None  # the DataLoader iterator of the epoch running now
    worker_cores: list[list[int] | None] | None = None  # each worker's cores, read from it at its first batch

    def attach_background(self, work) -> None:
        """Register this source's live worker processes with the run's background work (no-op without
        workers)."""
        if self.loader.num_workers > 0:
            work.suspend_processes(self._live_pids)

    def _live_pids(self) -> list[int]:
        workers = getattr(self._live, "_workers", None) or getattr(self.loader._iterator, "_workers", None) or []
        return [w.pid for w in workers if w.pid is not None and w.is_alive()]

    def _iterate(self) -> Iterator:
        """The loader's batches of this epoch, with its iterator kept where :meth:`_live_pids` finds it."""
        it = iter(self.loader)
        self._live = it
        try:
            for i, batch in enumerate(it):
                if i == 0 and self.worker_cores is None and self.loader.num_workers > 0:
                    self.worker_cores = [affinity_of(pid) for pid in self._live_pids()]  # read back, live
                yield batch
        finally:
            self._live = None


class EpochShuffle:
    """The loaders' shuffle (a DataLoader ``batch_sampler``): epoch ``e`` cuts ``randperm(n)``, drawn from
    ``(seed, e)`` alone, into batches of ``batch_size`` (the last one smaller).

    A DataLoader's own ``shuffle=True`` draws from a stream that its iterators also draw a base seed from, one
    per epoch without persistent workers and only the first with them, so persistent workers would shuffle
    later epochs differently; keyed by the epoch, the batches are the same with any loader flags.
    """

    def __init__(self, n: int, batch_size: int, seed: int = 0) -> None:
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        for b in torch.randperm(self.n, generator=g).split(self.batch_size):
            yield b.tolist()

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)


class WeightedNodeLoader(NodeLoader):
    """PyG's ``NodeLoader`` that also hands on a LABOR sample's edge weights as ``data.edge_weight`` (the sampler
    appends them to the metadata after the entries PyG reads, so they travel from a loader worker too)."""

    def filter_fn(self, out):
        data = super().filter_fn(out)
        meta = out.metadata if isinstance(out.metadata, tuple) else ()
        if len(meta) > 2 and isinstance(meta[2], Tensor):
            data.edge_weight = meta[2]
        return data


class NeighborBatches(_SuspendableWorkers, BatchSource):
    """Neighbour-sampled batches of the training nodes through PyG's ``NodeLoader``.

    Args:
        prepared: The prepared graph.
        flags: Sampling and loader flags.
        input_nodes: Seed nodes (default: the training nodes).
        seed: Seed of the sampler and of the shuffle.
    """

    norm_mode = "batch"  # the batch subgraph is normalized on its own (models.AggregationPolicy)

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        reason = native_backend_status() if flags.sampler_backend == "pyg" else None
        return [Unavailable("sampler_backend", reason)] if reason else []

    def __init__(
        self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None, seed: int = 0
    ) -> None:
        from torch_geometric.data import Data

        self.sampler = make_neighbor_sampler(
            prepared,
            flags.fanout,
            backend=flags.sampler_backend,
            replace=flags.sample_replace,
            seed=seed,
            sampler=flags.sampler,
        )
        if input_nodes is None:
            input_nodes = prepared.graph.train_mask.nonzero().view(-1)
        # Features are served by the feature placement, so the loader carries structure only.
        data = Data(edge_index=prepared.edge_index, num_nodes=prepared.num_nodes)
        self.csr = flags.keep_csr  # batches carry the CSR the sampler's target-sorted edges give for free
        self.shuffle = EpochShuffle(input_nodes.numel(), flags.batch_size, seed=seed)
        # The private generator only feeds the DataLoader's per-iterator base seed, which would otherwise be
        # drawn from the global RNG (and shift the dropout masks by loader flags); the sampler ignores it.
        self.loader = WeightedNodeLoader(
            data,
            node_sampler=self.sampler,
            input_nodes=input_nodes,
            batch_sampler=self.shuffle,
            generator=torch.Generator().manual_seed(seed),
            **worker_settings(flags),
        )

    def __len__(self) -> int:
        return len(self.loader)

    def steps_per_epoch(self) -> int | None:
        return len(self.loader)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        _set_epoch(self.loader, epoch)
        for data in self._iterate():
            yield Batch.from_pyg(data, csr=self.csr)

    def close(self) -> None:
        shutdown_loader(self.loader)


class TimedLinkLoader(LinkLoader):
    """PyG's ``LinkLoader`` that also hands on the sampler's :class:`NegativeTiming` as ``data.negative_timing``.

    The sampler appends it to the ``SamplerOutput`` metadata after the entries
    PyG's own ``filter_fn`` reads, so it travels with the batch from a loader
    worker process too (``None`` when the sampler gives none).
    """

    def filter_fn(self, out):
        data = super().filter_fn(out)
        meta = out.metadata if isinstance(out.metadata, tuple) else ()
        data.negative_timing = meta[-1] if meta and isinstance(meta[-1], NegativeTiming) else None
        return data


def training_pairs(prepared: PreparedGraph) -> Tensor:
    """Each undirected training edge once (``u < v``) as a ``[2, m]`` tensor."""
    ei = prepared.edge_index.to(torch.int64)
    return ei[:, ei[0] < ei[1]]


class LinkBatches(_SuspendableWorkers, BatchSource):
    """Edge mini-batches of positives plus negatives (binary labels), neighbour-sampled around their endpoints.

    Every training edge is a positive once per epoch, with ``flags.negative_ratio``
    negatives drawn per positive (PyG's ``NegativeSampling("binary", amount=...)``).
    A batch's positive edges are removed from its own sampled subgraph (both
    directions), so supervision and message-passing edges are disjoint within
    each batch, as held-out edges are absent from the evaluation graph (the
    per-batch form of PyG's ``RandomLinkSplit(disjoint_train_ratio=...)``);
    without it the model learns "a positive is already my neighbour" and
    held-out AUC falls below 0.5. Each batch carries the seconds its negatives
    took (``Batch.negatives_seconds``) and whether a loader worker drew them.

    Args:
        prepared: The *training* graph (``Graph.link_split()`` prepared), so
            held-out edges never feed message passing.
        flags: Sampling, loader and negative-sampling flags (``batch_size`` counts positive edges).
        seed: Seed of the sampler, the negatives and the shuffle.
    """

    # GCN weights of the batch with each source's full-graph degree (models.AggregationPolicy): with the
    # batch's own degrees (1 for the outermost sampled nodes) a GCN trained here ranks held-out edges below
    # chance under full-neighbourhood evaluation (measured in docs/models.md).
    norm_mode = "source_degree"

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        if flags.sampler_backend != "gnnbench":
            return [
                Unavailable(
                    "sampler_backend",
                    "link prediction uses gnnbench's sampler (its negatives reject "
                    f"training positives); got sampler_backend={flags.sampler_backend!r}",
                )
            ]
        return []

    def __init__(
        self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None, seed: int = 0
    ) -> None:
        from torch_geometric.data import Data
        from torch_geometric.sampler import NegativeSampling

        if flags.sampler_backend != "gnnbench":
            raise ValueError(LinkBatches.unavailable(flags, RunContext())[0].reason)
        self.negatives = NegativeSampler(
            prepared.edge_index,
            prepared.num_nodes,
            mode=flags.negative_mode,
            strict=flags.negative_strict,
            seed=seed + 1,
        )
        sampler = GnnbenchNeighborSampler(
            prepared,
            flags.fanout,
            replace=flags.sample_replace,
            seed=seed,
            negatives=self.negatives,
            exclude_seed_edges=True,
        )
        data = Data(edge_index=prepared.edge_index, num_nodes=prepared.num_nodes)
        self.csr = flags.keep_csr
        pairs = training_pairs(prepared)
        self.shuffle = EpochShuffle(pairs.size(1), flags.batch_size, seed=seed)
        self.loader = TimedLinkLoader(
            data,
            link_sampler=sampler,
            edge_label_index=pairs,
            neg_sampling=NegativeSampling("binary", amount=flags.negative_ratio),
            batch_sampler=self.shuffle,
            generator=torch.Generator().manual_seed(seed),
            **worker_settings(flags),
        )

    def steps_per_epoch(self) -> int | None:
        return len(self.loader)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        _set_epoch(self.loader, epoch)
        for data in self._iterate():
            idx = data.n_id.dtype  # the graph's index dtype: pair endpoints follow it
            label_index = data.edge_label_index.to(idx)
            timing = data.negative_timing
            yield Batch(
                n_id=data.n_id,
                edge_index=data.edge_index,
                e_id=data.e_id.to(idx),
                target=torch.unique(label_index),
                num_sampled_nodes=list(data.num_sampled_nodes),
                num_sampled_edges=list(data.num_sampled_edges),
                edge_label_index=label_index,
                edge_label=data.edge_label,
                rowptr=target_rowptr(data.edge_index[1], data.n_id.numel()) if self.csr else None,
                negatives_seconds=timing.seconds if timing is not None else 0.0,
                sampled_in_worker=bool(timing is not None and timing.in_worker),
            )

    def close(self) -> None:
        shutdown_loader(self.loader)
