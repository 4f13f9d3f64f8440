"""Batch sources: one ``epoch(e) -> Iterator[Batch]`` interface over neighbour
sampling (PyG's ``NodeLoader`` + a ``BaseSampler``), Cluster-GCN, GraphSAINT
and link-prediction edge batches, optionally behind the on-disk batch cache.

Sources are a lookup table (:data:`SOURCES`): each entry builds itself from a
prepared graph and the flags, and answers for what it cannot run
(``unavailable``). Loader flags (``num_workers``, ``prefetch_factor``,
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
from gnnbench.host_memory import uva_view
from gnnbench.sampling.batch import Batch, BatchSource, target_rowptr
from gnnbench.sampling.cache import BatchCache, sampling_code_version, tensor_digest
from gnnbench.sampling.labor import LaborSampleCore
from gnnbench.sampling.loaders import LinkBatches, NeighborBatches
from gnnbench.sampling.neighbor import NeighborSampleCore
from gnnbench.sampling.subgraph import ClusterGCNBatches, SaintRandomWalkBatches
from gnnbench.text import human_bytes

__all__ = ["BatchSource", "ClusterGCNSource", "SaintSource", "FullGraphSource", "CachedBatches", "SOURCES",
           "make_batch_source", "graph_fingerprint", "unavailable", "SAMPLING_FIELDS", "SeedShards",
           "ShardedNeighborBatches", "SHARDED_SOURCES", "rank_and_world", "DeviceNeighborBatches"]

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
        out.append(Unavailable("num_workers", f"{kind} batches are built in the main process; loader workers "
                               "apply to neighbour sampling only"))
    if flags.sampler_backend != "gnnbench":
        out.append(Unavailable("sampler_backend", f"{kind} batches do not use a neighbour sampler; sampler "
                               "backends apply to neighbour sampling only"))
    return out


class ClusterGCNSource(ClusterGCNBatches):
    """Cluster-GCN batches built from the flags (METIS through pymetis)."""

    norm_mode = "batch"

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        out = _main_process_only("cluster_gcn", flags)
        if importlib.util.find_spec("pymetis") is None:
            out.append(Unavailable("batch_source", "Cluster-GCN partitions with METIS through pymetis, which is "
                                   "not installed: pip install pymetis"))
        return out

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None,
                 seed: int = 0) -> None:
        super().__init__(prepared.neighbours(), prepared.graph.train_mask, cluster_size=flags.cluster_size,
                         clusters_per_batch=flags.clusters_per_batch, repartition_every=flags.repartition_every,
                         seed=seed, emit_csr=flags.keep_csr)


class SaintSource(SaintRandomWalkBatches):
    """GraphSAINT random-walk batches built from the flags; aggregation uses the full-graph estimator."""

    norm_mode = "estimator"  # models.AggregationPolicy rescales full-graph GCN coefficients per batch

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        return _main_process_only("saint_rw", flags)

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None,
                 seed: int = 0) -> None:
        super().__init__(prepared.neighbours(), prepared.graph.train_mask, num_roots=flags.saint_roots,
                         walk_length=flags.saint_walk_length, coverage=20, seed=seed, emit_csr=flags.keep_csr)


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

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None,
                 seed: int = 0) -> None:
        g = prepared.graph
        idx = g.edge_index.dtype
        target = (input_nodes if input_nodes is not None else g.train_mask.nonzero().view(-1)).to(idx)
        self.batch = Batch(n_id=torch.arange(g.num_nodes, dtype=idx), edge_index=g.edge_index,
                           e_id=torch.arange(g.num_edges, dtype=idx), target=target,
                           rowptr=g.rowptr.to(idx) if flags.keep_csr else None)

    def steps_per_epoch(self) -> int | None:
        return 1

    def epoch(self, epoch: int) -> Iterator[Batch]:
        yield self.batch


class SeedShards:
    """Data parallel: this rank's share of every global batch of training seeds (a DataLoader batch sampler).

    Each epoch the ``n`` seeds are permuted from ``(seed, epoch)`` (the same permutation on every
    rank), cut into global batches of ``batch_size``, and each global batch into ``world_size``
    contiguous parts of near-equal size (``tensor_split``): rank ``r`` takes part ``r``. So the
    ranks' batches are disjoint and together cover every seed each epoch, the global batch is the
    single-process batch size, and every rank takes the same number of steps (DDP needs that). A last
    global batch smaller than ``world_size`` is merged into the one before it, so no rank gets an
    empty batch.
    """

    def __init__(self, n: int, batch_size: int, rank: int, world_size: int, seed: int = 0) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}) (got {rank})")
        if n < world_size or batch_size < world_size:
            raise ValueError(f"{world_size} ranks need at least {world_size} seeds and a batch size of at least "
                             f"{world_size} (got {n} seeds, batch size {batch_size})")
        self.n, self.batch_size, self.rank, self.world_size, self.seed = n, batch_size, rank, world_size, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def global_batches(self, epoch: int) -> list[Tensor]:
        """The epoch's global batches (positions into the seed list), the same on every rank."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        batches = list(torch.randperm(self.n, generator=g).split(self.batch_size))
        if len(batches) > 1 and batches[-1].numel() < self.world_size:
            batches[-2:] = [torch.cat(batches[-2:])]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        for b in self.global_batches(self.epoch):
            yield b.tensor_split(self.world_size)[self.rank].tolist()

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest >= self.world_size or full == 0 else 0)


