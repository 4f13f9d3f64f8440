"""Batch cache, Cluster-GCN, GraphSAINT, loader flags and the feature store."""

import json
import math
import shutil
from types import SimpleNamespace

import pytest
import torch

from gnnbench import registry
from gnnbench.features.placement import (choose_hot_rows, hit_rate, hot_budget_rows, hot_set_chooser, place_features,
                               prefetch_features)
from gnnbench.flags import Flags, UnavailableError
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.measure.run import run
from gnnbench.sampling import cache as cache_module
from gnnbench.sampling.batch import Batch
from gnnbench.sampling.cache import BatchCache, cache_size, clean_cache, sampling_code_version
from gnnbench.sampling.sources import graph_fingerprint, make_batch_source
from gnnbench.training.trainer import RunConfig, Trainer
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


# ------------------------------------------------- batch cache: a cold start per run, keyed by code and content
RUN_SPEC = GraphSpec.preset("tiny", num_nodes=3000)
RUN_FLAGS = Flags(fanout=(5, 3), batch_size=96, batch_cache_epochs=3)


@pytest.fixture(scope="module")
def run_graph():
    return generate(RUN_SPEC)


def test_batch_cache_run_from_a_cold_start_samples_once_and_replays_k_minus_1_epochs(run_graph):
    r = run(RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16, warmup_steps=1), graph=run_graph)  # epochs: 2
    assert r.status == "ok"
    n = math.ceil(int(run_graph.train_mask.sum()) / 96)  # batches of one epoch (7)
    # K = 3: the run is extended from 2 to K + 1 = 4 epochs: sampled in epoch 0, replayed in 1 and 2, and
    # epoch 3 opens the next window, which resamples.
    assert r.epochs_run == 4 == len(r.epoch_seconds) and r.steps["total"] == 4 * n
    assert r.batch_cache["per_epoch"] == [{"epoch": 0, "hits": 0, "misses": n}, {"epoch": 1, "hits": n, "misses": 0},
                                          {"epoch": 2, "hits": n, "misses": 0}, {"epoch": 3, "hits": 0, "misses": n}]
    assert r.batch_cache["misses"] == 2 * n and r.batch_cache["hits"] == 2 * n and r.batch_cache["corrupt"] == 0
    assert "batch_cache K=3: run extended to 4 epochs so K-1 epochs replay" in r.warnings
    assert r.transfer["hot_hit_rate"] == 0.0 and r.transfer["rows_gathered"] > 0  # host placement
    json.dumps(r.to_dict())


def test_explicit_epochs_and_runs_without_the_cache_are_not_extended(run_graph):
    trainer = Trainer(RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16, max_steps_per_epoch=1), run_graph)
    try:
        assert trainer.source.min_epochs == 4
        assert [s.epoch for s in trainer.steps(epochs=2)] == [0, 1], "a caller's explicit epochs are kept"
    finally:
        trainer.close()
    r = run(RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS.replace(batch_cache_epochs=0), hidden=16, max_steps_per_epoch=2,
                      warmup_steps=1), graph=run_graph)
    assert r.epochs_run == 2 and r.batch_cache is None and not r.warnings
    capped = run(RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16, max_steps_per_epoch=2, warmup_steps=1),
                 graph=run_graph)
    assert capped.epochs_run == 4 and capped.batch_cache["hits"] == 0, "a cut-short epoch is never cached"
    assert any("replayed no batch" in w for w in capped.warnings)


def test_runs_without_cache_dir_share_no_batches_and_remove_their_cache_at_close(run_graph):
    cfg = RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16)
    a, b = Trainer(cfg, run_graph), Trainer(cfg, run_graph)
    roots = a.source.cache.root, b.source.cache.root
    try:
        assert roots[0] != roots[1] and all(r.is_dir() for r in roots)
        na = sum(1 for _ in a.source.epoch(0))
        nb = sum(1 for _ in b.source.epoch(0))
        assert na == nb > 0
        assert b.source.cache.stats.misses == nb and b.source.cache.stats.hits == 0, "b sampled its own batches"
    finally:
        a.close()
        b.close()
    assert not any(r.exists() for r in roots), "each run's temporary cache directory is gone after close"


