"""Neighbour sampling (ours against torch-sparse when installed; per sampled edge across fanouts) and negative
sampling."""

import time

import torch

from gnnbench.graphs import GraphSpec
from gnnbench.microbench.sampler_compare import torch_sparse_sampler
from gnnbench.sampling.negative import NegativeSampler
from gnnbench.sampling.neighbor import NeighborSampleCore

from . import common

SAMPLER_SPEC = GraphSpec.preset("small", num_nodes=200_000)  # ~200k nodes, avg degree 20, max degree in the thousands


class NeighborSampler:
    params = [["gnnbench", "torch_sparse"], [(15, 10)]]
    param_names = ["sampler", "fanout"]

    def setup(self, sampler, fanout):
        g = common.graph(SAMPLER_SPEC)
        self.seeds = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))[:1024]
        rowptr, col = g.rowptr, g.edge_index[0].contiguous()
        if sampler == "gnnbench":
            self.fn = NeighborSampleCore(rowptr, col, fanout).sample
        else:
            try:
                self.fn = torch_sparse_sampler(rowptr, col, fanout)
            except ImportError as exc:
                raise NotImplementedError(str(exc)) from None  # asv: skip this parameter

    def time_sample_batch_1024(self, sampler, fanout):
        self.fn(self.seeds)


DENSE_SPEC = GraphSpec(num_nodes=50_000, avg_degree=150.0)  # every row of a hop really chooses among its neighbours


class NeighborSamplerFanout:
    """One hop from a second hop's frontier (16,384 nodes) at growing fanouts: the time per sampled edge stays
    flat when drawing distinct neighbours costs work linear in the fanout."""

    params = [[5, 15, 40, 100]]
    param_names = ["fanout"]

    def setup(self, fanout):
        g = common.graph(DENSE_SPEC)
        self.seeds = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))[:16_384]
        self.core = NeighborSampleCore(g.rowptr, g.edge_index[0].contiguous(), (fanout,))
        self.edges = self.core.sample(self.seeds).edge.numel()

    def time_one_hop(self, fanout):
        self.core.sample(self.seeds)

    def track_ns_per_sampled_edge(self, fanout):
        reps = 5
        start = time.perf_counter()
        for _ in range(reps):
            self.core.sample(self.seeds)
        return 1e9 * (time.perf_counter() - start) / reps / self.edges

    track_ns_per_sampled_edge.unit = "ns"


class Negatives:
    params = [["uniform", "degree"], [True, False]]
    param_names = ["mode", "strict"]

    def setup(self, mode, strict):
        g = common.graph(GraphSpec.preset("small")).link_split()
        self.sampler = NegativeSampler(g.edge_index, g.num_nodes, mode=mode, strict=strict)

    def time_sample_100k(self, mode, strict):
        self.sampler.sample(100_000)
