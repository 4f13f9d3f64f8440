"""Locate the bottleneck first, then name what to try: ``gnnbench diagnose``.

:func:`diagnose` runs the quick template of the rules of thumb (``docs/rules.md``): a fixed number of
measured training steps, each split into phases, which :data:`PHASE_GROUPS` gathers into the bottlenecks of
:data:`gnnbench.registry.BOTTLENECKS`; :func:`classify` names the bottleneck with the thresholds of
:class:`Rules`, and :func:`recommend` lists the registry entries that target it, each with the measured
number that motivates it. :func:`format_diagnosis` prints the result. ``--verify`` measures the
recommendations with ``compare``'s statistics (:func:`verify_names`, :func:`verdicts`), so advice that does
not pay here is reported as such. :func:`distributed_advice` applies the rules for multi-rank runs.

The template, the phase groups and how recommendations are ranked: ``docs/advice.md``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.flags import Flags, format_reasons
from gnnbench.host_memory import peak_bytes
from gnnbench.measure.comparison import FLOOR_KEY
from gnnbench.measure.device_busy import BusySampler
from gnnbench.registry import BOTTLENECKS
from gnnbench.text import human_bytes, noise_floor, pp, ratio
from gnnbench.timing import PHASE_RANGE, PHASES
from gnnbench.training import RunConfig, Trainer, config_unavailable

__all__ = ["FEWER_VERTICES", "explosion_finding", "PHASE_GROUPS", "RULES", "Rules", "Finding", "Recommendation", "Diagnosis", "classify", "recommend",
           "diagnose", "format_diagnosis", "expectation", "distributed_advice", "HotOp", "HOT_OP_SHARE",
           "attribute_ops", "op_profile", "profile_shares"]

PHASE_GROUPS: dict[str, tuple[str, ...]] = {
    "sampling": ("sample",),
    "negatives": ("negatives",),
    "features": ("gather", "transfer"),
    "kernels": ("forward", "backward", "optimizer"),
}
assert set(PHASE_GROUPS) == set(BOTTLENECKS)


@dataclass(frozen=True)
class Rules:
    """Every threshold of the classification, in one place (fractions of the mean step time).

    The profiler rule (``docs/rules.md``): if the device computes for only a small share of the step, the data
    pipeline comes first; if it computes most of the step and the step is still slow, the kernels.
    """

    kernels_at: float = 0.5  # compute (device-busy) share at or above which the kernels are the bottleneck
    worth_at: float = 0.10  # a group below this share of the step is not worth optimizing first
    huge_graph_nodes: int = 10_000_000  # a "huge graph": sampling and loading dominate
    # loader workers overlap sampling with the step only on cores the step does not use: an entry that adds
    # workers is ranked last (with the reason) unless this many cores are free beyond the training threads
    worker_spare_cores: int = 1
    # the distributed rules of thumb: compress gradients only when the all-reduce takes at least this share
    # of the step; partition only a graph that does not fit one device (graph + features above this share of
    # the device's memory), else replicate it and train data parallel
    compress_at: float = 0.40
    fits_device_at: float = 0.5
    # neighbour explosion: a batch whose sampled neighbourhood covers at least this share of the graph's nodes
    # computes most of a whole-graph layer per step; with the step kernel-bound, computing fewer vertices pays
    explosion_at: float = 0.25


RULES = Rules()


@dataclass(frozen=True)
class Finding:
    """The classification: the bottleneck, the runner-up worth a look, and why."""

    bottleneck: str
    share: float
    secondary: str | None
    secondary_share: float | None
    compute_share: float
    compute_source: str  # "NVML" or "compute phases"
    reason: str


@dataclass(frozen=True)
class Recommendation:
    name: str
    target: str  # the bottleneck it addresses
    motivation: str  # the measured number behind it
    expected_effect: str
    costs_accuracy: bool
    unavailable: str | None = None  # why it cannot run in this configuration, if it cannot
    op_share: float | None = None  # share of the profiled step in the operators it targets (kernel entries)
    caveat: str | None = None  # why it is unlikely to pay on this machine (ranked after the others)
    not_applicable: str | None = None  # why it cannot apply to this configuration (listed, never measured)


@dataclass(frozen=True)
class HotOp:
    """An operator above :data:`HOT_OP_SHARE` of the profiled step, where it ran and what targets it."""

    op: str  # profiler operator name (aten::...)
    share: float  # of the profiled step's operator time
    phases: dict[str, float]  # share of the profiled step per phase it ran in ("outside" a timed phase)
    entries: tuple[str, ...]  # registry entries that remove or shrink it (their ``ops`` name it)


HOT_OP_SHARE = 0.05  # an operator above this share of the profiled step is listed, attributed or not


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

    @property
    def recommended(self) -> list[str]:
        """Names of the recommendations that apply and can run here, best first."""
        return [r.name for r in self.recommendations if r.unavailable is None and r.not_applicable is None]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def group_shares(phase_seconds: dict[str, float], step_seconds: float) -> dict[str, float]:
    """Share of the step per bottleneck group (phases not timed in a run count 0)."""
    if step_seconds <= 0:
        raise ValueError(f"step time must be positive (got {step_seconds})")
    return {g: sum(phase_seconds.get(p, 0.0) for p in phases) / step_seconds for g, phases in PHASE_GROUPS.items()}


def classify(shares: dict[str, float], *, busy_fraction: float | None = None, rules: Rules = RULES) -> Finding:
    """The bottleneck from the step's phase shares (pure: no timing here, so tests can drive it).

    Args:
        shares: Share of the mean step per group of :data:`PHASE_GROUPS`.
        busy_fraction: The device's measured busy share (NVML on CUDA); ``None`` uses the compute phases'
            share (CPU, or NVML unavailable).
        rules: The thresholds.
    """
    unknown = set(shares) - set(PHASE_GROUPS)
    if unknown:
        raise ValueError(f"unknown phase groups {sorted(unknown)}; accepted: {', '.join(PHASE_GROUPS)}")
    compute = shares.get("kernels", 0.0) if busy_fraction is None else busy_fraction
    source = "compute phases" if busy_fraction is None else "NVML"
    pipeline = {g: shares.get(g, 0.0) for g in PHASE_GROUPS if g != "kernels"}
    ranked = sorted(pipeline.items(), key=lambda kv: -kv[1])
    if compute >= rules.kernels_at:
        main, share = "kernels", shares.get("kernels", 0.0)
        reason = (f"the device computes {compute:.0%} of the step ({source}), at or above {rules.kernels_at:.0%}: "
                  "the step is slow in its kernels")
        runner = ranked[0] if ranked and ranked[0][1] >= rules.worth_at else None
    else:
        main, share = ranked[0]
        reason = (f"the device computes only {compute:.0%} of the step ({source}), below {rules.kernels_at:.0%}: "
                  f"the data pipeline comes first, and {main} is its largest part ({share:.0%})")
        rest = [kv for kv in ranked[1:]] + [("kernels", shares.get("kernels", 0.0))]
        rest.sort(key=lambda kv: -kv[1])
        runner = rest[0] if rest and rest[0][1] >= rules.worth_at else None
    return Finding(main, share, runner[0] if runner else None, runner[1] if runner else None, compute, source,
                   reason)


def expectation(task: str, num_nodes: int, rules: Rules = RULES) -> str:
    """What the rules of thumb (``docs/rules.md``) expect for this task and graph size (context beside the measurement)."""
    if task == "link":
        return "link prediction: negative sampling and feature transfer (first fixes: negatives, pinned memory)"
    if num_nodes >= rules.huge_graph_nodes:
        return "node classification on a huge graph: sampling and loading (first fixes: subgraph sampling, " \
               "feature caching)"
    return "node classification on a small or medium graph: kernels (first fixes: mixed precision, fusion)"


def spare_cores() -> tuple[int, int]:
    """``(cores this process may run on, threads the step uses)``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return cores, torch.get_num_threads()


