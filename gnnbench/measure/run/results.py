"""Results: the versioned schema of one run's result, the atomic writer, and
loading and reuse (older schema versions included). Comparing results is
:mod:`gnnbench.measure.compare.comparison`.

:class:`RunResult` is one result (:data:`SCHEMA_VERSION`); :func:`load_result`
reads a file of any readable version, and :func:`reuse_problem` says why a
stored result cannot stand in for a new measurement. What each schema version
holds: ``docs/measurement.md``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gnnbench.env import COMPARABLE_KEYS
from gnnbench.timing import summarize

__all__ = [
    "SCHEMA_VERSION",
    "RunResult",
    "GraphInfo",
    "StepCounts",
    "Summary",
    "Transfer",
    "Accuracy",
    "Memory",
    "Point",
    "CompileMetrics",
    "load_result",
    "reuse_problem",
    "graph_label",
]

SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


class _Block:
    """A block of a result file, read and written through one schema: :meth:`from_dict` reads the JSON object
    (a key an older file lacks loads as ``None``; a key this schema does not know, or a required one missing, is
    refused with its name), and :meth:`to_dict` writes it back with the same keys. Fields named in ``_WRITTEN_WHEN_SET`` are written only
    when they hold a value (a loaded graph's provenance, absent for a generated one)."""

    _WRITTEN_WHEN_SET: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def _checked(cls, d: Any, required: list[str]) -> dict[str, Any]:
        """``d`` when it is a JSON object holding every ``required`` key; else the error naming the block."""
        if not isinstance(d, dict):
            raise ValueError(f"{cls.__name__}: expected a JSON object, got {type(d).__name__}")
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"{cls.__name__}: missing key(s) {missing}")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Any:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        d = cls._checked(d, [f.name for f in fields if f.default is dataclasses.MISSING])
        names = {f.name for f in fields}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown key(s) {unknown}; this schema knows {sorted(names)}")
        return cls(**{n: d.get(n) for n in names})

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if f.name not in self._WRITTEN_WHEN_SET or getattr(self, f.name) is not None
        }


@dataclass(frozen=True)
class Summary(_Block):
    """Measured values summarized (:func:`gnnbench.timing.summarize`): the median with quartiles and min-max,
    over ``n`` values (NaN with ``n == 0``)."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> "Summary":
        return cls(**summarize(values))


@dataclass(frozen=True)
class GraphInfo(_Block):
    """The graph a run trained on: sizes, the seconds to generate (or load), prepare and set it up, and the
    edge index's bytes; for a loaded graph, where it came from and what gnnbench substituted."""

    num_nodes: int
    num_edges: int
    generate_seconds: float | None
    prepare_seconds: float | None
    setup_seconds: float | None
    index_bytes: int | None  # after preparation (int32 narrows it)
    index_bytes_int64: int | None  # before
    widened_index_bytes_per_step: float | None = None  # int32 indices widened back for a kernel, per step
    narrowed_index_bytes_per_step: float | None = None  # sampled indices narrowed, per step
    source: str | None = None  # "generated", or how the graph was loaded
    fingerprint: str | None = None
    loaded_from: str | None = None
    notes: list[str] | None = None
    link_holdout: Any = None
    substituted: Any = None
    labels_substituted: Any = None
    _WRITTEN_WHEN_SET = frozenset(
        {"fingerprint", "loaded_from", "notes", "link_holdout", "substituted", "labels_substituted"}
    )


@dataclass(frozen=True)
class StepCounts(_Block):
    """Steps of the run: measured, warm-up (not measured) and in all."""

    measured: int
    warmup: int
    total: int


@dataclass(frozen=True)
class Transfer(_Block):
    """Feature traffic: bytes host -> device, rows gathered and the share served from device memory."""

    bytes_h2d_per_batch: float
    bytes_h2d_total: int
    device_feature_bytes: int
    rows_gathered: int | None = None
    rows_from_device: int | None = None
    hot_hit_rate: float | None = None
    hot_hit_rate_per_epoch: list[float] | None = None


@dataclass(frozen=True)
class Accuracy(_Block):
    """The final evaluation: the task's metric on the validation and test splits, the last training loss, and
    any further metrics the task reports (``val_hits@50``, ...) in :attr:`extra`."""

    metric: str
    val: float
    test: float
    final_loss: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Accuracy":
        main = ("metric", "val", "test", "final_loss")
        d = cls._checked(d, list(main[:3]))
        return cls(**{k: d.get(k) for k in main}, extra={k: v for k, v in d.items() if k not in main})

    def to_dict(self) -> dict[str, Any]:
        main = {"metric": self.metric, "val": self.val, "test": self.test}
        return {**main, **self.extra, "final_loss": self.final_loss}


