"""The measured best set (docs/best-set.md): after a sweep's single-entry rounds, the entries that pay at no
accuracy cost are switched on together (conflicts resolved as ``tune`` resolves them) and that set is measured
against the baseline in rounds of its own, on seeds no other round of the sweep uses.

The set is chosen on the single-entry rounds and judged on its own rounds, so its verdict is a fresh test (a
family of one row, under a stopping rule of its own); the selection cannot inflate it. That is why a row that is
significant on its own test but not after Holm's correction over the whole family is a candidate too, after the
family-wise ones: choosing a hypothesis costs no error rate, only the set's own rounds decide it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from gnnbench import registry
from gnnbench.measure.compare import NO_COST, STATIC_LIST, ComparisonRow, pays, pays_alone
from gnnbench.training import RunConfig, config_unavailable

if TYPE_CHECKING:
    from gnnbench.measure.compare import Comparison

__all__ = [
    "BEST_SET_SEED_OFFSET",
    "BEST_SET_DIR",
    "BestSetChoice",
    "BestSetOutcome",
    "choose",
    "set_base",
    "outcome_line",
    "MIN_SET_ROUNDS",
]

BEST_SET_SEED_OFFSET = 30_000  # the set's round r trains with seed base.seed + 30_000 + r (and so does its baseline)
BEST_SET_DIR = "best-set"  # the set's rounds, in a sweep folder of their own inside the sweep's
MIN_SET_ROUNDS = 3  # the set's rounds at least (accuracy needs an interval; the rule's first look)


@dataclass
class BestSetChoice:
    """What the single-entry rounds chose: the rows that pay at no accuracy cost (``candidates``: family-wise
    first, then those significant alone, ``per_row``; each ranked), those left out and why, and the entries of
    the set (``names``; fewer than two: no set to measure)."""

    candidates: list[str] = field(default_factory=list)
    per_row: list[str] = field(default_factory=list)  # candidates significant alone, not family-wise
    left_out: dict[str, str] = field(default_factory=dict)  # candidate -> why it is not in the set
    names: list[str] = field(default_factory=list)  # the set's entries, in the order they were taken
    seed_offset: int = BEST_SET_SEED_OFFSET

    @property
    def label(self) -> str:
        """The set's row label: its entries joined by ``+`` (a sweep label, :func:`registry.combination`)."""
        return "+".join(self.names)

    @property
    def measurable(self) -> bool:
        """Two entries or more: with one, the best single row is the answer."""
        return len(self.names) >= 2

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "label": self.label if self.measurable else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BestSetChoice":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class BestSetOutcome:
    """The set as chosen, and what its own rounds measured (``row``: the set's row of its comparison; ``None``
    when no set was measured, ``reason`` says why)."""

    choice: BestSetChoice
    row: ComparisonRow | None = None
    comparison: "Comparison | None" = None
    reason: str | None = None  # why no set was measured

    @property
    def pays(self) -> bool:
        """The set pays here: significant and faster in its own rounds, reached the target in every round, at
        no accuracy cost."""
        return self.row is not None and pays(self.row) and self.row.acc_verdict in NO_COST

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.choice.to_dict(), "reason": self.reason, "pays": self.pays}
        r = self.row
        if r is not None:
            out.update(
                speedup=r.speedup,
                low=r.speedup_low,
                high=r.speedup_high,
                primary=r.primary,
                significant=r.significant,
                censored=r.censored,
                rounds=r.rounds,
                acc_delta=r.acc_delta,
                acc_delta_low=r.acc_delta_low,
                acc_delta_high=r.acc_delta_high,
                acc_verdict=r.acc_verdict,
                status=r.status,
                row_reason=r.reason,
            )
        return out


def _fields(name: str, flags) -> set[str]:
    """The fields of ``flags`` the entry ``name`` sets (none where it cannot apply)."""
    try:
        return set(registry.get(name).changes_for(flags))
    except registry.NotApplicable:
        return set()