def test_cache_dir_keeps_sharing_batches_across_runs(tmp_path, prepared):
    flags = Flags(fanout=(3, 2), batch_size=512, batch_cache_epochs=2)
    first = make_batch_source(prepared, flags, cache_dir=tmp_path)
    n = sum(1 for _ in first.epoch(0))
    first.close()
    assert first.cache.dir.is_dir(), "a given directory is left in place"
    second = make_batch_source(prepared, flags, cache_dir=tmp_path)
    assert sum(1 for _ in second.epoch(0)) == n and second.cache.stats.hits == n and second.cache.stats.misses == 0
    assert second.cache.material["code"] == sampling_code_version()
    assert second.cache.material["graph"] == graph_fingerprint(prepared)


def test_changed_code_version_misses(tmp_path, prepared):
    src = CountingSource(prepared)
    old = BatchCache(tmp_path, {"graph": "g", "code": "v1"}, epochs=3)
    n = len(list(old.epoch(0, lambda: src.epoch(0))))
    same = BatchCache(tmp_path, {"graph": "g", "code": "v1"}, epochs=3)
    list(same.epoch(1, lambda: src.epoch(1)))
    assert same.stats.hits == n and src.calls == 1
    changed = BatchCache(tmp_path, {"graph": "g", "code": "v2"}, epochs=3)
    assert changed.key != old.key
    list(changed.epoch(1, lambda: src.epoch(1)))
    assert changed.stats.misses == n and changed.stats.hits == 0 and src.calls == 2


def test_code_version_hashes_the_sampling_and_graph_sources(tmp_path, monkeypatch):
    package = tmp_path / "gnnbench"
    for sub in ("sampling", "graphs"):
        shutil.copytree(cache_module._PACKAGE / sub, package / sub)
    monkeypatch.setattr(cache_module, "_PACKAGE", package)
    try:
        sampling_code_version.cache_clear()
        before = sampling_code_version()
        sampling_code_version.cache_clear()
        assert sampling_code_version() == before, "same sources, same version"
        neighbor = package / "sampling" / "neighbor.py"
        neighbor.write_text(neighbor.read_text() + "\n# a changed sampler\n")
        sampling_code_version.cache_clear()
        assert sampling_code_version() != before
    finally:
        sampling_code_version.cache_clear()


def test_graph_fingerprint_hashes_the_contents(graph):
    def fingerprint(**changes):
        g = SimpleNamespace(edge_index=graph.edge_index, train_mask=graph.train_mask, num_nodes=graph.num_nodes,
                            num_edges=graph.num_edges, meta=graph.meta)  # one spec in meta for all of them
        for k, v in changes.items():
            setattr(g, k, v)
        return graph_fingerprint(SimpleNamespace(graph=g))

    base = fingerprint()
    assert base == fingerprint()
    edges = graph.edge_index.clone()
    edges[0, 0] = (edges[0, 0] + 1) % graph.num_nodes
    assert fingerprint(edge_index=edges) != base
    mask = graph.train_mask.clone()
    mask[0] = ~mask[0]
    assert fingerprint(train_mask=mask) != base
    assert fingerprint(num_nodes=graph.num_nodes + 1) != base


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
    from gnnbench.training.availability import reasons
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


# ---------------------------------------------------------------- hot set of hot_cold
def test_choose_hot_rows_ranks_by_score_then_tiebreak_then_id():
    scores = torch.tensor([3, 1, 3, 0, 2])
    assert choose_hot_rows(scores, 1).tolist() == [0], "a tie goes to the lower id"
    assert choose_hot_rows(scores, 1, tiebreak=torch.tensor([0, 0, 5, 9, 0])).tolist() == [2]
    assert choose_hot_rows(scores, 3).tolist() == [0, 2, 4]
    assert choose_hot_rows(torch.zeros(5), 2, tiebreak=torch.tensor([1, 4, 0, 4, 2])).tolist() == [1, 3]
    assert choose_hot_rows(scores, 0).numel() == 0 and choose_hot_rows(scores, 99).tolist() == [0, 1, 2, 3, 4]


