"""Shared fixtures for the asv suites: built once per process behind cached helpers.

The device comes from ``$GNNBENCH_DEVICE`` (default ``cpu``); parameters never
depend on the environment, so a configuration that cannot run here is skipped
by raising ``NotImplementedError`` in ``setup``.
"""

import functools
import os

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.runner import RunConfig, config_unavailable, run

BASELINE = "baseline"
OPTIMIZATIONS = [BASELINE] + registry.names()
# A small, fixed workload: the tiny preset with a fanout and batch size that give several steps per epoch.
BENCH_SPEC = GraphSpec.preset("tiny")
BENCH_FLAGS = Flags(fanout=(10, 5), batch_size=256)


def device() -> str:
    return os.environ.get("GNNBENCH_DEVICE", "cpu")


@functools.lru_cache(maxsize=None)
def graph(spec: GraphSpec = BENCH_SPEC):
    return generate(spec)


def config_for(name: str, task: str = "node") -> RunConfig:
    flags = BENCH_FLAGS if name == BASELINE else registry.get(name).apply(BENCH_FLAGS)
    task = "link" if name == "degree_negatives" else task
    return RunConfig(spec=BENCH_SPEC, flags=flags, task=task, epochs=2, warmup_steps=2, hidden=32,
                     device=device())


def skip_if_unavailable(config: RunConfig) -> None:
    try:
        dev = resolve_device(config.device)
    except ValueError as exc:
        raise NotImplementedError(str(exc)) from None
    reasons = config_unavailable(config, dev)
    if reasons:
        raise NotImplementedError("; ".join(f"{k}: {v}" for k, v in reasons.items()))


@functools.lru_cache(maxsize=None)
def run_result(name: str) -> dict:
    """One measured run of ``name`` (cached per process) for the track_* benchmarks."""
    result = run(config_for(name), graph=graph())
    if result["status"] != "ok":
        raise NotImplementedError("; ".join(f"{k}: {v}" for k, v in result["unavailable"].items()))
    return result
