"""pytest-benchmark over the registry: baseline and each optimization, one training step each.

Quick (default; timing disabled, each step runs once): ``python -m pytest tests/perf``.
Measured: ``python -m pytest tests/perf --benchmark-enable --benchmark-group-by=group``.
Local before/after workflow (docs/tracking.md, and ``scripts/perf_aa.py`` for its A/A check):
``--benchmark-save=before``, change the code, then ``--benchmark-compare=0001 --benchmark-compare-fail=median:<threshold>``. Measured runs pin
one thread (``tests/perf/conftest.py``). A measured optimized step of an entry that can share a process with the
baseline also records ``extra_info["interleaved_speedup"]``: its per-step ratio against the baseline timed in this
process, steps interleaved (the figure a drift between the two benchmarks cannot move).
"""

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import UnavailableError
from gnnbench.graphs import generate
from gnnbench.measure.run import BENCH_FLAGS, bench_config, bench_spec, time_pair
from gnnbench.training import RunConfig, Trainer
from tests.helpers import skip_unless_runs

SPEC = bench_spec()  # the one benchmark workload (gnnbench/measure/run/workload.py)
ROUNDS, WARMUP_ROUNDS, STEPS_PER_ROUND = 20, 5, 5
BASE_FLAGS = BENCH_FLAGS
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def graph():
    return generate(SPEC)


def _config(name: str, optimized: bool) -> RunConfig:
    opt = registry.get(name)
    flags = opt.apply(BASE_FLAGS) if optimized else BASE_FLAGS
    # the entry's own task: a link-prediction entry's baseline is the link-prediction baseline
    return bench_config(flags, task=opt.task, device=DEVICE)


def _bench_step(benchmark, graph, name: str, optimized: bool, request):
    config = _config(name, optimized)
    skip_unless_runs(config)
    try:
        trainer = Trainer(config, graph=graph)
    except UnavailableError as exc:  # found only while building (a layer's own refusal, e.g. a zero-copy view)
        pytest.skip(str(exc))
    enabled = not benchmark.disabled
    benchmark.group = f"step {name} ({SPEC.name}, {DEVICE})"
    benchmark.extra_info.update(
        {
            "role": "optimized" if optimized else "baseline",
            "optimization": name,
            "flags": config.flags.to_dict(),
            "spec": SPEC.to_dict(),
            "task": config.task,
        }
    )
    steps = trainer.steps(epochs=float("inf"))  # the one training loop, one step per call
    try:
        # 20 rounds of 5 steps each after 5 warm-up rounds: each measured unit is long enough to be stable
        benchmark.pedantic(
            lambda: next(steps),
            rounds=ROUNDS if enabled else 1,
            warmup_rounds=WARMUP_ROUNDS if enabled else 0,
            iterations=STEPS_PER_ROUND if enabled else 1,
        )
    finally:
        steps.close()
        trainer.close()


@pytest.mark.parametrize("name", registry.names())
def test_step_baseline(benchmark, graph, name, request):
    """The baseline step, in the same group as the optimization for a ratio measured in one run."""
    _bench_step(benchmark, graph, name, False, request)


@pytest.mark.parametrize("name", registry.names())
def test_step_optimized(benchmark, graph, name, request):
    _bench_step(benchmark, graph, name, True, request)
    opt = registry.get(name)
    if not benchmark.disabled and opt.shares_process and not opt.changes_work:
        # the ratio measured where the noise cancels: both trainers in this process, steps interleaved
        pair = time_pair(_config(name, False), _config(name, True), graph=graph, blocks=8, windows=2)
        timed = pair.interval()
        benchmark.extra_info["interleaved_speedup"] = {"ratio": timed.ratio, "low": timed.low, "high": timed.high}
