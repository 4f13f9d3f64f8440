"""One configuration's pipeline, assembled once: each layer built by its own factory from the flags, in
pipeline order, on one setup clock.

    graph (generated or loaded)  ->  task's training graph  ->  prepare(graph, flags)     [prepare clock]
    ->  hot set, feature store, batch source, network, precision, DDP / compile wrapping,
        aggregation policy, this rank's part, optimizer                                   [setup clock]

The setup clock runs from the prepared graph to the first step; time to accuracy starts from preparation plus
setup (:attr:`Pipeline.setup_clock`). Nothing here reads a flag value: each factory reads its own fields.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from gnnbench import process
from gnnbench.background import BackgroundWork
from gnnbench.env import resolve_device
from gnnbench.features.hot_set import hot_set_chooser
from gnnbench.features.placement import features_for
from gnnbench.features.stores import PlacedFeatures
from gnnbench.flags import UnavailableError
from gnnbench.graphs import generate
from gnnbench.graphs.prepare import PreparedGraph, prepare
from gnnbench.graphs.source import load_source
from gnnbench.models.aggregation_policy import AggregationPolicy
from gnnbench.models.nets import compile_model, model_for
from gnnbench.models.precision import Precision
from gnnbench.models.tasks import TASKS
from gnnbench.parallel.data_parallel import wrap_model
from gnnbench.parallel.partition_parallel import PartitionParallel, partition_for
from gnnbench.process import threads as thread_placement
from gnnbench.process.threads import ThreadPlan
from gnnbench.sampling.batch import BatchSource
from gnnbench.sampling.sources import make_batch_source
from gnnbench.training.availability import check, run_context
from gnnbench.training.config import RunConfig
from gnnbench.training.optim import hook_momentum, make_optimizer

__all__ = ["Pipeline", "assemble", "batch_source", "graph_of"]


@dataclass
class Pipeline:
    """Everything one configuration builds before its first step."""

    config: RunConfig
    device: torch.device
    graph_seconds: float  # generating (or loading) the graph, apart from the setup clock
    task: Any  # the task (gnnbench.models.tasks.TASKS): loss, evaluation, output width
    graph: Any  # what feeds message passing: the task's training graph
    prepared: PreparedGraph  # graph prepared for the flags (index dtype, CSR, cached normalization)
    features: PlacedFeatures  # the feature store (placement, pinning, prefetch)
    batches: BatchSource  # the batch source (neighbour, subgraph, full batch; cached or not)
    model: nn.Module  # the bare network (its parameters; evaluation runs it)
    precision: Precision
    forward: Callable  # what a training step calls: the model, DDP-wrapped and/or compiled
    dynamo_counters: dict | None  # torch.compile's counters (None without compile)
    comm: Any  # the communication recorder (nothing recorded in one process)
    policy: AggregationPolicy
    partition: PartitionParallel | None  # this rank's part (partition-parallel training), else None
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    setup_seconds: float  # the setup clock: from the prepared graph to the first step
    background: BackgroundWork = field(default_factory=BackgroundWork)  # producers paused during evaluation
    threads: ThreadPlan | None = None  # where the step's threads and the loader workers run (Flags.thread_placement)
    restore_threads: Callable[[], None] = lambda: None  # undoes the placement (at close)

    @property
    def setup_clock(self) -> float:
        """Where time to accuracy starts: preparation plus setup (graph generation excluded)."""
        return self.prepared.prepare_seconds + self.setup_seconds

    def close(self) -> None:
        """Release the batch source (loader workers, a per-run cache directory) and the thread placement."""
        self.batches.close()
        self.restore_threads()
        self.restore_threads = lambda: None


def graph_of(config: RunConfig, graph: Any = None) -> tuple[Any, float]:
    """``(graph, seconds)``: ``config``'s graph and what generating or loading it took (a prepared copy of a
    loaded file is memory-mapped). A ``graph`` passed in must be ``config``'s own; its seconds come from its
    metadata."""
    if graph is None:
        t0 = time.perf_counter()
        graph = load_source(config.source) if config.source is not None else generate(config.spec)
        return graph, time.perf_counter() - t0
    if config.source is not None:
        if graph.meta.get("fingerprint") != config.source.fingerprint:
            raise ValueError(
                "the graph passed to the trainer is not config.source's content "
                f"(fingerprint {graph.meta.get('fingerprint')!r}, "
                f"expected {config.source.fingerprint!r})"
            )
        return graph, graph.meta.get("load_seconds", 0.0)
    if graph.meta.get("spec") != config.spec.to_dict():
        raise ValueError("the graph passed to the trainer was not generated from config.spec")
    return graph, graph.meta.get("generate_seconds", 0.0)


def batch_source(config: RunConfig, graph: Any = None) -> BatchSource:
    """``config``'s batch source alone, as :func:`assemble` builds it (the task's training graph, prepared), without
    the features, the model or the optimizer: what its steps per epoch and its epochs' floor are read from (the
    gate fits each benchmark's epochs with it). The caller closes it."""
    device = resolve_device(config.device)
    graph = graph_of(config, graph)[0]
    task = TASKS[config.task](graph, device, seed=config.seed)
    prepared = prepare(task.train_graph, config.flags)
    kind = task.source_kind(config.flags)
    return make_batch_source(
        prepared, config.flags, kind=kind, seed=config.seed, device=device, cache_dir=config.cache_dir
    )


