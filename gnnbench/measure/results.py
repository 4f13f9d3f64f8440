"""Results: the versioned schema of one run's result, the atomic writer,
loading (older schema versions included), and the comparison rows that the
CLI and the report show.

Schema history:

- 1: the dict ``runner.run`` built inline (gnnbench before the training-loop
  restructuring). Its keys are exactly version 2's, so version-1 files load
  unchanged.
- 2: :class:`RunResult`; ``compile`` is a :class:`CompileMetrics`; adds the
  setup and training clocks (``setup_seconds``, ``train_seconds``) and the
  validation ``curve`` that time to accuracy is read from (empty when loaded
  from version 1).
- 3: ``phases`` gains ``negatives`` (link prediction: drawing negatives, moved
  out of ``sample``; 0 for node classification) and ``worker_phases`` records
  what loader workers ran overlapped. Version 1 and 2 files load unchanged:
  their ``phases`` have no ``negatives`` (a link run's negatives are inside
  ``sample`` there), and readers show the phases a result has.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gnnbench import registry
from gnnbench.atomic import write_json_atomic
from gnnbench.env import COMPARABLE_KEYS
from gnnbench.flags import format_reasons
from gnnbench.measure.stats import noise_floor, paired_ratio, t_quantile

__all__ = ["SCHEMA_VERSION", "RunResult", "CompileMetrics", "Comparison", "write_json_atomic", "load_result",
           "reuse_problem", "compare", "compare_rows", "graph_label", "distributed_cells", "partition_text", "BASELINE", "AA_LABEL", "E2E_BASELINE",
           "NO_COST_PP"]

SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
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
    # phases loader worker processes ran per batch (worker clock), overlapped with the steps: not in `phases`
    worker_phases: dict[str, dict[str, float]] | None = None
    epoch_seconds: list[float] = field(default_factory=list)  # training clock per epoch
    epochs_run: int | None = None  # epochs trained: config.epochs, or more where the source needs them (batch cache)
    setup_seconds: float | None = None  # setup clock: preparation, CSR, normalization, METIS, cache building
    train_seconds: float | None = None  # training clock: every step and per-epoch cost, evaluation excluded
    curve: list[dict[str, Any]] = field(default_factory=list)  # validation points: seconds, step, epoch, val, test
    eval_seconds: float | None = None  # all evaluations together (off the clocks)
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
    warnings: list[str] = field(default_factory=list)
    # a multi-rank run (gnnbench.measure.worker): world size, backend, per-rank figures, communication share
    distributed: dict[str, Any] | None = None
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
        if d.get("distributed", 0) is None:
            d.pop("distributed")
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
        return RunResult.from_dict(data).to_dict() | {k: v for k, v in data.items()
                                                      if k in ("label", "optimizations", "round")}
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


# ------------------------------------------------------------------ comparison
NO_COST_PP = 0.5  # an accuracy delta whose paired interval lies within +-0.5 pp is "no accuracy cost"
AA_LABEL = "baseline (A/A)"
E2E_BASELINE = "baseline (end-to-end)"  # the baseline timed end to end, for entries whose gain is overlap


@dataclass
class Comparison:
    """A sweep's comparison: one row per configuration, the noise floor and the accuracy target."""

    rows: list[dict[str, Any]]
    rounds: int  # baseline rounds measured
    target: float | None  # validation target for time to accuracy
    target_source: str  # how the target was chosen
    floors: dict[str, float]  # metric -> smallest resolvable factor (from the baseline's process spread)
    aa: dict[str, Any] | None = None  # the A/A row, when the sweep ran one


def _ok(r: dict) -> bool:
    return r.get("status") == "ok" and bool(r.get("step_seconds_all"))


def _by_round(runs: list[dict]) -> dict[int, dict]:
    return {r.get("round", i): r for i, r in enumerate(runs) if _ok(r)}


def _end_to_end(runs: list[dict]) -> bool:
    """Whether these runs were timed end to end (entries whose gain is overlap)."""
    return any(r.get("timing_mode") == "end_to_end" for r in runs)


def _epoch_time(r: dict) -> float:
    e = r.get("epoch_seconds") or []
    return statistics.mean(e) if e else float("nan")


