"""Shared fixtures for the asv suites: built once per process behind cached helpers.

The device comes from ``$GNNBENCH_DEVICE`` (default ``cpu``); parameters never
depend on the environment, so a configuration that cannot run here is skipped
by raising ``NotImplementedError`` in ``setup``.
"""

import dataclasses
import functools
import os

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.flags import Flags, format_reasons
from gnnbench.graphs import GraphSpec, generate
from gnnbench.measure.run import run
from gnnbench.training import RunConfig, config_unavailable

BASELINE = "baseline"
OPTIMIZATIONS = [BASELINE] + registry.names()
try:  # the one benchmark workload (gnnbench/measure/run/workload.py)
    from gnnbench.measure.run.workload import BENCH_FLAGS, bench_config, bench_spec
except ImportError:  # asv runs these suites over older commits: measure/ before its sub-packages ...
    try:
        from gnnbench.measure.workload import BENCH_FLAGS, bench_config, bench_spec
    except ImportError:  # ... and from before the workload had one home
        # tests/measure/run/test_workload.py: equal to the package's
        BENCH_FLAGS = Flags(fanout=(10, 5), batch_size=256)

        def bench_spec(preset: str = "tiny") -> GraphSpec:
            return GraphSpec.preset(preset)

        def bench_config(flags: Flags = BENCH_FLAGS, *, preset: str = "tiny", **fields) -> RunConfig:
            return RunConfig(spec=bench_spec(preset), flags=flags, hidden=32, **fields)


BENCH_SPEC = bench_spec()


def device() -> str:
    return os.environ.get("GNNBENCH_DEVICE", "cpu")


@functools.lru_cache(maxsize=None)
def graph(spec: GraphSpec = BENCH_SPEC):
    return generate(spec)


def config_for(name: str) -> RunConfig:
    """The baseline, or the baseline with ``name`` switched on, on the entry's own task."""
    opt = None if name == BASELINE else registry.get(name)
    return bench_config(
        opt.apply(BENCH_FLAGS) if opt else BENCH_FLAGS,
        task=opt.task if opt else "node",
        epochs=2,
        warmup_steps=2,
        device=device(),
    )


def skip_if_unavailable(config: RunConfig, *, in_this_process: bool = False) -> None:
    """Skip (``NotImplementedError``, with the layers' reasons) a configuration that cannot run here; with
    ``in_this_process`` also one whose allocator this process does not run (it is set when a process starts:
    ``run()`` starts one, an in-process benchmark cannot)."""
    try:
        dev = resolve_device(config.device)
    except ValueError as exc:
        raise NotImplementedError(str(exc)) from None
    reasons = config_unavailable(config, dev)
    if reasons:
        raise NotImplementedError(format_reasons(reasons))
    try:
        from gnnbench.process import start_refusal
    except ImportError:  # a commit from before the process entries
        return
    if in_this_process and start_refusal(config.flags):
        raise NotImplementedError(format_reasons(start_refusal(config.flags)))


# The track_* runs train for a budget shown to reach the validation plateau on this workload (the accuracy
# regression tests' own: tests/registry/test_accuracy_regression.py): node classification 8 epochs, link prediction 2
# (its AUC plateaus within the first epoch); accuracy is read at the best validation point.
TRACK_EPOCHS = {"node": 8, "link": 2}


@functools.lru_cache(maxsize=None)
def run_result(name: str) -> dict:
    """One measured run of ``name`` (cached per process) for the track_* benchmarks, trained to its plateau, as
    its JSON (``to_dict``): asv runs this suite against older commits too, and the JSON is the one form every
    commit's result has (typed blocks now, dicts before)."""
    config = config_for(name)
    result = run(dataclasses.replace(config, epochs=TRACK_EPOCHS[config.task]), graph=graph())
    if not result.ok:
        raise NotImplementedError(format_reasons(result.unavailable))
    return result.to_dict()
