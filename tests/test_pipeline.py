"""Batch cache, Cluster-GCN, GraphSAINT, loader flags and the feature store."""

import json

import pytest
import torch

from gnnbench import registry
from gnnbench.features import place_features, prefetch_features
from gnnbench.flags import Flags, UnavailableError
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.sampling.batch import Batch
from gnnbench.sampling.cache import BatchCache, cache_size, clean_cache
from gnnbench.sampling.sources import make_batch_source
from gnnbench.sampling.subgraph import ClusterGCNBatches, SaintRandomWalkBatches, induced_subgraph, metis_partition


@pytest.fixture(scope="module")
def graph():
    return generate(GraphSpec.preset("tiny", num_nodes=4000))


@pytest.fixture(scope="module")
def prepared(graph):
    return prepare(graph, Flags(keep_csr=True))


def check_batch_edges(graph, batch: Batch):
    assert torch.equal(graph.edge_index[:, batch.e_id], batch.n_id[batch.edge_index])


# ---------------------------------------------------------------- batch cache
class CountingSource:
    def __init__(self, prepared, seed=0):
        self.inner = make_batch_source(prepared, Flags(fanout=(3, 2), batch_size=256), seed=seed)
        self.calls = 0

    def epoch(self, epoch):
        self.calls += 1
        return self.inner.epoch(epoch)


def test_batch_cache_hits_for_k_epochs_then_resamples(tmp_path, prepared, graph):
    src = CountingSource(prepared)
    cache = BatchCache(tmp_path, {"graph": "g", "flags": {"fanout": [3, 2]}}, epochs=3)
    epochs = [list(cache.epoch(e, lambda e=e: src.epoch(e))) for e in range(5)]
    n = len(epochs[0])
    assert src.calls == 2, "sampled in epoch 0 and epoch 3 only"
    assert cache.stats.misses == 2 * n and cache.stats.hits == 3 * n
    key = lambda bs: sorted(b.n_id[:4].tolist() for b in bs)  # noqa: E731
    assert key(epochs[1]) == key(epochs[0]) == key(epochs[2]), "replayed window holds the same batches"
    assert key(epochs[3]) != key(epochs[0]), "a new window resamples"
    for b in epochs[1]:
        check_batch_edges(graph, b)
    assert cache.size_bytes() > 0 and len(list(cache.dir.glob("window-*"))) == 1, "old windows dropped"


def test_batch_cache_rejects_corrupt_entry_and_rebuilds(tmp_path, prepared, graph):
    src = CountingSource(prepared)
    cache = BatchCache(tmp_path, {"graph": "g"}, epochs=5)
    first = list(cache.epoch(0, lambda: src.epoch(0)))
    wdir = next(cache.dir.glob("window-*"))
    victim = sorted(wdir.glob("batch-*.pt"))[2]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    again = list(cache.epoch(1, lambda: src.epoch(1)))
    assert cache.stats.corrupt == 1 and src.calls == 2 and cache.stats.hits == 0
    # The epoch is one fresh sampling: every training node exactly once, none from the bad window.
    seeds = torch.cat([b.n_id[b.target] for b in again])
    assert torch.equal(torch.sort(seeds).values, graph.train_mask.nonzero().view(-1))
    for b in again:
        check_batch_edges(graph, b)
    manifest = json.loads((next(cache.dir.glob("window-*")) / "manifest.json").read_text())
    assert len(manifest["batches"]) == len(first), "window rebuilt completely"
    third = list(cache.epoch(2, lambda: src.epoch(2)))
    assert cache.stats.hits == len(third) and src.calls == 2


def test_truncated_or_missing_entry_is_never_served(tmp_path, prepared):
    src = CountingSource(prepared)
    cache = BatchCache(tmp_path, {"graph": "g"}, epochs=5)
    list(cache.epoch(0, lambda: src.epoch(0)))
    wdir = next(cache.dir.glob("window-*"))
    sorted(wdir.glob("batch-*.pt"))[0].unlink()
    list(cache.epoch(1, lambda: src.epoch(1)))
    assert cache.stats.corrupt == 1 and src.calls == 2


def test_epoch_cut_short_is_not_replayed_as_whole(tmp_path, prepared):
    src = CountingSource(prepared)
    cache = BatchCache(tmp_path, {"graph": "g"}, epochs=3)
    it = cache.epoch(0, lambda: src.epoch(0))
    [next(it) for _ in range(2)]  # a consumer with a 2-step cap
    it.close()
    full = list(cache.epoch(1, lambda: src.epoch(1)))
    assert src.calls == 2 and cache.stats.hits == 0, "the partial window was resampled, not replayed"
    assert len(full) == 4  # 800 training nodes / 256 per batch


