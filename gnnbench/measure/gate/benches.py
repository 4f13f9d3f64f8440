"""The gate's benchmarks: the workload's configuration (:func:`gate_config`), the baseline, every registry entry that
runs here and the micro-benchmarks (:func:`default_benches`, each left out with its reason), each fitted to a
number of measured steps from its batch source alone (:func:`fit_steps`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gnnbench.measure.gate.worker import MICRO_BENCHES

__all__ = ["Bench", "MICRO", "gate_config", "default_benches", "fit_steps"]

MICRO = tuple(MICRO_BENCHES)  # code paths timed alone (the worker's table: sampler, gather, aggregation)


@dataclass(frozen=True)
class Bench:
    """One benchmark of the gate: a configuration trained for a fixed number of steps."""

    name: str
    config: Any  # RunConfig (seed set per round)


def gate_config(preset: str = "tiny", *, warmup: int = 3, device: str = "cpu") -> Any:
    """The gate's base configuration: the one benchmark workload (:mod:`gnnbench.measure.run.workload`) on
    ``preset``'s graph (epochs are fitted per benchmark by :func:`default_benches`)."""
    from gnnbench.measure.run.workload import bench_config

    return bench_config(preset=preset, epochs=1, warmup_steps=warmup, device=device)


def default_benches(
    base_config: Any, names: list[str] | None = None, *, steps: int | None = None, skipped: dict[str, str] | None = None
) -> list[Bench]:
    """The baseline and every registry entry that runs here on ``base_config`` (or ``names`` among them;
    ``"baseline"`` is the base configuration itself). Each entry left out is put in ``skipped`` (when given)
    with the reason: it does not apply to the gate's workload, needs several processes, or cannot run on this
    device.

    With ``steps``, each benchmark's epochs are fitted so that it measures at least ``steps`` steps after its
    warm-up, whatever its batches per epoch (a neighbour epoch on ``tiny`` is 8 batches, a Cluster-GCN epoch
    2, a full-batch epoch 1); epochs are never cut short, since a cut epoch changes a source's regime (the
    batch cache does not keep it).
    """
    from gnnbench import registry
    from gnnbench.env import resolve_device
    from gnnbench.training import config_unavailable

    device = resolve_device(base_config.device)
    wanted = ["baseline"] + registry.names() + list(MICRO) if names is None else list(names)
    graph = None
    if steps is not None:
        if not isinstance(steps, int) or steps < 2:
            raise ValueError(f"the gate needs at least 2 measured steps per benchmark (got {steps!r})")
        from gnnbench.graphs import generate

        graph = generate(base_config.spec)
    benches = []
    for name in wanted:
        if name in MICRO:  # one code path alone, on the base configuration's graph
            benches.append(Bench(name, base_config))
            continue
        if name == "baseline":
            config = base_config
        else:
            parts = registry.combination(name)
            why = registry.not_applicable(base_config, parts)
            if why is None:
                config = registry.config_for(base_config, parts)
                refused = config_unavailable(config, device)
                multi = config.nproc > 1 or config.flags.parallel != "none"
                allocator = config.flags.allocator != base_config.flags.allocator
                why = (
                    "a multi-rank entry (torch.distributed): the gate times one process per tree"
                    if multi
                    else "an allocator entry: set when a process starts, and the gate's processes run with the "
                    "environment the gate was started with"
                    if allocator
                    else "; ".join(f"{k}: {v}" for k, v in refused.items())
                    if refused
                    else None
                )
            if why is not None:
                if skipped is not None:
                    skipped[name] = why
                continue
        if steps is not None:
            config = fit_steps(config, graph, steps)
        benches.append(Bench(name, config))
    if not benches:
        raise ValueError(f"no benchmark of {wanted} runs here")
    return benches


def fit_steps(config: Any, graph: Any, steps: int) -> Any:
    """``config`` with enough whole epochs for ``steps`` measured steps after ``config.warmup_steps``: its steps per
    epoch read from its batch source alone (:func:`gnnbench.training.pipeline.batch_source`; no model, features or
    optimizer built in the gate's process)."""
    import dataclasses
    import math

    from gnnbench.training.pipeline import batch_source

    batches = batch_source(dataclasses.replace(config, epochs=1, max_steps_per_epoch=None), graph)
    try:
        per_epoch = batches.steps_per_epoch()
        if per_epoch is None:  # a source that learns its length by running: count one epoch's batches
            per_epoch = sum(1 for _ in batches.epoch(0))
        floor = batches.min_epochs(config.warmup_steps)
    finally:
        batches.close()
    epochs = max(floor, math.ceil((steps + config.warmup_steps) / max(per_epoch, 1)))
    return dataclasses.replace(config, epochs=epochs, max_steps_per_epoch=None)
