"""``Flags``: every optimization switch in one frozen, typed dataclass.

The baseline is ``Flags()``. Optimizations are named changes to these fields,
listed once in :mod:`gnnbench.registry`. Validation happens here, early, with
messages that name the bad value and the accepted ones; what a device cannot
run is reported by :meth:`Flags.unavailable`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import torch

__all__ = [
    "Flags",
    "Unavailable",
    "UnavailableError",
    "RunContext",
    "format_reasons",
    "INDEX_DTYPES",
    "BATCH_SOURCES",
    "FEATURE_PLACEMENTS",
    "SAMPLER_BACKENDS",
    "SAMPLERS",
    "NEGATIVE_MODES",
    "AGGREGATIONS",
    "PRECISIONS",
    "DROPOUT_KERNELS",
    "FEATURE_DTYPES",
    "PARALLEL_MODES",
    "PARTITIONERS",
    "GRAD_COMPRESSIONS",
    "ALLOCATOR_NAMES",
    "THREAD_PLACEMENTS",
]

INDEX_DTYPES = ("int64", "int32")
SAMPLER_BACKENDS = ("gnnbench", "pyg")
SAMPLERS = ("neighbor", "labor")  # independent per-target draws | LABOR-0 (one variate per source, shared)
BATCH_SOURCES = ("neighbor", "cluster_gcn", "saint_rw", "full")
FEATURE_PLACEMENTS = ("host", "device", "hot_cold", "uva")
FEATURE_DTYPES = ("float32", "float16")
SAMPLER_DEVICES = ("host", "device", "uva")
HOT_RANKS = ("access", "degree")
NEGATIVE_MODES = ("uniform", "degree")
AGGREGATIONS = ("scatter", "sparse")
PRECISIONS = ("off", "full", "partial")
DROPOUT_KERNELS = ("bernoulli", "uniform")
PARALLEL_MODES = ("none", "data", "partition")
PARTITIONERS = ("metis", "degree")
GRAD_COMPRESSIONS = ("none", "topk", "fp16", "powersgd")
# the process's allocator, set when it starts (gnnbench.process.allocators.ALLOCATORS holds what each sets)
ALLOCATOR_NAMES = ("glibc", "glibc_tuned", "tcmalloc", "jemalloc", "jemalloc_pyg")
THREAD_PLACEMENTS = ("shared", "split")

_CHOICES = {
    "index_dtype": INDEX_DTYPES,
    "sampler_backend": SAMPLER_BACKENDS,
    "sampler": SAMPLERS,
    "batch_source": BATCH_SOURCES,
    "feature_placement": FEATURE_PLACEMENTS,
    "feature_dtype": FEATURE_DTYPES,
    "sampler_device": SAMPLER_DEVICES,
    "hot_rank": HOT_RANKS,
    "negative_mode": NEGATIVE_MODES,
    "aggregation": AGGREGATIONS,
    "precision": PRECISIONS,
    "dropout_kernel": DROPOUT_KERNELS,
    "parallel": PARALLEL_MODES,
    "partitioner": PARTITIONERS,
    "grad_compression": GRAD_COMPRESSIONS,
    "allocator": ALLOCATOR_NAMES,
    "thread_placement": THREAD_PLACEMENTS,
}
_POSITIVE_INTS = (
    "batch_size",
    "cluster_size",
    "clusters_per_batch",
    "saint_roots",
    "saint_walk_length",
    "negative_ratio",
    "powersgd_rank",
)
_NON_NEGATIVE_INTS = ("num_workers", "repartition_every", "batch_cache_epochs", "hot_budget_bytes", "pipeline_depth")
_KEYS_BATCHES = "keys_batches"  # field metadata: the field's value changes the sampled batches


def _batch_key(default: Any) -> Any:
    """A ``Flags`` field whose value changes the sampled batches, so it keys the batch cache
    (:meth:`Flags.batch_key_fields`); a field whose value changes them and is not declared so
    would let a shared cache replay batches another configuration sampled."""
    return dataclasses.field(default=default, metadata={_KEYS_BATCHES: True})


@dataclass(frozen=True)
class Flags:
    """Optimization switches; ``Flags()`` is the baseline."""

    # --- graph preparation (gnnbench.graphs.prepare) ---
    index_dtype: str = _batch_key("int64")  # edge index / CSR offset dtype: "int64" | "int32" (overflow-guarded)
    cached_norm: bool = False  # GCN normalization computed once: per graph (full batch), per batch (sampled)
    keep_csr: bool = _batch_key(False)  # keep CSR beside COO instead of deriving neighbour lists on each use
    # --- sampling (gnnbench.sampling) ---
    fanout: tuple[int, ...] = _batch_key((15, 10, 5))  # neighbours per hop (-1 = all); model depth = its length
    sample_replace: bool = _batch_key(False)  # draw neighbours with replacement
    sampler_device: str = _batch_key("host")  # sample on "host" | "device" (CSR on the GPU) | "uva" (pinned CSR)
    sampler_backend: str = _batch_key("gnnbench")  # "gnnbench" (vectorized, exact) | "pyg" (pyg-lib/torch-sparse)
    sampler: str = _batch_key("neighbor")  # "neighbor" | "labor" (LABOR-0: sources shared by overlapping targets)
    batch_size: int = _batch_key(1024)  # seed nodes per neighbour-sampled mini-batch
    batch_source: str = _batch_key("neighbor")  # "neighbor" | "cluster_gcn" | "saint_rw" | "full" (1 step/epoch)
    cluster_size: int = _batch_key(3000)  # Cluster-GCN: target nodes per METIS part
    clusters_per_batch: int = _batch_key(4)  # Cluster-GCN: parts merged into one batch
    repartition_every: int = _batch_key(0)  # Cluster-GCN: re-run METIS every N epochs (0 = never)
    saint_roots: int = _batch_key(2000)  # GraphSAINT: random-walk roots per subgraph
    saint_walk_length: int = _batch_key(2)  # GraphSAINT: steps per walk
    batch_cache_epochs: int = _batch_key(0)  # reuse sampled batches for K epochs, then resample (0 = off)
    # --- loader (PyTorch's DataLoader, driven by PyG's NodeLoader) ---
    num_workers: int = 0  # loader worker processes (their batches are the main process's: keyed by seed and epoch)
    prefetch_factor: int | None = None  # batches each worker prepares ahead (needs num_workers > 0)
    persistent_workers: bool = False  # keep workers alive across epochs (needs num_workers > 0)
    pin_memory: bool = False  # pin loader output in page-locked memory (CUDA only)
    # --- features (gnnbench.features.placement) ---
    feature_placement: str = "host"  # "host" | "device" | "hot_cold" (most-read rows on device) | "uva" (zero-copy)
    feature_prefetch: bool = False  # gather the next batch's features on a side CUDA stream
    pipeline_depth: int = 0  # batches sampled and gathered ahead by a background thread (0: off; the pipelined loader)
    hot_rank: str = "access"  # hot_cold: rank rows by "access" (counted over one profiled epoch) | "degree"
    hot_budget_fraction: float = 0.25  # hot_cold: share of the feature rows kept on the device (at most half free)
    hot_budget_bytes: int = 0  # hot_cold: device bytes for the hot rows, replacing the fraction (0 = use it)
    feature_dtype: str = "float32"  # stored features: "float32" | "float16" (half the bytes; model upcasts to fp32)
    # --- model (gnnbench.models.nets) ---
    aggregation: str = "scatter"  # "scatter" (edge_index gather + scatter-add) | "sparse" (CSR sparse-matrix product)
    norm_estimator: bool = False  # sampled batches: full-graph GCN weights rescaled by deg/sampled (an estimator)
    precision: str = "off"  # "off" | "full" (all low precision) | "partial" (linear low, aggregation fp32)
    compile: bool = False  # torch.compile the model (dynamic shapes)
    dropout_kernel: str = "bernoulli"  # dropout mask: "bernoulli" (F.dropout) | "uniform" (rand >= p, vectorized)
    # --- link prediction (gnnbench.sampling.negative) ---
    negative_mode: str = _batch_key("uniform")  # negatives: "uniform" | "degree" (deg ** 0.75)
    negative_strict: bool = _batch_key(True)  # reject negatives that are training positives
    negative_ratio: int = _batch_key(1)  # negatives per positive edge, >= 1 (PyG's NegativeSampling amount)
    # --- multi-process training (gnnbench.parallel; the world size is RunConfig.nproc, not a flag) ---
    parallel: str = "none"  # "none" | "data" (DDP: graph replicated, seeds split per rank) | "partition"
    partitioner: str = "metis"  # parallel="partition": "metis" (edge-cut) | "degree" (balanced by degree)
    grad_compression: str = "none"  # DDP comm hook: "none" (dense all-reduce) | "topk" | "fp16" | "powersgd"
    topk_ratio: float = 0.01  # grad_compression="topk": share of each parameter's entries sent (error feedback: rest)
    powersgd_rank: int = 2  # grad_compression="powersgd": matrix approximation rank of PowerSGD
    # --- the process (gnnbench.process): set when the measured process starts, read back from it ---
    allocator: str = "glibc"  # "glibc" (defaults) | "glibc_tuned" | "tcmalloc" | "jemalloc" | "jemalloc_pyg"
    thread_placement: str = "shared"  # "shared" (PyTorch's defaults) | "split" (a core per worker, rest to training)

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"Flags.{name} must be one of {', '.join(map(repr, choices))} (got {getattr(self, name)!r})"
                )
        for f in dataclasses.fields(self):
            if f.type in ("bool", bool) and not isinstance(getattr(self, f.name), bool):
                raise ValueError(f"Flags.{f.name} must be True or False (got {getattr(self, f.name)!r})")
        for name in _POSITIVE_INTS + _NON_NEGATIVE_INTS:
            value = getattr(self, name)
            low = 1 if name in _POSITIVE_INTS else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"Flags.{name} must be an integer >= {low} (got {value!r})")
        frac = self.hot_budget_fraction
        if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
            raise ValueError(f"Flags.hot_budget_fraction must be a number in (0, 1] (got {frac!r})")
        ratio = self.topk_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise ValueError(f"Flags.topk_ratio must be a number in (0, 1] (got {ratio!r})")
        fanout = self.fanout
        if isinstance(fanout, (list, tuple)):
            object.__setattr__(self, "fanout", tuple(fanout))
        if (
            not isinstance(fanout, (list, tuple))
            or not fanout
            or any(isinstance(k, bool) or not isinstance(k, int) or (k < 1 and k != -1) for k in fanout)
        ):
            raise ValueError(f"Flags.fanout must be a non-empty list of positive integers or -1 (got {fanout!r})")
        if self.prefetch_factor is not None and (
            isinstance(self.prefetch_factor, bool)
            or not isinstance(self.prefetch_factor, int)
            or self.prefetch_factor < 1
        ):
            raise ValueError(f"Flags.prefetch_factor must be None or an integer >= 1 (got {self.prefetch_factor!r})")
        if self.thread_placement == "split" and self.num_workers == 0:
            raise ValueError(
                "Flags.thread_placement='split' divides the cores between training and loader "
                "workers, so it needs num_workers > 0 (got num_workers=0)"
            )
        if self.num_workers == 0 and (self.prefetch_factor is not None or self.persistent_workers):
            raise ValueError(
                "Flags.prefetch_factor and persistent_workers need num_workers > 0 "
                f"(got num_workers=0, prefetch_factor={self.prefetch_factor!r}, "
                f"persistent_workers={self.persistent_workers!r})"
            )

    @classmethod
    def batch_key_fields(cls) -> tuple[str, ...]:
        """The fields whose values change the sampled batches (declared on each field), in field order:
        the flags part of the batch cache's key."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(_KEYS_BATCHES))

    @property
    def num_layers(self) -> int:
        """Model depth: one layer per sampling hop."""
        return len(self.fanout)

    def replace(self, **changes: Any) -> "Flags":
        """A copy with ``changes``; unknown field names raise, listing the valid ones."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"unknown Flags field(s) {unknown}; accepted: {sorted(names)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["fanout"] = list(self.fanout)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Flags":
        return cls().replace(**d)

    def changed(self) -> dict[str, Any]:
        """Fields that differ from the baseline ``Flags()``."""
        base = Flags().to_dict()
        return {k: v for k, v in self.to_dict().items() if base[k] != v}


@dataclass(frozen=True)
class Unavailable:
    """One reason a configuration cannot run here: the ``Flags`` field at fault and why.

    Each layer answers for its own fields (``unavailable(flags, ctx)`` in
    ``graphs.prepare``, ``sampling.sources``, ``features``, ``models`` and
    ``tasks``); :func:`gnnbench.training.availability.check` collects their answers and
    everything else reads that.
    """

    field: str  # the Flags field whose value cannot run here
    reason: str  # why, in words a user can act on


class UnavailableError(RuntimeError):
    """Raised when a configuration cannot run; ``reasons`` maps each offending field to why."""

    def __init__(self, items: Iterable[Unavailable]) -> None:
        self.items = tuple(items)
        self.reasons = {u.field: u.reason for u in self.items}
        super().__init__(format_reasons(self.reasons))


@dataclass(frozen=True)
class RunContext:
    """What availability depends on besides the flags: where and what the run trains.

    Args:
        device: The compute device.
        task: ``"node"`` or ``"link"``.
        model: Model name (``"gcn"``, ``"sage"``).
        num_nodes: Nodes of the graph, when known (index-overflow checks).
        num_edges: Directed edges of the graph, when known.
        world_size: Processes training together (``RunConfig.nproc``; 1 = one process).
    """

    device: torch.device = torch.device("cpu")
    task: str = "node"
    model: str = "gcn"
    num_nodes: int | None = None
    num_edges: int | None = None
    world_size: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", torch.device(self.device))
        if isinstance(self.world_size, bool) or not isinstance(self.world_size, int) or self.world_size < 1:
            raise ValueError(f"RunContext.world_size must be an integer >= 1 (got {self.world_size!r})")


def format_reasons(reasons: Mapping[str, str] | Iterable[Unavailable]) -> str:
    """``"field: reason; field: reason"``: the one way reasons are printed."""
    if isinstance(reasons, Mapping):
        items = reasons.items()
    else:
        items = ((u.field, u.reason) for u in reasons)
    return "; ".join(f"{k}: {v}" for k, v in items)