def _last_epoch(r: dict) -> int | None:
    curve = r.get("curve") or []
    return curve[-1]["epoch"] if curve else None


def _test_at(r: dict, epoch: int | None) -> float:
    """Test metric at the end of ``epoch``, so a run extended past the baseline's epochs (batch_cache's K+1)
    is compared at equal epochs; the final one when the run has no later point."""
    curve = r.get("curve") or []
    if epoch is not None and curve and curve[-1]["epoch"] > epoch:
        at = [p for p in curve if p["epoch"] == epoch]
        if at:
            return float(at[-1]["test"])
    return float(r["accuracy"]["test"])


def _time_to(r: dict, target: float | None) -> float | None:
    """Setup + training clock when validation first reached ``target`` (``None``: not reached)."""
    if target is None:
        return None
    for point in r.get("curve") or []:
        if point["val"] >= target - 1e-12:
            return float(point["seconds"])
    return None


def _interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean with a t-interval (nan bounds for fewer than 2 values)."""
    if not values:
        return float("nan"), float("nan"), float("nan")
    mean = statistics.mean(values)
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = t_quantile((1 + level) / 2, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def _ratio_dict(base: list[float], other: list[float]) -> dict[str, Any] | None:
    pairs = [(b, o) for b, o in zip(base, other) if b == b and o == o and b > 0 and o > 0]
    if not pairs:
        return None
    ri = paired_ratio([b for b, _ in pairs], [o for _, o in pairs])
    return {"ratio": ri.ratio, "low": ri.low, "high": ri.high, "significant": ri.significant, "rounds": ri.rounds}


def _changes_work(optimizations: list[str]) -> bool:
    return any(registry.REGISTRY[n].changes_work for n in optimizations if n in registry.REGISTRY)


def compare(results: list[dict], *, target_acc: float | None = None) -> Comparison:
    """Per configuration, paired by round against the baseline of the same sweep: speedups of the step,
    epoch and time-to-accuracy clocks with run-level intervals, the setup clock, and the paired accuracy delta.

    Args:
        results: Sweep results (dicts with ``label`` and ``round``).
        target_acc: Validation target for time to accuracy; default the
            baseline's best validation metric minus 1 pp (the lowest of its
            per-round bests, so the baseline itself reaches it in every round).
    """
    by_label: dict[str, list[dict]] = {}
    for r in results:
        by_label.setdefault(r["label"], []).append(r)
    base_runs = by_label.get(BASELINE, [])
    base = _by_round(base_runs)
    e2e_base = _by_round(by_label.get(E2E_BASELINE, []))
    if not base:
        why = [w for r in base_runs for w in r.get("warnings", [])] or \
              [str(r.get("unavailable") or r.get("error")) for r in base_runs]
        raise ValueError("the sweep has no measured baseline run to compare against"
                         + (f": {'; '.join(why)}" if why else ""))
    best = [max(p["val"] for p in r["curve"]) for r in base.values() if r.get("curve")]
    meaningless = any(r.get("graph", {}).get("labels_substituted") for r in base.values())
    if meaningless:  # a loaded graph without labels: gnnbench made some up, so only the clocks mean anything
        target, source = None, "none: the graph's labels were substituted (accuracy is meaningless), epoch time only"
    elif target_acc is not None:
        target, source = target_acc, "given"
    elif best:  # the lowest of the baseline's per-round bests, so the baseline reaches it in every round
        target, source = min(best) - 0.01, "baseline's best validation (lowest over rounds) - 1 pp"
    else:
        target, source = None, "no validation curve in these results"
    rounds = sorted(base)
    floors = {"step": noise_floor([base[k]["step_seconds"]["median"] for k in rounds]),
              "epoch": noise_floor([_epoch_time(base[k]) for k in rounds])}
    base_tta = [_time_to(base[k], target) for k in rounds]
    if target is not None and all(t is not None for t in base_tta):
        floors["time_to_accuracy"] = noise_floor(base_tta)
    rows = [_row(label, runs, e2e_base if _end_to_end(runs) and e2e_base else base, target)
            for label, runs in by_label.items()]
    if meaningless:
        for row in rows:
            if row.get("acc_verdict"):
                row["acc_verdict"] = "n/a: labels substituted"
    _partition_efficiency(rows, by_label)
    _compression_accuracy(rows, by_label)
    aa = next((r for r in rows if r["label"] == AA_LABEL), None)
    head = [r for r in rows if r["label"] == BASELINE]
    # Time to accuracy first (a configuration that never reaches the target ranks after those that do),
    # then epoch time; unmeasured rows last.
    rest = sorted((r for r in rows if r["label"] != BASELINE),
                  key=lambda r: (r["status"] != "ok", r.get("primary") != "time to accuracy",
                                 -(r.get("speedup") or 0.0)))
    return Comparison(head + rest, len(rounds), target, source, floors, aa)


def _partition_efficiency(rows: list[dict], by_label: dict[str, list[dict]]) -> None:
    """Partition-parallel steps are full-graph steps: their scaling efficiency is against the sweep's
    single-process ``full_batch`` entry (paired by round), not the sampled baseline; set in place."""
    full = _by_round(by_label.get("full_batch", []))
    for row in rows:
        d = row.get("distributed")
        if not d or d.get("parallel") != "partition":
            continue
        d["efficiency_against"] = "full_batch"
        mine = _by_round(by_label[row["label"]])
        ks = [k for k in sorted(mine) if k in full]
        if not ks or not d.get("world_size"):
            continue  # no full_batch run in this sweep: efficiency n/a
        step = _ratio_dict([full[k]["step_seconds"]["median"] for k in ks],
                           [mine[k]["step_seconds"]["median"] for k in ks])
        n = d["world_size"]
        d["scaling_efficiency"] = {"ratio": step["ratio"] / n, "low": step["low"] / n, "high": step["high"] / n}


def partition_text(d: dict[str, Any], size: Callable[[float], str]) -> str | None:
    """One line on a partition-parallel configuration's partition and halo (``None`` for other modes)."""
    p = d.get("partition")
    if not p:
        return None
    halo = p.get("halo_rows_per_step")
    return (f"partition {p['method']}, {int(p['parts'])} parts in {p['seconds']:.2f} s: edge cut "
            f"{p['edge_cut_fraction']:.1%}, node balance {p['node_balance']:.2f}, edge balance {p['edge_balance']:.2f}; "
            f"per step and rank: halo {'n/a' if halo is None else f'{halo:,.0f} rows'}"
            f" ({'n/a' if p.get('halo_bytes_per_step') is None else size(p['halo_bytes_per_step'])} sent), "
            f"gradient all-reduce {'n/a' if p.get('grad_bytes_per_step') is None else size(p['grad_bytes_per_step'])}"
            f"; efficiency against {d.get('efficiency_against', 'the baseline')}")


