"""Batch sources built from the flags (gnnbench/sampling/sources.py) and their loaders
(gnnbench/sampling/loaders.py): workers, persistent workers and prefetch cover every training node once."""

import pytest
import torch

from gnnbench.flags import Flags
from gnnbench.sampling.sources import make_batch_source
from tests.helpers import check_batch_edges


def test_neighbor_source_covers_train_nodes_with_workers(prepared, graph):
    flags = Flags(fanout=(4, 2), batch_size=300, num_workers=2, persistent_workers=True, prefetch_factor=2)
    src = make_batch_source(prepared, flags, seed=0)
    for epoch in range(2):
        seeds = []
        for b in src.epoch(epoch):
            check_batch_edges(graph, b)
            seeds.append(b.n_id[b.target])
        assert torch.equal(torch.sort(torch.cat(seeds)).values, graph.train_mask.nonzero().view(-1))


def test_workers_draw_independent_samples(prepared):
    # Two workers must not replay the same random stream.
    flags = Flags(fanout=(5,), batch_size=200, num_workers=2)
    src = make_batch_source(prepared, flags, seed=0, input_nodes=torch.arange(400))
    b0, b1 = list(src.epoch(0))
    assert not torch.equal(b0.n_id[200:210], b1.n_id[200:210])


def test_the_loaders_take_their_worker_settings_from_one_helper():
    from gnnbench.sampling.loaders import worker_settings

    flags = Flags(num_workers=2, persistent_workers=True, prefetch_factor=3)
    assert worker_settings(flags) == {
        "num_workers": 2,
        "prefetch_factor": 3,
        "persistent_workers": True,
        "pin_memory": flags.pin_memory,
        "filter_per_worker": True,
        "worker_init_fn": None,  # shared placement: workers run where the kernel puts them
    }
    assert "worker_init_fn" not in worker_settings(flags, place_workers=False)  # data parallel's loader
    assert worker_settings(Flags())["filter_per_worker"] is False


@pytest.mark.parametrize("source", ["cluster_gcn", "saint_rw"])
def test_subgraph_sources_via_flags(prepared, graph, source):
    flags = Flags(batch_source=source, cluster_size=1000, saint_roots=400)
    batches = list(make_batch_source(prepared, flags).epoch(0))
    assert batches
    for b in batches:
        check_batch_edges(graph, b)