class ShardedNeighborBatches(NeighborBatches):
    """Neighbour-sampled batches of this rank's share of each global batch (:class:`SeedShards`): the
    loader's shuffle is replaced by the shared per-epoch split, everything else is :class:`NeighborBatches`."""

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, input_nodes: Tensor | None = None,
                 seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        from torch_geometric.data import Data
        from torch_geometric.loader import NodeLoader

        super().__init__(prepared, flags, input_nodes=input_nodes, seed=seed)
        if input_nodes is None:
            input_nodes = prepared.graph.train_mask.nonzero().view(-1)
        self.shards = SeedShards(input_nodes.numel(), flags.batch_size, rank, world_size, seed=seed)
        data = Data(edge_index=prepared.edge_index, num_nodes=prepared.num_nodes)
        self.loader = NodeLoader(
            data, node_sampler=self.sampler, input_nodes=input_nodes, batch_sampler=self.shards,
            num_workers=flags.num_workers, prefetch_factor=flags.prefetch_factor,
            persistent_workers=flags.persistent_workers, pin_memory=flags.pin_memory,
            filter_per_worker=flags.num_workers > 0,
        )

    def epoch(self, epoch: int) -> Iterator[Batch]:
        self.shards.set_epoch(epoch)  # read by the loader's batch sampler, in this process
        return super().epoch(epoch)


# kind -> source: the Flags.batch_source values, plus "link" (chosen by the link-prediction task).
SOURCES = {"neighbor": NeighborBatches, "cluster_gcn": ClusterGCNSource, "saint_rw": SaintSource,
           "full": FullGraphSource, "link": LinkBatches}
# kind -> source of parallel="data": each rank's share of every global batch.
SHARDED_SOURCES = {"neighbor": ShardedNeighborBatches}


def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)`` of the initialized default process group, ``(0, 1)`` without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def unavailable(flags: Flags, ctx: RunContext, kind: str | None = None) -> list[Unavailable]:
    """The sampling layer's answer: what the source of ``kind`` (default ``flags.batch_source``) cannot run."""
    kind = kind or flags.batch_source
    out = SOURCES[kind].unavailable(flags, ctx) + _device_sampling_reasons(flags, ctx, kind) + _labor_reasons(flags, kind)
    if flags.parallel == "data":
        if kind not in SHARDED_SOURCES:
            out.append(Unavailable("parallel", f"data parallel splits neighbour-sampled seed batches across ranks; "
                                   f"the {kind!r} batch source has no per-rank split (use batch_source='neighbor' "
                                   "with node classification)"))
        if flags.batch_size < ctx.world_size:
            out.append(Unavailable("batch_size", f"data parallel splits each batch of {flags.batch_size} seeds across "
                                   f"{ctx.world_size} ranks; it needs a batch size >= the number of ranks"))
    return out


