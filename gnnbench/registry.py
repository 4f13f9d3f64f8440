"""The registry of optimizations: the one list that benchmarks, the CLI, the
report and the coverage tests iterate.

Each entry is data: the change it makes to :class:`~gnnbench.flags.Flags`, a
one-line description, the effect commonly reported for it, the devices it
needs and whether it is expected to cost accuracy. The code of an optimization
lives in the layer it changes, switched by its flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Union

import torch

from gnnbench.training import availability
from gnnbench.flags import Flags, RunContext, format_reasons

__all__ = ["Optimization", "REGISTRY", "get", "names", "flags_for", "for_task", "combination", "TASK_NAMES",
           "BOTTLENECKS"]

TASK_NAMES = ("node", "link")
# What an entry can relieve: the groups of phases ``gnnbench diagnose`` classifies a step by.
BOTTLENECKS = ("sampling", "negatives", "features", "kernels")


@dataclass(frozen=True)
class Optimization:
    """One named optimization.

    Args:
        name: Short name used on the command line and in reports.
        changes: What it changes, relative to the flags it is applied to: a
            mapping of :class:`Flags` fields to values (a switch), or a function
            of the base flags returning that mapping (a relative change, such as
            dropping the base fanout's last hop).
        description: One line saying what it does.
        expected_effect: The effect as commonly reported, with its figure.
        layer: The module whose code it switches.
        costs_accuracy: Whether it is expected to change accuracy.
        recommended: Whether it belongs in the "all recommended" combination.
        tasks: The tasks it applies to; the first is the one benchmarks and
            tests measure it on.
        changes_work: Whether it changes the work done per step (sampled
            neighbourhood, subgraph size), so a per-step ratio against the
            baseline compares different work.
        overlap: Whether its gain is overlap (asynchronous copies, side
            streams): it is then timed end to end, against an end-to-end
            baseline, since per-phase synchronization would serialize it.
        targets: The bottlenecks (:data:`BOTTLENECKS`) it relieves; ``diagnose``
            recommends it when one of them dominates the step.
        ops: Profiler operator names (``torch.profiler``'s ``aten::...``) whose
            time it removes or shrinks; ``diagnose`` ranks kernel entries by the
            share of the step those operators take.
        nproc: The world size it is measured with (``RunConfig.nproc``; 1 = one
            process). Entries of several ranks run through
            :mod:`gnnbench.measure.launch`; with fewer ranks they say why.
    """

    name: str
    changes: Union[Mapping[str, Any], Callable[[Flags], Mapping[str, Any]]]
    description: str
    expected_effect: str
    layer: str
    costs_accuracy: bool = False
    recommended: bool = True
    tasks: tuple[str, ...] = TASK_NAMES
    changes_work: bool = False
    overlap: bool = False
    targets: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    nproc: int = 1

    def __post_init__(self) -> None:
        self.apply(Flags())  # validates field names and values early
        if not self.tasks or set(self.tasks) - set(TASK_NAMES):
            raise ValueError(f"Optimization.tasks must be a non-empty subset of {TASK_NAMES} (got {self.tasks!r})")
        if set(self.targets) - set(BOTTLENECKS):
            raise ValueError(f"Optimization.targets must be a subset of {BOTTLENECKS} (got {self.targets!r})")
        if isinstance(self.nproc, bool) or not isinstance(self.nproc, int) or self.nproc < 1:
            raise ValueError(f"Optimization.nproc must be an integer >= 1 (got {self.nproc!r})")


    def changes_for(self, base: Flags) -> dict[str, Any]:
        """The field values this optimization sets on ``base``."""
        return dict(self.changes(base) if callable(self.changes) else self.changes)

    def apply(self, flags: Flags) -> Flags:
        """``flags`` with this optimization switched on (relative entries read ``flags``)."""
        return flags.replace(**self.changes_for(flags))

    @property
    def task(self) -> str:
        """The task it is measured on (the first of :attr:`tasks`)."""
        return self.tasks[0]

    def unavailable(self, device: torch.device | str, world_size: int | None = None) -> str | None:
        """Why this optimization cannot run on ``device`` (on its own task) with ``world_size`` ranks
        (default: its own :attr:`nproc`), or ``None`` if it can.

        The answer comes from the layers that own the fields
        (:func:`gnnbench.training.availability.check`), so the registry, the trainer
        and every suite get the same one.
        """
        ctx = RunContext(device=device, task=self.task, world_size=self.nproc if world_size is None else world_size)
        reasons = availability.reasons(self.apply(Flags()), ctx)
        return format_reasons(reasons) if reasons else None

    @property
    def requires(self) -> tuple[str, ...]:
        """Device types it needs: ``("cuda",)`` when it cannot run on a CPU but can on CUDA, else empty."""
        return ("cuda",) if self.unavailable("cpu") and not self.unavailable("cuda") else ()


def _drop_last_hop(fanout: tuple[int, ...]) -> tuple[int, ...]:
    if len(fanout) < 2:
        raise ValueError(f"the fanout optimization drops the last hop, and the base fanout {list(fanout)} has only "
                         "one; give a base fanout of at least two hops (e.g. --fanout 15,10)")
    return tuple(fanout[:-1])


_ENTRIES = (
    Optimization(
        name="int32",
        changes={"index_dtype": "int32"},
        description="Store edge indices and CSR offsets as int32, after checking the largest id fits.",
        expected_effect="Index storage halves (2x fewer bytes, exact), and the sampler emits int32 node, edge "
        "and CSR ids. The CSR product takes int32 natively (on this CPU, MKL: 2x forward, 3x forward + "
        "backward per aggregation), so it pays with sparse_agg. ATen's CPU index_add_ is serial for int32, so "
        "the scatter path on CPU widens once per batch (counted in widened_index_bytes_per_step): there "
        "int32 saves memory, not time. On CUDA index_select / index_add_ take int32 as is.",
        layer="gnnbench.graphs.prepare",
        targets=('kernels',),
    ),
    Optimization(
        name="cached_norm",
        changes={"cached_norm": True},
        description="GCN normalization computed once and reused: per graph with full-batch training, per batch "
        "(shared by all layers) on sampled batches; exact either way (zero-degree safe).",
        expected_effect="With full-batch training exactly PyG's GCNConv(cached=True): the degree scatter and "
        "weight gathers over E leave every step. On sampled batches PyG's cached=True is not valid (the "
        "subgraph changes), so this normalizes each batch once instead of once per layer: (L-1)/L of that work.",
        layer="gnnbench.models.aggregation",
        targets=('kernels',),
    ),
    Optimization(
        name="csr",
        changes={"keep_csr": True},
        description="Keep CSR beside COO, and have the sampler emit each batch's CSR over its targets (its draws are "
        "laid out grouped by target), so sparse aggregation never sorts or builds offsets in the step.",
        expected_effect="With sparse_agg: one GCN aggregation of a sampled small batch (69k nodes, 241k edges, "
        "F=64) takes 7.0 ms with the sampler's CSR against 10.2 ms with the per-batch build (within 1.03x of "
        "a prebuilt CSR product; `gnnbench aggregation-compare`), and the backward's A^T is built once per "
        "batch instead of once per layer. No effect on the scatter path; memory: N+1 offsets (CSR's column "
        "array is COO's source row).",
        layer="gnnbench.graphs.prepare",
        targets=('kernels',),
        ops=('aten::sort', 'aten::argsort', 'aten::_to_sparse_csr', 'aten::_convert_indices_from_coo_to_csr'),
    ),
    Optimization(
        name="fanout",
        changes=lambda base: {"fanout": _drop_last_hop(base.fanout)},
        description="Drop the base fanout's last hop (default [15, 10, 5] -> [15, 10]; the model loses a layer).",
        expected_effect="The sampled neighbourhood shrinks up to 5x (the last hop's fanout), and with it "
        "sampling, gather and compute; accuracy may drop where 3-hop context matters.",
        layer="gnnbench.sampling.neighbor",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=('sampling', 'features', 'kernels'),
    ),
    Optimization(
        name="workers",
        changes=lambda base: {"num_workers": max(base.num_workers, 2)},
        description="Sample in (at least) 2 DataLoader worker processes, overlapping sampling with training.",
        expected_effect="Hides sampling time behind compute when sampling is the bottleneck; bounded by "
        "the cores left to the training process (2 workers can hide at most 2 cores of sampling).",
        layer="gnnbench.sampling.loaders",
        targets=('sampling',),
    ),
    Optimization(
        name="persistent_workers",
        changes=lambda base: {"num_workers": max(base.num_workers, 2), "persistent_workers": True},
        description="Keep (at least) 2 loader workers alive across epochs instead of re-forking them.",
        expected_effect="Saves the worker start-up (process fork plus sampler copy) at every epoch; "
        "matters most for short epochs.",
        layer="gnnbench.sampling.loaders",
        targets=('sampling',),
    ),
    Optimization(
        name="prefetch",
        changes=lambda base: {"num_workers": max(base.num_workers, 2),
                              "prefetch_factor": max(base.prefetch_factor or 2, 4)},
        description="Let each of (at least) 2 loader workers prepare 4 batches ahead (PyTorch's default is 2).",
        expected_effect="Absorbs jitter in sampling time; no gain when sampling is slower than compute on average.",
        layer="gnnbench.sampling.loaders",
        targets=('sampling',),
    ),
    Optimization(
        name="pin_memory",
        changes={"pin_memory": True},
        description="Pin loader output and gathered features in page-locked memory for async copies.",
        expected_effect="Host-to-device copies run at full PCIe/NVLink bandwidth and overlap with compute "
        "(pageable copies are staged and synchronous).",
        layer="gnnbench.features.placement",
        overlap=True,
        targets=('features',),
    ),
    Optimization(
        name="batch_cache",
        changes={"batch_cache_epochs": 5},
        description="Write sampled batches to disk and replay them for 5 epochs before resampling.",
        expected_effect="Removes sampling from 4 of every 5 epochs (replaced by reading the batches); "
        "less sampling diversity can cost some accuracy. Here each run starts from an empty cache of its own "
        "and lasts at least 6 epochs (sampled in epoch 0, replayed in 1-4, resampled in 5); --cache-dir "
        "shares batches across runs, keyed by graph contents, sampling flags, seed and code version.",
        layer="gnnbench.sampling.cache",
        costs_accuracy=True,
        recommended=False,
        targets=('sampling',),
    ),
    Optimization(
        name="cluster_gcn",
        changes={"batch_source": "cluster_gcn"},
        description="Cluster-GCN: batches are unions of METIS parts (~3,000 nodes each) with their edges.",
        expected_effect="No neighbourhood explosion: each batch is a dense subgraph, so memory and time per "
        "batch stay flat with depth (Chiang et al. 2019); dropped inter-cluster edges can cost accuracy.",
        layer="gnnbench.sampling.subgraph",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=('sampling', 'features'),
    ),
    Optimization(
        name="graphsaint",
        changes={"batch_source": "saint_rw"},
        description="GraphSAINT random-walk subgraphs (2,000 roots, walk length 2) with its normalization.",
        expected_effect="Subgraph batches with bias-corrected loss and aggregation (Zeng et al. 2020); cost "
        "per batch independent of depth; sampling variance can cost accuracy.",
        layer="gnnbench.sampling.subgraph",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=('sampling', 'features'),
    ),
    Optimization(
        name="full_batch",
        changes={"batch_source": "full"},
        description="Full-batch training: every epoch is one step on the whole graph (no sampling).",
        expected_effect="The field report's small/medium-graph case: no sampling or gather per step, so the "
        "step is all kernels; one optimizer step per epoch, so more epochs to the same accuracy.",
        layer="gnnbench.sampling.sources",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=('sampling', 'features'),
    ),
    Optimization(
        name="features_on_device",
        changes={"feature_placement": "device"},
        description="Keep all node features resident on the GPU; gather there.",
        expected_effect="Removes per-batch host-to-device feature traffic entirely, at the cost of N x F "
        "device memory.",
        layer="gnnbench.features.placement",
        targets=('features',),
    ),
    Optimization(
        name="hot_cold",
        recommended=False,  # an alternative placement to features_on_device
        changes={"feature_placement": "hot_cold"},
        description="The most-read feature rows on the GPU (25% of rows, ranked by access over one profiled "
        "epoch), the rest in pinned host memory.",
        expected_effect="Only cold rows cross the bus, with device memory limited to the hot rows (--hot-budget). "
        "The share of gathered rows served from the GPU is each result's transfer.hot_hit_rate; on small "
        "([15,10,5], batch 1024) 20% of rows ranked by access serve 28% of gathered rows (the training nodes: "
        "20%), 25% of rows serve 34%.",
        layer="gnnbench.features.placement",
        targets=('features',),
    ),
    Optimization(
        name="uva",
        recommended=False,  # an alternative placement to features_on_device
        changes={"feature_placement": "uva"},
        description="Features in pinned host memory read by GPU kernels directly (zero-copy, UVA).",
        expected_effect="Only the gathered rows cross the bus, with no staging copy and no device memory "
        "for features; commonly much faster than gather-on-host then copy for large feature tables.",
        layer="gnnbench.features.placement",
        targets=('features',),
    ),
    Optimization(
        name="feature_prefetch",
        changes={"feature_prefetch": True},
        description="Gather and copy the next batch's features on a side CUDA stream during compute.",
        expected_effect="Overlaps the feature transfer with forward/backward; at best hides it completely.",
        layer="gnnbench.features.placement",
        overlap=True,
        targets=('features',),
    ),
    Optimization(
        name="sparse_agg",
        changes={"aggregation": "sparse"},
        description="Aggregate with one CSR sparse-matrix product instead of gathering messages per edge "
        "and scatter-adding them.",
        expected_effect="No E x F message tensor is materialized: one GCN aggregation of a sampled small batch "
        "takes 10.2 ms (CSR built per batch inside the timing) against 43.5 ms for gather + scatter-add, 4.3x "
        "(`gnnbench aggregation-compare`, 2 threads). Per step on small about 1.3x: dropout and the dense "
        "transforms are the rest of the step.",
        layer="gnnbench.models.aggregation",
        targets=('kernels',),
        ops=('aten::index_select', 'aten::index_add_', 'aten::index_add', 'aten::scatter_add_'),
    ),
    Optimization(
        name="norm_estimator",
        changes={"norm_estimator": True},
        description="Sampled batches use full-graph GCN weights rescaled by deg/sampled per target instead of "
        "normalizing each batch subgraph (the estimator GraphSAINT batches use).",
        expected_effect="Skips the per-batch degree computation but trains a different model: an unbiased "
        "estimate of the full-neighbourhood sum with its own variance; may cost accuracy.",
        layer="gnnbench.models.aggregation",
        costs_accuracy=True,
        recommended=False,
        targets=('kernels',),
    ),
    Optimization(
        name="partial_amp",
        changes={"precision": "partial"},
        description="Linear layers in low precision (fp16 on CUDA, bf16 on CPU); aggregation kept in fp32.",
        expected_effect="Tensor-core/AMX speed for the dense transforms with fp32 sums over neighbours; accuracy "
        "normally unchanged. On this 2-core CPU it does not pay (0.94-0.97x on small): bf16 makes the linear "
        "layers' mm about 2.8x faster, but they are only 8-9% of a GNN step here (dropout's bernoulli_ is "
        "40%, gather/scatter 27%), and the casts around them cost about as much as the mm saves.",
        layer="gnnbench.models.precision",
        targets=('kernels',),
        ops=('aten::mm', 'aten::addmm'),
    ),
    Optimization(
        name="full_amp",
        changes={"precision": "full"},
        description="Whole model in low precision, aggregation included (fp16 on CUDA, bf16 on CPU).",
        expected_effect="Also halves aggregation traffic, but sums over high-degree neighbourhoods lose "
        "precision: may cost accuracy on power-law graphs.",
        layer="gnnbench.models.precision",
        costs_accuracy=True,
        recommended=False,
        targets=('kernels',),
        ops=('aten::mm', 'aten::addmm', 'aten::index_select', 'aten::index_add_', 'aten::index_add', 'aten::scatter_add_'),
    ),
    Optimization(
        name="fast_dropout",
        changes={"dropout_kernel": "uniform"},
        description="Draw the dropout mask as one vectorized uniform sample compared with p (rand >= p) instead "
        "of F.dropout's bernoulli_.",
        expected_effect="Found by profiling the CPU step: ATen's CPU bernoulli_(p) draws element by element "
        "(42 ms for a 69k x 64 batch here, 5x the uniform draw's 9 ms), and dropout was about 40% of the "
        "baseline GCN step on small. Same keep-mask distribution (not the same bits), so accuracy is "
        "unchanged in distribution; on CUDA the fused dropout is already vectorized.",
        layer="gnnbench.models.nets",
        targets=('kernels',),
        ops=('aten::bernoulli_',),
    ),
    Optimization(
        name="compile",
        changes={"compile": True},
        description="torch.compile the model with dynamic shapes (compile time reported apart).",
        expected_effect="Fuses elementwise work around the sparse ops; gains vary (often 1.1-1.5x on GPU, "
        "small on CPU) and first steps pay the compile time.",
        layer="gnnbench.models.nets",
        targets=('kernels',),
        ops=('aten::add', 'aten::add_', 'aten::relu', 'aten::threshold_backward', 'aten::div_', 'aten::clamp_min'),
    ),
    Optimization(
        name="degree_negatives",
        changes={"negative_mode": "degree"},
        description="Link prediction: negatives drawn proportional to degree^0.75 instead of uniformly.",
        expected_effect="Harder negatives (hubs appear as often as in positives), which usually improves "
        "ranking metrics such as MRR/Hits@K at equal cost per negative.",
        layer="gnnbench.sampling.negative",
        costs_accuracy=True,
        recommended=False,
        tasks=("link",),
        targets=('negatives',),
    ),
    Optimization(
        name="unchecked_negatives",
        changes={"negative_strict": False},
        description="Link prediction: keep every drawn negative instead of rejecting those that are training "
        "edges (PyG's own negative sampling only avoids self loops).",
        expected_effect="Rejection is a binary search of every candidate in the sorted edge keys: drawing "
        "negatives costs about 10x less without it (0.019 against 0.184 ms per 1k uniform negatives on "
        "small, `gnnbench pipeline`). A share of negatives about the graph's density are true edges "
        "labelled 0, which may cost a little accuracy.",
        layer="gnnbench.sampling.negative",
        costs_accuracy=True,
        recommended=False,
        tasks=("link",),
        targets=('negatives',),
    ),
)

_ENTRIES += (
    Optimization(
        name="data_parallel",
        changes={"parallel": "data"},
        description="Data-parallel training on --nproc ranks (torchrun; gloo on CPU, NCCL on CUDA): graph and "
        "features replicated, each global batch's seeds split across ranks, gradients all-reduced by DDP.",
        expected_effect="Per-rank work is batch_size / N, so the step shrinks up to N-fold when ranks have their "
        "own cores or GPUs (DistributedDataParallel overlaps the all-reduce with backward); the figure is "
        "scaling efficiency T1 / (N x TN) against one process on the same global batch. On this 2-core CPU "
        "two ranks share the cores: on small (`OMP_NUM_THREADS=1 gnnbench compare --preset small --nproc 2 "
        "--epochs 2 --repeats 2`, one thread per process, a loaded machine) efficiency 0.50 [0.32, 0.76], the "
        "all-reduce 2-4% of the step (8,970 parameters: 35,880 bytes per step). Same global batch, same "
        "update up to float summation order.",
        layer="gnnbench.parallel.data_parallel",
        recommended=False,
        tasks=("node",),
        targets=("sampling", "features", "kernels"),
        nproc=2,
    ),
    Optimization(
        name="topk_compression",
        changes={"parallel": "data", "grad_compression": "topk"},
        description="Data parallel with top-k gradient sparsification and error feedback (DDP comm hook): "
        "each rank sends the 1% largest-magnitude entries of each parameter (values + int32 indices, "
        "all-gathered) and keeps the rest as a residual for the next step; with --optimizer sgd the hook "
        "applies DGC's momentum correction and momentum factor masking.",
        expected_effect="Deep Gradient Compression (Lin et al. 2018) reports 270-600x smaller gradients without "
        "accuracy loss with SGD momentum (momentum correction and masking, here; warm-up and local clipping, "
        "not here); this sends 2% of the dense bytes (8 bytes per entry sent). The field report: compression "
        "pays only above ~40% communication share. Measured on small with SGD (`gnnbench compare --preset "
        "small --nproc 2 --optimizer sgd --lr 0.05 --lr-schedule cosine --fanout 10,5 --batch-size 256 "
        "--epochs 30 --flags data_parallel,topk_compression,fp16_compression,powersgd`, 5 paired rounds): 400 "
        "bytes a step against 18.8 KiB (2.1%), test accuracy 81.1% against 79.7% for dense data parallel, "
        "+1.4 pp [+0.5, +2.3]. It needs many steps: each entry is sent about once per 100 steps, so at 2 "
        "epochs (40 steps) it falls far behind; and with Adam (the default optimizer) it fell 28 pp behind even "
        "at 6 epochs (59.9% against 87.6%): Adam normalizes each coordinate's step, so residuals sent late do "
        "not make up the movement (such runs warn).",
        layer="gnnbench.parallel.compression",
        costs_accuracy=True,
        recommended=False,
        tasks=("node",),
        targets=("kernels",),  # the all-reduce runs inside backward, in diagnose's kernels group
        nproc=2,
    ),
    Optimization(
        name="fp16_compression",
        changes={"parallel": "data", "grad_compression": "fp16"},
        description="Data parallel with gradients cast to fp16 for the all-reduce (PyTorch's "
        "default_hooks.fp16_compress_hook), then back to fp32.",
        expected_effect="Half the bytes on the wire (2x compression), normally without accuracy change; pays "
        "only when the all-reduce is a large share of the step (field report: above ~40%). Measured on small "
        "(2 epochs, seeds 0 / 1): 17,940 bytes a step against 35,880, test accuracy 84.48 / 80.18% against "
        "84.47 / 80.10% with dense data parallel (within 0.1 pp); with SGD over 30 epochs (the topk_compression "
        "command, 5 paired rounds) +0.01 pp [-0.03, +0.06] against dense data parallel.",
        layer="gnnbench.parallel.compression",
        recommended=False,
        tasks=("node",),
        targets=("kernels",),  # the all-reduce runs inside backward, in diagnose's kernels group
        nproc=2,
    ),
    Optimization(
        name="powersgd",
        changes={"parallel": "data", "grad_compression": "powersgd"},
        description="Data parallel with PowerSGD low-rank gradient compression (PyTorch's powerSGD_hook, rank "
        "2, error feedback and warm start, vanilla all-reduce for the first 2 steps).",
        expected_effect="Vogels et al. 2019 report 100x+ compression at rank 1-4 on CNNs with test accuracy "
        "matched; here only the weight matrices compress ((a + b) r instead of a b entries), biases go "
        "dense. Pays only at a high communication share (field report: above ~40%). Measured on small (2 "
        "epochs, seeds 0 and 1): 3,192 bytes a step against 35,880 (8.9%) after the 2 vanilla steps, test "
        "accuracy 81.3 / 74.5% against 84.5 / 80.1% with dense data parallel (-3 / -6 pp in 40 steps); with SGD "
        "over 30 epochs (the topk_compression command, 5 paired rounds): 9.9% of the dense bytes, -0.05 pp "
        "[-0.12, +0.02] against dense data parallel.",
        layer="gnnbench.parallel.compression",
        costs_accuracy=True,
        recommended=False,
        tasks=("node",),
        targets=("kernels",),  # the all-reduce runs inside backward, in diagnose's kernels group
        nproc=2,
    ),
    Optimization(
        name="partition_metis",
        changes={"parallel": "partition", "batch_source": "full"},
        description="Partition-parallel full-graph training: each rank owns one METIS part (its nodes, their "
        "features and in-edges) and exchanges halo rows with the others at every layer (all_to_all), forward "
        "and backward; gradients are summed in one all-reduce.",
        expected_effect="The same computation as full-batch training on one process (tested to float "
        "tolerance), split across ranks: each rank aggregates its part's edges and holds its part's features "
        "plus its halo. Halo traffic per layer grows with the edge cut, which METIS keeps low (24.5% of edges "
        "on medium with 2 parts, at 27 s of partitioning on this CPU, counted in setup).",
        layer="gnnbench.parallel.partition_parallel",
        recommended=False,
        tasks=("node",),
        changes_work=True,
        targets=("features",),
        nproc=2,
    ),
    Optimization(
        name="partition_degree",
        changes={"parallel": "partition", "partitioner": "degree", "batch_source": "full"},
        description="Partition-parallel full-graph training with degree-bucket parts (nodes dealt round-robin "
        "by decreasing degree) instead of METIS.",
        expected_effect="Partitions in a fraction of a second (0.75 s on medium against METIS's 27 s) and "
        "balances edges across ranks, at about twice METIS's edge cut (50% with 2 parts on medium), so about "
        "twice the halo rows per layer.",
        layer="gnnbench.parallel.partition_parallel",
        recommended=False,
        tasks=("node",),
        changes_work=True,
        targets=("features",),
        nproc=2,
    ),
)

REGISTRY: Mapping[str, Optimization] = MappingProxyType({opt.name: opt for opt in _ENTRIES})


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Optimization:
    """Look up an optimization by name; unknown names list the valid ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown optimization {name!r}; accepted: {', '.join(REGISTRY)}") from None


def combination(label: str) -> tuple[str, ...]:
    """The entries of a sweep label: ``"sparse_agg"`` or a combination measured as one configuration,
    ``"csr+sparse_agg"``; each part must be registered."""
    parts = tuple(p.strip() for p in label.split("+"))
    if not all(parts):
        raise ValueError(f"a combination is entry names joined by '+', e.g. 'csr+sparse_agg' (got {label!r})")
    if len(set(parts)) != len(parts):
        raise ValueError(f"a combination names each entry once (got {label!r})")
    for name in parts:
        get(name)
    return parts


def flags_for(opt_names: Iterable[str], base: Flags = Flags()) -> Flags:
    """``base`` with each named optimization (or ``a+b`` combination) switched on, in order."""
    flags = base
    for name in opt_names:
        for part in combination(name):
            flags = get(part).apply(flags)
    return flags


def for_task(task: str) -> list[Optimization]:
    """The entries that apply to ``task``."""
    return [opt for opt in REGISTRY.values() if task in opt.tasks]
