"""Whether a configuration can be timed in one process beside another trainer (DESIGN.md §3, "Measure where
the noise cancels").

Two trainers in one process with their steps interleaved see the same process speed, so the drift from one
process to the next cancels in their ratio. That is fair only when neither trainer does work while the other
one steps and neither sets something the whole process shares. :data:`SHARING_RULES` is the table of what
breaks that, one row per kind of field value; :func:`own_process_reasons` reads it. The registry declares each
entry's answer (``Optimization.shares_process``) and checks it against this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gnnbench.flags import Flags
from gnnbench.process.allocators import BASELINE_ALLOCATOR

__all__ = ["SharingRule", "SHARING_RULES", "own_process_reasons", "shares_process"]


@dataclass(frozen=True)
class SharingRule:
    """One reason a configuration needs a process of its own."""

    field: str  # the Flags field it reads
    applies: Callable[[Flags], bool]  # whether the flags' value needs a process of their own
    why: str  # why, in words (``{value}`` is the field's value)


SHARING_RULES: tuple[SharingRule, ...] = (
    SharingRule(
        "num_workers",
        lambda f: f.num_workers > 0,
        "runs {value} loader worker process(es), which sample ahead while the other trainer steps",
    ),
    SharingRule(
        "pipeline_depth",
        lambda f: f.pipeline_depth > 0,
        "runs a background thread that prepares {value} batch(es) ahead while the other trainer steps",
    ),
    SharingRule(
        "feature_prefetch",
        lambda f: f.feature_prefetch,
        "gathers the next batch on a side stream while the other trainer steps",
    ),
    SharingRule(
        "allocator",
        lambda f: f.allocator != BASELINE_ALLOCATOR,
        "sets the process's memory allocator ({value}), which the other trainer would run under too",
    ),
    SharingRule(
        "thread_placement",
        lambda f: f.thread_placement != "shared",
        "places the process's threads ({value}), which the other trainer would run under too",
    ),
    SharingRule(
        "parallel",
        lambda f: f.parallel != "none",
        "trains on several ranks ({value}), each a process of its own",
    ),
    SharingRule(
        "batch_cache_epochs",
        lambda f: f.batch_cache_epochs > 0,
        "its step time follows a {value}-epoch cycle (sample, then replay), which a window of interleaved steps "
        "does not cover",
    ),
)


def own_process_reasons(flags: Flags) -> list[str]:
    """Why ``flags`` cannot be timed in one process beside another trainer (empty: it can), each reason naming
    its field: ``"num_workers=2: runs 2 loader worker process(es), ..."``."""
    out = []
    for rule in SHARING_RULES:
        if rule.applies(flags):
            value = getattr(flags, rule.field)
            out.append(f"{rule.field}={value}: {rule.why.format(value=value)}")
    return out


def shares_process(flags: Flags) -> bool:
    """Whether ``flags`` can be timed beside another trainer in one process (:func:`own_process_reasons` is
    empty)."""
    return not own_process_reasons(flags)