def _worker_caveat(config: RunConfig, flags, rules: Rules, cores: tuple[int, int]) -> str | None:
    """Why added loader workers are unlikely to pay here: they need cores the step does not already use."""
    if flags.num_workers <= config.flags.num_workers:
        return None
    total, threads = cores
    if total - threads >= rules.worker_spare_cores:
        return None
    return (f"adds {flags.num_workers} loader worker processes, but this machine has {total} cores and the step "
            f"already runs {threads} threads: the workers compete with the step instead of overlapping it "
            f"(lower torch.set_num_threads, or use a machine with >= {threads + rules.worker_spare_cores} cores)")


def _credited(opt: Any, op_shares: dict[str, float], op_phases: dict[str, dict[str, float]] | None
              ) -> dict[str, float]:
    """The share of the profiled step each of ``opt``'s operators takes in the phases of the bottlenecks it
    targets (the sampler's ``aten::sort`` is not credited to an entry that removes the aggregation's sort);
    without per-phase figures, the operators' whole shares."""
    phases = {ph for group in opt.targets for ph in PHASE_GROUPS[group]}
    out = {}
    for op in opt.ops:
        if op_phases and op in op_phases:
            share = sum(v for ph, v in op_phases[op].items() if ph in phases)
        else:
            share = op_shares.get(op, 0.0)
        if share > 0:
            out[op] = share
    return out


