import dataclasses
import itertools

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs.prepare import prepare
from gnnbench.measure.run import run
from gnnbench.models.tasks import auc, hits_at_k
from gnnbench.sampling.loaders import LinkBatches, training_pairs
from tests.helpers import QUICK


def test_auc_matches_pairwise_definition():
    g = torch.Generator().manual_seed(0)
    pos = torch.randint(0, 5, (40,), generator=g).float()  # many ties
    neg = torch.randint(0, 5, (30,), generator=g).float()
    pairs = [(1.0 if p > n else 0.5 if p == n else 0.0) for p, n in itertools.product(pos.tolist(), neg.tolist())]
    assert auc(pos, neg) == pytest.approx(sum(pairs) / len(pairs))
    assert auc(torch.tensor([2.0, 3.0]), torch.tensor([0.0, 1.0])) == 1.0


def test_hits_at_k():
    neg = torch.arange(100).float()
    pos = torch.tensor([99.5, 50.0, 97.0, 96.0])
    assert hits_at_k(pos, neg, k=3) == 0.25  # 3rd best negative is 97: only 99.5 beats it
    assert hits_at_k(pos, neg[:2], k=3) != hits_at_k(pos, neg[:2], k=3)  # nan with too few negatives


def test_link_batches_label_real_positives_and_strict_negatives(quick_graph):
    g = quick_graph.link_split()
    p = prepare(g, Flags())
    src = LinkBatches(p, Flags(fanout=(4, 2), batch_size=256))
    batch = next(src.epoch(0))
    ends = batch.n_id[batch.edge_label_index]
    pos = batch.edge_label == 1
    assert int(pos.sum()) == 256 and int((~pos).sum()) == 256
    assert src.negatives.is_edge(ends[0, pos], ends[1, pos]).all()
    assert not src.negatives.is_edge(ends[0, ~pos], ends[1, ~pos]).any()
    assert torch.equal(g.edge_index[:, batch.e_id], batch.n_id[batch.edge_index])
    assert (training_pairs(p)[0] < training_pairs(p)[1]).all()


def test_link_task_trains_and_reports_auc_and_hits():
    cfg = dataclasses.replace(
        QUICK,
        task="link",
        flags=QUICK.flags.replace(batch_size=256),
        epochs=2,
        max_steps_per_epoch=12,
        hidden=32,
        lr=0.01,
    )
    r = run(cfg)
    assert r.status == "ok"
    acc = r.accuracy
    assert acc.metric == "auc" and acc.test > 0.6 and 0 <= acc.extra["test_hits@50"] <= 1
    deg = run(dataclasses.replace(cfg, flags=registry.flags_for(["degree_negatives"], cfg.flags)))
    assert deg.status == "ok" and deg.accuracy.test > 0.5
    sub = run(dataclasses.replace(cfg, flags=registry.flags_for(["cluster_gcn"], cfg.flags)))
    assert sub.status == "unavailable" and "link prediction" in sub.unavailable["batch_source"]
