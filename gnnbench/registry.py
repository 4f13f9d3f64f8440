"""The registry of optimizations: the one list that benchmarks, the CLI, the
report and the coverage tests iterate.

Each entry is data: the change it makes to :class:`~gnnbench.flags.Flags`, a
one-line description, the effect commonly reported for it, the devices it
needs and whether it is expected to cost accuracy. The code of an optimization
lives in the layer it changes, switched by its flag.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Union

import torch

from gnnbench.flags import Flags, RunContext, format_reasons
from gnnbench.process.sharing import own_process_reasons, times_in_duet
from gnnbench.timing import CODE_PATHS
from gnnbench.training import availability
from gnnbench.training.config import RunConfig

__all__ = [
    "Optimization",
    "REGISTRY",
    "get",
    "names",
    "flags_for",
    "for_task",
    "combination",
    "TASK_NAMES",
    "BOTTLENECKS",
    "NotApplicable",
    "config_for",
    "not_applicable",
]

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
        expected_effect: One or two sentences of the effect as commonly reported
            elsewhere (a paper, the PyG / DGL / PyTorch docs), naming that source.
            Never a figure this project measured: those reach readers through
            result files and the report.
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
        paths: The code paths (:data:`~gnnbench.timing.CODE_PATHS`, marked as
            ``gnnbench.path:<name>`` profiler ranges) it removes or changes; the
            operator profile credits it with every operator's time in them (an
            operator's backward counts in the path its forward ran in), and
            ``diagnose`` ranks entries by that share.
        ops: Profiler operator names (``torch.profiler``'s ``aten::...``) whose
            time it removes or shrinks where no marked code path issued them (a
            watched user's own model, say), in the phases of its targets: the
            fallback for code gnnbench did not mark.
        nproc: The world size it is measured with (``RunConfig.nproc``; 1 = one
            process). Entries of several ranks run through
            :mod:`gnnbench.measure.run.launch`; with fewer ranks they say why.
        oom_rung: Its place on the out-of-memory ladder after halving the fanout
            and the batch (:mod:`gnnbench.advice.ladder`; 1 = first), or ``None``.
        oom_hint: The ladder's triage when this rung costs accuracy.
        same_trajectory: Whether it leaves the training trajectory unchanged: the same batches and the same
            updates up to floating-point reassociation. Declared only where a test proves it
            (``tests/training/test_same_trajectory.py`` trains the baseline and the entry on one seed and requires their
            validation curves and losses to agree within a stated tolerance); ``compare`` then derives its time
            to accuracy from its time per step and the baseline's calibrated steps to the target instead of
            training it to the target (:mod:`gnnbench.measure.compare.derived`).
        shares_process: Whether its time per step can be measured in one process beside the baseline's, steps
            interleaved, so the drift of a process's speed cancels in their ratio (DESIGN.md §3). Decided by what
            it does to the process, and checked against :data:`gnnbench.process.sharing.SHARING_RULES` when the
            entry is made: loader worker processes are suspended while the baseline steps (whole epochs
            measured); a background thread (the pipelined loader, a side stream) would work while the baseline
            steps, and an entry that sets the process (allocator, threads) or runs several ranks cannot share
            it; those are timed in processes of their own.
        duet: Whether, needing a process of its own, its time per step is timed in duet: its process and the
            baseline's at the same moment, each on a core of its own at one thread (DESIGN.md §3). Decided like
            ``shares_process`` (:func:`gnnbench.process.sharing.times_in_duet`) and checked against the same
            table: the allocator entries qualify; thread placement, background threads and ranks do not.
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
    paths: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    nproc: int = 1
    oom_rung: int | None = None
    oom_hint: str = ""
    same_trajectory: bool = False
    shares_process: bool = True
    duet: bool = False

    def __post_init__(self) -> None:
        self.apply(Flags())  # validates field names and values early
        if not self.tasks or set(self.tasks) - set(TASK_NAMES):
            raise ValueError(f"Optimization.tasks must be a non-empty subset of {TASK_NAMES} (got {self.tasks!r})")
        if set(self.targets) - set(BOTTLENECKS):
            raise ValueError(f"Optimization.targets must be a subset of {BOTTLENECKS} (got {self.targets!r})")
        if set(self.paths) - set(CODE_PATHS):
            raise ValueError(
                f"Optimization.paths must name code paths of gnnbench.timing.CODE_PATHS "
                f"({', '.join(CODE_PATHS)}) (got {self.paths!r})"
            )
        if isinstance(self.nproc, bool) or not isinstance(self.nproc, int) or self.nproc < 1:
            raise ValueError(f"Optimization.nproc must be an integer >= 1 (got {self.nproc!r})")
        reasons = own_process_reasons(self.apply(Flags()))
        if self.shares_process == bool(reasons) or (self.shares_process and self.nproc > 1):
            raise ValueError(
                f"{self.name}: shares_process={self.shares_process} but what it does to the process says "
                f"{'it needs its own: ' + '; '.join(reasons) if reasons else 'it can share one'} "
                "(gnnbench.process.sharing.SHARING_RULES)"
            )
        in_duet = times_in_duet(self.apply(Flags())) and self.nproc == 1
        if self.duet != in_duet:
            raise ValueError(
                f"{self.name}: duet={self.duet} but what it does to the process says "
                f"{'a duet carries it' if in_duet else 'a duet cannot time it'} "
                "(gnnbench.process.sharing.SHARING_RULES, duet)"
            )
        if self.same_trajectory and (self.costs_accuracy or self.changes_work):
            raise ValueError(
                f"{self.name}: an entry that may cost accuracy or changes the work per step cannot "
                "leave the training trajectory unchanged (same_trajectory=True)"
            )

    def changes_for(self, base: Flags) -> dict[str, Any]:
        """The field values this optimization sets on ``base``."""
        return dict(self.changes(base) if callable(self.changes) else self.changes)

    def apply(self, flags: Flags) -> Flags:
        """``flags`` with this optimization switched on (relative entries read ``flags``).

        Raises:
            NotApplicable: when the change cannot apply to ``flags`` (its message names this entry).
        """
        try:
            return flags.replace(**self.changes_for(flags))
        except NotApplicable as exc:
            raise NotApplicable(f"{self.name} does not apply here: {exc}") from None

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


class NotApplicable(ValueError):
    """An optimization that cannot apply to a configuration: its change needs something the configuration does
    not have (the message says what). Everything that iterates the registry lists such an entry as not
    applicable, with the reason, and goes on with the others."""


def _drop_last_hop(fanout: tuple[int, ...]) -> tuple[int, ...]:
    if len(fanout) < 2:
        raise NotApplicable(f"it drops the fanout's last hop, and the fanout {list(fanout)} has only one")
    return tuple(fanout[:-1])


_ENTRIES = (
    Optimization(
        name="int32",
        same_trajectory=True,
        changes={"index_dtype": "int32"},
        description="Store edge indices and CSR offsets as int32, after checking the largest id fits.",
        expected_effect="Half the index bytes, exact while ids fit in 2^31: the choice DGL exposes as a graph's "
        "idtype (DGL docs: DGLGraph.int). On CPU the scatter path here widens indices once per batch, so time is "
        "saved only with sparse_agg.",
        layer="gnnbench.graphs.prepare",
        targets=("kernels",),
    ),
    Optimization(
        name="cached_norm",
        same_trajectory=True,
        changes={"cached_norm": True},
        description="GCN normalization computed once and reused: per graph with full-batch training, per batch "
        "(shared by all layers) on sampled batches; exact either way (zero-degree safe).",
        expected_effect="Exactly PyG's GCNConv(cached=True) with full-batch training, which PyG reserves for "
        "transductive full-graph use (PyG docs: GCNConv); on sampled batches it normalizes once per batch instead "
        "of once per layer.",
        layer="gnnbench.models.aggregation",
        targets=("kernels",),
        paths=("norm.build",),
    ),
    Optimization(
        name="csr",
        same_trajectory=True,
        changes={"keep_csr": True},
        description="Keep CSR beside COO, and have the sampler emit each batch's CSR over its targets (its draws are "
        "laid out grouped by target), so sparse aggregation never sorts or builds offsets in the step.",
        expected_effect="Builds the sparse layout once, as PyG's ToSparseTensor transform does, so no aggregation "
        "sorts edges or builds offsets (PyG docs: Memory-Efficient Aggregations); it matters only with sparse_agg.",
        layer="gnnbench.graphs.prepare",
        targets=("kernels",),
        paths=("aggregate.csr_build", "aggregate.spmm_converting"),
        ops=("aten::sort", "aten::argsort", "aten::_to_sparse_csr", "aten::_convert_indices_from_coo_to_csr"),
    ),
    Optimization(
        name="fanout",
        changes=lambda base: {"fanout": _drop_last_hop(base.fanout)},
        description="Drop the base fanout's last hop (default [15, 10, 5] -> [15, 10]; the model loses a layer).",
        expected_effect="The sampled neighbourhood grows with the product of the fanouts, so dropping the last hop "
        "cuts sampling, gather and compute by up to its fanout; GraphSAGE found hops beyond two add little "
        "accuracy at 10-100x the runtime (Hamilton et al., NeurIPS 2017).",
        layer="gnnbench.sampling.neighbor",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=("sampling", "features", "kernels"),
        paths=("sample",),
    ),
    Optimization(
        name="labor",
        changes={"sampler": "labor"},
        description="LABOR-0 sampling: one random variate per source vertex shared by every target of the batch, "
        "each edge kept with probability min(1, fanout / degree), so overlapping neighbourhoods pick the same "
        "vertices (the base fanout is the per-hop budget).",
        expected_effect="Layer-neighbour sampling samples up to 7x fewer vertices than neighbour sampling at the "
        "same fanout with equal quality (Balin and Catalyurek, NeurIPS 2023; DGL GraphBolt's labor sampler), so "
        "gather and compute shrink with the sampled neighbourhood.",
        layer="gnnbench.sampling.labor",
        costs_accuracy=True,
        recommended=False,
        tasks=("node",),
        changes_work=True,
        targets=("sampling", "features", "kernels"),
        paths=("sample",),
    ),
    Optimization(
        name="workers",
        same_trajectory=True,
        changes=lambda base: {"num_workers": max(base.num_workers, 2)},
        description="Sample in (at least) 2 DataLoader worker processes, overlapping sampling with training.",
        expected_effect="Overlaps sampling with training when sampling is the bottleneck and spare cores exist "
        "(PyTorch docs: torch.utils.data, multi-process data loading).",
        layer="gnnbench.sampling.loaders",
        targets=("sampling",),
        paths=("sample",),
    ),
    Optimization(
        name="persistent_workers",
        same_trajectory=True,
        changes=lambda base: {"num_workers": max(base.num_workers, 2), "persistent_workers": True},
        description="Keep (at least) 2 loader workers alive across epochs instead of re-forking them.",
        expected_effect="Saves re-creating the worker processes at every epoch, which matters most for short "
        "epochs (PyTorch docs: DataLoader persistent_workers).",
        layer="gnnbench.sampling.loaders",
        targets=("sampling",),
    ),
    Optimization(
        name="prefetch",
        same_trajectory=True,
        changes=lambda base: {
            "num_workers": max(base.num_workers, 2),
            "prefetch_factor": max(base.prefetch_factor or 2, 4),
        },
        description="Let each of (at least) 2 loader workers prepare 4 batches ahead (PyTorch's default is 2).",
        expected_effect="Absorbs jitter in sampling time, but cannot help when sampling is slower than compute on "
        "average (PyTorch docs: DataLoader prefetch_factor).",
        layer="gnnbench.sampling.loaders",
        targets=("sampling",),
    ),
    Optimization(
        name="pin_memory",
        same_trajectory=True,
        changes={"pin_memory": True},
        description="Pin loader output and gathered features in page-locked memory for async copies.",
        expected_effect="Copies from pinned memory are much faster than from pageable memory and can overlap "
        "compute with non_blocking=True (PyTorch docs: CUDA semantics, pinned memory buffers).",
        layer="gnnbench.features.stores",
        overlap=True,
        targets=("features",),
        paths=("gather",),
    ),
    Optimization(
        name="batch_cache",
        shares_process=False,
        changes={"batch_cache_epochs": 5},
        description="Write sampled batches to disk and replay them for 5 epochs before resampling.",
        expected_effect="Samples once per K epochs; recycling sampled subgraphs is reported to keep the "
        "convergence of resampling at a fraction of its sampling cost (LazyGCN, Ramezani et al., NeurIPS 2020), "
        "though less sampling diversity can cost some accuracy.",
        layer="gnnbench.sampling.cache",
        costs_accuracy=True,
        recommended=False,
        targets=("sampling",),
        paths=("sample",),
    ),
    Optimization(
        name="cluster_gcn",
        changes={"batch_source": "cluster_gcn"},
        description="Cluster-GCN: batches are unions of METIS parts (~3,000 nodes each) with their edges.",
        expected_effect="Memory and time per batch stay flat with depth instead of growing exponentially "
        "(Cluster-GCN, Chiang et al., KDD 2019); dropped inter-cluster edges can cost accuracy.",
        layer="gnnbench.sampling.subgraph",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=("sampling", "features"),
        paths=("sample",),
        oom_rung=2,
        oom_hint="bigger or overlapping subgraphs: raise clusters_per_batch or cluster_size, or re-partition "
        "(repartition_every) so batches mix across epochs",
    ),
    Optimization(
        name="graphsaint",
        changes={"batch_source": "saint_rw"},
        description="GraphSAINT random-walk subgraphs (2,000 roots, walk length 2) with its normalization.",
        expected_effect="Bias-corrected subgraph batches whose cost does not grow with depth (GraphSAINT, Zeng et "
        "al., ICLR 2020); sampling variance can cost accuracy.",
        layer="gnnbench.sampling.subgraph",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=("sampling", "features"),
        paths=("sample",),
    ),
    Optimization(
        name="full_batch",
        changes={"batch_source": "full"},
        description="Full-batch training: every epoch is one step on the whole graph (no sampling).",
        expected_effect="No sampling or gather, so the step is all kernels, but one optimizer step per epoch, so "
        "more epochs to the same accuracy: the original GCN setting (Kipf and Welling, ICLR 2017), while the graph "
        "fits in memory.",
        layer="gnnbench.sampling.sources",
        costs_accuracy=True,
        recommended=False,
        changes_work=True,
        targets=("sampling", "features"),
        paths=("sample", "gather"),
    ),
    Optimization(
        name="features_on_device",
        same_trajectory=True,
        changes={"feature_placement": "device"},
        description="Keep all node features resident on the GPU; gather there.",
        expected_effect="No per-batch feature copies, for N x F device memory; DGL advises keeping graph data on "
        "the GPU whenever it fits (DGL user guide: Using GPU for Neighborhood Sampling).",
        layer="gnnbench.features.stores",
        targets=("features",),
        paths=("gather",),
    ),
    Optimization(
        name="fp16_features",
        recommended=False,  # pays where moving or caching features is the bottleneck (a GPU); on a CPU it upcasts
        changes={"feature_dtype": "float16"},
        description="Store node features in fp16 (half the bytes gathered, copied and cached); the model upcasts "
        "each batch to fp32 and computes in fp32.",
        expected_effect="Halves host-to-device feature traffic and feature-cache bytes; SALIENT stores features "
        "in half precision for this reason (Kaler et al., MLSys 2022). Accuracy: features rounded to fp16.",
        layer="gnnbench.features.placement",
        targets=("features",),
        paths=("gather",),
        oom_rung=1,
        oom_hint="keep aggregation in fp32: only the stored features are fp16 here (avoid precision='full')",
    ),
    Optimization(
        name="hot_cold",
        same_trajectory=True,
        recommended=False,  # an alternative placement to features_on_device
        changes={"feature_placement": "hot_cold"},
        description="The most-read feature rows on the GPU (25% of rows, ranked by access over one profiled "
        "epoch), the rest in pinned host memory.",
        expected_effect="Feature reads are skewed towards high-degree nodes, so a GPU cache of the hottest rows "
        "serves most gathers (PaGraph, Lin et al., SoCC 2020; GNNLab, Yang et al., EuroSys 2022); each result's "
        "transfer.hot_hit_rate is the share served.",
        layer="gnnbench.features.stores",
        targets=("features",),
        paths=("gather",),
    ),
    Optimization(
        name="uva",
        same_trajectory=True,
        recommended=False,  # an alternative placement to features_on_device
        changes={"feature_placement": "uva"},
        description="Features in pinned host memory read by GPU kernels directly (zero-copy, UVA).",
        expected_effect="Only the gathered rows cross the bus, with no staging copy and no device memory, reported "
        "faster than gather-then-copy for large feature tables (PyTorch-Direct, Min et al., VLDB 2021; DGL's "
        "use_uva).",
        layer="gnnbench.features.stores",
        targets=("features",),
        paths=("gather",),
    ),
    Optimization(
        name="feature_prefetch",
        shares_process=False,
        same_trajectory=True,
        changes={"feature_prefetch": True},
        description="Gather and copy the next batch's features on a side CUDA stream during compute.",
        expected_effect="Hides the feature transfer behind compute, at best completely, as SALIENT's pipelining "
        "does (Kaler et al., MLSys 2022).",
        layer="gnnbench.features.stores",
        overlap=True,
        targets=("features",),
        paths=("gather",),
    ),
    Optimization(
        name="gpu_sampling",
        recommended=False,  # an alternative to uva_sampling, chosen by whether the graph fits the device
        changes={"sampler_device": "device"},
        description="Keep the CSR on the GPU and draw the neighbour samples there: batch ids, edges and CSR never "
        "visit the host (refused, naming uva_sampling, when the CSR does not fit).",
        expected_effect="Removes the CPU sampler from the step; DGL's GPU sampling reports several-fold faster "
        "sampling than CPU sampling on graphs that fit the GPU (DGL user guide: Using GPU for Neighborhood "
        "Sampling).",
        layer="gnnbench.sampling.sources",
        targets=("sampling",),
        paths=("sample",),
        tasks=("node",),  # link batches are drawn by the link loader on the host
    ),
    Optimization(
        name="uva_sampling",
        recommended=False,
        changes={"sampler_device": "uva"},
        description="Keep the CSR in pinned host memory and sample with GPU kernels reading it zero-copy (UVA): "
        "GPU sampling for graphs larger than device memory.",
        expected_effect="Most of GPU sampling's gain without the CSR in device memory; DGL samples over a pinned "
        "graph this way (DGL user guide: Using GPU for Neighborhood Sampling, UVA).",
        layer="gnnbench.sampling.sources",
        targets=("sampling",),
        paths=("sample",),
        tasks=("node",),  # link batches are drawn by the link loader on the host
    ),
    Optimization(
        name="pipelined_loader",
        same_trajectory=True,
        recommended=False,  # on a 2-core CPU the producer thread competes with the step's own threads
        changes={"pipeline_depth": 2},
        description="A background thread samples the next 2 batches and gathers their features (on a side CUDA "
        "stream on a GPU) while the current batch computes.",
        expected_effect="Overlaps sampling and feature fetch with compute, as DGL's GraphBolt pipeline and "
        "SALIENT do (Kaler et al., MLSys 2022): at best the step shrinks to its largest stage.",
        layer="gnnbench.features.pipelined",
        overlap=True,
        targets=("sampling", "features"),
        paths=("sample", "gather"),
    ),
    Optimization(
        name="sparse_agg",
        same_trajectory=True,
        changes={"aggregation": "sparse"},
        description="Aggregate with one CSR sparse-matrix product instead of gathering messages per edge "
        "and scatter-adding them.",
        expected_effect="No E x F message tensor: PyG documents sparse-matrix aggregation as lower in memory and "
        "faster than gather-scatter (PyG docs: Memory-Efficient Aggregations).",
        layer="gnnbench.models.aggregation",
        targets=("kernels",),
        paths=("aggregate.gather", "aggregate.edge_norm", "aggregate.scatter", "aggregate.mean_scale"),
        ops=("aten::index_select", "aten::index_add_", "aten::index_add", "aten::scatter_add_"),
    ),
    Optimization(
        name="norm_estimator",
        changes={"norm_estimator": True},
        description="Sampled batches use full-graph GCN weights rescaled by deg/sampled per target instead of "
        "normalizing each batch subgraph (the estimator GraphSAINT batches use).",
        expected_effect="The unbiased neighbour-sampling estimator of the full aggregation (VR-GCN, Chen et al., "
        "ICML 2018): no per-batch degree computation, but its own variance, which may cost accuracy.",
        layer="gnnbench.models.aggregation",
        costs_accuracy=True,
        recommended=False,
        targets=("kernels",),
        paths=("norm.build",),
    ),
    Optimization(
        name="partial_amp",
        changes={"precision": "partial"},
        description="Linear layers in low precision (fp16 on CUDA, bf16 on CPU); aggregation kept in fp32.",
        expected_effect="Dense transforms in fp16/bf16 with fp32 sums over neighbours, the recipe mixed-precision "
        "training reports as accuracy-neutral (Micikevicius et al., ICLR 2018); the gain is bounded by the linear "
        "layers' share of the step.",
        layer="gnnbench.models.precision",
        targets=("kernels",),
        paths=("linear",),
        ops=("aten::mm", "aten::addmm"),
    ),
    Optimization(
        name="full_amp",
        changes={"precision": "full"},
        description="Whole model in low precision, aggregation included (fp16 on CUDA, bf16 on CPU).",
        expected_effect="Also halves aggregation traffic, but low-precision sums over high-degree neighbourhoods "
        "lose precision, which is why mixed-precision training keeps reductions in fp32 (Micikevicius et al., ICLR "
        "2018).",
        layer="gnnbench.models.precision",
        costs_accuracy=True,
        recommended=False,
        targets=("kernels",),
        paths=(
            "linear",
            "aggregate.gather",
            "aggregate.edge_norm",
            "aggregate.scatter",
            "aggregate.mean_scale",
            "aggregate.self_weight",
            "aggregate.spmm",
            "aggregate.spmm_converting",
        ),
        ops=(
            "aten::mm",
            "aten::addmm",
            "aten::index_select",
            "aten::index_add_",
            "aten::index_add",
            "aten::scatter_add_",
        ),
    ),
    Optimization(
        name="fast_dropout",
        changes={"dropout_kernel": "uniform"},
        description="Draw the dropout mask as one vectorized uniform sample compared with p (rand >= p) instead "
        "of F.dropout's bernoulli_.",
        expected_effect="Drawn as PyTorch's own dropout decomposition draws it (rand_like(x) > p, torch._decomp), "
        "it replaces CPU bernoulli_(p), a serial kernel since its MKL path was disabled (pytorch/pytorch#132395); "
        "CUDA's fused dropout is already vectorized.",
        layer="gnnbench.models.nets",
        targets=("kernels",),
        paths=("dropout",),
        ops=("aten::bernoulli_",),
    ),
    Optimization(
        name="compile",
        changes={"compile": True},
        description="torch.compile the model with dynamic shapes (compile time reported apart).",
        expected_effect="PyG reports 2.2-2.8x for compiled GCN, GraphSAGE and GIN on a 10k-node synthetic graph "
        "(PyG docs: Compiled Graph Neural Networks); the first steps pay the compile time.",
        layer="gnnbench.models.nets",
        targets=("kernels",),
        ops=("aten::add", "aten::add_", "aten::relu", "aten::threshold_backward", "aten::div_", "aten::clamp_min"),
    ),
    Optimization(
        name="degree_negatives",
        changes={"negative_mode": "degree"},
        description="Link prediction: negatives drawn proportional to degree^0.75 instead of uniformly.",
        expected_effect="The degree^0.75 noise distribution of word2vec and LINE (Tang et al., WWW 2015) gives "
        "harder negatives than uniform ones; the effect on MRR / Hits@K depends on the graph.",
        layer="gnnbench.sampling.negative",
        costs_accuracy=True,
        recommended=False,
        tasks=("link",),
        targets=("negatives",),
    ),
    Optimization(
        name="unchecked_negatives",
        changes={"negative_strict": False},
        description="Link prediction: keep every drawn negative instead of rejecting those that are training "
        "edges (PyG's own negative sampling only avoids self loops).",
        expected_effect="PyG's LinkNeighborLoader also skips the check, noting its negatives may contain false "
        "negatives (PyG docs: LinkNeighborLoader); on a sparse graph only a share about its density are true edges.",
        layer="gnnbench.sampling.negative",
        costs_accuracy=True,
        recommended=False,
        tasks=("link",),
        targets=("negatives",),
    ),
)

_ENTRIES += (
    Optimization(
        name="glibc_tuned",
        shares_process=False,
        duet=True,
        same_trajectory=True,
        changes={"allocator": "glibc_tuned"},
        description="Start the process with glibc's malloc keeping freed memory mapped: MALLOC_MMAP_THRESHOLD_=1 GiB, "
        "MALLOC_TRIM_THRESHOLD_=16 GiB, MALLOC_TOP_PAD_=1 GiB.",
        expected_effect="glibc maps blocks above its mmap threshold (128 KiB, raised as blocks are freed to at most "
        "32 MiB) and returns the heap top to the kernel on free, so large temporaries are faulted in again at every "
        "use; raising the thresholds keeps freed memory mapped (glibc docs: Memory Allocation Tunables; mallopt(3)).",
        layer="gnnbench.process.allocators",
        targets=("kernels",),
    ),
    Optimization(
        name="tcmalloc",
        shares_process=False,
        duet=True,
        same_trajectory=True,
        recommended=False,  # one allocator at a time: glibc_tuned is the one that needs no library
        changes={"allocator": "tcmalloc"},
        description="Start the process with tcmalloc (gperftools, LD_PRELOAD of libtcmalloc_minimal.so.4), its "
        "defaults.",
        expected_effect="Thread-caching malloc keeps freed spans for reuse instead of returning them to the kernel "
        "at once; Intel's PyTorch CPU performance guide recommends tcmalloc or jemalloc over the default allocator "
        "for deep-learning workloads (PyTorch docs: CPU Performance Tuning Guide, Switch Memory Allocator).",
        layer="gnnbench.process.allocators",
        targets=("kernels",),
    ),
    Optimization(
        name="jemalloc",
        shares_process=False,
        duet=True,
        same_trajectory=True,
        recommended=False,  # one allocator at a time
        changes={"allocator": "jemalloc"},
        description="Start the process with jemalloc (LD_PRELOAD of libjemalloc.so.2) and page purging off: "
        "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1.",
        expected_effect="jemalloc's arenas keep freed pages when purging is off (jemalloc TUNING.md: dirty_decay_ms); "
        "PyTorch's CPU performance guide lists it with tcmalloc as faster than the default allocator (PyTorch docs: "
        "CPU Performance Tuning Guide).",
        layer="gnnbench.process.allocators",
        targets=("kernels",),
    ),
    Optimization(
        name="jemalloc_pyg",
        shares_process=False,
        duet=True,
        same_trajectory=True,
        recommended=False,  # PyG's published settings, measured so a user can see what they do here
        changes={"allocator": "jemalloc_pyg"},
        description="Start the process with jemalloc and the MALLOC_CONF PyG's CPU benchmarks set for every run: "
        "oversize_threshold:1, background_thread:true, metadata_thp:auto, dirty/muzzy_decay_ms:9000000000.",
        expected_effect="PyG's training and inference benchmark READMEs set these for every CPU run without "
        "measuring them (pytorch_geometric benchmark/training/README.md); oversize_threshold:1 sends every "
        "allocation above one byte to jemalloc's dedicated oversize arena, which caches no freed pages (jemalloc docs: "
        "opt.oversize_threshold).",
        layer="gnnbench.process.allocators",
        targets=("kernels",),
    ),
    Optimization(
        name="workers_split",
        shares_process=False,
        same_trajectory=True,
        recommended=False,  # the split with workers' 2 needs 3 cores; measured alone, not in the static set
        changes=lambda base: {"num_workers": max(base.num_workers, 1), "thread_placement": "split"},
        description="Sample in (at least) 1 loader worker pinned to its own core, the training process's intra-op "
        "threads on the other cores (usable cores - workers).",
        expected_effect="Loader workers overlap sampling with the step only on cores the step does not use; PyG "
        "pins workers to their own cores and gives the rest to the model's OpenMP threads for this reason (PyG "
        "docs: CPU affinity, NodeLoader.enable_cpu_affinity).",
        layer="gnnbench.process.threads",
        targets=("sampling",),
        paths=("sample",),
    ),
    Optimization(
        name="data_parallel",
        shares_process=False,
        changes={"parallel": "data"},
        description="Data-parallel training on --nproc ranks (torchrun; gloo on CPU, NCCL on CUDA): graph and "
        "features replicated, each global batch's seeds split across ranks, gradients all-reduced by DDP.",
        expected_effect="Per-rank work is batch_size / N and DDP overlaps the all-reduce with backward, so the "
        "step shrinks up to N-fold on ranks with their own cores or GPUs (PyTorch DDP, Li et al., VLDB 2020); same "
        "update up to float summation order.",
        layer="gnnbench.parallel.data_parallel",
        recommended=False,
        tasks=("node",),
        targets=("sampling", "features", "kernels"),
        nproc=2,
    ),
    Optimization(
        name="topk_compression",
        shares_process=False,
        changes={"parallel": "data", "grad_compression": "topk"},
        description="Data parallel with top-k gradient sparsification and error feedback (DDP comm hook): "
        "each rank sends the 1% largest-magnitude entries of each parameter (values + int32 indices, "
        "all-gathered) and keeps the rest as a residual for the next step; with --optimizer sgd the hook "
        "applies DGC's momentum correction and momentum factor masking.",
        expected_effect="Deep Gradient Compression reports 270-600x smaller gradients without accuracy loss for "
        "momentum SGD, with warm-up and local clipping this hook omits (Lin et al., ICLR 2018); error feedback is "
        "reported not to carry over to Adam (1-bit Adam, Tang et al., ICML 2021).",
        layer="gnnbench.parallel.compression",
        costs_accuracy=True,
        recommended=False,
        tasks=("node",),
        targets=("kernels",),  # the all-reduce runs inside backward, in diagnose's kernels group
        nproc=2,
    ),
    Optimization(
        name="fp16_compression",
        shares_process=False,
        changes={"parallel": "data", "grad_compression": "fp16"},
        description="Data parallel with gradients cast to fp16 for the all-reduce (PyTorch's "
        "default_hooks.fp16_compress_hook), then back to fp32.",
        expected_effect="Half the all-reduce bytes, normally without accuracy change (PyTorch docs: DDP "
        "communication hooks); it pays only when the all-reduce is a large share of the step.",
        layer="gnnbench.parallel.compression",
        recommended=False,
        tasks=("node",),
        targets=("kernels",),  # the all-reduce runs inside backward, in diagnose's kernels group
        nproc=2,
    ),
    Optimization(
        name="powersgd",
        shares_process=False,
        changes={"parallel": "data", "grad_compression": "powersgd"},
        description="Data parallel with PowerSGD low-rank gradient compression (PyTorch's powerSGD_hook, rank "
        "2, error feedback and warm start, vanilla all-reduce for the first 2 steps).",
        expected_effect="PowerSGD reports over 100x compression at rank 1-4 with test accuracy matched on image "
        "and language models (Vogels et al., NeurIPS 2019); here only weight matrices compress, biases go dense.",
        layer="gnnbench.parallel.compression",
        costs_accuracy=True,
        recommended=False,
        tasks=("node",),
        targets=("kernels",),  # the all-reduce runs inside backward, in diagnose's kernels group
        nproc=2,
    ),
    Optimization(
        name="partition_metis",
        shares_process=False,
        changes={"parallel": "partition", "batch_source": "full"},
        description="Partition-parallel full-graph training: each rank owns one METIS part (its nodes, their "
        "features and in-edges) and exchanges halo rows with the others at every layer (all_to_all), forward "
        "and backward; gradients are summed in one all-reduce.",
        expected_effect="Halo traffic per layer grows with the edge cut, which METIS keeps low (Karypis and Kumar, "
        "1998; ROC, Jia et al., MLSys 2020); the same computation as one-process full-batch training, partitioning "
        "in setup.",
        layer="gnnbench.parallel.partition_parallel",
        recommended=False,
        tasks=("node",),
        changes_work=True,
        targets=("features",),
        nproc=2,
    ),
    Optimization(
        name="partition_degree",
        shares_process=False,
        changes={"parallel": "partition", "partitioner": "degree", "batch_source": "full"},
        description="Partition-parallel full-graph training with degree-bucket parts (nodes dealt round-robin "
        "by decreasing degree) instead of METIS.",
        expected_effect="Partitions in one pass and balances edges, but ignoring locality it cuts about (k - 1) / "
        "k of the edges like a random partition, far more than METIS (the reason DistDGL uses METIS, Zheng et al., "
        "IA3 2020).",
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


def config_for(base: RunConfig, opt_names: Iterable[str]) -> RunConfig:
    """``base`` with the named optimizations (or ``a+b`` combinations) switched on.

    The model has one layer per hop of the fanout: where ``base`` gives its depth explicitly
    (``num_layers``) and an entry changes the fanout's length (``fanout`` drops the last hop), the depth
    changes with it, so the entry drops the last hop and the last layer together.

    Raises:
        NotApplicable: when an entry cannot apply to ``base`` (the message names it and says why).
    """
    flags = flags_for(opt_names, base.flags)
    layers = None if base.num_layers is None else len(flags.fanout)
    return dataclasses.replace(base, flags=flags, num_layers=layers)


def not_applicable(base: RunConfig, opt_names: Iterable[str]) -> str | None:
    """Why the named entries cannot apply to ``base`` (:class:`NotApplicable`), or ``None`` if they can."""
    try:
        config_for(base, opt_names)
    except NotApplicable as exc:
        return str(exc)
    return None


def oom_rungs() -> list[Optimization]:
    """The entries on the out-of-memory ladder, in its order (:attr:`Optimization.oom_rung`)."""
    return sorted((o for o in REGISTRY.values() if o.oom_rung is not None), key=lambda o: o.oom_rung)


def for_task(task: str) -> list[Optimization]:
    """The entries that apply to ``task``."""
    return [opt for opt in REGISTRY.values() if task in opt.tasks]
