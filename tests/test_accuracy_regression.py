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
from gnnbench.measure.run import run
from gnnbench.training.trainer import RunConfig, config_unavailable

SEEDS = (0, 1)
TOLERANCE_PP = 1.5
# Documented accuracy costs on tiny at 3 epochs, in percentage points (a measured loss must stay below).
# Losses measured at the default homophily 0.55 / snr 1.0 (baseline ~70%): fanout 17.7 (one hop instead of
# two), full_batch 32.1 (3 epochs = 3 optimizer steps), graphsaint 7.2, cluster_gcn 3.3, norm_estimator 1.7.
# Link entries (test AUC with LINK_MODEL below, seeds 0 and 1 on tiny, 2026-11-30): baseline 0.7939;
# degree_negatives 0.5899 (-20.4 pp: deg^0.75 negatives hide popularity, which uniform evaluation negatives
# reward: the degree product alone scores 0.83); unchecked_negatives 0.7816 (-1.2 pp: ~0.3% of uniform pairs
# are edges). Before link batches' source-degree GCN weights the baseline was 0.2807 (anti-correlated) and
# degree_negatives "gained" 12.8 pp: those bounds measured nothing.
BOUNDS_PP = {"fanout": 25.0, "batch_cache": 15.0, "full_amp": 3.0, "graphsaint": 20.0, "cluster_gcn": 12.0,
             "degree_negatives": 25.0, "unchecked_negatives": 5.0, "full_batch": 40.0, "norm_estimator": 6.0,
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


# Link prediction's model. Until link batches normalized GCN with full-graph source degrees
# (models.AggregationPolicy, source_norm "source_degree"), a GCN trained here ranked held-out edges below chance
# (BASE on tiny: AUC 0.2807, mean of seeds 0 and 1; 0.7939 since), so link bounds against it measured nothing.
LINK_MODEL = "gcn"


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
