"""What to try for a named bottleneck: the registry entries that target it, each with the measured number
that motivates it, ranked (:func:`recommend`; ``docs/advice.md``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from gnnbench import registry
from gnnbench.advice.op_profile import OpProfile
from gnnbench.advice.rules import RULES, Finding, Rules
from gnnbench.flags import format_reasons
from gnnbench.training import RunConfig, config_unavailable

__all__ = ["Recommendation", "recommend", "spare_cores"]

_LISTED = 4  # operators named in a motivation (largest first)


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


def spare_cores() -> tuple[int, int]:
    """``(cores this process may run on, threads the step uses)``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return cores, torch.get_num_threads()


def _worker_caveat(config: RunConfig, flags, rules: Rules, cores: tuple[int, int]) -> str | None:
    """Why added loader workers are unlikely to pay here: they need cores the step does not already use (unless
    the entry splits the cores between them and the step)."""
    if flags.num_workers <= config.flags.num_workers or flags.thread_placement == "split":
        return None
    total, threads = cores
    if total - threads >= rules.worker_spare_cores:
        return None
    return (
        f"adds {flags.num_workers} loader worker processes, but this machine has {total} cores and the step "
        f"already runs {threads} threads: the workers compete with the step instead of overlapping it "
        f"(split the cores: workers_split, torch.set_num_threads(cores - workers) with each worker pinned to its "
        f"own core; or use a machine with >= {threads + rules.worker_spare_cores} cores)"
    )


def _allocation_evidence(usage: dict | None, rules: Rules) -> tuple[str | None, float | None, str | None]:
    """``(motivation, share, caveat)`` of an entry that changes the process's allocator, from the measured steps'
    ``usage``: the kernel's share of their CPU time stands for the share it can remove."""
    share = (usage or {}).get("kernel_share")
    if share is None:
        return None, None, None
    faults = usage.get("minor_faults_per_step") or 0.0
    motivation = (
        f"the measured steps spent {share:.0%} of their CPU time in the kernel ({faults:,.0f} page faults a step)"
    )
    caveat = (
        None
        if share >= rules.allocation_kernel_at
        else (f"the steps spend only {share:.0%} of their CPU time in the kernel: little allocation cost to remove")
    )
    return motivation, share, caveat


def recommend(
    finding: Finding,
    shares: dict[str, float],
    step_ms: float,
    config: RunConfig,
    device: torch.device,
    profile: OpProfile | None = None,
    rules: Rules = RULES,
    cores: tuple[int, int] | None = None,
    usage: dict | None = None,
) -> list[Recommendation]:
    """Registry entries that target the bottleneck (then the runner-up), for this task, ranked: entries credited
    with a measured share of the profiled step (:meth:`OpProfile.credit`: the operators in the code paths they
    remove or change, and the operators they name where no marked path issued them) first, largest share
    first; then the others in registry order; entries that may cost accuracy after those that should not;
    entries with a caveat on this machine (loader workers without spare cores, ``cores`` =
    :func:`spare_cores`) last. Entries that change the process's allocator are credited with the kernel's share of
    the measured steps' CPU time (``usage``: :meth:`gnnbench.process.StepUsage.summary`), with a caveat below
    :attr:`Rules.allocation_kernel_at`. Entries that cannot run here come with their reason."""
    profile = profile or OpProfile()
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
                ranked.append(
                    Recommendation(
                        opt.name,
                        group,
                        group_motivation,
                        opt.expected_effect,
                        opt.costs_accuracy,
                        not_applicable=reason,
                    )
                )
                continue
            derived = registry.config_for(config, [opt.name])
            flags = derived.flags
            if flags == config.flags:
                continue  # already on in this configuration
            ops = profile.credit(opt)
            evidence = sum(ops.values()) if ops else None
            motivation = group_motivation
            if ops:
                top = sorted(ops.items(), key=lambda kv: -kv[1])
                listed = ", ".join(f"{op} {v:.0%}" for op, v in top[:_LISTED]) + (", ..." if len(top) > _LISTED else "")
                motivation = (
                    f"the operators it removes or changes take {evidence:.0%} of the profiled step "
                    f"({listed}); {group_motivation}"
                )
            caveat = _worker_caveat(config, flags, rules, cores)
            if flags.allocator != config.flags.allocator:  # the process, not an operator: read from its usage
                why, evidence, caveat = _allocation_evidence(usage, rules)
                motivation = f"{why}; {group_motivation}" if why else group_motivation
            reasons = config_unavailable(derived, device)
            ranked.append(
                Recommendation(
                    opt.name,
                    group,
                    motivation,
                    opt.expected_effect,
                    opt.costs_accuracy,
                    format_reasons(reasons) if reasons else None,
                    evidence,
                    caveat,
                )
            )
        ranked.sort(
            key=lambda r: (
                r.not_applicable is not None,
                r.caveat is not None,
                r.costs_accuracy,
                r.op_share is None,
                -(r.op_share or 0.0),
            )
        )
        out.extend(ranked)
    return out