def choose(comparison: "Comparison", base: RunConfig) -> BestSetChoice:
    """The set the single-entry rows of ``comparison`` found to pay: candidates are the rows that pay at no
    accuracy cost (family-wise significant, faster, reached the target in every round; the registry's static
    list excepted), in rank order, then the rows that pay alone (:func:`pays_alone`: significant before Holm's
    correction), in rank order; each is taken unless it conflicts with one taken before it: it sets a field
    of :class:`~gnnbench.flags.Flags` a taken entry set, it is not applicable once those are on, the
    configuration with it cannot run on this device (:func:`config_unavailable`), or adding it leaves the flags
    unchanged. A combination row (``a+b``) is a candidate as its parts together."""

    def free(r: ComparisonRow) -> bool:
        return r.acc_verdict in NO_COST and r.label != STATIC_LIST

    family = [r for r in comparison.rows if pays(r) and free(r)]
    alone = [r for r in comparison.rows if pays_alone(r) and free(r)]
    candidates = family + alone
    choice = BestSetChoice(candidates=[r.label for r in candidates], per_row=[r.label for r in alone])
    taken: list[str] = []
    owner: dict[str, str] = {}  # field -> the taken entry that set it
    for row in candidates:
        parts = list(row.optimizations) or list(registry.combination(row.label))
        if any(p in taken for p in parts):
            choice.left_out[row.label] = f"already in the set ({', '.join(p for p in parts if p in taken)})"
            continue
        shared = sorted({f for p in parts for f in _fields(p, base.flags)} & set(owner))
        if shared:
            choice.left_out[row.label] = (
                f"conflicts with {owner[shared[0]]} on {'field' if len(shared) == 1 else 'fields'} {', '.join(shared)}"
            )
            continue
        current = registry.config_for(base, taken) if taken else base
        why = registry.not_applicable(current, parts)
        if why:
            choice.left_out[row.label] = f"not applicable with {'+'.join(taken)} on: {why}"
            continue
        cannot = config_unavailable(registry.config_for(current, parts)) if taken else {}
        if cannot:
            field_, reason = next(iter(cannot.items()))
            choice.left_out[row.label] = f"cannot run with {'+'.join(taken)} on here ({field_}: {reason})"
            continue
        if taken and registry.config_for(current, parts).flags == current.flags:
            choice.left_out[row.label] = f"changes nothing once {'+'.join(taken)} is on"
            continue
        for p in parts:
            for f in _fields(p, base.flags):
                owner[f] = p
        taken += parts
    choice.names = taken
    return choice


def set_base(base: RunConfig, choice: BestSetChoice) -> RunConfig:
    """The base configuration of the set's rounds: ``base`` on the set's own seed stream (round r trains with
    ``base.seed + seed_offset + r``, seeds no single-entry round, calibration run or A/A copy uses)."""
    return dataclasses.replace(base, seed=base.seed + choice.seed_offset)


def outcome_line(outcome: BestSetOutcome | None, effect: Callable[[ComparisonRow], str]) -> str | None:
    """The best set in one line (``effect`` words a row's speedup and accuracy), or ``None`` without one."""
    if outcome is None:
        return None
    choice = outcome.choice
    left = "; ".join(f"left out: {k} ({v})" for k, v in choice.left_out.items())
    alone = [n for n in choice.per_row if all(p in choice.names for p in registry.combination(n))]
    left = (f"; {left}" if left else "") + (
        f"; chosen on their own test, not family-wise: {', '.join(alone)}" if alone and choice.measurable else ""
    )
    if not choice.measurable or outcome.row is None:
        why = outcome.reason or (
            "fewer than two entries pay at no accuracy cost here, family-wise or on their own "
            "test: the best single row is the answer"
        )
        return f"best set: none measured ({why}){left}"
    r = outcome.row
    if r.status != "ok":
        return f"best set {choice.label}: not measured ({r.reason or r.status}){left}"
    if outcome.pays:
        return f"measured best set here: {choice.label}: {effect(r)} (its own {r.rounds} rounds){left}"
    return (
        f"best set {choice.label} does not pay here in its own {r.rounds} rounds: {effect(r)}; the best single "
        f"row stands{left}"
    )


def store_dir(out_dir: str | Path) -> Path:
    """The folder of a sweep's best-set rounds."""
    return Path(out_dir) / BEST_SET_DIR
