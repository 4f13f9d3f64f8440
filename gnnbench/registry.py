"""The registry of optimizations: the one list that benchmarks, the CLI, the
report and the coverage tests iterate.

Each entry is data: the change it makes to :class:`~gnnbench.flags.Flags`, a
one-line description, the effect commonly reported for it, the devices it
needs and whether it is expected to cost accuracy. The code of an optimization
lives in the layer it changes, switched by its flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import torch

from gnnbench.flags import Flags

__all__ = ["Optimization", "REGISTRY", "get", "names", "flags_for", "available", "unavailable_reasons"]


@dataclass(frozen=True)
class Optimization:
    """One named optimization.

    Args:
        name: Short name used on the command line and in reports.
        changes: Fields of :class:`Flags` and the values that switch it on.
        description: One line saying what it does.
        expected_effect: The effect as commonly reported, with its figure.
        layer: The module whose code it switches.
        requires: Device types it needs (e.g. ``("cuda",)``); empty = any.
        costs_accuracy: Whether it is expected to change accuracy.
        recommended: Whether it belongs in the "all recommended" combination.
    """

    name: str
    changes: Mapping[str, Any]
    description: str
    expected_effect: str
    layer: str
    requires: tuple[str, ...] = ()
    costs_accuracy: bool = False
    recommended: bool = True
    _frozen_changes: Mapping[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        Flags().replace(**self.changes)  # validates field names and values early
        object.__setattr__(self, "_frozen_changes", MappingProxyType(dict(self.changes)))

    def apply(self, flags: Flags) -> Flags:
        """``flags`` with this optimization switched on."""
        return flags.replace(**self._frozen_changes)

    def unavailable(self, device: torch.device | str) -> str | None:
        """Why this optimization cannot run on ``device``, or ``None`` if it can."""
        dev = torch.device(device)
        if self.requires and dev.type not in self.requires:
            return f"{self.name} needs a {' or '.join(self.requires)} device (this run uses {dev.type})"
        return None


_ENTRIES = (
    Optimization(
        name="int32",
        changes={"index_dtype": "int32"},
        description="Store edge indices and CSR offsets as int32, after checking the largest id fits.",
        expected_effect="Index storage halves (2x fewer bytes, exact); index-bound gathers and scatters "
        "move half the index bytes, so speed gains are small and device dependent (often 0-15%).",
        layer="gnnbench.graphs.prepare",
    ),
    Optimization(
        name="cached_norm",
        changes={"cached_norm": True},
        description="Compute GCN's D^-1/2 (A+I) D^-1/2 once per graph and reuse it (zero-degree safe).",
        expected_effect="Removes the per-forward normalization (one degree scatter and three gathers over "
        "E) from every GCN layer, as PyG's GCNConv(cached=True) does; the saving is that work's share of a step.",
        layer="gnnbench.graphs.prepare",
    ),
    Optimization(
        name="csr",
        changes={"keep_csr": True},
        description="Keep CSR neighbour lists beside COO instead of deriving them (a sort) on each use.",
        expected_effect="Saves a sort of all E edges each time neighbour lists are needed, for N+1 "
        "offsets of memory (CSR's column array is COO's source row).",
        layer="gnnbench.graphs.prepare",
    ),
)

REGISTRY: Mapping[str, Optimization] = MappingProxyType({opt.name: opt for opt in _ENTRIES})


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Optimization:
    """Look up an optimization by name; unknown names list the valid ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown optimization {name!r}; accepted: {', '.join(REGISTRY)}") from None


def flags_for(opt_names: Iterable[str], base: Flags = Flags()) -> Flags:
    """``base`` with each named optimization switched on, in order."""
    flags = base
    for name in opt_names:
        flags = get(name).apply(flags)
    return flags


def unavailable_reasons(flags: Flags, device: torch.device | str) -> dict[str, str]:
    """For each optimization switched on in ``flags`` that cannot run on ``device``, the reason."""
    out = {}
    for opt in REGISTRY.values():
        on = all(getattr(flags, k) == v for k, v in opt.changes.items())
        reason = opt.unavailable(device) if on else None
        if reason:
            out[opt.name] = reason
    return out


def available(device: torch.device | str) -> list[Optimization]:
    return [opt for opt in REGISTRY.values() if opt.unavailable(device) is None]