def assemble(config: RunConfig, graph: Any = None) -> Pipeline:
    """Build ``config``'s pipeline (on ``graph`` when given, else its own).

    Raises:
        UnavailableError: when a flag cannot run on this device or setup (each layer names its field and why).
    """
    device = resolve_device(config.device)
    torch.manual_seed(config.seed)
    graph, graph_seconds = graph_of(config, graph)
    items = check(config.flags, run_context(config, device, graph)) or process.start_refusal(config.flags)
    if items:
        raise UnavailableError(items)
    flags, seed = config.flags, config.seed
    threads = process.placement(flags)  # planned before any pinning
    task = TASKS[config.task](graph, device, seed=seed)
    train_graph = task.train_graph
    prepared = prepare(train_graph, flags)
    t0 = time.perf_counter()
    kind = task.source_kind(flags)
    features = features_for(
        train_graph.x,
        flags,
        device,
        full_batch=kind == "full",
        hot_nodes=hot_set_chooser(prepared, flags, kind=kind, seed=seed),
    )
    batches = make_batch_source(
        prepared, flags, kind=kind, seed=seed, device=device, cache_dir=config.cache_dir
    )  # None: a fresh cache directory, per run
    model = model_for(config.model, flags, train_graph.num_features, config.hidden, task.out_dim(config.hidden)).to(
        device
    )
    precision = Precision.for_flags(flags, device)
    # data parallel: DistributedDataParallel with the timed gradient hook (the model stays the bare module)
    module, comm = wrap_model(model, flags, run_context(config, device, graph), hook_momentum(config))
    forward, dynamo_counters = compile_model(module, flags)
    policy = AggregationPolicy.build(flags, precision, prepared, device, source_norm=batches.norm_mode)
    partition = partition_for(prepared.graph, prepared.gcn_norm, flags, device, precision, seed=seed)
    if partition is not None:
        comm = partition.comm
    optimizer = make_optimizer(config, model.parameters())
    scaler = torch.amp.GradScaler(device.type, enabled=precision.needs_grad_scaler)
    background = BackgroundWork()
    features.background = background
    attach = getattr(batches, "attach_background", None)  # sources with loader workers suspend them in evaluation
    if attach is not None:
        attach(background)
    restore = thread_placement.apply(threads)  # the workers, forked at the first epoch, pin themselves
    return Pipeline(
        config=config,
        device=device,
        graph_seconds=graph_seconds,
        task=task,
        graph=train_graph,
        prepared=prepared,
        features=features,
        batches=batches,
        model=model,
        precision=precision,
        forward=forward,
        dynamo_counters=dynamo_counters,
        comm=comm,
        policy=policy,
        partition=partition,
        optimizer=optimizer,
        scaler=scaler,
        setup_seconds=time.perf_counter() - t0,
        background=background,
        threads=threads,
        restore_threads=restore,
    )
