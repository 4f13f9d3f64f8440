"""Operator profiling and attribution: each operator's share of the profiled steps, the phases and the code
paths it ran in (:func:`op_profile`, :func:`profile_shares`, :class:`OpProfile`), and the registry entries that
remove or change the hot ones (:func:`attribute_ops`).

An operator is attributed by the code that issued it, not by its name: the code paths that issue the hot
generic operators (``aten::mul`` of the scatter path's per-edge normalization, of dropout, ...) run inside
``gnnbench.path:<name>`` profiler ranges (:func:`gnnbench.timing.code_path`; ``gnnbench.watch`` marks the same
paths in PyG's own layers), an operator's time belongs to the innermost one it ran in, and a backward
operator's to the path its forward ran in (the profiler's autograd sequence numbers link the two). A registry
entry is credited with the time in the paths it names (``Optimization.paths``); for operators that ran in no
marked path (code gnnbench did not mark), with those its ``ops`` name, in the phases of its targets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gnnbench import registry
from gnnbench.advice.rules import PHASE_GROUPS
from gnnbench.timing import PATH_RANGE, PHASE_RANGE

__all__ = [
    "HotOp",
    "HOT_OP_SHARE",
    "OUTSIDE",
    "UNMARKED",
    "UNKNOWN_PHASE",
    "OpProfile",
    "op_profile",
    "profile_shares",
    "attribute_ops",
]


@dataclass(frozen=True)
class HotOp:
    """An operator above :data:`HOT_OP_SHARE` of the profiled step, where it ran and what targets it."""

    op: str  # profiler operator name (aten::...)
    share: float  # of the profiled step's operator time
    phases: dict[str, float]  # share of the profiled step per phase it ran in ("outside" a timed phase)
    entries: tuple[str, ...]  # registry entries that remove or change it where it ran, most credited first
    paths: dict[str, float] = field(default_factory=dict)  # share per marked code path it ran in, largest first
    credits: dict[str, float] = field(default_factory=dict)  # per entry listed: the share of the step credited


HOT_OP_SHARE = 0.05  # an operator above this share of the profiled step is listed, attributed or not
# an entry is listed against an operator when it removes or changes at least this part of the operator's time
# (the sampler's few multiplies do not make the loader entries targets of the model's aten::mul)
MIN_CREDIT_OF_OP = 0.1


OUTSIDE = "outside"  # an operator's time outside every timed phase (between steps, the loop itself)
UNMARKED = ""  # the code path of an operator's time outside every marked code path
UNKNOWN_PHASE = ""  # the phase of an operator's time when the profile did not record phases

_BACKWARD_NODE = "autograd::engine::evaluate_function: "  # the profiler's range of one autograd node's backward


@dataclass(frozen=True)
class OpProfile:
    """Operator time of the profiled steps, as shares of the whole: per operator, per ``(phase, code path)``
    (:data:`UNMARKED` for time outside every marked path, :data:`UNKNOWN_PHASE` where phases were not
    recorded)."""

    cells: dict[str, dict[tuple[str, str], float]] = field(default_factory=dict)

    @classmethod
    def from_shares(cls, shares: dict[str, float], phases: dict[str, dict[str, float]] | None = None) -> "OpProfile":
        """A profile without code paths: per operator its share, split by phase where ``phases`` has it."""
        cells: dict[str, dict[tuple[str, str], float]] = {}
        for op, share in shares.items():
            by_phase = (phases or {}).get(op)
            cells[op] = (
                {(ph, UNMARKED): v for ph, v in by_phase.items()} if by_phase else {(UNKNOWN_PHASE, UNMARKED): share}
            )
        return cls(cells)

    def __bool__(self) -> bool:
        return bool(self.cells)

    @property
    def shares(self) -> dict[str, float]:
        """Each operator's share of the profiled operator time."""
        return {op: sum(c.values()) for op, c in self.cells.items()}

    @property
    def phases(self) -> dict[str, dict[str, float]]:
        """Per operator, its share in each phase it ran in (largest first; none where phases were not recorded)."""
        return {
            op: _sorted({ph: v for ph, v in _marginal(c, 0).items() if ph != UNKNOWN_PHASE})
            for op, c in self.cells.items()
        }

    @property
    def paths(self) -> dict[str, dict[str, float]]:
        """Per operator, its share in each marked code path it ran in (largest first; unmarked time left out)."""
        return {
            op: _sorted({p: v for p, v in _marginal(c, 1).items() if p != UNMARKED}) for op, c in self.cells.items()
        }

    def credit(self, opt: Any) -> dict[str, float]:
        """The share of the profiled step, per operator, that registry entry ``opt`` removes or changes: the
        operator's time in the code paths it names (``opt.paths``), plus, for the operators it names
        (``opt.ops``), their unmarked time in the phases of the bottlenecks it targets (or in any phase where
        phases were not recorded). The sampler's ``aten::sort`` is not credited to an entry that removes the
        aggregation's sort."""
        paths = set(opt.paths)
        phases = {ph for group in opt.targets for ph in PHASE_GROUPS[group]} | {UNKNOWN_PHASE}
        out: dict[str, float] = {}
        for op, cells in self.cells.items():
            named = op in opt.ops
            share = sum(
                v for (ph, path), v in cells.items() if path in paths or (named and path == UNMARKED and ph in phases)
            )
            if share > 0:
                out[op] = share
        return out