def recommend(finding: Finding, shares: dict[str, float], step_ms: float, config: RunConfig,
              device: torch.device, op_shares: dict[str, float] | None = None, rules: Rules = RULES,
              cores: tuple[int, int] | None = None,
              op_phases: dict[str, dict[str, float]] | None = None) -> list[Recommendation]:
    """Registry entries that target the bottleneck (then the runner-up), for this task, ranked: entries whose
    operators (``Optimization.ops``) took a measured share of the profiled step in the phases they target
    first, largest share first; then the others in registry order; entries that may cost accuracy after those
    that should not; entries with a caveat on this machine (loader workers without spare cores, ``cores`` =
    :func:`spare_cores`) last. Entries that cannot run here come with their reason."""
    op_shares = op_shares or {}
    cores = cores or spare_cores()
    out: list[Recommendation] = []
    for group in (finding.bottleneck, finding.secondary):
        if group is None:
            continue
        share = shares.get(group, 0.0)
        group_motivation = f"{group} is {share:.0%} of the step ({share * step_ms:.1f} of {step_ms:.1f} ms)"
        ranked = []
        for opt in registry.REGISTRY.values():
            if group not in opt.targets or config.task not in opt.tasks or any(r.name == opt.name for r in out):
                continue
            reason = registry.not_applicable(config, [opt.name])
            if reason:
                ranked.append(Recommendation(opt.name, group, group_motivation, opt.expected_effect,
                                             opt.costs_accuracy, not_applicable=reason))
                continue
            derived = registry.config_for(config, [opt.name])
            flags = derived.flags
            if flags == config.flags:
                continue  # already on in this configuration
            ops = _credited(opt, op_shares, op_phases)
            evidence = sum(ops.values()) if ops else None
            motivation = group_motivation
            if ops:
                listed = ", ".join(f"{op} {v:.0%}" for op, v in sorted(ops.items(), key=lambda kv: -kv[1]))
                motivation = f"its operators take {evidence:.0%} of the profiled step ({listed}); {group_motivation}"
            reasons = config_unavailable(derived, device)
            ranked.append(Recommendation(opt.name, group, motivation, opt.expected_effect,
                                         opt.costs_accuracy, format_reasons(reasons) if reasons else None,
                                         evidence, _worker_caveat(config, flags, rules, cores)))
        ranked.sort(key=lambda r: (r.not_applicable is not None, r.caveat is not None, r.costs_accuracy,
                                   r.op_share is None, -(r.op_share or 0.0)))
        out.extend(ranked)
    return out


OUTSIDE = "outside"  # an operator's time outside every timed phase (between steps, the loop itself)


