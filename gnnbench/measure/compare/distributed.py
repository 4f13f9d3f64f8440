"""A multi-rank comparison row's ``distributed`` figures: communication share, bytes on the wire, scaling
efficiency, a partition's efficiency against single-process full-batch training and a gradient compression's
accuracy against dense data parallel.

Those references are found by what they are (the flags each result carries), never by a registry entry's name.
The figures stay a mapping: the same block a multi-rank run result carries (:mod:`gnnbench.report.distributed_text`
reads either).
"""

from __future__ import annotations

import statistics
from typing import Any

from gnnbench import registry
from gnnbench.measure.compare.accuracy import acc_verdict, converged_test
from gnnbench.measure.compare.paired import by_round, mean_interval, ratio_over_rounds
from gnnbench.measure.compare.rows import ComparisonRow, PairedRatio
from gnnbench.measure.run import RunResult

__all__ = ["distributed_summary", "partition_efficiency", "compression_accuracy"]


def _flags(run: RunResult) -> dict[str, Any]:
    """The flags a run trained with: those its config carries; a result without them (built by hand) is read as
    the default flags with its registered ``optimizations`` switched on."""
    stored = run.config.get("flags")
    if stored:
        return stored
    return registry.flags_for([n for n in run.optimizations or [] if n in registry.REGISTRY]).to_dict()


def _reference(by_label: dict[str, list[RunResult]], label: str, **what: Any) -> str | None:
    """The measured configuration of the sweep whose flags are ``what`` (field -> value), other than ``label``;
    where several are, the one whose flags differ from ``label``'s in the fewest fields (then by label)."""
    mine = _flags(by_label[label][0])
    found = []
    for other, runs in by_label.items():
        flags = _flags(runs[0])
        if other != label and by_round(runs) and all(flags.get(k) == v for k, v in what.items()):
            found.append((sum(flags.get(k) != v for k, v in mine.items()), other))
    return min(found)[1] if found else None


def _efficiency(step: PairedRatio, n: int) -> dict[str, float]:
    """The scaling efficiency ``T1 / (N x TN)`` from the step ratio ``T1 / TN`` over ``n`` ranks."""
    return {"ratio": step.ratio / n, "low": step.low / n, "high": step.high / n}


def distributed_summary(runs: list[RunResult], step: PairedRatio | None) -> dict[str, Any] | None:
    """A multi-rank configuration's figures over its rounds (``None`` for a single-process one).

    Args:
        runs: Its results (one, for a single run): world size, backend, compression, the communication share
            of the step and bytes on the wire are read from their ``distributed`` blocks (means over rounds).
        step: The paired step ratio against the single-process baseline on the same global batch, from which
            the scaling efficiency ``T1 / (N x TN)`` follows; ``None``: no efficiency.
    """
    blocks = [r.distributed for r in runs if r.distributed]
    if not blocks:
        return None

    def mean(key: str) -> float | None:
        vals = [b[key] for b in blocks if b.get(key) is not None]
        return statistics.mean(vals) if vals else None

    n = blocks[0]["world_size"]
    g, spec = runs[0].graph, runs[0].config.get("spec") or {}
    # fp32 features of a generated graph (a loaded graph's feature width is not in its result)
    features = g.num_nodes * spec["feature_dim"] * 4 if g is not None and spec.get("feature_dim") else None
    eff = _efficiency(step, n) if step is not None and n else None
    parts = [b["partition"] for b in blocks if b.get("partition")]
    partition = None
    if parts:  # numbers: mean over rounds (the partition itself is the same in every round)
        partition = {}
        for k, v in parts[0].items():
            vals = [p[k] for p in parts if isinstance(p.get(k), (int, float)) and not isinstance(p.get(k), bool)]
            partition[k] = statistics.mean(vals) if vals and not isinstance(v, str) else v
    return {
        "world_size": n,
        "backend": blocks[0].get("backend"),
        "parallel": blocks[0].get("parallel"),
        "grad_compression": blocks[0].get("grad_compression"),
        "comm_share": mean("comm_share"),
        "bytes_per_step": mean("bytes_per_step"),
        "dense_bytes_per_step": mean("dense_bytes_per_step"),
        "compression_ratio": mean("compression_ratio"),
        "scaling_efficiency": eff,
        "partition": partition,
        "graph_bytes": (g.index_bytes or 0) + features if g is not None and features is not None else None,
        "device": runs[0].environment.get("device") or "cpu",
    }


def partition_efficiency(rows: list[ComparisonRow], by_label: dict[str, list[RunResult]]) -> None:
    """Partition-parallel steps are full-graph steps: their scaling efficiency is against the sweep's
    single-process full-batch configuration (paired by round), not the sampled baseline; set in place, with
    ``efficiency_against`` naming that configuration (``None``: the sweep has none, so no efficiency)."""
    for row in rows:
        d = row.distributed
        if not d or d.get("parallel") != "partition":
            continue
        ref = _reference(by_label, row.label, batch_source="full", parallel="none")
        d["efficiency_against"] = ref
        if ref is None or not d.get("world_size"):
            continue
        full, mine = by_round(by_label[ref]), by_round(by_label[row.label])
        ks = [k for k in sorted(mine) if k in full]
        if not ks:
            continue
        step = ratio_over_rounds([full[k].step_seconds.median for k in ks], [mine[k].step_seconds.median for k in ks])
        d["scaling_efficiency"] = _efficiency(step, d["world_size"])


def compression_accuracy(rows: list[ComparisonRow], by_label: dict[str, list[RunResult]]) -> None:
    """A gradient-compression configuration's test accuracy against dense data parallel (the sweep's data-parallel
    configuration without compression, paired by round, each at convergence): ``distributed["accuracy_vs_dense"]``,
    set in place."""
    for row in rows:
        d = row.distributed
        if not d or d.get("grad_compression") in (None, "none"):
            continue
        ref = _reference(by_label, row.label, parallel="data", grad_compression="none")
        if ref is None:
            continue
        dense, mine = by_round(by_label[ref]), by_round(by_label[row.label])
        ks = [k for k in sorted(mine) if k in dense]
        if not ks:
            continue
        deltas = [converged_test(mine[k]) - converged_test(dense[k]) for k in ks]
        mean, low, high = mean_interval(deltas)
        d["accuracy_vs_dense"] = {
            "against": ref,
            "delta": mean,
            "low": low,
            "high": high,
            "rounds": len(ks),
            "verdict": acc_verdict(low, high),
            "test": statistics.mean(converged_test(mine[k]) for k in ks),
            "dense_test": statistics.mean(converged_test(dense[k]) for k in ks),
        }
