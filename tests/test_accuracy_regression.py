"""Accuracy regression on ``tiny``, across seeds.

Optimizations not documented to cost accuracy must stay within ``TOLERANCE_PP``
of the baseline (mean over seeds); those documented to cost accuracy have their
loss measured and bounded by ``BOUNDS_PP``.
"""

import functools
import statistics

import pytest
import torch

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.measure import run
from gnnbench.training import RunConfig, config_unavailable

SEEDS = (0, 1)
TOLERANCE_PP = 1.5
# Documented accuracy costs on tiny at 3 epochs, in percentage points (a measured loss must stay below).
# Losses measured at the default homophily 0.55 / snr 1.0 (baseline ~70%): fanout 17.7 (one hop instead of
# two), full_batch 32.1 (3 epochs = 3 optimizer steps), graphsaint 7.2, cluster_gcn 3.3, norm_estimator 1.7.
# Link entries (test AUC, LINK_MODEL below; seeds 0 and 1 on tiny, 2026-11-30): baseline 0.6097; degree_negatives
# 0.5008 (-10.9 pp: deg^0.75 negatives teach "popular is not enough", uniform evaluation negatives reward it);
# unchecked_negatives 0.6151 (+0.5 pp: ~0.3% of uniform pairs are edges). Against the former GCN baseline
# (0.2807, anti-correlated) degree_negatives "gained" 12.8 pp: the bound measured nothing.
BOUNDS_PP = {"fanout": 25.0, "batch_cache": 15.0, "full_amp": 3.0, "graphsaint": 20.0, "cluster_gcn": 12.0,
             "degree_negatives": 15.0, "unchecked_negatives": 5.0, "full_batch": 40.0, "norm_estimator": 6.0,
             # data-parallel compression with Adam (skipped at nproc 1), from registry.py's figures on small at
             # 2 epochs: top-k 27.4 / 18.1% against 84.5 / 81.2% dense, PowerSGD 81.3 / 71.6%
             "topk_compression": 70.0, "powersgd": 15.0}
# Settings that give the subgraph sources several steps per epoch on a 10k-node graph.
SUBGRAPH = {"cluster_size": 500, "clusters_per_batch": 2, "saint_roots": 500}
SPEC = GraphSpec.preset("tiny")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@functools.lru_cache(maxsize=None)
def _graph():
    return generate(SPEC)


BASE = Flags(fanout=(10, 5), batch_size=256, **SUBGRAPH)


# Link prediction is measured with GraphSAGE: a GCN trained on neighbour-sampled batches does not transfer to
# full-neighbourhood link evaluation here (BASE on tiny, seed 0: test AUC 0.26, anti-correlated; the same
# model scores 0.65 under its own sampled operator and a GCN trained with fanout -1 scores 0.78), so link
# bounds against a GCN baseline measured nothing. SAGE's mean aggregation does not scale with the fanout:
# 0.62 sampled vs 0.64 with full neighbourhoods (tests/test_link_fidelity.py).
LINK_MODEL = "sage"


def _config(names: tuple[str, ...], seed: int, task: str, cache_dir: str) -> RunConfig:
    flags = registry.flags_for(names, BASE)
    return RunConfig(spec=SPEC, flags=flags, task=task, model=LINK_MODEL if task == "link" else "gcn", epochs=3,
                     hidden=32, lr=0.02, seed=seed, device=DEVICE, cache_dir=cache_dir)


@functools.lru_cache(maxsize=None)
def _metric(names: tuple[str, ...], task: str, cache_dir: str) -> list[float]:
    out = []
    for seed in SEEDS:
        r = run(_config(names, seed, task, cache_dir), graph=_graph())
        assert r.status == "ok", r.unavailable
        out.append(r.accuracy["test"])
    return out


def _task(name: str) -> str:
    return registry.get(name).task


def _skip_if_unavailable(name: str, cache_dir: str) -> None:
    reasons = config_unavailable(_config((name,), 0, _task(name), cache_dir), resolve_device(DEVICE))
    if reasons:
        pytest.skip("; ".join(reasons.values()))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("batch-cache"))


FREE = [o.name for o in registry.REGISTRY.values() if not o.costs_accuracy]
COSTLY = [o.name for o in registry.REGISTRY.values() if o.costs_accuracy]


def test_every_costly_entry_has_a_bound():
    assert set(COSTLY) == set(BOUNDS_PP)


@pytest.mark.parametrize("name", FREE)
def test_free_optimizations_keep_accuracy(name, cache_dir):
    _skip_if_unavailable(name, cache_dir)
    base = statistics.mean(_metric((), _task(name), cache_dir))
    opt = statistics.mean(_metric((name,), _task(name), cache_dir))
    assert abs(opt - base) * 100 <= TOLERANCE_PP, f"{name}: {opt:.4f} vs baseline {base:.4f}"


@pytest.mark.parametrize("name", COSTLY)
def test_costly_optimizations_have_bounded_loss(name, cache_dir):
    _skip_if_unavailable(name, cache_dir)
    base = statistics.mean(_metric((), _task(name), cache_dir))
    opt = statistics.mean(_metric((name,), _task(name), cache_dir))
    loss_pp = (base - opt) * 100
    print(f"{name}: baseline {base:.4f}, with it {opt:.4f}, loss {loss_pp:+.2f} pp (bound {BOUNDS_PP[name]})")
    assert loss_pp <= BOUNDS_PP[name]