def test_hot_budget_is_a_fraction_of_rows_or_bytes_within_free_device_memory():
    assert hot_budget_rows(1000, 256) == 250  # default: a quarter of the rows
    assert hot_budget_rows(1000, 256, fraction=0.5) == 500
    assert hot_budget_rows(1000, 256, free_device_bytes=100 * 256) == 50, "at most half the free device memory"
    assert hot_budget_rows(1000, 256, budget_bytes=10 * 256 + 5) == 10
    assert hot_budget_rows(1000, 256, budget_bytes=10**9) == 1000
    with pytest.raises(ValueError, match=r"hot_budget_fraction must be a number in \(0, 1\] \(got 0\)"):
        Flags(hot_budget_fraction=0)
    with pytest.raises(ValueError, match="hot_rank must be one of 'access', 'degree'"):
        Flags(hot_rank="random")


def test_hot_budget_option_takes_a_fraction_or_a_size():
    import argparse

    from gnnbench.cli.options import config_from_args, parse_hot_budget
    from gnnbench.cli.parser import build_parser

    assert parse_hot_budget("0.3") == {"hot_budget_fraction": 0.3}
    assert parse_hot_budget("512MiB") == {"hot_budget_bytes": 512 * 2**20}
    assert parse_hot_budget("2 GB") == {"hot_budget_bytes": 2 * 10**9}
    for bad in ("2", "0", "lots", "5XB"):
        with pytest.raises(argparse.ArgumentTypeError, match="--hot-budget"):
            parse_hot_budget(bad)
    args = build_parser().parse_args(["run", "--flags", "hot_cold", "--hot-budget", "1GiB", "--hot-rank", "degree"])
    flags = config_from_args(args, args.flags).flags
    assert flags.feature_placement == "hot_cold" and flags.hot_budget_bytes == 2**30 and flags.hot_rank == "degree"


@pytest.fixture(scope="module")
def small_graph():
    return generate(GraphSpec.preset("small", num_nodes=30_000))  # small's degrees and defaults, 30% of its size


def test_access_ranked_hot_set_serves_at_least_the_training_nodes_share(small_graph):
    g = small_graph
    flags = Flags(feature_placement="hot_cold")  # fanout [15, 10, 5], batch 1024
    prepared_small = prepare(g, flags)
    train = g.train_mask.nonzero().view(-1)
    row_bytes = g.x.size(1) * g.x.element_size()
    same_size = flags.replace(hot_budget_bytes=train.numel() * row_bytes)  # as many rows as training nodes
    chooser = hot_set_chooser(prepared_small, same_size, seed=0)
    access = chooser(torch.device("cpu"), row_bytes)
    degree = hot_set_chooser(prepared_small, same_size.replace(hot_rank="degree"))(torch.device("cpu"), row_bytes)
    assert access.numel() == degree.numel() == train.numel()
    assert chooser.info["rank"] == "access" and chooser.info["profile_batches"] == math.ceil(train.numel() / 1024)
    # Hit rates over the training epoch's batches (seed 0), not the profiled ones (seed 1).
    batches = [b.n_id for b in make_batch_source(prepared_small, flags, seed=0).epoch(0)]
    rates = {name: hit_rate(hot, batches, g.num_nodes, n_id_of=lambda ids: ids)
             for name, hot in (("train", train), ("access", access), ("degree", degree))}
    print("hot-hit rates with", train.numel(), "rows:", {k: round(v, 4) for k, v in rates.items()})
    assert rates["access"] >= rates["train"] and rates["degree"] >= rates["train"]
    default = hot_set_chooser(prepared_small, flags)(torch.device("cpu"), row_bytes)
    assert default.numel() == g.num_nodes // 4


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
    assert store.stats.rows == ids.numel()
    expected_hits = {"host": 0, "uva": 0, "device": ids.numel(), "hot_cold": int(graph.train_mask[ids].sum())}
    assert store.stats.rows_device == expected_hits[placement]  # uva reads host memory: zero-copy, not resident
    if placement == "device":
        assert store.stats.last_bytes_h2d == ids.nbytes
    elif placement == "hot_cold":
        cold = int((~graph.train_mask[ids]).sum())
        hot = ids.numel() - cold
        # cold rows, plus the hot slots and positions and the cold positions (int64 each)
        assert store.stats.last_bytes_h2d == cold * row_bytes + 8 * (2 * hot + cold)
        assert store.device_bytes() == train.numel() * row_bytes
    elif placement == "uva":  # the ids, then the rows read over the bus inside the gather kernel
        assert store.stats.last_bytes_h2d == ids.nbytes + ids.numel() * row_bytes
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