def _acc_verdict(low: float, high: float) -> str:
    """The verdict on a paired accuracy delta's interval (fractions, not pp)."""
    if low != low:
        return "one round: no interval"
    if -NO_COST_PP / 100 <= low and high <= NO_COST_PP / 100:
        return "no accuracy cost"
    if high < 0:
        return "costs accuracy"
    if low > 0:
        return "gains accuracy"
    return f"inconclusive (interval wider than +-{NO_COST_PP} pp)"


def _compression_accuracy(rows: list[dict], by_label: dict[str, list[dict]]) -> None:
    """A gradient-compression configuration's test accuracy against dense data parallel (the sweep's
    ``data_parallel`` entry, paired by round, at equal epochs): ``distributed["accuracy_vs_dense"]``, set in place."""
    dense = _by_round(by_label.get("data_parallel", []))
    for row in rows:
        d = row.get("distributed")
        if not d or d.get("grad_compression") in (None, "none") or not dense:
            continue
        mine = _by_round(by_label[row["label"]])
        ks = [k for k in sorted(mine) if k in dense]
        if not ks:
            continue
        deltas = [_test_at(mine[k], _last_epoch(dense[k])) - dense[k]["accuracy"]["test"] for k in ks]
        mean, low, high = _interval(deltas)
        d["accuracy_vs_dense"] = {"against": "data_parallel", "delta": mean, "low": low, "high": high,
                                  "rounds": len(ks), "verdict": _acc_verdict(low, high),
                                  "test": statistics.mean(_test_at(mine[k], _last_epoch(dense[k])) for k in ks),
                                  "dense_test": statistics.mean(dense[k]["accuracy"]["test"] for k in ks)}


