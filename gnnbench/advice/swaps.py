"""``tune``'s swap moves: a chosen entry replaced by one that paid in an earlier round but cannot be added
beside it (it sets a field a chosen entry set, or cannot run with one), since pure greedy addition can lock out an
entry that paid on its own (an example: ``docs/advice.md``)."""

from __future__ import annotations

import dataclasses

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.measure.sweep import Entry
from gnnbench.training import RunConfig, config_unavailable

__all__ = ["SWAP_PREFIX", "changed_fields", "swap_moves", "swap_entries"]

SWAP_PREFIX = "swap:"  # label of a swap move: "swap:<out>-><in>"


def changed_fields(name: str, flags) -> set[str]:
    """The fields of ``flags`` the entry ``name`` sets (none where it cannot apply)."""
    try:
        return set(registry.get(name).changes_for(flags))
    except registry.NotApplicable:
        return set()


def _conflicts(names: list[str], base: RunConfig, device) -> bool:
    """Whether ``names`` cannot be switched on together: two set one field, or the set cannot run here."""
    seen: set[str] = set()
    for n in names:
        f = changed_fields(n, base.flags)
        if f & seen:
            return True
        seen |= f
    if registry.not_applicable(base, names):
        return True
    return bool(config_unavailable(registry.config_for(base, names), device))


def swap_moves(
    chosen: list[str], paid: list[str], base: RunConfig, *, tried: set[tuple[str, str]] = frozenset(), device=None
) -> list[tuple[str, str, list[str]]]:
    """``(out, in, new set)`` for each entry of ``paid`` (entries that paid significantly in an earlier round,
    best first) that cannot be added to ``chosen`` but can replace exactly one chosen entry; swaps in
    ``tried`` are skipped. The new set keeps the order of ``chosen`` with ``in`` in the place of ``out``."""
    device = device if device is not None else resolve_device(base.device)
    moves = []
    for name in paid:
        if name in chosen or not _conflicts(chosen + [name], base, device):
            continue  # already chosen, or an ordinary addition
        for out in chosen:
            if (out, name) in tried:
                continue
            new = [name if c == out else c for c in chosen]
            if not _conflicts(new, base, device):
                moves.append((out, name, new))
                break
    return moves


def swap_entries(base: RunConfig, moves: list[tuple[str, str, list[str]]], repeats: int) -> list[Entry]:
    """Sweep entries for swap moves, paired by round (seed) with :func:`sweep_entries`' baseline."""
    return [
        Entry(
            f"{SWAP_PREFIX}{out}->{new_in}",
            registry.config_for(dataclasses.replace(base, seed=base.seed + r), new),
            tuple(new),
            r,
        )
        for r in range(repeats)
        for out, new_in, new in moves
    ]