@pytest.mark.cuda
@cuda
def test_prefetch_overlaps_a_slow_gather_with_compute(graph):
    """With a deliberately slow host gather (sleep) and a GPU step of similar length, prefetching makes the
    step time clearly shorter than the sum of its parts; without it the parts add up."""
    import time

    store = place_features(graph.x, "cuda", "host", pin_memory=True)
    slow, gather = 0.03, store.gather

    def slow_gather(n_id, timer=None):
        time.sleep(slow)  # host-side cost, released GIL: what a large host gather looks like
        return gather(n_id, timer)

    store.gather = slow_gather
    w = torch.randn(2048, 2048, device="cuda")

    def compute(feats):  # about `slow` seconds of device work, measured below
        y = w
        for _ in range(reps):
            y = y @ w
        # read the result on the host, as a training loop reads its loss: without this the queued device work
        # would run behind the next host-side gather anyway, and nothing would be left to overlap
        return float(feats.sum() + y[0, 0])

    reps = 10
    compute(torch.zeros(1, device="cuda"))  # warm-up: cuBLAS initialisation is not part of the calibration
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    compute(torch.zeros(1, device="cuda"))
    torch.cuda.synchronize()
    reps = max(1, int(10 * slow / max(time.perf_counter() - t0, 1e-4)))
    batches = [torch.randint(0, graph.num_nodes, (500,)) for _ in range(12)]

    def run(prefetch: bool) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        if prefetch:
            for _, feats in prefetch_features(batches, store, n_id_of=lambda ids: ids):
                compute(feats)
        else:
            for ids in batches:
                compute(store.gather(ids))
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / len(batches)

    run(True)  # warm-up
    serial, overlapped = run(False), run(True)
    assert serial >= 1.6 * slow, "without prefetch the gather and the compute add up"
    assert overlapped < 0.8 * serial, (overlapped, serial)


@pytest.mark.cuda
@cuda
def test_hot_cold_keeps_the_access_ranked_rows_on_the_device(graph, prepared):
    flags = Flags(feature_placement="hot_cold", fanout=(3, 2), batch_size=256)
    store = place_features(graph.x, "cuda", "hot_cold", hot_nodes=hot_set_chooser(prepared, flags, seed=0))
    assert store.hot_rows == graph.num_nodes // 4 and store.hot_info["rank"] == "access"
    assert store.device_bytes() == store.hot_rows * graph.x.size(1) * 4
    hot = (store._slot_host >= 0).nonzero().view(-1)
    batches = list(make_batch_source(prepared, flags, seed=0).epoch(0))
    for b in batches:
        assert torch.equal(store.gather(b.n_id).cpu(), graph.x[b.n_id])
    assert store.stats.hot_hit_rate == pytest.approx(hit_rate(hot, batches, graph.num_nodes))
    assert store.stats.hot_hit_rate >= hit_rate(graph.train_mask.nonzero().view(-1)[:hot.numel()], batches,
                                                graph.num_nodes)