def compression_text(d: dict[str, Any]) -> str | None:
    """One line on a compression configuration's accuracy against dense data parallel (``None`` if not measured)."""
    a = d.get("accuracy_vs_dense")
    if not a:
        return None
    interval = "" if a["low"] != a["low"] else f" [{100 * a['low']:+.2f}, {100 * a['high']:+.2f}]"
    return (f"test accuracy {a['test']:.2%} against {a['dense_test']:.2%} with dense {a['against']} at equal epochs: "
            f"{100 * a['delta']:+.2f} pp{interval} over {a['rounds']} paired round(s): {a['verdict']}")


def _row(label: str, runs: list[dict], base: dict[int, dict], target: float | None) -> dict[str, Any]:
    optimizations = runs[0].get("optimizations", [])
    row: dict[str, Any] = {"label": label, "optimizations": optimizations,
                           "timing_mode": "end_to_end" if _end_to_end(runs) else "sync"}
    mine = _by_round(runs)
    if not mine:
        if any(r.get("status") == "ok" for r in runs):
            warnings = [w for r in runs for w in r.get("warnings", [])]
            row.update(status="not measured", reason="; ".join(warnings) or "no measured steps")
        else:
            reasons = runs[0].get("unavailable") or {"error": runs[0].get("error", "failed")}
            row.update(status=runs[0].get("status"), reason=format_reasons(reasons))
        return row
    rounds = [k for k in sorted(mine) if k in base]
    if not rounds:
        row.update(status="not measured", reason="no round shared with a measured baseline run")
        return row
    b = [base[k] for k in rounds]
    m = [mine[k] for k in rounds]
    same_work = not _changes_work(optimizations)
    step = _ratio_dict([r["step_seconds"]["median"] for r in b], [r["step_seconds"]["median"] for r in m])
    epoch = _ratio_dict([_epoch_time(r) for r in b], [_epoch_time(r) for r in m])
    tta_b = [_time_to(r, target) for r in b]
    tta_m = [_time_to(r, target) for r in m]
    reached = sum(t is not None for t in tta_m)
    tta = None
    if target is not None and reached == len(m) and all(t is not None for t in tta_b):
        tta = _ratio_dict(tta_b, tta_m)
    deltas = [(_test_at(y, _last_epoch(x)) - x["accuracy"]["test"]) for x, y in zip(b, m)]
    d_mean, d_low, d_high = _interval(deltas)
    verdict = _acc_verdict(d_low, d_high)
    primary, primary_name = (tta, "time to accuracy") if tta is not None else (epoch, "epoch time")
    epochs = m[0]["config"]["epochs"]
    row.update(
        status="ok", rounds=len(rounds), same_work=same_work,
        step_ms=1e3 * statistics.median(r["step_seconds"]["median"] for r in m),
        step_speedup=step if same_work else None,
        epoch_s=statistics.median(_epoch_time(r) for r in m), epoch_speedup=epoch,
        setup_s=statistics.median(r.get("setup_seconds") or r["graph"].get("setup_seconds", 0.0) for r in m),
        tta_s=statistics.median(t for t in tta_m if t is not None) if reached else None,
        tta_reached=f"{reached}/{len(m)}", tta_speedup=tta,
        tta_note=(None if tta is not None or target is None
                  else f"not reached within {epochs} epochs in {len(m) - reached} of {len(m)} rounds"
                  if reached < len(m) else "baseline did not reach the target in every round"),
        primary=primary_name, speedup=primary["ratio"] if primary else None,
        speedup_low=primary["low"] if primary else None, speedup_high=primary["high"] if primary else None,
        significant=bool(primary and primary["significant"]),
        test_acc=statistics.mean(_test_at(y, _last_epoch(x)) for x, y in zip(b, m)),
        acc_delta=d_mean, acc_delta_low=d_low, acc_delta_high=d_high,
        acc_delta_spread=(max(deltas) - min(deltas)) if len(deltas) > 1 else 0.0, acc_verdict=verdict,
        seeds=len(m), phases={p: v["median"] for p, v in m[0]["phases"].items()},
        compile=m[0].get("compile"),
        device_busy=(statistics.mean(r["device_busy_fraction"] for r in m)
                     if all(r.get("device_busy_fraction") is not None for r in m) else None),
        h2d_bytes_per_batch=m[0]["transfer"]["bytes_h2d_per_batch"],
        device_phase_ms=({p: statistics.median(r["device_phase_ms"][p]["median"] for r in m)
                          for p in m[0]["device_phase_ms"]}
                         if all(r.get("device_phase_ms") for r in m) else None),
        distributed=_distributed_summary(m, step if same_work else None),  # efficiency needs the same work
    )
    return row


