"""The one benchmark workload: the small, fixed configuration that the gate (``gnnbench regress``), asv
(``benchmarks/``), pytest-benchmark (``tests/perf``), the gate's micro-benchmarks and the accuracy regression
tests time and train: the ``tiny`` preset, fanout 10,5, batch 256, hidden width 32, several steps per epoch.

Each user states only how it differs (epochs, warm-up, task, device) through :func:`bench_config`; the asv
history and the gate's verdicts stay comparable across commits only while this workload is unchanged.
"""

from __future__ import annotations

from typing import Any

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.training import RunConfig

BENCH_PRESET = "tiny"
BENCH_FLAGS = Flags(fanout=(10, 5), batch_size=256)
BENCH_HIDDEN = 32


def bench_spec(preset: str = BENCH_PRESET) -> GraphSpec:
    """The workload's graph (``preset``'s spec, ``tiny`` by default)."""
    return GraphSpec.preset(preset)


def bench_config(flags: Flags = BENCH_FLAGS, *, preset: str = BENCH_PRESET, **fields: Any) -> RunConfig:
    """The workload as a :class:`RunConfig`: ``flags`` (the workload's own by default, or an entry applied to
    them) on ``preset``'s graph at hidden width 32; ``fields`` are the other :class:`RunConfig` fields the
    caller sets (``epochs``, ``warmup_steps``, ``task``, ``device``, ...)."""
    return RunConfig(spec=bench_spec(preset), flags=flags, hidden=BENCH_HIDDEN, **fields)
