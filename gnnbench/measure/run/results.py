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
from typing import Any

from gnnbench.atomic import write_json_atomic
from gnnbench.env import COMPARABLE_KEYS

__all__ = [
    "SCHEMA_VERSION",
    "RunResult",
    "CompileMetrics",
    "write_json_atomic",
    "load_result",
    "reuse_problem",
    "graph_label",
]

SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


@dataclass(frozen=True)
class CompileMetrics:
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

    Field groups follow the JSON layout: ``graph`` (sizes, generation /
    preparation / setup seconds, index bytes), ``steps`` (measured / warmup /
    total), ``step_seconds`` and each of ``phases`` (median, quartiles,
    min-max, n), ``transfer``, ``accuracy``, ``memory`` and ``batch_cache``.
    """

    status: str  # "ok" | "unavailable" | "failed"
    config: dict[str, Any]  # RunConfig.to_dict()
    environment: dict[str, Any] = field(default_factory=dict)  # versions, device, threads, commit
    unavailable: dict[str, str] | None = None  # field -> reason, when status is "unavailable"
    error: str | None = None  # when status is "failed"
    timing_mode: str | None = None  # "sync" (per-phase) | "end_to_end"
    graph: dict[str, Any] | None = None
    steps: dict[str, int] | None = None
    step_seconds: dict[str, float] | None = None  # summary of measured steps
    step_seconds_all: list[float] = field(default_factory=list)  # every measured step
    phases: dict[str, dict[str, float]] | None = None
    device_phase_ms: dict[str, dict[str, float]] | None = None  # CUDA events, sync mode only
    # phases loader worker processes ran per batch (worker clock), overlapped with the steps: not in `phases`
    worker_phases: dict[str, dict[str, float]] | None = None
    epoch_seconds: list[float] = field(default_factory=list)  # training clock per epoch
    epochs_run: int | None = None  # epochs trained: config.epochs, or more where the source needs them (batch cache)
    steps_per_epoch: int | None = None  # steps of the first epoch
    setup_seconds: float | None = None  # setup clock: preparation, CSR, normalization, METIS, cache building
    train_seconds: float | None = None  # training clock: every step and per-epoch cost, evaluation excluded
    curve: list[dict[str, Any]] = field(default_factory=list)  # validation points: seconds, step, epoch, val, test
    eval_seconds: float | None = None  # all evaluations together (off the clocks)
    stop_reason: str | None = None  # why training stopped: epochs | plateau | max_epochs | max_steps | max_seconds
    # background producer work done during evaluations, charged back to the training clock (gnnbench.background)
    eval_charged_seconds: float | None = None
    converged: dict[str, Any] | None = None  # the best validation point (val, test, step, epoch, seconds)
    data_wait_fraction: float | None = None
    compute_fraction: float | None = None
    device_busy_fraction: float | None = None
    device_busy_reason: str | None = None  # why device_busy_fraction is missing
    instrumentation_overhead_fraction: float | None = None
    compile: CompileMetrics | None = None
    transfer: dict[str, float] | None = None  # bytes host -> device, rows gathered / from device, hot_hit_rate
    accuracy: dict[str, Any] | None = None
    memory: dict[str, int | None] | None = None
    batch_cache: dict[str, Any] | None = None  # CacheStats: hits, misses, ..., per_epoch [{epoch, hits, misses}]
    # the neighbour explosion: nodes and edges per batch (per hop), the share of the graph's nodes a batch covers
    sampled: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    # a multi-rank run (gnnbench.measure.run.rank): world size, backend, per-rank figures, communication share
    distributed: dict[str, Any] | None = None
    # the process, read back from it (gnnbench.process.in_effect): allocator, threads and cores, and the
    # measured steps' page faults and user / kernel CPU time
    process: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; fields that do not apply to the status are left out."""
        d = dataclasses.asdict(self)
        if self.status != "ok":
            keep = {"schema_version", "status", "config", "environment", "unavailable", "error"}
            d = {k: v for k, v in d.items() if k in keep and v is not None}
        elif not self.warnings:
            d.pop("warnings")
        for k in ("distributed", "process"):
            if d.get(k, 0) is None:
                d.pop(k)
        for k in ("unavailable", "error"):
            if d.get(k) is None:
                d.pop(k, None)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunResult":
        """Read a result of any readable schema version; a newer one is refused with its version."""
        version = d.get("schema_version", 1)
        if version not in READABLE_VERSIONS:
            raise ValueError(
                f"result schema version {version!r} is not readable by this gnnbench "
                f"(reads {', '.join(map(str, READABLE_VERSIONS))}); upgrade gnnbench"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names}
        if kwargs.get("compile") is not None:
            kwargs["compile"] = CompileMetrics(**kwargs["compile"])
        kwargs["schema_version"] = version
        return cls(**kwargs)


def graph_label(config: dict[str, Any]) -> str:
    """The graph a result's config trained on: the preset's name, or the loaded file's / dataset's name with the
    head of its content fingerprint (``graph.npz@1a2b3c4d``)."""
    source = config.get("source")
    if source:
        name = Path(source["location"]).name if source.get("kind") == "file" else source["location"]
        return f"{name}@{str(source.get('fingerprint', '')).split(':')[-1][:8]}"
    return (config.get("spec") or {}).get("name", "?")


def load_result(path: str | Path) -> dict[str, Any] | None:
    """A result file as a dict (``None`` when missing, partial or not a result)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "status" not in data or "config" not in data:
        return None
    try:
        return RunResult.from_dict(data).to_dict() | {
            k: v for k, v in data.items() if k in ("label", "optimizations", "round", "derived")
        }
    except (TypeError, ValueError):
        return None


def reuse_problem(data: dict[str, Any], config: dict[str, Any], env: dict[str, Any]) -> str | None:
    """Why a stored result cannot stand in for measuring ``config`` now in ``env`` (``None``: it can).

    Reused only when the config, the code fingerprint (gnnbench's sources,
    committed or not) and the environment (machine, device, torch / PyG /
    Python versions, threads) all match.
    """
    if data.get("config") != json.loads(json.dumps(config, default=str)):
        return "another configuration"
    stored = data.get("environment") or {}
    for key in COMPARABLE_KEYS:
        if stored.get(key) != env.get(key):
            return f"{key} differs (stored {stored.get(key)!r}, now {env.get(key)!r})"
    return None
