"""Locate the bottleneck first, then name what to try: ``gnnbench diagnose``.

:func:`diagnose` runs the quick template of the rules of thumb (``docs/rules.md``): a fixed number of
measured training steps, each split into phases, then a few under the operator profiler, and returns the
:class:`Diagnosis`. The rules that name the bottleneck live in :mod:`gnnbench.advice.rules`, the ranking of what
to try in :mod:`gnnbench.advice.recommend`, the operator profile in :mod:`gnnbench.advice.op_profile`; the text
is :mod:`gnnbench.advice.diagnosis_text`, ``--verify``'s verdicts :mod:`gnnbench.advice.verdicts`, and the rules
for multi-rank runs :mod:`gnnbench.advice.distributed`.

The template, the phase groups and how recommendations are ranked: ``docs/advice.md``.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any

import torch

from gnnbench.advice.op_profile import HotOp, OpProfile, attribute_ops, op_profile
from gnnbench.advice.recommend import Recommendation, recommend
from gnnbench.advice.rules import (
    RULES,
    Finding,
    Rules,
    allocation_finding,
    classify,
    expectation,
    explosion_finding,
    group_shares,
)
from gnnbench.env import resolve_device
from gnnbench.host_memory import peak_bytes
from gnnbench.measure.run import BusySampler
from gnnbench.process import StepUsage, in_effect, threads_in_effect
from gnnbench.timing import PHASES
from gnnbench.training import RunConfig, Trainer

__all__ = ["Diagnosis", "diagnose"]


@dataclass
class Diagnosis:
    """What ``diagnose`` measured and concluded (``to_dict`` for ``--json``)."""

    config: dict
    device: str
    steps: int
    step_ms: dict[str, float]
    phase_ms: dict[str, float]  # mean per measured step
    shares: dict[str, float]  # per bottleneck group, of the mean step
    data_wait_share: float
    finding: Finding
    expected: str  # what the rules of thumb expect for this task and graph size
    recommendations: list[Recommendation] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    top_ops: list[tuple[str, float]] = field(default_factory=list)  # (operator, share of the profiled step)
    hot_ops: list[HotOp] = field(default_factory=list)  # every operator above HOT_OP_SHARE, attributed
    # torch.compile's work when the configuration compiles: graphs, graph breaks, recompilations, first step
    compile: dict[str, Any] | None = None
    sampled: dict[str, Any] | None = None  # the batches' neighbour explosion (SampledStats.to_dict)
    explosion: str | None = None  # the neighbour-explosion finding, when it decides the step
    # the process, read back: allocator, threads, the measured steps' page faults and kernel time, and the
    # allocation-cost finding (gnnbench.process)
    process: dict[str, Any] = field(default_factory=dict)

    @property
    def recommended(self) -> list[str]:
        """Names of the recommendations that apply and can run here, best first."""
        return [r.name for r in self.recommendations if r.unavailable is None and r.not_applicable is None]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _run_template(
    config: RunConfig, steps: int, graph: Any, profile_steps: int
) -> tuple[Trainer, BusySampler, OpProfile]:
    """The quick template: ``steps`` measured steps (after warm-up), then ``profile_steps`` more under the
    operator profiler (kept out of the timings)."""
    trainer = Trainer(config, graph)
    busy = BusySampler(trainer.device)  # NVML missing: the compute phases stand for the busy share
    profile = OpProfile()
    trainer.usage = StepUsage(config.warmup_steps)  # page faults and kernel time of the measured steps
    loop = trainer.steps(epochs=float("inf"))
    try:
        for step in loop:
            trainer.usage.tick(step.index)
            busy.sample()
            if len(trainer.timer.step_seconds) >= steps:
                break
        trainer.threads_seen = threads_in_effect(
            trainer.pipeline.threads, getattr(trainer.pipeline.batches, "worker_cores", None)
        )
        if profile_steps:
            recorded = len(trainer.timer.step_seconds)
            profile = op_profile(loop, profile_steps, trainer.device, trainer.timer)
            del trainer.timer.step_seconds[recorded:], trainer.timer.steps[recorded:]  # profiled: not timed
    finally:
        loop.close()
        trainer.close()
    return trainer, busy, profile


def diagnose(
    config: RunConfig, *, steps: int = 100, graph: Any = None, rules: Rules = RULES, profile_steps: int = 5
) -> Diagnosis:
    """Run the quick template on ``config`` (``steps`` measured steps after ``config.warmup_steps``, then
    ``profile_steps`` under the operator profiler, which ranks kernel entries) and classify.
    Raises :class:`~gnnbench.flags.UnavailableError` when the configuration cannot run here."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1 (got {steps!r})")
    if not isinstance(profile_steps, int) or profile_steps < 0:
        raise ValueError(f"profile_steps must be an integer >= 0 (got {profile_steps!r})")
    if not config.sync_phases:
        raise ValueError("diagnose needs the per-phase breakdown; run it without --no-sync")
    device = resolve_device(config.device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    trainer, busy, profile = _run_template(config, steps, graph, profile_steps)
    timer = trainer.timer
    n = len(timer.step_seconds)
    mean_step = statistics.fmean(timer.step_seconds)
    phase_s = {p: statistics.fmean(s.get(p, 0.0) for s in timer.steps) for p in PHASES}
    shares = group_shares(phase_s, mean_step)
    finding = classify(shares, busy_fraction=busy.mean_fraction(), rules=rules)
    step_ms = 1e3 * mean_step
    usage = trainer.usage.summary()
    proc = in_effect(trainer.threads_seen, usage)
    running = proc["allocator"]["allocator"]
    if running is not None and running != config.flags.allocator:  # the process as started: advise from it
        config = dataclasses.replace(config, flags=config.flags.replace(allocator=running))
    proc["finding"] = allocation_finding(usage, running, rules)
    return Diagnosis(
        config=config.to_dict(),
        device=str(device),
        steps=n,
        step_ms={
            "mean": step_ms,
            "median": 1e3 * statistics.median(timer.step_seconds),
            "min": 1e3 * min(timer.step_seconds),
            "max": 1e3 * max(timer.step_seconds),
        },
        phase_ms={p: 1e3 * v for p, v in phase_s.items()},
        shares=shares,
        data_wait_share=phase_s.get("sample", 0.0) / mean_step,
        finding=finding,
        expected=expectation(config.task, trainer.pipeline.graph.num_nodes, rules),
        recommendations=recommend(finding, shares, step_ms, config, device, profile, rules, usage=usage),
        process=proc,
        top_ops=sorted(profile.shares.items(), key=lambda kv: -kv[1])[:8],
        hot_ops=attribute_ops(profile, config.task),
        memory={
            "host_peak_bytes": peak_bytes(),
            "device_peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        },
        compile=_compile_figures(trainer),
        sampled=trainer.sampled.to_dict(),
        explosion=explosion_finding(trainer.sampled.to_dict(), finding, rules, flags=config.flags, task=config.task),
    )


def _compile_figures(trainer: Trainer) -> dict[str, Any] | None:
    """What ``torch.compile`` built for this run (its own dynamo counters), or ``None`` without compile."""
    counters = trainer.pipeline.dynamo_counters
    if counters is None:
        return None
    graphs = int(counters["stats"].get("unique_graphs", 0))
    return {
        "graphs": graphs,
        "recompilations": max(0, graphs - 1),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "break_reasons": sorted(str(k) for k in counters["graph_break"])[:5],
        "first_step_seconds": trainer.first_step_seconds,
    }
