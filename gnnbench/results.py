"""Results: the versioned schema of one run's result, the atomic writer,
loading (older schema versions included), and the comparison rows that the
CLI and the report show.

Schema history:

- 1: the dict ``runner.run`` built inline (gnnbench before the training-loop
  restructuring). Its keys are exactly version 2's, so version-1 files load
  unchanged.
- 2: :class:`RunResult`; ``compile`` is a :class:`CompileMetrics`.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnbench.atomic import write_json_atomic
from gnnbench.flags import format_reasons
from gnnbench.timing import bootstrap_ratio

__all__ = ["SCHEMA_VERSION", "RunResult", "CompileMetrics", "write_json_atomic", "load_result", "compare_rows",
           "BASELINE"]

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
BASELINE = "baseline"


@dataclass(frozen=True)
class CompileMetrics:
    """What ``torch.compile`` cost, apart from steady-state steps."""

    first_step_seconds: float | None  # wall time of the first step (compilation included)
    estimated_compile_seconds: float | None  # first step minus the median step
    unique_graphs: int  # graphs dynamo compiled
    recompilations: int  # unique_graphs - 1


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
    epoch_seconds: list[float] = field(default_factory=list)
    eval_seconds: float | None = None
    data_wait_fraction: float | None = None
    compute_fraction: float | None = None
    device_busy_fraction: float | None = None
    device_busy_reason: str | None = None  # why device_busy_fraction is missing
    instrumentation_overhead_fraction: float | None = None
    compile: CompileMetrics | None = None
    transfer: dict[str, float] | None = None
    accuracy: dict[str, Any] | None = None
    memory: dict[str, int | None] | None = None
    batch_cache: dict[str, int] | None = None
    warnings: list[str] = field(default_factory=list)
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
        for k in ("unavailable", "error"):
            if d.get(k) is None:
                d.pop(k, None)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunResult":
        """Read a result of any readable schema version; a newer one is refused with its version."""
        version = d.get("schema_version", 1)
        if version not in READABLE_VERSIONS:
            raise ValueError(f"result schema version {version!r} is not readable by this gnnbench "
                             f"(reads {', '.join(map(str, READABLE_VERSIONS))}); upgrade gnnbench")
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names}
        if kwargs.get("compile") is not None:
            kwargs["compile"] = CompileMetrics(**kwargs["compile"])
        kwargs["schema_version"] = version
        return cls(**kwargs)


def load_result(path: str | Path) -> dict[str, Any] | None:
    """A result file as a dict (``None`` when missing, partial or not a result)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "status" not in data or "config" not in data:
        return None
    try:
        return RunResult.from_dict(data).to_dict() | {k: v for k, v in data.items() if k in ("label", "optimizations")}
    except (TypeError, ValueError):
        return None


def compare_rows(results: list[dict]) -> list[dict]:
    """Per configuration: speedup over the baseline with its interval, and the accuracy delta across seeds."""
    by_label: dict[str, list[dict]] = {}
    for r in results:
        by_label.setdefault(r["label"], []).append(r)
    base = [r for r in by_label.get(BASELINE, []) if r.get("status") == "ok" and r.get("step_seconds_all")]
    if not base:
        why = [w for r in by_label.get(BASELINE, []) for w in r.get("warnings", [])] or \
              [str(r.get("unavailable") or r.get("error")) for r in by_label.get(BASELINE, [])]
        raise ValueError("the sweep has no measured baseline run to compare against"
                         + (f": {'; '.join(why)}" if why else ""))
    base_steps = [s for r in base for s in r["step_seconds_all"]]
    base_acc = [r["accuracy"]["test"] for r in base]
    rows = []
    for label, runs in by_label.items():
        ok = [r for r in runs if r.get("status") == "ok" and r.get("step_seconds_all")]
        row = {"label": label, "optimizations": runs[0].get("optimizations", [])}
        if not ok and any(r.get("status") == "ok" for r in runs):
            warnings = [w for r in runs for w in r.get("warnings", [])]
            row.update(status="not measured", reason="; ".join(warnings) or "no measured steps")
            rows.append(row)
            continue
        if not ok:
            reasons = runs[0].get("unavailable") or {"error": runs[0].get("error", "failed")}
            row.update(status=runs[0].get("status"), reason=format_reasons(reasons))
            rows.append(row)
            continue
        steps = [s for r in ok for s in r["step_seconds_all"]]
        acc = [r["accuracy"]["test"] for r in ok]
        ratio = bootstrap_ratio(base_steps, steps)
        delta = [a - statistics.mean(base_acc) for a in acc]
        row.update(
            status="ok", step_ms=1e3 * statistics.median(steps), speedup=ratio["ratio"],
            speedup_low=ratio["low"], speedup_high=ratio["high"], significant=ratio["significant"],
            test_acc=statistics.mean(acc), acc_delta=statistics.mean(delta),
            acc_delta_spread=(max(delta) - min(delta)) if len(delta) > 1 else 0.0,
            seeds=len(ok), phases={p: v["median"] for p, v in ok[0]["phases"].items()},
            compile=ok[0].get("compile"),
            device_busy=(statistics.mean(r["device_busy_fraction"] for r in ok)
                         if all(r.get("device_busy_fraction") is not None for r in ok) else None),
            h2d_bytes_per_batch=ok[0]["transfer"]["bytes_h2d_per_batch"],
        )
        rows.append(row)
    return rows