def _marginal(cells: dict[tuple[str, str], float], axis: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, v in cells.items():
        out[key[axis]] = out.get(key[axis], 0.0) + v
    return out


def _sorted(d: dict[str, float]) -> dict[str, float]:
    return dict(sorted(d.items(), key=lambda kv: -kv[1]))


def op_profile(trainer_steps, steps: int, device: torch.device, timer: Any = None) -> OpProfile:
    """The :class:`OpProfile` of ``steps`` steps pulled from ``trainer_steps`` under ``torch.profiler``: each
    operator's self time (device time on CUDA), by phase and code path. Phases come from the profiler ranges
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


def profile_shares(prof: Any, device: torch.device) -> OpProfile:
    """The :class:`OpProfile` of a finished ``torch.profiler.profile``: each operator's self time (device time
    on CUDA) by phase (the enclosing ``phase:<name>`` range, :data:`OUTSIDE` when none) and code path (the
    innermost enclosing ``gnnbench.path:<name>`` range; for an operator of an autograd node's backward without
    one, the path the node's forward operator ran in; :data:`UNMARKED` when none)."""
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = list(prof.events())
    where: dict[int, tuple[str | None, str | None, Any]] = {}  # id(event) -> (phase, path, backward node)

    def locate(e: Any) -> tuple[str | None, str | None, Any]:
        """(enclosing phase, innermost enclosing path, enclosing backward node) of ``e``; ``None``: none."""
        chain = []
        found: tuple[str | None, str | None, Any] = (None, None, None)
        node = e
        while node is not None:
            if id(node) in where:
                found = where[id(node)]
                break
            chain.append(node)
            node = node.cpu_parent
        phase, path, backward = found
        for n in reversed(chain):  # outermost first: an inner range overrides an outer one
            name = n.name
            if name.startswith(PHASE_RANGE):
                phase = name[len(PHASE_RANGE) :]
            elif name.startswith(PATH_RANGE):
                path = name[len(PATH_RANGE) :]
            elif name.startswith(_BACKWARD_NODE):
                backward, path = n, None  # a backward's path is its own (inner) range, else its forward's
            where[id(n)] = (phase, path, backward)
        return phase, path, backward

    # The path of the forward operator that made each autograd node, by (thread, sequence number). An operator
    # records the thread's autograd counter as it starts and the counter advances when an operator makes a node,
    # so the operators that share a number are the node's maker and those before it that made none: the maker
    # is the last of them to start (or one of its own inner operators, in the same path).
    forward_path: dict[tuple[int, int], tuple[float, str | None]] = {}
    for e in events:
        seq = getattr(e, "sequence_nr", -1)
        if seq is None or seq < 0:
            continue
        phase, path, backward = locate(e)
        start = e.time_range.start
        node = (e.thread, seq)
        if backward is None and (node not in forward_path or start >= forward_path[node][0]):
            forward_path[node] = (start, path)

    cells: dict[str, dict[tuple[str, str], float]] = {}
    for e in events:
        if e.name.startswith((PHASE_RANGE, PATH_RANGE)):
            continue
        t = float(getattr(e, key, 0.0) or 0.0)
        if t <= 0:
            continue
        phase, path, backward = locate(e)
        if path is None and backward is not None:
            path = forward_path.get((getattr(backward, "fwd_thread", None), backward.sequence_nr), (0.0, None))[1]
        cell = (phase if phase is not None else OUTSIDE, path if path is not None else UNMARKED)
        by_cell = cells.setdefault(e.name, {})
        by_cell[cell] = by_cell.get(cell, 0.0) + t
    total = sum(sum(c.values()) for c in cells.values())
    if total <= 0:
        return OpProfile()
    return OpProfile({op: {k: v / total for k, v in c.items()} for op, c in cells.items()})


def attribute_ops(profile: OpProfile, task: str, *, threshold: float = HOT_OP_SHARE) -> list[HotOp]:
    """Every operator above ``threshold`` of the profiled step, largest first: the phases and code paths it ran
    in and the registry entries for ``task`` that remove or change at least :data:`MIN_CREDIT_OF_OP` of its time
    where it ran (:meth:`OpProfile.credit`), most credited first; an empty tuple: no entry targets it."""
    credits = {o.name: profile.credit(o) for o in registry.for_task(task)}
    phases, paths = profile.phases, profile.paths
    out = []
    for op, share in sorted(profile.shares.items(), key=lambda kv: -kv[1]):
        if share < threshold:
            break
        named = sorted(
            (name for name, c in credits.items() if c.get(op, 0.0) >= MIN_CREDIT_OF_OP * share),
            key=lambda name: -credits[name][op],
        )
        out.append(
            HotOp(
                op,
                share,
                phases.get(op, {}),
                tuple(named),
                paths.get(op, {}),
                {name: credits[name][op] for name in named},
            )
        )
    return out