def distributed_cells(d: dict[str, Any], size: Callable[[float], str]) -> tuple[str, str, str]:
    """``(scaling efficiency [interval], communication share, bytes on the wire)`` of a row's ``distributed``
    figures as text, ``size`` formatting a byte count; ``n/a`` where a figure is missing."""
    eff = d.get("scaling_efficiency")
    eff_txt = f"{eff['ratio']:.2f} [{eff['low']:.2f}, {eff['high']:.2f}]" if eff else "n/a"
    share = "n/a" if d.get("comm_share") is None else f"{d['comm_share']:.0%}"
    sent, ratio = d.get("bytes_per_step"), d.get("compression_ratio")
    wire = "n/a" if sent is None else size(sent) + (
        f" ({ratio:.1%} of dense)" if ratio is not None and d.get("grad_compression") not in (None, "none") else "")
    return eff_txt, share, wire


def _distributed_summary(runs: list[dict], step: dict | None) -> dict[str, Any] | None:
    """A multi-rank configuration's figures over its rounds: world size, backend, compression, the
    communication share of the step and bytes on the wire (means over rounds), and the scaling efficiency
    ``T1 / (N x TN)`` from the paired step ratio against the single-process baseline (same global batch)."""
    blocks = [r["distributed"] for r in runs if r.get("distributed")]
    if not blocks:
        return None

    def mean(key: str) -> float | None:
        vals = [b[key] for b in blocks if b.get(key) is not None]
        return statistics.mean(vals) if vals else None

    n = blocks[0]["world_size"]
    g, spec = runs[0].get("graph", {}), (runs[0].get("config") or {}).get("spec") or {}
    features = g.get("feature_bytes")
    if features is None and spec.get("feature_dim"):
        features = g["num_nodes"] * spec["feature_dim"] * 4  # fp32 features of a generated graph
    eff = None
    if step is not None and n:
        eff = {"ratio": step["ratio"] / n, "low": step["low"] / n, "high": step["high"] / n}
    parts = [b["partition"] for b in blocks if b.get("partition")]
    partition = None
    if parts:  # numbers: mean over rounds (the partition itself is the same in every round)
        partition = {}
        for k, v in parts[0].items():
            vals = [p[k] for p in parts if isinstance(p.get(k), (int, float)) and not isinstance(p.get(k), bool)]
            partition[k] = statistics.mean(vals) if vals and not isinstance(v, str) else v
    return {"world_size": n, "backend": blocks[0].get("backend"), "parallel": blocks[0].get("parallel"),
            "grad_compression": blocks[0].get("grad_compression"), "comm_share": mean("comm_share"),
            "bytes_per_step": mean("bytes_per_step"), "dense_bytes_per_step": mean("dense_bytes_per_step"),
            "compression_ratio": mean("compression_ratio"), "scaling_efficiency": eff, "partition": partition,
            "graph_bytes": (g.get("index_bytes") or 0) + features if features is not None else None,
            "device": (runs[0].get("environment") or {}).get("device") or "cpu"}


def compare_rows(results: list[dict], *, target_acc: float | None = None) -> list[dict]:
    """The rows of :func:`compare` (baseline first, then ranked by the primary speedup)."""
    return compare(results, target_acc=target_acc).rows
