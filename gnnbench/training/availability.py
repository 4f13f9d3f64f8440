"""What cannot run here, and why: every layer's answer for its own ``Flags`` fields, collected.

Each layer owns the rules for its fields (:func:`gnnbench.graphs.prepare.unavailable`,
:func:`gnnbench.sampling.sources.unavailable`, :func:`gnnbench.features.placement.unavailable`,
:func:`gnnbench.models.aggregation.unavailable`, :func:`gnnbench.models.tasks.unavailable`,
:func:`gnnbench.parallel.data_parallel.unavailable`, :func:`gnnbench.parallel.partition_parallel.unavailable`,
:func:`gnnbench.process.unavailable`);
:func:`check` asks them all. The trainer, the registry, sweeps, benchmarks and tests read this one answer, so a
configuration is refused the same way everywhere.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnbench import process
from gnnbench.env import resolve_device
from gnnbench.features import placement as features
from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs import prepare
from gnnbench.models import aggregation as models
from gnnbench.models import tasks
from gnnbench.parallel import data_parallel, partition_parallel
from gnnbench.sampling import sources
from gnnbench.training.config import RunConfig

__all__ = ["check", "reasons", "LAYERS", "run_context", "config_unavailable"]

LAYERS = (
    process.unavailable,
    prepare.unavailable,
    features.unavailable,
    models.unavailable,
    tasks.unavailable,
    data_parallel.unavailable,
    partition_parallel.unavailable,
)


def check(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """Every field of ``flags`` that cannot run in ``ctx``, with the reason (empty: it can run)."""
    out: list[Unavailable] = []
    for layer in LAYERS:
        out += layer(flags, ctx)
    out += sources.unavailable(flags, ctx, kind=tasks.TASKS[ctx.task].source_kind(flags))
    return out


def reasons(flags: Flags, ctx: RunContext) -> dict[str, str]:
    """:func:`check` as ``{field: reason}`` (reasons for one field joined)."""
    out: dict[str, str] = {}
    for u in check(flags, ctx):
        out[u.field] = f"{out[u.field]}; {u.reason}" if u.field in out else u.reason
    return out


def run_context(config: RunConfig, device: torch.device | None = None, graph: Any = None) -> RunContext:
    """The availability context of ``config`` (graph size from ``graph`` when given, else the configuration's)."""
    num_nodes, num_edges = (graph.num_nodes, graph.num_edges) if graph is not None else config.graph_size
    return RunContext(
        device=device if device is not None else resolve_device(config.device),
        task=config.task,
        model=config.model,
        num_nodes=num_nodes,
        num_edges=num_edges,
        world_size=config.nproc,
    )


def config_unavailable(config: RunConfig, device: torch.device | None = None) -> dict[str, str]:
    """Every flag of ``config`` that cannot run here, with the reason (:func:`reasons`)."""
    return reasons(config.flags, run_context(config, device))
