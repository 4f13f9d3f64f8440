"""The rules of thumb that name the bottleneck (pure: no timing here, so tests can drive them).

:data:`PHASE_GROUPS` gathers a step's timed phases into the bottlenecks of :data:`gnnbench.registry.BOTTLENECKS`;
:func:`classify` names the bottleneck with the thresholds of :class:`Rules` (``docs/rules.md``),
:func:`expectation` says what the rules expect for a task and graph size, and :func:`explosion_finding` the
neighbour-explosion finding.
"""

from __future__ import annotations

from dataclasses import dataclass

from gnnbench.flags import Flags
from gnnbench.registry import BOTTLENECKS, NotApplicable, get

__all__ = [
    "PHASE_GROUPS",
    "Rules",
    "RULES",
    "Finding",
    "group_shares",
    "classify",
    "expectation",
    "FEWER_VERTICES",
    "EXPLODING_SOURCE",
    "explosion_finding",
    "allocation_finding",
]

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
    # allocation cost: the measured steps spend at least this share of their CPU time in the kernel (page faults
    # of memory the allocator returned and maps again, mmap / munmap): an allocator entry is named for it
    allocation_kernel_at: float = 0.05


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
        reason = (
            f"the device computes {compute:.0%} of the step ({source}), at or above {rules.kernels_at:.0%}: "
            "the step is slow in its kernels"
        )
        runner = ranked[0] if ranked and ranked[0][1] >= rules.worth_at else None
    elif ranked and ranked[0][1] < rules.worth_at and shares.get("kernels", 0.0) > ranked[0][1]:
        # little compute, yet no pipeline group worth a look (a loop without a loader): the pipeline cannot be
        # the bottleneck; the step's time lies outside the timed phases, and the kernels are its largest timed part
        main, share = "kernels", shares.get("kernels", 0.0)
        reason = (
            f"the device computes only {compute:.0%} of the step ({source}), below {rules.kernels_at:.0%}, yet no "
            "data-pipeline group reaches "
            f"{rules.worth_at:.0%} (largest: {ranked[0][0]}, {ranked[0][1]:.0%}): the rest of the step is outside "
            "the timed phases (Python between calls, the optimizer's own work), and the kernels are its largest "
            "timed part"
        )
        runner = None
    else:
        main, share = ranked[0]
        reason = (
            f"the device computes only {compute:.0%} of the step ({source}), below {rules.kernels_at:.0%}: "
            f"the data pipeline comes first, and {main} is its largest part ({share:.0%})"
        )
        rest = [kv for kv in ranked[1:]] + [("kernels", shares.get("kernels", 0.0))]
        rest.sort(key=lambda kv: -kv[1])
        runner = rest[0] if rest and rest[0][1] >= rules.worth_at else None
    return Finding(main, share, runner[0] if runner else None, runner[1] if runner else None, compute, source, reason)


def expectation(task: str, num_nodes: int, rules: Rules = RULES) -> str:
    """What the rules of thumb (``docs/rules.md``) expect for this task and graph size (context beside the measurement)."""
    if task == "link":
        return "link prediction: negative sampling and feature transfer (first fixes: negatives, pinned memory)"
    if num_nodes >= rules.huge_graph_nodes:
        return (
            "node classification on a huge graph: sampling and loading (first fixes: subgraph sampling, "
            "feature caching)"
        )
    return "node classification on a small or medium graph: kernels (first fixes: mixed precision, fusion)"


# the entries that compute fewer vertices per step (the answers to neighbour explosion)
FEWER_VERTICES = ("labor", "fanout", "cluster_gcn", "graphsaint", "full_batch")
# the batch source whose neighbourhood grows hop by hop; subgraph and full batches cover what they cover by design
EXPLODING_SOURCE = "neighbor"


def _fewer_vertex_entries(flags: Flags, task: str) -> list[str]:
    """The entries of :data:`FEWER_VERTICES` that would change this configuration: on its task, applicable to
    its flags, and not already in use (an entry whose change leaves the flags as they are is in use)."""
    out = []
    for name in FEWER_VERTICES:
        opt = get(name)
        if task not in opt.tasks:
            continue
        try:
            if opt.apply(flags) == flags:
                continue
        except NotApplicable:  # e.g. fanout on a single hop: no hop to drop
            continue
        out.append(name)
    return out


def explosion_finding(
    sampled: dict | None, finding: Finding, rules: Rules = RULES, *, flags: Flags, task: str = "node"
) -> str | None:
    """The neighbour-explosion finding: a kernel-bound step whose neighbour-sampled batches' neighbourhoods cover
    at least ``rules.explosion_at`` of the graph's nodes computes most of a whole-graph layer per step, so entries
    that speed up data movement are worth little and those that compute fewer vertices are named.

    Only neighbour-sampled batches (``flags.batch_source == "neighbor"``) explode: a full batch covers the whole
    graph and a subgraph batch its subgraph by design, so they get no finding. The entries named are those that
    would change this configuration (:func:`_fewer_vertex_entries`): never one already in use.

    Args:
        sampled: The batches' figures (:meth:`~gnnbench.sampling.batch.SampledStats.to_dict`), or ``None``.
        finding: The step's classification (:func:`classify`).
        rules: The thresholds (``rules.explosion_at``).
        flags: The diagnosed configuration's flags (its batch source, and the entries already in use).
        task: The diagnosed configuration's task (``"node"`` or ``"link"``): entries that do not apply to it
            are not named.
    """
    if not sampled or finding.bottleneck != "kernels" or sampled["coverage"] < rules.explosion_at:
        return None
    if flags.batch_source != EXPLODING_SOURCE:
        return None
    hops = sampled.get("nodes_per_hop") or []
    growth = (" (" + " -> ".join(f"{v:.0f}" for v in hops) + " nodes per hop)") if len(hops) > 1 else ""
    entries = _fewer_vertex_entries(flags, task)
    names = (
        f"entries that compute fewer vertices: {', '.join(entries)}"
        if entries
        else "every entry that computes fewer vertices is in use already or does not apply here"
    )
    return (
        f"neighbour explosion: a batch's sampled neighbourhood covers {sampled['coverage']:.0%} of the graph's "
        f"nodes{growth}, at or above {rules.explosion_at:.0%}, and the step is kernel-bound: every step "
        f"computes most of a whole-graph layer, so computing fewer vertices pays before moving data faster; "
        f"{names}"
    )


def allocation_finding(usage: dict | None, allocator: str | None, rules: Rules = RULES) -> str | None:
    """The allocation-cost finding of the measured steps' ``usage`` (:meth:`gnnbench.process.StepUsage.summary`)
    in a process running ``allocator`` (``None``: one gnnbench does not set), or ``None`` when the kernel's share
    of their CPU time is below :attr:`Rules.allocation_kernel_at` (or was not measured)."""
    share = (usage or {}).get("kernel_share")
    if share is None or share < rules.allocation_kernel_at:
        return None
    faults = usage.get("minor_faults_per_step") or 0.0
    mib = (usage.get("faulted_bytes_per_step") or 0.0) / 2**20
    running = allocator or "an allocator gnnbench does not set"
    return (
        f"allocation cost: the measured steps spent {share:.0%} of their CPU time in the kernel, with "
        f"{faults:,.0f} page faults a step ({mib:,.0f} MiB mapped and touched again each step) under {running}: "
        "memory freed to the kernel at one step is faulted back in at the next; an allocator that keeps it "
        "mapped removes that"
    )