class DeviceNeighborBatches(BatchSource):
    """Neighbour-sampled node batches drawn where the model computes (``Flags.sampler_device``): the CSR on the
    device (``"device"``), or in pinned host memory read by device kernels (``"uva"``, for a graph larger than
    device memory), sampled by :class:`~gnnbench.sampling.neighbor.NeighborSampleCore` (device-agnostic torch);
    the seeds are shuffled on the device per epoch. Ids, edges and the batch's CSR never visit the host (the
    features do only when they live there: ``feature_placement``).

    Args:
        prepared: The prepared graph.
        flags: Sampling flags (``fanout``, ``batch_size``, ``sample_replace``, ``keep_csr``, ``sampler_device``).
        device: Where sampling runs.
        input_nodes: Seed nodes (default: the training nodes).
        seed: Seed of the sampler and of the per-epoch shuffle.
    """

    norm_mode = "batch"

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, device: torch.device | str,
                 input_nodes: Tensor | None = None, seed: int = 0) -> None:
        self.device = torch.device(device)
        csr = prepared.neighbours()
        if flags.sampler_device == "uva":
            self._pinned = (csr.rowptr.contiguous().pin_memory(), csr.col.contiguous().pin_memory())
            rowptr, col = (uva_view(t, self.device, "sampler_device") for t in self._pinned)
        else:
            rowptr, col = csr.rowptr.to(self.device), csr.col.to(self.device)
        core = LaborSampleCore if flags.sampler == "labor" else NeighborSampleCore
        self.core = core(rowptr, col, flags.fanout, replace=flags.sample_replace, seed=seed)
        seeds = input_nodes if input_nodes is not None else prepared.graph.train_mask.nonzero().view(-1)
        n = rowptr.numel() - 1
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= n):
            raise ValueError(f"input_nodes must be node ids in [0, {n - 1}] "
                             f"(got min {int(seeds.min())}, max {int(seeds.max())})")
        if seeds.unique().numel() != seeds.numel():
            raise ValueError("input_nodes must be distinct (got repeated ids)")
        self.seeds = seeds.to(self.device, rowptr.dtype)  # checked once: batches sample them unchecked
        self.batch_size = flags.batch_size
        self.csr = flags.keep_csr
        self.seed = seed

    def steps_per_epoch(self) -> int | None:
        return -(-self.seeds.numel() // self.batch_size)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        g = torch.Generator(device=self.device)
        g.manual_seed(self.seed * 1_000_003 + epoch)
        perm = torch.randperm(self.seeds.numel(), generator=g, device=self.device)
        for chunk in perm.split(self.batch_size):
            seeds = self.seeds.index_select(0, chunk)
            out = self.core.sample(seeds, check=False)  # a slice of a permutation of the source's own seeds
            n = out.node.numel()
            yield Batch(n_id=out.node, edge_index=torch.stack([out.row, out.col]), e_id=out.edge,
                        target=torch.arange(seeds.numel(), dtype=out.node.dtype, device=self.device),
                        num_sampled_nodes=out.num_sampled_nodes, num_sampled_edges=out.num_sampled_edges,
                        rowptr=target_rowptr(out.col, n) if self.csr else None,
                        edge_weight=getattr(out, "weight", None))


def _labor_reasons(flags: Flags, kind: str) -> list[Unavailable]:
    """Why ``flags.sampler="labor"`` cannot run with this batch source (empty for the neighbour sampler)."""
    if flags.sampler == "neighbor":
        return []
    out = []
    if kind != "neighbor":
        out.append(f"LABOR samples neighbour batches of node classification (batch_source='neighbor'); this run's "
                   f"batches are {kind!r}")
    if flags.sampler_backend != "gnnbench":
        out.append(f"LABOR is gnnbench's sampler; got sampler_backend={flags.sampler_backend!r}")
    if flags.sample_replace:
        out.append("LABOR-0 keeps each neighbour at most once (an inclusion probability per edge); "
                   "sample_replace=True has no LABOR form")
    return [Unavailable("sampler", r) for r in out]


def _device_sampling_reasons(flags: Flags, ctx: RunContext, kind: str) -> list[Unavailable]:
    """Why ``flags.sampler_device`` cannot run here (empty for ``"host"``)."""
    if flags.sampler_device == "host":
        return []
    what = {"device": "gpu_sampling keeps the CSR on a CUDA device and samples there",
            "uva": "uva_sampling maps the pinned CSR into a CUDA device's address space"}[flags.sampler_device]
    out = []
    device = torch.device(ctx.device)
    if device.type != "cuda":
        out.append(f"{what}; on a CPU host and device memory are the same (device is {device.type})")
    if kind != "neighbor":
        out.append(f"sampling on the device draws neighbour-sampled node batches (batch_source='neighbor', node "
                   f"classification); this run's batches are {kind!r}")
    if flags.sampler_backend != "gnnbench":
        out.append(f"sampling on the device is gnnbench's sampler (device-agnostic torch); got "
                   f"sampler_backend={flags.sampler_backend!r}")
    if flags.num_workers:
        out.append(f"loader workers are CPU processes; sampling on the device runs in the training process "
                   f"(num_workers=0, got {flags.num_workers})")
    if flags.batch_cache_epochs:
        out.append("the batch cache stores host batches; sampling on the device keeps them on the device "
                   "(batch_cache_epochs=0)")
    if flags.parallel != "none":
        out.append(f"sampling on the device has no per-rank split (parallel={flags.parallel!r})")
    if (flags.sampler_device == "device" and device.type == "cuda" and torch.cuda.is_available()
            and ctx.num_nodes and ctx.num_edges):
        need = (ctx.num_nodes + 1 + ctx.num_edges) * (4 if flags.index_dtype == "int32" else 8)
        free = torch.cuda.mem_get_info(device)[0]
        if need > free // 2:
            out.append(f"the CSR needs {human_bytes(need)}, more than half the free device memory "
                       f"({human_bytes(free)}): use uva_sampling (the CSR stays in pinned host memory)")
    return [Unavailable("sampler_device", r) for r in out]


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


def make_batch_source(prepared: PreparedGraph, flags: Flags, *, kind: str | None = None, seed: int = 0,
                      cache_dir: str | Path | None = None, input_nodes: Tensor | None = None,
                      device: torch.device | str | None = None) -> BatchSource:
    """The batch source of ``kind`` (default ``flags.batch_source``; ``"link"`` for edge batches), with
    ``parallel="data"`` this rank's share of each global batch (:class:`SeedShards`, rank and world size
    from the initialized process group), wrapped in the batch cache when ``batch_cache_epochs > 0``: in ``cache_dir`` (shared across runs) or,
    when ``None``, in a fresh temporary directory removed by the source's ``close()``."""
    kind = kind or flags.batch_source
    if kind not in SOURCES:
        raise ValueError(f"unknown batch source {kind!r}; accepted: {', '.join(SOURCES)}")
    shard = None
    if flags.parallel == "data":  # each rank samples its share of every global batch
        if kind not in SHARDED_SOURCES:
            raise ValueError(f"data parallel has no per-rank split for batch source {kind!r}")
        rank, world = rank_and_world()
        shard = [rank, world]
        source = SHARDED_SOURCES[kind](prepared, flags, input_nodes=input_nodes, seed=seed, rank=rank,
                                       world_size=world)
    elif flags.sampler_device != "host" and kind == "neighbor":  # sampled where the model computes
        if device is None:
            raise ValueError(f"sampler_device={flags.sampler_device!r} needs the device to sample on")
        source = DeviceNeighborBatches(prepared, flags, device=device, input_nodes=input_nodes, seed=seed)
    else:
        source = SOURCES[kind](prepared, flags, input_nodes=input_nodes, seed=seed)
    if flags.batch_cache_epochs > 0:
        material = {"shard": shard,"graph": graph_fingerprint(prepared), "code": sampling_code_version(), "seed": seed,
                    "kind": kind,
                    "flags": {k: v for k, v in flags.to_dict().items() if k in SAMPLING_FIELDS},
                    "input_nodes": None if input_nodes is None else hashlib.sha256(
                        input_nodes.cpu().numpy().tobytes()).hexdigest()[:16]}
        cache = BatchCache(cache_dir, material, epochs=flags.batch_cache_epochs, seed=seed)
        return CachedBatches(source, cache)
    return source