def test_consumer_stopping_exactly_at_the_last_batch_still_caches(tmp_path, prepared):
    src = CountingSource(prepared)
    cache = BatchCache(tmp_path, {"graph": "g"}, epochs=3)
    it = cache.epoch(0, lambda: src.epoch(0))
    got = [next(it) for _ in range(4)]  # all 4 batches, without asking for a 5th
    it.close()
    assert len(got) == 4
    again = list(cache.epoch(1, lambda: src.epoch(1)))
    assert src.calls == 1 and cache.stats.hits == 4 and len(again) == 4


def test_interrupted_window_is_rebuilt(tmp_path, prepared):
    # A process killed while writing leaves batch files but no manifest.
    src = CountingSource(prepared)
    cache = BatchCache(tmp_path, {"graph": "g"}, epochs=5)
    list(cache.epoch(0, lambda: src.epoch(0)))
    (next(cache.dir.glob("window-*")) / "manifest.json").unlink()
    full = list(cache.epoch(1, lambda: src.epoch(1)))
    assert src.calls == 2 and cache.stats.hits == 0 and len(full) > 2


def test_producer_failure_leaves_no_manifest(tmp_path, prepared):
    cache = BatchCache(tmp_path, {"graph": "g"}, epochs=5)
    src = CountingSource(prepared)

    def failing():
        it = src.epoch(0)
        yield next(it)
        raise OSError("disk gone")

    with pytest.raises(OSError):
        list(cache.epoch(0, failing))
    assert not list(cache.dir.glob("window-*/manifest.json"))


def test_cache_key_separates_configurations_and_clean(tmp_path):
    a = BatchCache(tmp_path, {"flags": {"fanout": [3, 2]}}, epochs=2)
    b = BatchCache(tmp_path, {"flags": {"fanout": [3, 3]}}, epochs=2)
    c = BatchCache(tmp_path, {"flags": {"fanout": [3, 2]}}, epochs=2)
    assert a.key != b.key and a.key == c.key
    (tmp_path / "unrelated").mkdir()
    (tmp_path / "unrelated" / "keep.txt").write_text("x")
    assert cache_size(tmp_path) > 0
    clean_cache(tmp_path)
    assert (tmp_path / "unrelated" / "keep.txt").exists(), "clean only removes gnnbench entries"
    assert not a.dir.exists() and not b.dir.exists()
    with pytest.raises(ValueError, match="batch cache epochs must be >= 1"):
        BatchCache(tmp_path, {}, epochs=0)


def test_batch_cache_flag_wraps_any_source(tmp_path, prepared):
    flags = Flags(fanout=(3, 2), batch_size=512, batch_cache_epochs=2)
    src = make_batch_source(prepared, flags, cache_dir=tmp_path)
    list(src.epoch(0)), list(src.epoch(1))
    assert src.cache.stats.hits == src.cache.stats.misses > 0


# ------------------------------------------------------------ subgraph batches
def test_induced_subgraph_is_exact(graph):
    nodes = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[:500]
    edge_index, e_id = induced_subgraph(graph.csr, nodes)
    inside = torch.zeros(graph.num_nodes, dtype=torch.bool)
    inside[nodes] = True
    expected = (inside[graph.edge_index[0]] & inside[graph.edge_index[1]]).nonzero().view(-1)
    assert torch.equal(torch.sort(e_id).values, expected)
    assert torch.equal(graph.edge_index[:, e_id], nodes[edge_index])


def test_cluster_gcn_parts_and_batches(graph):
    src = ClusterGCNBatches(graph.csr, graph.train_mask, cluster_size=500, clusters_per_batch=2, seed=0)
    sizes = src.part_sizes()
    assert src.num_parts == 8 and int(sizes.sum()) == graph.num_nodes
    assert int(sizes.max()) <= 1.1 * 500 + 1  # METIS balance
    # METIS keeps far more edges inside parts than a random partition would.
    p = src.part
    intra = (p[graph.edge_index[0]] == p[graph.edge_index[1]]).float().mean()
    assert intra > 3 * (1 / src.num_parts)
    batches = list(src.epoch(0))
    assert len(batches) == 4
    assert torch.equal(torch.sort(torch.cat([b.n_id for b in batches])).values, torch.arange(graph.num_nodes))
    for b in batches:
        check_batch_edges(graph, b)
        assert graph.train_mask[b.n_id[b.target]].all()
    assert int(sum(b.target.numel() for b in batches)) == int(graph.train_mask.sum())


def test_cluster_gcn_repartitions_every_n_epochs(graph):
    src = ClusterGCNBatches(graph.csr, graph.train_mask, cluster_size=1000, repartition_every=2, seed=0)
    part0 = src.part.clone()
    list(src.epoch(1))
    assert torch.equal(src.part, part0) and len(src.partition_seconds) == 1
    list(src.epoch(2))
    assert len(src.partition_seconds) == 2 and not torch.equal(src.part, part0)


def test_metis_partition_needs_valid_parts(graph):
    assert metis_partition(graph.csr, 1).unique().tolist() == [0]
    with pytest.raises(ValueError, match="num_parts must be >= 1"):
        metis_partition(graph.csr, 0)