def op_profile(trainer_steps, steps: int, device: torch.device,
               timer: Any = None) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """``(shares, phases)`` of the profiled steps: each operator's share of the operator self time (device
    time on CUDA), and per operator its share in each phase it ran in. Phases come from the profiler ranges
    that ``timer`` (a :class:`~gnnbench.timing.PhaseTimer`) marks while profiling (:attr:`PhaseTimer.label`)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    if timer is not None:
        timer.label = True
    try:
        with profile(activities=activities) as prof:
            for _ in range(steps):
                if next(trainer_steps, None) is None:
                    break
    finally:
        if timer is not None:
            timer.label = False
    return profile_shares(prof, device)


def profile_shares(prof: Any, device: torch.device) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """``(shares, phases)`` of a finished ``torch.profiler.profile``: each operator's share of the operator self
    time (device time on CUDA), and per operator its share in each phase it ran in (the enclosing
    ``phase:<name>`` profiler range, :data:`OUTSIDE` when none)."""
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    per_phase: dict[str, dict[str, float]] = {}
    for e in prof.events():
        if e.name.startswith(PHASE_RANGE):
            continue
        t = float(getattr(e, key, 0.0) or 0.0)
        if t <= 0:
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith(PHASE_RANGE):
            parent = parent.cpu_parent
        phase = parent.name[len(PHASE_RANGE):] if parent is not None else OUTSIDE
        by_phase = per_phase.setdefault(e.name, {})
        by_phase[phase] = by_phase.get(phase, 0.0) + t
    total = sum(sum(p.values()) for p in per_phase.values())
    if total <= 0:
        return {}, {}
    shares = {op: sum(p.values()) / total for op, p in per_phase.items()}
    return shares, {op: {ph: t / total for ph, t in p.items()} for op, p in per_phase.items()}


def attribute_ops(op_shares: dict[str, float], op_phases: dict[str, dict[str, float]], task: str, *,
                  threshold: float = HOT_OP_SHARE) -> list[HotOp]:
    """Every operator above ``threshold`` of the profiled step, largest first: the phases it ran in and the
    registry entries for ``task`` that remove or shrink it where it runs (an entry whose targets' phases the
    operator never ran in is not listed; an empty tuple: no entry targets it)."""
    out = []
    for op, share in sorted(op_shares.items(), key=lambda kv: -kv[1]):
        if share < threshold:
            break
        phases = dict(sorted(op_phases.get(op, {}).items(), key=lambda kv: -kv[1]))
        entries = tuple(o.name for o in registry.for_task(task) if op in o.ops
                        and (not phases or any(ph in phases for g in o.targets for ph in PHASE_GROUPS[g])))
        out.append(HotOp(op, share, phases, entries))
    return out


def _run_template(config: RunConfig, steps: int, graph: Any,
                  profile_steps: int) -> tuple[Trainer, BusySampler, tuple[dict, dict]]:
    """The quick template: ``steps`` measured steps (after warm-up), then ``profile_steps`` more under the
    operator profiler (kept out of the timings)."""
    trainer = Trainer(config, graph)
    busy = BusySampler(trainer.device)  # NVML missing: the compute phases stand for the busy share
    op_shares: tuple[dict[str, float], dict[str, dict[str, float]]] = ({}, {})
    loop = trainer.steps(epochs=float("inf"))
    try:
        for _ in loop:
            busy.sample()
            if len(trainer.timer.step_seconds) >= steps:
                break
        if profile_steps:
            recorded = len(trainer.timer.step_seconds)
            op_shares = op_profile(loop, profile_steps, trainer.device, trainer.timer)
            del trainer.timer.step_seconds[recorded:], trainer.timer.steps[recorded:]  # profiled: not timed
    finally:
        loop.close()
        trainer.close()
    return trainer, busy, op_shares


def diagnose(config: RunConfig, *, steps: int = 100, graph: Any = None, rules: Rules = RULES,
             profile_steps: int = 5) -> Diagnosis:
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
    trainer, busy, (op_shares, op_phases) = _run_template(config, steps, graph, profile_steps)
    timer = trainer.timer
    n = len(timer.step_seconds)
    mean_step = statistics.fmean(timer.step_seconds)
    phase_s = {p: statistics.fmean(s.get(p, 0.0) for s in timer.steps) for p in PHASES}
    shares = group_shares(phase_s, mean_step)
    finding = classify(shares, busy_fraction=busy.mean_fraction(), rules=rules)
    step_ms = 1e3 * mean_step
    return Diagnosis(
        config=config.to_dict(), device=str(device), steps=n,
        step_ms={"mean": step_ms, "median": 1e3 * statistics.median(timer.step_seconds),
                 "min": 1e3 * min(timer.step_seconds), "max": 1e3 * max(timer.step_seconds)},
        phase_ms={p: 1e3 * v for p, v in phase_s.items()}, shares=shares,
        data_wait_share=phase_s.get("sample", 0.0) / mean_step, finding=finding,
        expected=expectation(config.task, trainer.pipeline.graph.num_nodes, rules),
        recommendations=recommend(finding, shares, step_ms, config, device, op_shares, rules, op_phases=op_phases),
        top_ops=sorted(op_shares.items(), key=lambda kv: -kv[1])[:8],
        hot_ops=attribute_ops(op_shares, op_phases, config.task),
        memory={"host_peak_bytes": peak_bytes(),
                "device_peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None},
        compile=_compile_figures(trainer),
        sampled=trainer.sampled.to_dict(),
        explosion=explosion_finding(trainer.sampled.to_dict(), finding, rules),
    )


# the entries that compute fewer vertices per step (the answers to neighbour explosion)
FEWER_VERTICES = ("labor", "fanout", "cluster_gcn", "graphsaint", "full_batch")


def explosion_finding(sampled: dict | None, finding: Finding, rules: Rules = RULES) -> str | None:
    """The neighbour-explosion finding: a kernel-bound step whose batches' sampled neighbourhoods cover at least
    ``rules.explosion_at`` of the graph's nodes computes most of a whole-graph layer per step, so entries that
    speed up data movement are worth little and those that compute fewer vertices are named."""
    if not sampled or finding.bottleneck != "kernels" or sampled["coverage"] < rules.explosion_at:
        return None
    hops = sampled.get("nodes_per_hop") or []
    growth = (" (" + " -> ".join(f"{v:.0f}" for v in hops) + " nodes per hop)") if len(hops) > 1 else ""
    return (f"neighbour explosion: a batch's sampled neighbourhood covers {sampled['coverage']:.0%} of the graph's "
            f"nodes{growth}, at or above {rules.explosion_at:.0%}, and the step is kernel-bound: every step "
            f"computes most of a whole-graph layer, so computing fewer vertices pays before moving data faster; "
            f"entries that compute fewer vertices: {', '.join(FEWER_VERTICES)}")


def _compile_figures(trainer: Trainer) -> dict[str, Any] | None:
    """What ``torch.compile`` built for this run (its own dynamo counters), or ``None`` without compile."""
    counters = trainer.pipeline.dynamo_counters
    if counters is None:
        return None
    graphs = int(counters["stats"].get("unique_graphs", 0))
    return {"graphs": graphs, "recompilations": max(0, graphs - 1),
            "graph_breaks": int(sum(counters["graph_break"].values())),
            "break_reasons": sorted(str(k) for k in counters["graph_break"])[:5],
            "first_step_seconds": trainer.first_step_seconds}


def format_diagnosis(d: Diagnosis) -> str:
    """The human-readable report: breakdown, classification, what to try."""
    f = d.finding
    lines = [f"diagnose: {d.steps} measured steps on {d.device}; step {d.step_ms['mean']:.1f} ms mean "
             f"(median {d.step_ms['median']:.1f}, min {d.step_ms['min']:.1f}, max {d.step_ms['max']:.1f})", ""]
    lines.append(f"{'phase':<12}{'ms/step':>10}{'share':>8}")
    for p, ms in d.phase_ms.items():
        if ms > 0 or p != "negatives":
            lines.append(f"{p:<12}{ms:>10.2f}{ms / d.step_ms['mean']:>8.0%}")
    lines.append("")
    lines.append("by bottleneck: " + ", ".join(f"{g} {s:.0%}" for g, s in d.shares.items()
                                               if s > 0 or g != "negatives"))
    lines.append(f"compute share {f.compute_share:.0%} ({f.compute_source}); waiting for data "
                 f"{d.data_wait_share:.0%}")
    mem = d.memory
    mem_txt = f"host peak {human_bytes(mem['host_peak_bytes'])}"
    if mem.get("device_peak_bytes") is not None:
        mem_txt += f", device peak {human_bytes(mem['device_peak_bytes'])}"
    lines.append(f"memory: {mem_txt}")
    s = d.sampled
    if s:
        hops = (" (per hop: " + " / ".join(f"{v:.0f}" for v in s["nodes_per_hop"]) + ")") if s.get("nodes_per_hop") else ""
        lines.append(f"sampled: {s['nodes_per_batch']:.0f} nodes per batch{hops}, {s['coverage']:.0%} of the graph's "
                     f"nodes; {s['edges_per_batch']:.0f} edges")
    if d.compile is not None:
        c = d.compile
        lines.append(f"compile: {c['graphs']} graph(s), {c['graph_breaks']} graph break(s), {c['recompilations']} "
                     f"recompilation(s); first step {c['first_step_seconds'] or 0:.1f} s (compilation included)"
                     + (f"; breaks: {'; '.join(c['break_reasons'])}" if c["break_reasons"] else ""))
    if d.hot_ops:
        lines.append(f"operators above {HOT_OP_SHARE:.0%} of the profiled steps, where they ran and what targets them:")
        for h in d.hot_ops:
            shown = [(p, s) for i, (p, s) in enumerate(h.phases.items()) if i == 0 or s >= 0.005]
            where = ", ".join(f"{p} {s:.0%}" for p, s in shown)
            target = ", ".join(h.entries) if h.entries else "no entry targets it"
            lines.append(f"  {h.op} {h.share:.0%} ({where}): {target}")
    elif d.top_ops:
        lines.append("top operators (profiled steps): " + ", ".join(f"{op} {v:.0%}" for op, v in d.top_ops[:5]))
    lines.append("")
    lines.append(f"bottleneck: {f.bottleneck} ({f.share:.0%} of the step): {f.reason}")
    if d.explosion:
        lines.append(d.explosion)
    if f.secondary:
        lines.append(f"also worth a look: {f.secondary} ({f.secondary_share:.0%})")
    lines.append(f"commonly expected for this case (docs/rules.md): {d.expected}")
    lines.append("")
    runnable = [r for r in d.recommendations if r.unavailable is None and r.not_applicable is None]
    lines.append("try, in this order:" if runnable else "nothing in the registry targets it and can run here")
    for i, r in enumerate(runnable, 1):
        cost = " (may cost accuracy: judge it by time to accuracy)" if r.costs_accuracy else ""
        lines.append(f"  {i}. {r.name}{cost}: {r.motivation}")
        lines.append(f"     {r.expected_effect}")
        if r.caveat:
            lines.append(f"     unlikely to pay on this machine: {r.caveat}")
    blocked = [r for r in d.recommendations if r.unavailable is not None]
    if blocked:
        lines.append("would target it, but cannot run here:")
        for r in blocked:
            lines.append(f"  - {r.name}: {r.unavailable}")
    inapplicable = [r for r in d.recommendations if r.not_applicable is not None]
    if inapplicable:
        lines.append("would target it, but does not apply to this configuration:")
        for r in inapplicable:
            lines.append(f"  - {r.name}: {r.not_applicable}")
    if runnable:
        lines.append("")
        lines.append("measure them: gnnbench diagnose ... --verify (or gnnbench compare --flags "
                     f"{','.join(r.name for r in runnable)})")
    return "\n".join(lines)


def verify_names(d: Diagnosis, top: int = 3) -> list[str]:
    """The sweep labels ``--verify`` measures: each of the ``top`` runnable recommendations alone, and the
    ones that do not cost accuracy together (``a+b``) when there are two or more."""
    names = d.recommended[:top]
    safe = [n for n in names if not registry.get(n).costs_accuracy]
    labels = list(names)
    if len(safe) >= 2:
        labels.append("+".join(safe))
    return labels


def verdicts(rows: Iterable[dict], floors: dict[str, float] | None = None) -> list[str]:
    """One line per measured recommendation (rows of :func:`gnnbench.measure.comparison.compare`): does it pay
    here?

    An interval that contains 1 is never "does not pay": with the noise floor of its metric (``floors``, from
    :class:`~gnnbench.measure.comparison.Comparison`) it is "not resolved" when every gain it admits is below
    the floor, and "no significant difference" (more rounds would tell) when it admits a gain above it. Only a
    significant slowdown does not pay."""
    floors = floors or {}
    out = []
    for row in rows:
        label = row.get("label")
        if label in (None, "baseline") or label.startswith("baseline ("):
            continue
        if row.get("status") != "ok":
            out.append(f"{label}: not measured ({row.get('reason') or row.get('status')})")
            continue
        speedup = row.get("speedup")
        shown = ratio(speedup, row.get("speedup_low"), row.get("speedup_high"))
        by = row.get("primary", "epoch time")
        acc = f"; accuracy {pp(row['acc_delta'])} ({row['acc_verdict']})"
        if speedup is None:
            out.append(f"{label}: no comparable measurement{acc}")
        elif row.get("significant") and speedup > 1:
            out.append(f"{label}: pays here, {shown} by {by}{acc}")
        elif row.get("significant"):
            out.append(f"{label}: does not pay here, it is slower: {shown} by {by}{acc}")
        else:
            floor = floors.get(FLOOR_KEY.get(by, ""))
            high = row.get("speedup_high")
            if floor is not None and math.isfinite(floor) and high is not None and high <= floor:
                out.append(f"{label}: not resolved: any effect is below the {noise_floor(floor)} floor "
                           f"({shown} by {by}){acc}")
            else:
                admits = (f", the interval admits a gain of up to {high - 1:.0%}; more rounds would tell"
                          if high is not None and math.isfinite(high) and high > 1 else "")
                out.append(f"{label}: no significant difference: {shown} by {by}{admits}{acc}")
    return out


def distributed_advice(summary: dict, *, graph_bytes: int, device_bytes: int, rules: Rules = RULES) -> list[str]:
    """The distributed rules of thumb (``docs/rules.md``) applied to one multi-rank configuration.

    Args:
        summary: The ``distributed`` figures of a compare row (:func:`gnnbench.measure.comparison.compare`) or of a run
            result: ``world_size``, ``parallel``, ``grad_compression``, ``comm_share``, ``compression_ratio``.
        graph_bytes: Bytes of the graph's structure and features (what data parallel replicates per rank).
        device_bytes: Memory of one device (GPU memory; on a CPU, the machine's).
        rules: ``compress_at`` (gradient compression pays only above this communication share) and
            ``fits_device_at`` (a graph within this share of one device is replicated, not partitioned).
    """
    out = []
    share = summary.get("comm_share")
    compression = summary.get("grad_compression") or "none"
    if share is not None:
        if summary.get("parallel") == "partition":
            p = summary.get("partition") or {}
            h, g = p.get("halo_seconds"), p.get("grad_seconds")
            split = f", {h / (h + g):.0%} of it the halo exchange" if h is not None and g is not None and h + g > 0 else ""
            cut = p.get("edge_cut_fraction")
            out.append(f"communication is {share:.0%} of the step{split}: halo rows follow the edge cut"
                       + (f" ({cut:.1%} of edges here)" if cut is not None else "")
                       + f", so a lower-cut partitioner ({_entries(parallel='partition', partitioner='metis')}) cuts "
                         "them; gradient compression applies to data parallel's all-reduce only")
        elif compression != "none":
            ratio = summary.get("compression_ratio")
            sent = f", {ratio:.1%} of the dense bytes on the wire" if ratio is not None else ""
            verdict = ("worth trying at this share" if share >= rules.compress_at else
                       f"below {rules.compress_at:.0%}: by the rule of thumb not worth its complexity here")
            out.append(f"communication is {share:.0%} of the step with {compression} compression{sent}; {verdict}")
        elif share >= rules.compress_at:
            out.append(f"communication is {share:.0%} of the step, at or above {rules.compress_at:.0%}: try gradient "
                       f"compression ({_entries(parallel='data', grad_compression=lambda v: v != 'none')})")
        else:
            out.append(f"communication is {share:.0%} of the step, below {rules.compress_at:.0%}: gradient "
                       "compression is not worth its complexity here (the all-reduce is not the bottleneck)")
    fits = graph_bytes <= rules.fits_device_at * device_bytes
    size = f"graph and features take {human_bytes(graph_bytes)} of one device's {human_bytes(device_bytes)}"
    if summary.get("parallel") == "partition":
        out.append(f"{size}: " + (f"it fits, so replicate it and train data parallel "
                                  f"({_entries(parallel='data', grad_compression='none')}) instead of "
                                  "partitioning: no halo exchange" if fits else
                                  "it does not fit one device: partitioning is the way to scale"))
    elif summary.get("parallel") == "data" and not fits:
        out.append(f"{size}: too big to replicate on every rank; partition it ({_entries(parallel='partition')})")
    return out


def _entries(**fields) -> str:
    """The registry entries whose change, applied to the baseline, sets each field as asked (a value, or a
    predicate on the value), in registry order: advice names entries by what they do, never by a hard-coded
    name."""
    names = []
    for opt in registry.REGISTRY.values():
        flags = opt.apply(Flags())
        if all(want(getattr(flags, f)) if callable(want) else getattr(flags, f) == want for f, want in fields.items()):
            names.append(opt.name)
    return ", ".join(names)
