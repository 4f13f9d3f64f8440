"""The process a step runs in: its memory allocator and where its threads and loader workers run.

Two ``Flags`` fields belong to this layer: ``allocator`` (:mod:`gnnbench.process.allocators`, set when the
process starts) and ``thread_placement`` (:mod:`gnnbench.process.threads`, applied when the pipeline is
assembled). What a process really ran with is read back from it (:mod:`gnnbench.process.readback`) and recorded
in every result's ``process`` block.

The public face:

* :func:`unavailable`: this layer's answer to "can these flags run here?" (an allocator library that is not
  installed names the package that provides it).
* :func:`start_mismatch`: why this process cannot measure ``flags`` as it is (another allocator), so the run
  starts a child process with :func:`child_environment`.
* :func:`in_effect`: the ``process`` block of a result.
* :func:`run_child`: the one way to start a measuring child process (its own process group, a timeout, nothing
  left behind, the end of its stderr on failure; :mod:`gnnbench.process.children`), with its timeout from a
  run's time budget (:func:`budget_timeout`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.process.allocators import (
    ALLOCATORS,
    BASELINE_ALLOCATOR,
    allocator_unavailable,
    shell_prefix,
)
from gnnbench.process.allocators import (
    child_environment as _allocator_environment,
)
from gnnbench.process.children import DEFAULT_CHILD_TIMEOUT_S, ChildOutcome, budget_timeout, run_child, run_json_child
from gnnbench.process.readback import allocator_in_effect
from gnnbench.process.threads import ThreadPlan, placement_unavailable, plan_for, threads_in_effect
from gnnbench.process.usage import StepUsage, resource_usage

__all__ = [
    "unavailable",
    "start_mismatch",
    "start_refusal",
    "placement",
    "was_placed",
    "child_environment",
    "in_effect",
    "ALLOCATORS",
    "BASELINE_ALLOCATOR",
    "shell_prefix",
    "allocator_in_effect",
    "resource_usage",
    "StepUsage",
    "ThreadPlan",
    "plan_for",
    "threads_in_effect",
    "PLACED",
    "run_child",
    "run_json_child",
    "ChildOutcome",
    "budget_timeout",
    "DEFAULT_CHILD_TIMEOUT_S",
]

PLACED = "GNNBENCH_PROCESS_PLACED"
"""Set in a child process started for its allocator: a child that still runs another allocator reports the
mismatch instead of starting a child of its own."""


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """The process layer's answer for ``allocator`` and ``thread_placement``."""
    out = []
    reason = allocator_unavailable(flags.allocator)
    if reason:
        out.append(Unavailable("allocator", reason))
    reason = placement_unavailable(flags.thread_placement, flags.num_workers, world_size=ctx.world_size)
    if reason:
        out.append(Unavailable("thread_placement", reason))
    return out


def start_mismatch(flags: Flags) -> str | None:
    """Why this process does not run with ``flags``' allocator (it is set when a process starts), or ``None``
    when it does."""
    found = allocator_in_effect()
    if found["allocator"] == flags.allocator:
        return None
    running = found["allocator"] or f"{found['family']} ({found['library']}) with {found['settings'] or 'no settings'}"
    return f"allocator {flags.allocator!r} asked for, this process runs {running}"


def start_refusal(flags: Flags) -> list[Unavailable]:
    """An allocator other than the baseline that this process does not run: it is set when a process starts, so
    a trainer refuses it rather than measure the allocator this process has (``gnnbench.measure.run.single`` starts a
    process for it). The baseline is the process as it was started; its result records what that was."""
    if flags.allocator == BASELINE_ALLOCATOR:
        return []
    mismatch = start_mismatch(flags)
    if mismatch is None:
        return []
    return [
        Unavailable(
            "allocator",
            f"{mismatch}; an allocator is set when a process starts: measure it with "
            "gnnbench run or compare (they start one), or start this one with "
            f"{shell_prefix(flags.allocator)}",
        )
    ]


def placement(flags: Flags) -> ThreadPlan:
    """The thread placement of ``flags`` (``thread_placement`` with its ``num_workers``) over this process's
    cores (:func:`gnnbench.process.threads.plan_for`)."""
    return plan_for(flags.thread_placement, flags.num_workers)


def child_environment(flags: Flags, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process that runs ``flags``' allocator (:func:`gnnbench.process.allocators.
    child_environment`), marked :data:`PLACED`."""
    env = _allocator_environment(flags.allocator, base)
    env[PLACED] = flags.allocator
    return env


def was_placed() -> bool:
    """Whether this process was started by gnnbench for its allocator."""
    return PLACED in os.environ


def in_effect(threads: Mapping[str, Any] | None = None, usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A result's ``process`` block: the allocator read back from this process, its threads and cores
    (``threads``: :func:`threads_in_effect` as read while the run's placement held; read now when not given),
    and (``usage``) what the measured steps cost the process in page faults and kernel time."""
    block = {"allocator": allocator_in_effect(), "threads": dict(threads) if threads else threads_in_effect()}
    if usage is not None:
        block["usage"] = dict(usage)
    return block
