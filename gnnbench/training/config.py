"""What one measured run is: :class:`RunConfig`, the configuration every layer is assembled from, with its
validation and its serialized form (results carry it; sweeps key stored results by it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.graphs.source import GraphSource
from gnnbench.models.inference import DEFAULT_CHUNK_BYTES, check_chunk_bytes
from gnnbench.models.nets import MODELS
from gnnbench.models.tasks import TASKS

__all__ = ["RunConfig", "OPTIMIZERS", "LR_SCHEDULES"]

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
        epochs: Training epochs; ``None``: train to a validation plateau (:mod:`gnnbench.training.stopping`:
            stop once the validation metric has not risen by ``min_delta`` over its reference best for
            ``patience`` epochs, or at a budget: ``max_epochs``, ``max_steps``, ``max_seconds``), evaluating
            ``EVALS_PER_EPOCH`` times per epoch unless ``eval_every`` says otherwise.
        max_epochs: Budget in epochs of a run to a plateau (``epochs=None``).
        max_steps: Step budget of a run to a plateau: it stops at this many optimizer steps (stop reason
            ``"max_steps"``). A sweep sets it from the calibration, so a slow configuration cannot exhaust its
            accuracy run early. ``None``: no step budget.
        min_steps: A run to a plateau never stops on the plateau rule before this many steps (a sweep sets
            twice the calibrated steps to the target). Default 0.
        step_unit: The steps per epoch ``min_steps`` and ``max_steps`` are counted in (a sweep sets the
            calibrated baseline's): a batch source whose epochs have another number of steps (full batch: one)
            has both scaled to the same number of epochs, so its floor and budget are in its own unit of work.
            ``None`` (default): as given.
        max_seconds: Hard stop on the run clock (setup + training, evaluation excluded), for any run: training
            stops at the first step past it (stop reason ``"max_seconds"``; the run's accuracy is then not "at
            convergence"). ``None``: no hard stop. A sweep does not set it: see ``censor_seconds``.
        censor_seconds: The time-to-accuracy budget on the run clock: a run that reaches the target only after
            it is censored there (its time to accuracy is a bound), but training goes on to its plateau. It
            never stops a run. ``None``: no censoring budget.
        stop_at: A time-to-accuracy run (the rounds of a sweep after its accuracy rounds): training stops at the
            first validation point at or above this target (stop reason ``"target"``) or, once the run clock
            passes ``censor_seconds`` without reaching it, at the next step (``"censored"``); the plateau rule
            stops it never (its time to the target must not depend on where a plateau stop would fall). Such a
            run measures time to accuracy only; its accuracy is never read. ``None`` (default): no such stop.
        smoothing: Evaluations in the trailing mean the target is read on: ``stop_at`` stops a run when the
            mean of its last ``smoothing`` validation points reaches the target, and its time to accuracy is read
            where that mean crosses it (:func:`gnnbench.measure.compare.crossing.target_curve`), so one lucky
            evaluation near the plateau does not end the count early. 1 (default): each point alone. ``compare``
            sets :data:`gnnbench.measure.compare.crossing.DEFAULT_SMOOTHING` (``--smoothing``).
        patience: Epochs (at least :data:`~gnnbench.training.stopping.MIN_PATIENCE_STEPS` steps) without a
            qualifying rise of the validation metric before a run to a plateau stops.
        patience_target: A validation level (a sweep sets its calibrated target): once a run to a plateau has
            reached it after ``s`` steps, its patience is at most ``s`` steps (the time scale of its own
            learning; never below ``MIN_PATIENCE_STEPS``). ``None`` (default): ``patience`` alone.
        min_delta: The rise of the validation metric over the reference best that qualifies (never below one
            validation node: the metric's granularity).
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
            :func:`gnnbench.measure.run.single.run` launches the run through torchrun
            (:mod:`gnnbench.measure.run.launch`); it needs a parallel mode
            (``Flags.parallel``).
    """

    spec: GraphSpec | None = field(default_factory=lambda: GraphSpec.preset("small"))
    source: GraphSource | None = None
    flags: Flags = field(default_factory=Flags)
    task: str = "node"
    model: str = "gcn"
    num_layers: int | None = None
    hidden: int = 64
    epochs: int | None = 2
    max_epochs: int = 200
    max_steps: int | None = None
    min_steps: int = 0
    step_unit: int | None = None
    max_seconds: float | None = None
    censor_seconds: float | None = None
    stop_at: float | None = None
    smoothing: int = 1
    patience: float = 5.0
    patience_target: float | None = None
    min_delta: float = 0.001
    max_steps_per_epoch: int | None = None
    warmup_steps: int = 3
    lr: float = 0.01
    optimizer: str = "adam"
    momentum: float = 0.9
    lr_schedule: str = "constant"
    seed: int = 0
    device: str = "cpu"
    sync_phases: bool = True
    cache_dir: str | None = None
    eval_every: int | None = None
    eval_chunk_bytes: int = DEFAULT_CHUNK_BYTES
    nproc: int = 1

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
                f"{self.num_layers} layers; the depth follows the fanout (give a fanout of {self.num_layers} hops)"
            )
        for name, low in (
            ("hidden", 1),
            ("max_epochs", 1),
            ("warmup_steps", 0),
            ("nproc", 1),
            ("min_steps", 0),
            ("smoothing", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"RunConfig.{name} must be an integer >= {low} (got {value!r})")
        if self.epochs is not None and (
            not isinstance(self.epochs, int) or isinstance(self.epochs, bool) or self.epochs < 1
        ):
            raise ValueError(
                f"RunConfig.epochs must be None (train to a plateau) or an integer >= 1 (got {self.epochs!r})"
            )
        for name in ("max_seconds", "censor_seconds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise ValueError(f"RunConfig.{name} must be None or a number of seconds > 0 (got {value!r})")
        if self.stop_at is not None and (
            isinstance(self.stop_at, bool) or not isinstance(self.stop_at, (int, float)) or not 0 < self.stop_at <= 1
        ):
            raise ValueError(f"RunConfig.stop_at must be None or a validation target in (0, 1] (got {self.stop_at!r})")
        if self.patience_target is not None and (
            isinstance(self.patience_target, bool)
            or not isinstance(self.patience_target, (int, float))
            or not 0 < self.patience_target <= 1
        ):
            raise ValueError(
                f"RunConfig.patience_target must be None or a validation level in (0, 1] (got {self.patience_target!r})"
            )
        if self.step_unit is not None and (
            isinstance(self.step_unit, bool) or not isinstance(self.step_unit, int) or self.step_unit < 1
        ):
            raise ValueError(f"RunConfig.step_unit must be None or an integer >= 1 (got {self.step_unit!r})")
        if self.max_steps is not None and (
            isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1
        ):
            raise ValueError(f"RunConfig.max_steps must be None or an integer >= 1 (got {self.max_steps!r})")
        if not (isinstance(self.patience, (int, float)) and self.patience > 0):
            raise ValueError(f"RunConfig.patience must be a number of epochs > 0 (got {self.patience!r})")
        if not (isinstance(self.min_delta, (int, float)) and 0 <= self.min_delta < 1):
            raise ValueError(f"RunConfig.min_delta must be a number in [0, 1) (got {self.min_delta!r})")
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
            raise ValueError(
                f"unknown lr_schedule {self.lr_schedule!r}; accepted: {', '.join(map(repr, LR_SCHEDULES))}"
            )
        if not isinstance(self.momentum, (int, float)) or not 0 <= self.momentum < 1:
            raise ValueError(f"RunConfig.momentum must be a number in [0, 1) (got {self.momentum!r})")

    @property
    def to_plateau(self) -> bool:
        """Whether the run trains to a validation plateau (``epochs=None``) rather than a fixed length."""
        return self.epochs is None

    @property
    def clock_bound(self) -> float | None:
        """Seconds on the run clock past which this run stops: ``max_seconds``, or for a time-to-accuracy run
        (``stop_at``) ``censor_seconds`` when smaller; ``None`` when no clock stops it (``censor_seconds`` alone
        stops nothing). A process that measures it is given a timeout from it
        (:func:`gnnbench.process.budget_timeout`)."""
        censor = self.censor_seconds if self.stop_at is not None else None
        bounds = [float(b) for b in (self.max_seconds, censor) if b is not None]
        return min(bounds) if bounds else None

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
        return (
            f"source:{self.source.fingerprint}"
            if self.source is not None
            else "spec:" + json.dumps(self.spec.to_dict(), sort_keys=True)
        )

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
