"""The baseline trains as well as the loop users write by hand.

The plain loop is PyG's own: its ``GraphSAGE`` / ``GCN`` models (``torch_geometric.nn.models``), a
``NodeLoader`` over the same neighbour sampler, Adam, cross-entropy on each batch's seed nodes, and full-graph
evaluation after every epoch. gnnbench's baseline on the same graph, fanout, batch, width, learning rate and
epochs must reach the same validation accuracy per epoch (mean over seeds, within ``TOLERANCE_PP``): a speedup
over a baseline that learns more slowly than the obvious alternative would flatter every entry.
"""

import statistics

import pytest
import torch
import torch.nn.functional as F

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.measure.run import run
from gnnbench.sampling.sampler import make_neighbor_sampler
from gnnbench.training import RunConfig

SPEC = GraphSpec.preset("tiny")
FANOUT, BATCH, HIDDEN, LR, EPOCHS = (10, 5), 256, 64, 0.01, 5
SEEDS = (0, 1, 2, 3, 4, 5)
TOLERANCE_PP = (
    3.0  # per epoch, mean over SEEDS (one seed's spread at the first epoch, 8 steps in, is about 5 pp: 6 seeds)
)


@pytest.fixture(scope="module")
def graph():
    return generate(SPEC)


def _plain_pyg_curve(graph, model_name: str, seed: int) -> list[float]:
    from torch_geometric.data import Data
    from torch_geometric.loader import NodeLoader
    from torch_geometric.nn.models import GCN, GraphSAGE

    torch.manual_seed(seed)
    prepared = prepare(graph, Flags())
    data = Data(x=graph.x, y=graph.y, edge_index=prepared.edge_index, num_nodes=graph.num_nodes)
    loader = NodeLoader(
        data,
        node_sampler=make_neighbor_sampler(prepared, FANOUT, seed=seed),
        input_nodes=graph.train_mask.nonzero().view(-1),
        batch_size=BATCH,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )
    cls = {"sage": GraphSAGE, "gcn": GCN}[model_name]
    model = cls(graph.num_features, HIDDEN, len(FANOUT), int(graph.y.max()) + 1, dropout=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    curve = []
    for _ in range(EPOCHS):
        model.train()
        for b in loader:
            opt.zero_grad()
            out = model(b.x, b.edge_index)[: b.batch_size]
            F.cross_entropy(out, b.y[: b.batch_size]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(graph.x, prepared.edge_index).argmax(dim=1)
        curve.append(float((pred[graph.val_mask] == graph.y[graph.val_mask]).float().mean()))
    return curve


def _gnnbench_curve(graph, model_name: str, seed: int) -> list[float]:
    cfg = RunConfig(
        spec=SPEC,
        flags=Flags(fanout=FANOUT, batch_size=BATCH),
        model=model_name,
        hidden=HIDDEN,
        lr=LR,
        epochs=EPOCHS,
        seed=seed,
    )
    r = run(cfg, graph=graph)
    assert r.status == "ok" and len(r.curve) == EPOCHS
    return [p.val for p in r.curve]


@pytest.mark.parametrize("model_name", ["sage", "gcn"])
@pytest.mark.slow
def test_the_baseline_learns_as_fast_as_the_plain_pyg_loop(graph, model_name):
    ours = [_gnnbench_curve(graph, model_name, s) for s in SEEDS]
    plain = [_plain_pyg_curve(graph, model_name, s) for s in SEEDS]
    mean_ours = [statistics.mean(c[e] for c in ours) for e in range(EPOCHS)]
    mean_plain = [statistics.mean(c[e] for c in plain) for e in range(EPOCHS)]
    print(model_name, "gnnbench", [round(v, 3) for v in mean_ours], "plain PyG", [round(v, 3) for v in mean_plain])
    for e in range(EPOCHS):
        assert abs(mean_ours[e] - mean_plain[e]) * 100 <= TOLERANCE_PP, (e, mean_ours, mean_plain)