@dataclass(frozen=True)
class Memory(_Block):
    """Peak memory: the process's host peak, the device's, and the compute device's peak outside and during
    evaluation, with how it was read (:class:`gnnbench.host_memory.EvalPeaks`)."""

    host_peak_bytes: int | None
    device_peak_bytes: int | None
    train_peak_bytes: int | None = None
    eval_peak_bytes: int | None = None
    eval_rise_bytes: int | None = None
    peak_method: str | None = None


@dataclass(frozen=True)
class Point(_Block):
    """A validation point: the run clock (setup + training, evaluation excluded), the step and epoch it was
    read at, and the validation and test metric."""

    seconds: float
    step: int
    epoch: int
    val: float
    test: float


@dataclass(frozen=True)
class CompileMetrics(_Block):
    """What ``torch.compile`` cost, apart from steady-state steps."""

    first_step_seconds: float | None  # wall time of the first step (compilation included)
    estimated_compile_seconds: float | None  # first step minus the median step
    unique_graphs: int  # graphs dynamo compiled
    recompilations: int  # unique_graphs - 1
    graph_breaks: int | None = None  # graph breaks dynamo hit (each splits the forward; None: not recorded)


@dataclass
class RunResult:
    """One configuration's measured result (``status == "ok"``) or the reasons it could not run
    (``"unavailable"``, with :attr:`unavailable`) or why it failed (``"failed"``, with :attr:`error`).

    The blocks are typed (:class:`GraphInfo`, :class:`StepCounts`, :class:`Summary` for ``step_seconds`` and
    each phase, :class:`Transfer`, :class:`Accuracy`, :class:`Memory`, :class:`Point` for the curve and the
    converged point, :class:`CompileMetrics`), read and written by :meth:`from_dict` and :meth:`to_dict` as the
    JSON objects of the file. ``batch_cache``, ``sampled``, ``distributed`` and ``process`` stay JSON objects:
    each is written whole by its producer's own ``to_dict`` and read by few.
    """

    status: str  # "ok" | "unavailable" | "failed"
    config: dict[str, Any]  # RunConfig.to_dict()
    environment: dict[str, Any] = field(default_factory=dict)  # versions, device, threads, commit
    unavailable: dict[str, str] | None = None  # field -> reason, when status is "unavailable"
    error: str | None = None  # when status is "failed"
    timing_mode: str | None = None  # "sync" (per-phase) | "end_to_end"
    graph: GraphInfo | None = None
    steps: StepCounts | None = None
    step_seconds: Summary | None = None  # summary of measured steps
    step_seconds_all: list[float] = field(default_factory=list)  # every measured step
    phases: dict[str, Summary] | None = None  # per phase (gnnbench.timing.PHASES)
    device_phase_ms: dict[str, Summary] | None = None  # CUDA events, sync mode only
    # phases loader worker processes ran per batch (worker clock), overlapped with the steps: not in `phases`
    worker_phases: dict[str, Summary] | None = None
    epoch_seconds: list[float] = field(default_factory=list)  # training clock per epoch
    epochs_run: int | None = None  # epochs trained: config.epochs, or more where the source needs them (batch cache)
    steps_per_epoch: int | None = None  # steps of the first epoch
    setup_seconds: float | None = None  # setup clock: preparation, CSR, normalization, METIS, cache building
    train_seconds: float | None = None  # training clock: every step and per-epoch cost, evaluation excluded
    curve: list[Point] = field(default_factory=list)  # validation points in the order they were read
    eval_seconds: float | None = None  # all evaluations together (off the clocks)
    stop_reason: str | None = None  # why training stopped: epochs | plateau | max_epochs | max_steps | max_seconds
    # background producer work done during evaluations, charged back to the training clock (gnnbench.background)
    eval_charged_seconds: float | None = None
    converged: Point | None = None  # the best validation point (the first of equals)
    data_wait_fraction: float | None = None
    compute_fraction: float | None = None
    device_busy_fraction: float | None = None
    device_busy_reason: str | None = None  # why device_busy_fraction is missing
    instrumentation_overhead_fraction: float | None = None
    compile: CompileMetrics | None = None
    transfer: Transfer | None = None
    accuracy: Accuracy | None = None
    memory: Memory | None = None
    batch_cache: dict[str, Any] | None = None  # CacheStats: hits, misses, ..., per_epoch [{epoch, hits, misses}]
    # the neighbour explosion: nodes and edges per batch (per hop), the share of the graph's nodes a batch covers
    sampled: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    # a multi-rank run (gnnbench.measure.run.rank): world size, backend, per-rank figures, communication share
    distributed: dict[str, Any] | None = None
    # the process, read back from it (gnnbench.process.in_effect): allocator, threads and cores, and the
    # measured steps' page faults and user / kernel CPU time
    process: dict[str, Any] | None = None
    # this configuration's steps timed against its round's baseline in one process, interleaved
    # (gnnbench.measure.run.interleaved.PairTiming.to_dict): the time per step a sweep reads where it has it
    interleaved: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION
    # where a sweep placed the result (written into its file by the sweep; None outside a sweep): the entry's
    # label, its round, the optimizations it turns on, and whether it is derived from the baseline's run
    label: str | None = None
    round: int | None = None
    optimizations: list[str] | None = None
    derived: bool | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def setup_clock(self) -> float:
        """The setup clock (preparation, CSR, normalization, METIS, cache building); for a version 1 result,
        which has none, the graph's setup seconds; 0.0 without either."""
        if self.setup_seconds:
            return float(self.setup_seconds)
        return float(self.graph.setup_seconds or 0.0) if self.graph is not None else 0.0

    @property
    def clock_seconds(self) -> float:
        """The run's duration as its clocks give it: generating (or loading) the graph, setup, training and
        evaluation (0.0 for what it did not record)."""
        graph = (self.graph.generate_seconds or 0.0) if self.graph is not None else 0.0
        return graph + (self.setup_seconds or 0.0) + (self.train_seconds or 0.0) + (self.eval_seconds or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; fields that do not apply to the status are left out, and a sweep's placement fields
        only inside a sweep."""
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            d[f.name] = _plain(getattr(self, f.name))
        if self.status != "ok":
            keep = {"schema_version", "status", "config", "environment", "unavailable", "error", *_PLACEMENT}
            d = {k: v for k, v in d.items() if k in keep and v is not None}
        elif not self.warnings:
            d.pop("warnings")
        for k in ("distributed", "process", "interleaved", "unavailable", "error", *_PLACEMENT):
            if d.get(k, 0) is None:
                d.pop(k)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunResult":
        """Read a result of any readable schema version; a newer one is refused with its version.

        Raises:
            ValueError: for an unreadable version, or a block that does not match its schema (naming it).
        """
        version = d.get("schema_version", 1)
        if version not in READABLE_VERSIONS:
            raise ValueError(
                f"result schema version {version!r} is not readable by this gnnbench "
                f"(reads {', '.join(map(str, READABLE_VERSIONS))}); upgrade gnnbench"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        try:
            for name, block in _BLOCKS.items():
                if kw.get(name) is not None:
                    kw[name] = block.from_dict(kw[name])
            for name in ("phases", "device_phase_ms", "worker_phases"):
                if kw.get(name) is not None:
                    kw[name] = {p: Summary.from_dict(v) for p, v in kw[name].items()}
            kw["curve"] = [Point.from_dict(p) for p in kw.get("curve") or []]
        except (TypeError, AttributeError) as e:  # a block of the wrong shape (a list where a mapping belongs)
            raise ValueError(f"result block does not match its schema: {e}") from None
        kw["environment"] = kw.get("environment") or {}  # a file that wrote none, or null
        kw["schema_version"] = version
        return cls(**kw)


_PLACEMENT = ("label", "round", "optimizations", "derived")
_BLOCKS: dict[str, type[_Block]] = {
    "graph": GraphInfo,
    "steps": StepCounts,
    "step_seconds": Summary,
    "transfer": Transfer,
    "accuracy": Accuracy,
    "memory": Memory,
    "converged": Point,
    "compile": CompileMetrics,
}


def _plain(v: Any) -> Any:
    """A field's JSON value: blocks through their ``to_dict``, inside lists and dicts too."""
    if isinstance(v, _Block):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def graph_label(config: dict[str, Any]) -> str:
    """The graph a result's config trained on: the preset's name, or the loaded file's / dataset's name with the
    head of its content fingerprint (``graph.npz@1a2b3c4d``)."""
    source = config.get("source")
    if source:
        name = Path(source["location"]).name if source.get("kind") == "file" else source["location"]
        return f"{name}@{str(source.get('fingerprint', '')).split(':')[-1][:8]}"
    return (config.get("spec") or {}).get("name", "?")


def load_result(path: str | Path) -> RunResult | None:
    """A result file, typed (``None`` when missing, partial, not a result, or not readable by this schema: a
    corrupt or partial file is measured again, never trusted)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "status" not in data or "config" not in data:
        return None
    try:
        return RunResult.from_dict(data)
    except (TypeError, ValueError):
        return None


def reuse_problem(stored: RunResult, config: dict[str, Any], env: dict[str, Any]) -> str | None:
    """Why a stored result cannot stand in for measuring ``config`` now in ``env`` (``None``: it can).

    Reused only when the config, the code fingerprint (gnnbench's sources,
    committed or not) and the environment (machine, device, torch / PyG /
    Python versions, threads) all match.
    """
    if stored.config != json.loads(json.dumps(config, default=str)):
        return "another configuration"
    for key in COMPARABLE_KEYS:
        if stored.environment.get(key) != env.get(key):
            return f"{key} differs (stored {stored.environment.get(key)!r}, now {env.get(key)!r})"
    return None
