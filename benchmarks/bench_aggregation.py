"""One GCN aggregation of one sampled batch: the per-batch CSR build is inside the timing
(``sparse_sort``), against the sampler-emitted CSR (``sparse_csr``), a prebuilt CSR product and scatter.
``gnnbench aggregation-compare`` gives the same four interleaved, with ratios from one run."""

import torch

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.graphs.norm import gcn_norm
from gnnbench.graphs.prepare import prepare
from gnnbench.models.aggregation import Aggregator
from gnnbench.sampling.sources import make_batch_source

from . import common

AGG_SPEC = GraphSpec.preset("small")


class Aggregation:
    params = [["scatter", "sparse_sort", "sparse_csr", "prebuilt"]]
    param_names = ["mode"]

    def setup(self, mode):
        g = common.graph(AGG_SPEC)
        flags = Flags(batch_size=1024, keep_csr=True)
        self.batch = b = next(make_batch_source(prepare(g, flags), flags).epoch(0))
        self.weights = gcn_norm(b.edge_index, b.num_nodes)
        self.h = torch.randn(b.num_nodes, 64, generator=torch.Generator().manual_seed(0))
        fixed = lambda: self.weights  # noqa: E731
        if mode == "prebuilt":
            adj = torch.sparse_csr_tensor(
                b.rowptr, b.edge_index[0], self.weights.edge_weight, size=(b.num_nodes, b.num_nodes)
            )
            self.fn = lambda: torch.sparse.mm(adj, self.h)
        else:
            rowptr = b.rowptr if mode == "sparse_csr" else None
            kind = "scatter" if mode == "scatter" else "sparse"
            self.fn = lambda: Aggregator(b.edge_index, b.num_nodes, mode=kind, gcn_weights=fixed, rowptr=rowptr).gcn(
                self.h
            )

    def time_aggregate(self, mode):
        self.fn()