def test_graphsaint_walks_and_normalization(graph):
    src = SaintRandomWalkBatches(graph.csr, graph.train_mask, num_roots=300, walk_length=2, coverage=50, seed=0)
    assert src.node_norm is not None and torch.isfinite(src.node_norm).all()
    batches = list(src.epoch(0))
    assert len(batches) == src.batches_per_epoch
    for b in batches:
        check_batch_edges(graph, b)
        assert b.n_id.unique().numel() == b.n_id.numel()
        assert b.node_norm.shape == b.target.shape
    # Unbiasedness of the loss norm: E[sum over batch of node_norm] = 1 (mean over training nodes).
    totals = torch.tensor([float(b.node_norm.sum()) for b in src.epoch(1)] +
                          [float(b.node_norm.sum()) for b in src.epoch(2)])
    assert abs(float(totals.mean()) - 1.0) < 0.1


def test_random_walk_steps_follow_edges(graph):
    src = SaintRandomWalkBatches(graph.csr, graph.train_mask, num_roots=50, walk_length=1, seed=1)
    nodes = src.walk_nodes(torch.Generator().manual_seed(0))
    assert nodes.numel() <= 100 and nodes.unique().numel() == nodes.numel()


# ------------------------------------------------------------------- loader
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


@pytest.mark.parametrize("source", ["cluster_gcn", "saint_rw"])
def test_subgraph_sources_via_flags(prepared, graph, source):
    flags = Flags(batch_source=source, cluster_size=1000, saint_roots=400)
    batches = list(make_batch_source(prepared, flags).epoch(0))
    assert batches
    for b in batches:
        check_batch_edges(graph, b)


def test_pin_memory_flag_unavailable_without_cuda(graph):
    # Answered for the run's device (not the machine's): a CPU run cannot pin, with or without CUDA here.
    from gnnbench.availability import reasons
    from gnnbench.flags import RunContext

    assert "pinned" in reasons(Flags(pin_memory=True), RunContext(device="cpu"))["pin_memory"]
    with pytest.raises(UnavailableError, match="pinned"):
        place_features(graph.x, "cpu", "host", pin_memory=True)


# -------------------------------------------------------------- feature store
def test_host_store_gathers_exact_rows(graph):
    store = place_features(graph.x, "cpu", "host")
    ids = torch.tensor([5, 0, 3999, 5])
    assert torch.equal(store.gather(ids), graph.x[ids])
    assert store.stats.batches == 1 and store.stats.bytes_h2d == 0  # no device to move to


@pytest.mark.parametrize("placement", ["device", "hot_cold", "uva"])
def test_cuda_placements_unavailable_on_cpu(graph, placement):
    with pytest.raises(UnavailableError, match="CUDA"):
        place_features(graph.x, "cpu", placement, hot_nodes=graph.train_mask.nonzero().view(-1))
    opt = {"device": "features_on_device", "hot_cold": "hot_cold", "uva": "uva"}[placement]
    assert registry.get(opt).unavailable("cpu")


def test_prefetch_unavailable_on_cpu(graph):
    store = place_features(graph.x, "cpu", "host")
    with pytest.raises(UnavailableError, match="CUDA streams"):
        next(prefetch_features([], store))


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("placement,pin", [("host", False), ("host", True), ("device", False),
                                           ("hot_cold", False), ("uva", False)])
def test_cuda_placements_gather_exact_rows(graph, placement, pin):
    train = graph.train_mask.nonzero().view(-1)
    store = place_features(graph.x, "cuda", placement, hot_nodes=train, pin_memory=pin)
    ids = torch.randint(0, graph.num_nodes, (1000,))
    out = store.gather(ids)
    assert out.is_cuda and torch.equal(out.cpu(), graph.x[ids])
    row_bytes = graph.x.size(1) * 4
    if placement == "device":
        assert store.stats.last_bytes_h2d == ids.nbytes
    elif placement == "hot_cold":
        cold = int((~graph.train_mask[ids]).sum())
        hot = ids.numel() - cold
        # cold rows, plus the hot slots and positions and the cold positions (int64 each)
        assert store.stats.last_bytes_h2d == cold * row_bytes + 8 * (2 * hot + cold)
        assert store.device_bytes() == train.numel() * row_bytes
    else:
        assert store.stats.last_bytes_h2d == ids.numel() * row_bytes


@pytest.mark.cuda
@cuda
def test_side_stream_prefetch_yields_exact_features(graph):
    store = place_features(graph.x, "cuda", "host", pin_memory=True)
    batches = [torch.randint(0, graph.num_nodes, (500,)) for _ in range(5)]
    got = list(prefetch_features(batches, store, n_id_of=lambda ids: ids))
    assert len(got) == 5
    for ids, feats in got:
        assert torch.equal(feats.cpu(), graph.x[ids])
