"""Every pair of registry entries either runs or is refused with a reason: never a traceback.

The full walk (every pair, both models, one short step each on a 2,000-node
graph, about a minute here) is marked slow: ``python -m pytest -q -m slow
tests/registry/test_combinations.py``. The pairs that once crashed stay in the default suite.
"""

import itertools

import pytest

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.measure.run import run
from gnnbench.training import RunConfig

SPEC = GraphSpec.preset("tiny", num_nodes=2000)
BASE = Flags(fanout=(5, 3), batch_size=128, cluster_size=500, clusters_per_batch=1, saint_roots=200)
PAIRS = [(model, a, b) for model in ("gcn", "sage") for a, b in itertools.combinations(registry.names(), 2)]
# Pairs that ended in a traceback before (bf16 CSR product on CPU: addmm_out_sparse_csr_impl_mkl).
ONCE_CRASHED = [("gcn", "sparse_agg", "full_amp"), ("sage", "sparse_agg", "full_amp")]


@pytest.fixture(scope="module")
def graph():
    return generate(SPEC)


def _check_pair(graph, model: str, a: str, b: str) -> None:
    task = "link" if "link" in (registry.get(a).task, registry.get(b).task) else "node"
    cfg = RunConfig(
        spec=SPEC,
        flags=registry.flags_for([a, b], BASE),
        task=task,
        model=model,
        epochs=1,
        max_steps_per_epoch=1,
        warmup_steps=0,
        hidden=8,
    )
    r = run(cfg, graph=graph)  # any exception fails the test
    assert r.status in ("ok", "unavailable"), r
    if r.status == "unavailable":
        assert r.unavailable and all(isinstance(v, str) and v for v in r.unavailable.values())
    else:
        assert r.steps.total == (r.epochs_run or 1), "one step per epoch (batch_cache extends to K+1 epochs)"


@pytest.mark.parametrize("model,a,b", ONCE_CRASHED)
def test_pairs_that_once_crashed_run_or_are_refused(graph, model, a, b):
    _check_pair(graph, model, a, b)


@pytest.mark.slow
@pytest.mark.parametrize("model,a,b", PAIRS)
def test_every_pair_runs_or_is_refused(graph, model, a, b):
    _check_pair(graph, model, a, b)
