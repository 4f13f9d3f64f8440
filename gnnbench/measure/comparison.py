"""The comparison of a sweep (``gnnbench compare``, the report, diagnose ``--verify``, tune): per configuration,
paired by round against the baseline of the same sweep, the speedups of the step, epoch and time-to-accuracy
clocks with run-level intervals (:func:`gnnbench.measure.stats.paired_ratio`), the setup clock, the paired
accuracy delta and the noise floor.

Multi-rank configurations also carry their ``distributed`` figures: communication share, bytes on the wire,
scaling efficiency, a partition's efficiency against single-process full-batch training and a gradient
compression's accuracy against dense data parallel. Those references are found by what they are (the flags each
result carries), never by a registry entry's name.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from gnnbench import registry
from gnnbench.flags import format_reasons
from gnnbench.measure.stats import noise_floor, paired_ratio, t_quantile

__all__ = ["Comparison", "compare", "compare_rows", "distributed_summary", "BASELINE", "AA_LABEL", "E2E_BASELINE",
           "identity_problem", "MixedSweepError", "IDENTITY_KEYS",
           "NO_COST_PP"]

BASELINE = "baseline"
AA_LABEL = "baseline (A/A)"
E2E_BASELINE = "baseline (end-to-end)"  # the baseline timed end to end, for entries whose gain is overlap
NO_COST_PP = 0.5  # an accuracy delta whose paired interval lies within +-0.5 pp is "no accuracy cost"


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


def _flags(run: dict) -> dict[str, Any]:
    """The flags a run trained with: those its config carries; a result without them (built by hand) is read as
    the default flags with its registered ``optimizations`` switched on."""
    stored = (run.get("config") or {}).get("flags")
    if stored:
        return stored
    return registry.flags_for([n for n in run.get("optimizations") or [] if n in registry.REGISTRY]).to_dict()


def _reference(by_label: dict[str, list[dict]], label: str, **what: Any) -> str | None:
    """The measured configuration of the sweep whose flags are ``what`` (field -> value), other than ``label``;
    where several are, the one whose flags differ from ``label``'s in the fewest fields (then by label)."""
    mine = _flags(by_label[label][0])
    found = []
    for other, runs in by_label.items():
        flags = _flags(runs[0])
        if other != label and _by_round(runs) and all(flags.get(k) == v for k, v in what.items()):
            found.append((sum(flags.get(k) != v for k, v in mine.items()), other))
    return min(found)[1] if found else None


# What one sweep shares: the environment (threads excepted: multi-rank entries run 1-thread ranks) and the
# base configuration (every config field but those an entry or a round sets).
IDENTITY_KEYS = ("code_fingerprint", "machine", "device_name", "torch", "torch_geometric", "python")
PER_ENTRY_FIELDS = ("flags", "seed", "sync_phases", "nproc", "num_layers")


class MixedSweepError(ValueError):
    """Results that are not one sweep (different code, machine, environment or base configuration)."""


def identity_problem(results: list[dict]) -> str | None:
    """What makes ``results`` more than one sweep, naming each field that differs and its values (with how
    many results carry each), or ``None`` when they share one identity."""
    problems = []
    for key in IDENTITY_KEYS:
        seen = Counter(str(r["environment"].get(key)) for r in results if r.get("environment"))
        if len(seen) > 1:
            problems.append(f"{key} differs ({', '.join(f'{v} in {n}' for v, n in seen.most_common())})")
    bases = [{k: v for k, v in r["config"].items() if k not in PER_ENTRY_FIELDS} for r in results if r.get("config")]
    fields = sorted({k for b in bases for k in b if len({json.dumps(x.get(k), sort_keys=True) for x in bases}) > 1})
    for k in fields:
        seen = Counter(json.dumps(b.get(k), sort_keys=True) for b in bases)
        problems.append(f"the base configuration's {k} differs ({', '.join(f'{v} in {n}' for v, n in seen.most_common(3))})")
    return "; ".join(problems) or None


def compare(results: list[dict], *, target_acc: float | None = None) -> Comparison:
    """Per configuration, paired by round against the baseline of the same sweep: speedups of the step,
    epoch and time-to-accuracy clocks with run-level intervals, the setup clock, and the paired accuracy delta.

    Args:
        results: Sweep results (dicts with ``label`` and ``round``).
        target_acc: Validation target for time to accuracy; default the
            baseline's best validation metric minus 1 pp (the lowest of its
            per-round bests, so the baseline itself reaches it in every round).

    Raises:
        MixedSweepError: when the results are not one sweep (:func:`identity_problem` names what differs).
        ValueError: when there is no measured baseline.
    """
    problem = identity_problem(results)
    if problem:
        raise MixedSweepError(f"these results are not one sweep, so they are not compared: {problem}; compare "
                              "each sweep's folder on its own")
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
    single-process full-batch configuration (paired by round), not the sampled baseline; set in place, with
    ``efficiency_against`` naming that configuration (``None``: the sweep has none, so no efficiency)."""
    for row in rows:
        d = row.get("distributed")
        if not d or d.get("parallel") != "partition":
            continue
        ref = _reference(by_label, row["label"], batch_source="full", parallel="none")
        d["efficiency_against"] = ref
        if ref is None or not d.get("world_size"):
            continue
        full, mine = _by_round(by_label[ref]), _by_round(by_label[row["label"]])
        ks = [k for k in sorted(mine) if k in full]
        if not ks:
            continue
        step = _ratio_dict([full[k]["step_seconds"]["median"] for k in ks],
                           [mine[k]["step_seconds"]["median"] for k in ks])
        n = d["world_size"]
        d["scaling_efficiency"] = {"ratio": step["ratio"] / n, "low": step["low"] / n, "high": step["high"] / n}


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
    """A gradient-compression configuration's test accuracy against dense data parallel (the sweep's data-parallel
    configuration without compression, paired by round, at equal epochs): ``distributed["accuracy_vs_dense"]``,
    set in place."""
    for row in rows:
        d = row.get("distributed")
        if not d or d.get("grad_compression") in (None, "none"):
            continue
        ref = _reference(by_label, row["label"], parallel="data", grad_compression="none")
        if ref is None:
            continue
        dense, mine = _by_round(by_label[ref]), _by_round(by_label[row["label"]])
        ks = [k for k in sorted(mine) if k in dense]
        if not ks:
            continue
        deltas = [_test_at(mine[k], _last_epoch(dense[k])) - dense[k]["accuracy"]["test"] for k in ks]
        mean, low, high = _interval(deltas)
        d["accuracy_vs_dense"] = {"against": ref, "delta": mean, "low": low, "high": high,
                                  "rounds": len(ks), "verdict": _acc_verdict(low, high),
                                  "test": statistics.mean(_test_at(mine[k], _last_epoch(dense[k])) for k in ks),
                                  "dense_test": statistics.mean(dense[k]["accuracy"]["test"] for k in ks)}


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
        distributed=distributed_summary(m, step if same_work else None),  # efficiency needs the same work
    )
    return row


def distributed_summary(runs: list[dict], step: dict | None) -> dict[str, Any] | None:
    """A multi-rank configuration's figures over its rounds (``None`` for a single-process one).

    Args:
        runs: Its results (one, for a single run): world size, backend, compression, the communication share
            of the step and bytes on the wire are read from their ``distributed`` blocks (means over rounds).
        step: The paired step ratio against the single-process baseline on the same global batch, from which
            the scaling efficiency ``T1 / (N x TN)`` follows; ``None``: no efficiency.
    """
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
