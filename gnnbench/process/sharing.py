"""Whether a configuration can be timed in one process beside another trainer (DESIGN.md §3, "Measure where
the noise cancels").

Two trainers in one process with their steps interleaved see the same process speed, so the drift from one
process to the next cancels in their ratio. That is fair only when neither trainer does work while the other
one steps and neither sets something the whole process shares. :data:`SHARING_RULES` is the table of what
breaks that, one row per kind of field value; :func:`own_process_reasons` reads it. The registry declares each
entry's answer (``Optimization.shares_process``) and checks it against this table.

A rule whose producers can be stopped outright is **paused** instead (``SharingRule.paused``): loader worker
processes are suspended (``SIGSTOP``) while the other trainer steps and continued for their own trainer's
steps, as :class:`gnnbench.background.BackgroundWork` already does while the loop evaluates. A suspended
process does no work at all, so its trainer's pipeline is frozen between its own steps, as if the other side's
steps took no time; and since loader workers cost something once per epoch (forked, or handed the epoch's
first indices), a pair with paused producers measures whole epochs of each side
(:func:`gnnbench.measure.run.interleaved.time_pair`). :func:`paused_producers` names them. The pipelined
loader's thread is **held** the same way: after each of its trainer's steps it starts no new item, and the pair
waits, on that side's clock, for the item it has in progress (:meth:`gnnbench.background.BackgroundWork.drain`),
so none of its work runs on the other side's time; a held thread needs no signal (``SharingRule.by_signal``).
Its queue is then as full as the producer could make it during its own step, as in training where the
producer keeps ahead, and a producer slower than the step costs its trainer the wait for it either way. The
thread that pins loader workers' batches (CUDA) is PyTorch's and the side-stream prefetch's gather is queued
on a CUDA stream: neither can be held, so both keep a process of their own.

A rule whose setting a process of its own carries at the moment the other trainer's process runs is timed in
**duet** (``SharingRule.duet``): both processes start together, each pinned to its own core at one thread, a
barrier before either builds its trainer, so a drift of the machine lands on both (Bulej et al., "Duet
Benchmarking", 2020; :mod:`gnnbench.measure.sweep.duet`). The allocator qualifies: it acts inside its own
process only. Thread placement does not (a duet side has one thread on one core, which is the placement), nor do
producers that need a second core, nor several ranks. :func:`duet_refusals` names what a duet cannot carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gnnbench.background import can_suspend_processes
from gnnbench.flags import Flags
from gnnbench.process.allocators import BASELINE_ALLOCATOR

__all__ = [
    "SharingRule",
    "SHARING_RULES",
    "own_process_reasons",
    "paused_producers",
    "shares_process",
    "duet_refusals",
    "times_in_duet",
]


@dataclass(frozen=True)
class SharingRule:
    """One reason a configuration needs a process of its own."""

    field: str  # the Flags field it reads
    applies: Callable[[Flags], bool]  # whether the flags' value needs a process of their own
    why: str  # why, in words (``{value}`` is the field's value)
    # how its producers are paused while the other trainer steps, in words; "" (the default): they cannot be,
    # and the configuration needs a process of its own
    paused: str = ""
    # whether pausing them takes a signal (SIGSTOP: worker processes), which not every platform has; a thread
    # is held between its items by BackgroundWork and drained, with no signal
    by_signal: bool = False
    # whether a process of its own, timed at the same moment as the other trainer's on a core of its own at one
    # thread (a duet), carries the setting whole: it acts inside its own process only and needs no second core
    duet: bool = False


SHARING_RULES: tuple[SharingRule, ...] = (
    SharingRule(
        "num_workers",
        lambda f: f.num_workers > 0,
        "runs {value} loader worker process(es), which sample ahead while the other trainer steps",
        paused="its {value} loader worker process(es) suspended (SIGSTOP) while the other trainer steps, whole "
        "epochs measured",
        by_signal=True,
    ),
    SharingRule(
        "pin_memory",
        lambda f: f.pin_memory and f.num_workers > 0,
        "pins its loader workers' finished batches in a thread of this process, which goes on while the other "
        "trainer steps",
    ),
    SharingRule(
        "pipeline_depth",
        lambda f: f.pipeline_depth > 0,
        "runs a background thread that prepares {value} batch(es) ahead while the other trainer steps",
        paused="its producer thread held while the other trainer steps (the item in progress finished on its own "
        "side's clock), whole epochs measured",
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
        duet=True,
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


def _pausable(rule: SharingRule) -> bool:
    return bool(rule.paused) and (not rule.by_signal or can_suspend_processes())


def own_process_reasons(flags: Flags) -> list[str]:
    """Why ``flags`` cannot be timed in one process beside another trainer (empty: it can), each reason naming
    its field: ``"allocator=jemalloc: sets the process's memory allocator ..."``. Producers that are paused
    while the other trainer steps (:func:`paused_producers`) are no reason."""
    out = []
    for rule in SHARING_RULES:
        if rule.applies(flags) and not _pausable(rule):
            value = getattr(flags, rule.field)
            out.append(f"{rule.field}={value}: {rule.why.format(value=value)}")
    return out


def paused_producers(flags: Flags) -> list[str]:
    """The background producers of ``flags`` that a pair suspends while the other trainer steps (empty: none),
    each naming its field: ``"num_workers=2: its 2 loader worker process(es) suspended (SIGSTOP) ..."``."""
    out = []
    for rule in SHARING_RULES:
        if rule.applies(flags) and _pausable(rule):
            value = getattr(flags, rule.field)
            out.append(f"{rule.field}={value}: {rule.paused.format(value=value)}")
    return out


def shares_process(flags: Flags) -> bool:
    """Whether ``flags`` can be timed beside another trainer in one process (:func:`own_process_reasons` is
    empty)."""
    return not own_process_reasons(flags)


def duet_refusals(flags: Flags) -> list[str]:
    """What of ``flags`` a duet cannot carry (empty: nothing), each naming its field: every rule that applies and
    is not ``duet``, paused producers included (a duet side has one core, which its loader workers would share
    with its own steps, and nothing pauses them)."""
    out = []
    for rule in SHARING_RULES:
        if rule.applies(flags) and not rule.duet:
            value = getattr(flags, rule.field)
            out.append(f"{rule.field}={value}: {rule.why.format(value=value)}")
    return out


def times_in_duet(flags: Flags) -> bool:
    """Whether ``flags`` need a process of their own that a duet carries whole: timed against the baseline's
    process at the same moment, one core each, instead of in one process (:func:`own_process_reasons` not empty,
    :func:`duet_refusals` empty)."""
    return bool(own_process_reasons(flags)) and not duet_refusals(flags)
