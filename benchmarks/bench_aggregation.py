"""One aggregation over a whole graph: edge_index scatter against a CSR sparse-matrix product."""

import torch

from gnnbench.graphs import GraphSpec
from gnnbench.models import Aggregator

from . import common

AGG_SPEC = GraphSpec.preset("small", num_nodes=200_000)


class Aggregation:
    params = [["scatter", "sparse"], ["gcn", "mean"]]
    param_names = ["mode", "kind"]

    def setup(self, mode, kind):
        g = common.graph(AGG_SPEC)
        self.agg = Aggregator(g.edge_index, g.num_nodes, mode=mode)
        self.h = torch.randn(g.num_nodes, 64, generator=torch.Generator().manual_seed(0))
        self.fn = self.agg.gcn if kind == "gcn" else self.agg.mean

    def time_aggregate(self, mode, kind):
        self.fn(self.h)
