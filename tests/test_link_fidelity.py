"""Link prediction fidelity: what training learns must rank held-out edges above chance under the
full-neighbourhood evaluation, and held-out edges never feed message passing or supervision.

The graph has hubs far above the fanout (3,000 nodes, mean degree 20, max ~245), the regime of ``tiny``
where a GCN trained on neighbour-sampled batches scores *below* chance (AUC 0.26 on ``tiny``, 0.27-0.35
here) under full-neighbourhood evaluation: its per-batch normalization sees at most ``fanout`` neighbours
per node (frontier nodes as degree 1), so its output scale stops following degree, while the full graph's
follows ``sqrt(degree)``, and a dot-product decoder reads that scale. GraphSAGE's mean does not scale with
the fanout, and a GCN trained on full neighbourhoods computes what evaluation computes; both rank held-out
edges well above chance.
"""

import functools

import pytest
import torch

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.measure import run
from gnnbench.sampling.loaders import LinkBatches
from gnnbench.tasks import LinkPrediction, evaluation_negatives
from gnnbench.training import RunConfig

SPEC = GraphSpec(num_nodes=3000, avg_degree=20.0, feature_dim=16, seed=0)


@functools.lru_cache(maxsize=None)
def _graph():
    return generate(SPEC)


def _keys(pairs: torch.Tensor, n: int) -> set[int]:
    """Undirected keys ``min * n + max`` of ``[2, k]`` pairs."""
    a, b = pairs[0].to(torch.int64), pairs[1].to(torch.int64)
    return set((torch.minimum(a, b) * n + torch.maximum(a, b)).tolist())


def test_held_out_edges_feed_neither_message_passing_nor_supervision():
    full = _graph()
    n = full.num_nodes
    task = LinkPrediction(full, torch.device("cpu"))
    held = _keys(torch.cat([full.lp_val_pos, full.lp_test_pos], dim=1), n)
    assert held
    # The message-passing graph of training *and* evaluation is the full graph less exactly the held-out pairs.
    train_keys = _keys(task.train_graph.edge_index, n)
    assert not train_keys & held
    assert train_keys | held == _keys(full.edge_index, n)
    assert task.train_graph.num_edges == full.num_edges - 2 * len(held)
    src = LinkBatches(prepare(task.train_graph, Flags()), Flags(fanout=(5, 3), batch_size=1024))
    try:
        for batch in src.epoch(0):
            mp = _keys(batch.n_id[batch.edge_index], n)
            labelled = batch.n_id[batch.edge_label_index]
            pos = _keys(labelled[:, batch.edge_label == 1], n)
            assert not mp & held  # no held-out edge is a message-passing edge of a training batch
            assert pos <= train_keys and not pos & mp  # supervision: training edges, absent from their batch
            # negatives are not training edges; they may (rarely) be held-out ones: avoiding those would tell
            # training where the held-out edges are
            assert not _keys(labelled[:, batch.edge_label == 0], n) & train_keys
    finally:
        src.close()
    # Evaluation negatives are non-edges of the full graph, uniform like the training ones.
    neg = evaluation_negatives(full.edge_index, n, 4000, seed=2)
    assert not _keys(neg, n) & (train_keys | held)


def _test_auc(model: str, fanout: tuple[int, ...], batch_size: int) -> float:
    cfg = RunConfig(spec=SPEC, flags=Flags(fanout=fanout, batch_size=batch_size), task="link", model=model, epochs=2,
                    hidden=32, lr=0.02, seed=0, warmup_steps=0)
    r = run(cfg, graph=_graph())
    assert r.status == "ok", r.unavailable
    return r.accuracy["test"]


# Measured (seeds 0 and 1): SAGE sampled 0.607 / 0.601, GCN with full neighbourhoods 0.746 / 0.788.
@pytest.mark.parametrize("model, fanout, bound", [("sage", (10, 5), 0.56), ("gcn", (-1, -1), 0.68)])
def test_link_training_ranks_held_out_edges_well_above_chance(model, fanout, bound):
    auc = _test_auc(model, fanout, 512)
    assert auc > bound, f"{model} fanout {fanout}: held-out test AUC {auc:.3f}"


@pytest.mark.xfail(strict=True, reason=(
    "GCN trained on neighbour-sampled batches does not transfer to full-neighbourhood link evaluation "
    "(measured 0.33 / 0.35 here at batch 256, seeds 0 / 1; 0.26 on tiny): per-batch GCN normalization caps each node's neighbourhood at "
    "the fanout, so its output scale stops following degree; the fix belongs to the model layer "
    "(normalization / dropout for sampled link training) or to the evaluation protocol"))
def test_sampled_gcn_link_training_transfers_to_full_neighbourhood_evaluation():
    # batch 256: twice the steps of the tests above; at 512 it has not yet fitted the batch operator (0.58)
    auc = _test_auc("gcn", (10, 5), 256)
    assert auc > 0.56, f"gcn sampled: held-out test AUC {auc:.3f}"
