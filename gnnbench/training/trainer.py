"""The training loop: a :class:`Trainer` assembled from each layer's factory,
whose :meth:`Trainer.steps` generator is the only training loop in gnnbench.

``gnnbench run`` (through :func:`gnnbench.measure.run.run`), the asv suites and
the pytest-benchmark suite all time the same ``steps()``. Reading it::

    for each epoch:                      (forever when epochs is None)
        batches = source.epoch(epoch)    (features gathered per batch, or prefetched)
        for each batch (up to max_steps_per_epoch):
            sample -> gather -> transfer -> forward -> backward -> optimizer
            (link prediction: the negatives drawn inside sample are moved to "negatives")
            the first ``warmup_steps`` steps of the run are burn-in (not recorded);
            every later step is recorded by the phase timer
            yield a Step

The trainer composes layers and never reads a flag value: each layer's
factory reads its own flags.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from gnnbench.training import availability
from gnnbench.parallel.data_parallel import wrap_model
from gnnbench.parallel.partition_parallel import PartitionParallel
from gnnbench.env import resolve_device
from gnnbench.features.placement import hot_set_chooser, place_features, prefetch_features
from gnnbench.flags import Flags, RunContext, UnavailableError
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.graphs.source import GraphSource, load_source
from gnnbench.models.inference import DEFAULT_CHUNK_BYTES, LayerwiseInference, check_chunk_bytes
from gnnbench.models.aggregation import AggregationPolicy
from gnnbench.models.nets import MODELS, build_model, compile_model
from gnnbench.models.precision import Precision
from gnnbench.host_memory import PeakMemory
from gnnbench.sampling.batch import Batch
from gnnbench.sampling.sources import make_batch_source
from gnnbench.models.tasks import TASKS
from gnnbench.timing import PhaseTimer

__all__ = ["RunConfig", "Trainer", "Step", "EvalPoint", "config_unavailable", "OPTIMIZERS", "LR_SCHEDULES"]

OPTIMIZERS = ("adam", "sgd")
LR_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class RunConfig:
    """One configuration to measure.

    Args:
        spec: The graph to generate (``None`` when ``source`` is given).
        source: A user's graph (a file or a dataset, identified by its content
            fingerprint; :func:`gnnbench.graphs.source.open_source` makes one).
            Given, it replaces ``spec``.
        flags: The optimizations switched on (``Flags()`` = baseline).
        task: ``"node"`` (classification, accuracy) or ``"link"`` (prediction on
            held-out edges, AUC and Hits@50).
        model: ``"gcn"`` or ``"sage"``; its depth is ``len(flags.fanout)``.
        num_layers: Optional explicit depth; must equal ``len(flags.fanout)``.
        hidden: Hidden width.
        epochs: Training epochs.
        max_steps_per_epoch: Cap on steps per epoch (``None`` = full epochs).
        warmup_steps: Steps excluded from steady-state timings.
        lr: Learning rate of the optimizer.
        optimizer: ``"adam"`` (default) or ``"sgd"`` (with ``momentum``). Top-k gradient
            compression's error feedback is exact in sum only for SGD's linear update: with
            ``"sgd"`` and ``grad_compression="topk"`` the momentum moves into the hook (DGC's
            momentum correction) and the optimizer steps plain SGD on the averaged sparse update.
        momentum: SGD momentum (``optimizer="sgd"``), in [0, 1).
        lr_schedule: ``"constant"`` (default) or ``"cosine"``: the learning rate of epoch ``e`` of
            ``E`` is ``lr (1 + cos(pi e / E)) / 2`` (runs cycling epochs forever keep ``lr``).
        seed: Seed of the model, sampler and shuffles.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
        sync_phases: Synchronize at phase boundaries (per-phase numbers); off =
            end-to-end step times only.
        cache_dir: Batch-cache directory shared across runs (default ``None``:
            a fresh temporary directory per run, removed at ``Trainer.close()``).
        eval_every: Validation points for time to accuracy: every N steps and
            at the end (``None``: at the end of every epoch). Evaluation runs
            outside the training clock.
        eval_chunk_bytes: Memory budget of one chunk of target nodes in
            full-neighbourhood evaluation, which runs layer by layer a chunk at
            a time (:mod:`gnnbench.models.inference`; default 256 MiB, at least 64 KiB).
        nproc: Ranks training together (default 1). With ``nproc > 1``
            :func:`gnnbench.measure.run.run` launches the run through torchrun
            (:mod:`gnnbench.measure.launch`); it needs a parallel mode
            (``Flags.parallel``).
    """

    spec: GraphSpec | None = field(default_factory=lambda: GraphSpec.preset("small"))
    source: GraphSource | None = None  # a loaded graph (file or dataset); replaces spec
    flags: Flags = field(default_factory=Flags)
    task: str = "node"  # "node" classification | "link" prediction
    model: str = "gcn"  # "gcn" | "sage"
    num_layers: int | None = None  # None: follows the fanout
    hidden: int = 64  # hidden width
    epochs: int = 2  # training epochs
    max_steps_per_epoch: int | None = None  # cap steps per epoch
    warmup_steps: int = 3  # excluded from steady-state timings
    lr: float = 0.01  # learning rate
    optimizer: str = "adam"  # "adam" | "sgd" (momentum below)
    momentum: float = 0.9  # optimizer="sgd": momentum (top-k compression: applied in the hook, DGC)
    lr_schedule: str = "constant"  # "constant" | "cosine" (per epoch, down to 0 at the last)
    seed: int = 0  # model / sampler / shuffle seed
    device: str = "cpu"  # cpu | cuda | cuda:N | auto
    sync_phases: bool = True  # per-phase sync (True) or end-to-end only
    cache_dir: str | None = None  # batch-cache directory shared across runs (None: fresh per run)
    eval_every: int | None = None  # evaluate every N steps (None: at every epoch end), outside the training clock
    eval_chunk_bytes: int = DEFAULT_CHUNK_BYTES  # evaluation: one chunk of target nodes' temporaries (layer-wise)
    nproc: int = 1  # ranks training together (torchrun, gnnbench.measure.launch); 1 = this process

    def __post_init__(self) -> None:
        if self.source is not None:
            if not isinstance(self.source, GraphSource):
                raise ValueError(f"RunConfig.source must be a GraphSource (got {type(self.source).__name__})")
            object.__setattr__(self, "spec", None)  # one graph per configuration: the loaded one
        elif not isinstance(self.spec, GraphSpec):
            raise ValueError("RunConfig needs a graph: a GraphSpec (spec=...) or a loaded GraphSource (source=...)")
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; accepted: {', '.join(map(repr, TASKS))}")
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; accepted: {', '.join(MODELS)}")
        if self.num_layers is not None and self.num_layers != len(self.flags.fanout):
            raise ValueError(
                f"fanout {list(self.flags.fanout)} has {len(self.flags.fanout)} hops but the model has "
                f"{self.num_layers} layers; the depth follows the fanout (give a fanout of {self.num_layers} hops)")
        for name, low in (("hidden", 1), ("epochs", 1), ("warmup_steps", 0), ("nproc", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ValueError(f"RunConfig.{name} must be an integer >= {low} (got {value!r})")
        check_chunk_bytes(self.eval_chunk_bytes, "RunConfig.eval_chunk_bytes")
        if self.eval_every is not None and (not isinstance(self.eval_every, int) or self.eval_every < 1):
            raise ValueError(f"RunConfig.eval_every must be None or an integer >= 1 (got {self.eval_every!r})")
        if self.max_steps_per_epoch is not None and self.max_steps_per_epoch < 1:
            raise ValueError(f"RunConfig.max_steps_per_epoch must be None or >= 1 (got {self.max_steps_per_epoch})")
        if not self.lr > 0:
            raise ValueError(f"RunConfig.lr must be > 0 (got {self.lr})")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; accepted: {', '.join(map(repr, OPTIMIZERS))}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {self.lr_schedule!r}; accepted: "
                             f"{', '.join(map(repr, LR_SCHEDULES))}")
        if not isinstance(self.momentum, (int, float)) or not 0 <= self.momentum < 1:
            raise ValueError(f"RunConfig.momentum must be a number in [0, 1) (got {self.momentum!r})")

    @property
    def hook_momentum(self) -> float:
        """Momentum the top-k hook applies (DGC's momentum correction): SGD's, when top-k compresses its
        gradients; else 0 (the optimizer keeps its own)."""
        f = self.flags
        if self.optimizer == "sgd" and f.parallel == "data" and f.grad_compression == "topk":
            return float(self.momentum)
        return 0.0

    def make_optimizer(self, params) -> torch.optim.Optimizer:
        """The optimizer this configuration trains with (SGD's momentum moved into the top-k hook, if any)."""
        if self.optimizer == "adam":
            return torch.optim.Adam(params, lr=self.lr)
        return torch.optim.SGD(params, lr=self.lr, momentum=0.0 if self.hook_momentum else self.momentum)

    def context(self, device: torch.device | None = None, graph: Any = None) -> RunContext:
        """The availability context of this run (graph size from ``graph`` when given, else the spec)."""
        return RunContext(device=device if device is not None else resolve_device(self.device), task=self.task,
                          model=self.model,
                          num_nodes=graph.num_nodes if graph is not None else self.graph_size[0],
                          num_edges=graph.num_edges if graph is not None else self.graph_size[1],
                          world_size=self.nproc)

    @property
    def graph_size(self) -> tuple[int, int]:
        """``(nodes, stored edges)`` of the graph this configuration trains on (before any link split)."""
        if self.source is not None:
            return self.source.num_nodes, self.source.num_edges
        return self.spec.num_nodes, self.spec.num_edges

    @property
    def graph_name(self) -> str:
        """The preset's name, or the loaded file's / dataset's name with its fingerprint's head."""
        return self.source.label if self.source is not None else self.spec.name

    def graph_key(self) -> str:
        """Identifies the graph: equal keys, identical graphs (the spec, or the source's fingerprint)."""
        return (f"source:{self.source.fingerprint}" if self.source is not None
                else "spec:" + json.dumps(self.spec.to_dict(), sort_keys=True))

    def build_graph(self) -> Any:
        """Generate the spec's graph, or load the source's (its prepared copy when intact)."""
        return load_source(self.source) if self.source is not None else generate(self.spec)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["spec"] = self.spec.to_dict() if self.spec is not None else None
        d["source"] = self.source.to_dict() if self.source is not None else None
        d["flags"] = self.flags.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        d = {k: v for k, v in d.items() if k in {f.name for f in dataclasses.fields(cls)}}
        d["spec"] = GraphSpec(**d["spec"]) if d.get("spec") is not None else None
        d["source"] = GraphSource.from_dict(d["source"]) if d.get("source") is not None else None
        d["flags"] = Flags.from_dict(d["flags"])
        return cls(**d)


def config_unavailable(config: RunConfig, device: torch.device | None = None) -> dict[str, str]:
    """Every flag of ``config`` that cannot run here, with the reason (``availability.reasons``)."""
    return availability.reasons(config.flags, config.context(device))


@dataclass(frozen=True)
class EvalPoint:
    """One validation point of the accuracy curve (time to accuracy reads these)."""

    seconds: float  # setup + training clock at this point (evaluation excluded)
    step: int  # steps taken
    epoch: int  # epoch just trained
    val: float  # validation metric (accuracy or AUC)
    test: float  # test metric
    metrics: dict  # everything the task's evaluation returned


@dataclass(frozen=True)
class Step:
    """One training step as :meth:`Trainer.steps` yields it."""

    index: int  # steps taken in this run before this one
    epoch: int  # epoch it belongs to
    loss: float  # training loss
    measured: bool  # False during burn-in (the first warmup_steps steps)
    seconds: float  # wall time of the step, sample to optimizer


class Trainer:
    """Everything one configuration builds, and the training loop.

    Raises:
        UnavailableError: when a flag cannot run on this device or setup
            (each layer names its field and why).
    """

    def __init__(self, config: RunConfig, graph: Any = None) -> None:
        self.config = config
        self.device = device = resolve_device(config.device)
        torch.manual_seed(config.seed)
        t0 = time.perf_counter()
        if graph is None:
            graph = config.build_graph()
            self.generate_seconds = time.perf_counter() - t0  # generated, or loaded (prepared copy: mmap)
        else:
            if config.source is not None:
                if graph.meta.get("fingerprint") != config.source.fingerprint:
                    raise ValueError("the graph passed to the trainer is not config.source's content "
                                     f"(fingerprint {graph.meta.get('fingerprint')!r}, "
                                     f"expected {config.source.fingerprint!r})")
                self.generate_seconds = graph.meta.get("load_seconds", 0.0)
            else:
                if graph.meta.get("spec") != config.spec.to_dict():
                    raise ValueError("the graph passed to the trainer was not generated from config.spec")
                self.generate_seconds = graph.meta.get("generate_seconds", 0.0)
        items = availability.check(config.flags, config.context(device, graph))
        if items:
            raise UnavailableError(items)
        flags = config.flags
        self.task = TASKS[config.task](graph, device, seed=config.seed)
        self.graph = self.task.train_graph  # what feeds message passing
        self.prepared = prepare(self.graph, flags)
        t1 = time.perf_counter()
        kind = self.task.source_kind(flags)
        self.features = place_features(self.graph.x, device, flags.feature_placement, pin_memory=flags.pin_memory,
                                       hot_nodes=hot_set_chooser(self.prepared, flags, kind=kind, seed=config.seed),
                                       dtype=flags.feature_dtype)
        self.source = make_batch_source(self.prepared, flags, kind=kind, seed=config.seed,
                                        cache_dir=config.cache_dir)  # None: a fresh cache directory, per run
        if hasattr(self.source, "measured_steps"):  # full batch: one step per epoch; measure some after warm-up
            self.source.min_epochs = config.warmup_steps + self.source.measured_steps
        self.setup_seconds = time.perf_counter() - t1
        self.model = build_model(config.model, self.graph.num_features, config.hidden,
                                 self.task.out_dim(config.hidden), len(flags.fanout),
                                 dropout_kernel=flags.dropout_kernel).to(device)
        self.precision = Precision(flags.precision, device.type)
        # data parallel: DistributedDataParallel with the timed gradient hook (self.model stays the bare module)
        module, self.comm = wrap_model(self.model, flags, config.context(device, graph), config.hook_momentum)
        self.forward, self.dynamo_counters = compile_model(module, flags)
        t2 = time.perf_counter()  # full-graph GCN coefficients, when the policy needs them, are setup too
        self.policy = AggregationPolicy.build(flags, self.precision, self.prepared, device,
                                              source_norm=self.source.norm_mode)
        self.setup_seconds += time.perf_counter() - t2
        self.partition: PartitionParallel | None = None
        if flags.parallel == "partition":  # this rank's part, its halo plan; rank 0's partition time is setup
            t3 = time.perf_counter()
            self.partition = PartitionParallel(self.prepared.graph, self.prepared.gcn_norm(), flags, device,
                                               self.precision, seed=config.seed)
            self.comm = self.partition.comm
            self.setup_seconds += time.perf_counter() - t3
        self.opt = config.make_optimizer(self.model.parameters())
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.precision.needs_grad_scaler)
        self.timer = PhaseTimer(device, sync=config.sync_phases)
        self.prefetch = flags.feature_prefetch
        self.setup_clock = self.prepared.prepare_seconds + self.setup_seconds  # what time to accuracy starts from
        self.steps_taken = 0
        self.widened_index_bytes = 0  # int32 -> int64 index bytes made inside steps (scatter path on CPU)
        self.narrowed_index_bytes = 0  # int64 -> int32 CSR index bytes made inside steps (MKL's index, CPU)
        self.train_seconds = 0.0  # the training clock: inside steps(), evaluation and consumer excluded
        self.epoch_seconds: list[float] = []  # each epoch on the training clock (worker start, first batch included)
        self.curve: list[EvalPoint] = []
        self.eval_seconds = 0.0
        self.first_step_seconds: float | None = None
        self.inference: LayerwiseInference | None = None  # full-neighbourhood evaluation, built at the first one
        self.peaks = PeakMemory(device)  # peak memory of evaluation apart from the rest

    # ------------------------------------------------------------------ the loop
    def steps(self, epochs: int | float | None = None, max_steps_per_epoch: int | None = None, *,
              evaluate: bool = False) -> Iterator[Step]:
        """The training loop: yields each :class:`Step` after its optimizer update.

        Args:
            epochs: Epochs to run (default ``config.epochs``, raised to the
                source's ``min_epochs`` where it has one: the batch cache's
                ``K + 1``, so K - 1 epochs replay; full batch's warm-up + 10,
                one step per epoch). Pass
                ``float("inf")`` to cycle epochs forever, as the asv and
                pytest-benchmark suites do (they pull one step at a time).
            max_steps_per_epoch: Cap per epoch (default ``config.max_steps_per_epoch``).
            evaluate: Record validation points (:attr:`curve`) every
                ``config.eval_every`` steps and at the end, or at every epoch end;
                evaluation is kept off the training clock.

        Closing the generator (or leaving a ``for`` loop over it) releases the
        current epoch's loader iterator and its workers. Time spent by the
        consumer between steps is not on the training clock.
        """
        cfg = self.config
        # the config's epochs, at least what the source needs to show its regime (batch cache: K + 1)
        epochs = max(cfg.epochs, getattr(self.source, "min_epochs", 1)) if epochs is None else epochs
        cap = cfg.max_steps_per_epoch if max_steps_per_epoch is None else max_steps_per_epoch
        every = cfg.eval_every if evaluate else None
        timer = self.timer
        epoch = 0
        resumed = time.perf_counter()
        while epoch < epochs:
            epoch_start = self.train_seconds  # the clock since `resumed` lands in this epoch: epochs tile the clock
            self.model.train()
            self._schedule_lr(epoch, epochs)
            batches = self._epoch_batches(epoch)
            taken = 0
            try:
                while cap is None or taken < cap:
                    timer.start_step()
                    t_step = time.perf_counter()
                    with timer.phase("sample"):
                        item = next(batches, None)
                    if item is None:
                        timer.end_step(record=False)
                        break
                    self._account_negatives(item[0])
                    loss = self._train_on(*item)
                    measured = self.steps_taken >= cfg.warmup_steps  # burn-in: first touch, compilation
                    timer.end_step(record=measured)
                    self.comm.end_step(measured)  # all-reduce seconds and bytes of this step (data parallel)
                    seconds = time.perf_counter() - t_step
                    if self.first_step_seconds is None:
                        self.first_step_seconds = seconds
                    step = Step(self.steps_taken, epoch, float(loss), measured, seconds)
                    self.steps_taken += 1
                    taken += 1
                    self.train_seconds += time.perf_counter() - resumed  # clock stops: evaluation, consumer
                    if every is not None and self.steps_taken % every == 0:
                        self._record_eval(epoch)
                    yield step
                    resumed = time.perf_counter()
            finally:
                batches.close()  # an epoch cut short must release its loader iterator (and its workers)
            self.train_seconds += time.perf_counter() - resumed
            self.epoch_seconds.append(self.train_seconds - epoch_start)
            if evaluate and taken and (every is None or (epoch + 1 >= epochs and self.steps_taken % every)):
                self._record_eval(epoch)
            if taken == 0 and epochs == float("inf"):
                raise RuntimeError(f"the batch source yielded no batches for epoch {epoch}")
            epoch += 1
            resumed = time.perf_counter()

    def _schedule_lr(self, epoch: int, epochs: float) -> None:
        """Set this epoch's learning rate (``RunConfig.lr_schedule``)."""
        if self.config.lr_schedule == "cosine" and epochs != float("inf"):
            lr = self.config.lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))
            for group in self.opt.param_groups:
                group["lr"] = lr

    def _record_eval(self, epoch: int) -> None:
        metrics, seconds = self.evaluate()
        self.eval_seconds += seconds
        self.model.train()
        self.curve.append(EvalPoint(self.setup_clock + self.train_seconds, self.steps_taken, epoch,
                                    float(metrics["val"]), float(metrics["test"]), metrics))

    def _epoch_batches(self, epoch: int) -> Iterator[tuple[Batch, torch.Tensor | None]]:
        """``(batch, features or None)`` for ``epoch``; with prefetch, the next batch's features are
        gathered on a side stream while this one computes (timed inside "sample": the wait for data)."""
        source_batches = self.source.epoch(epoch)
        if self.prefetch:
            yield from prefetch_features(source_batches, self.features)
        else:
            try:
                for b in source_batches:
                    yield b, None
            finally:
                if hasattr(source_batches, "close"):
                    source_batches.close()

    def _account_negatives(self, batch: Batch) -> None:
        """Link prediction's negatives are drawn inside the sampler, so inside ``sample``: in this process
        they move to the ``negatives`` phase (the step's total unchanged); drawn by a loader worker they ran
        overlapped with training and are recorded apart, on the worker's clock."""
        if not batch.negatives_seconds:
            return
        if batch.sampled_in_worker:
            self.timer.record_apart("negatives", batch.negatives_seconds)
        else:
            self.timer.move(batch.negatives_seconds, src="sample", dst="negatives")

    def _train_on(self, batch: Batch, x: torch.Tensor | None = None) -> torch.Tensor:
        """One step on ``batch`` (features gathered here unless given); returns the detached loss."""
        timer, device = self.timer, self.device
        if self.partition is not None:
            return self._train_partition()
        if x is None:
            x = self.features.gather(batch.n_id, timer)
        with timer.phase("transfer"):
            batch = batch.to(device, edge_ids=self.policy.needs_edge_ids)
        with timer.phase("forward"):
            agg = self.policy.for_batch(batch.edge_index, batch.n_id, batch.e_id, batch.rowptr)
            self.widened_index_bytes += agg.widened_bytes
            self.narrowed_index_bytes += agg.narrowed_bytes
            loss = self.task.loss(self.forward(x, agg, self.precision), batch)
        with timer.phase("backward"):
            self.scaler.scale(loss).backward()
        with timer.phase("optimizer"):
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
        return loss.detach()

    def _train_partition(self) -> torch.Tensor:
        """One partition-parallel step (the epoch's full batch): this rank's part with a halo exchange per
        layer, the gradient all-reduce inside ``backward``; returns the whole graph's loss."""
        timer, part = self.timer, self.partition
        with timer.phase("forward"):
            loss = part.loss(part.forward(self.model, self.precision))
        with timer.phase("backward"):
            self.scaler.scale(loss).backward()
            total = part.allreduce(list(self.model.parameters()), loss)
        with timer.phase("optimizer"):
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
        return total

    # ------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> tuple[dict, float]:
        """Full-neighbourhood evaluation (no sampling noise): ``(metrics, seconds)``.

        The model runs layer by layer over the whole graph, a chunk of target nodes at a time
        (:class:`~gnnbench.models.inference.LayerwiseInference`, chunks within ``config.eval_chunk_bytes``): memory
        grows with the nodes, not with edges x features. Its peak is recorded apart from training's (:attr:`peaks`).
        """
        t0 = time.perf_counter()
        self.model.eval()
        with self.peaks.evaluation():
            if self.inference is None:
                g = self.prepared.graph
                self.inference = LayerwiseInference(g.edge_index, g.rowptr, self.policy, self.device,
                                                    chunk_bytes=self.config.eval_chunk_bytes)
            metrics = self.task.evaluate(lambda: self.inference(self.model, self.graph.x, self.precision))
        return metrics, time.perf_counter() - t0

    def close(self) -> None:
        if hasattr(self.source, "close"):
            self.source.close()
