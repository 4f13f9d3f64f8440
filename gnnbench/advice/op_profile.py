"""Operator profiling and attribution: each operator's share of the profiled steps, the phases it ran in
(:func:`op_profile`, :func:`profile_shares`), and the registry entries that remove or shrink the hot ones
(:func:`attribute_ops`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from gnnbench import registry
from gnnbench.advice.rules import PHASE_GROUPS
from gnnbench.timing import PHASE_RANGE

__all__ = ["HotOp", "HOT_OP_SHARE", "OUTSIDE", "op_profile", "profile_shares", "attribute_ops"]


@dataclass(frozen=True)
class HotOp:
    """An operator above :data:`HOT_OP_SHARE` of the profiled step, where it ran and what targets it."""

    op: str  # profiler operator name (aten::...)
    share: float  # of the profiled step's operator time
    phases: dict[str, float]  # share of the profiled step per phase it ran in ("outside" a timed phase)
    entries: tuple[str, ...]  # registry entries that remove or shrink it (their ``ops`` name it)


HOT_OP_SHARE = 0.05  # an operator above this share of the profiled step is listed, attributed or not


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
