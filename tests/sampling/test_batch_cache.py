"""The batch cache (gnnbench/sampling/cache.py): windows of K epochs replayed from disk, corrupt or partial
entries never served, a cold start per run, and keys made of the code, the graph's contents and the
sampling flags."""

import json
import math
import shutil
from types import SimpleNamespace

import pytest
import torch

from gnnbench.flags import Flags
from gnnbench.measure.run import run
from gnnbench.sampling import cache as cache_module
from gnnbench.sampling.cache import BatchCache, cache_size, clean_cache, sampling_code_version
from gnnbench.sampling.sources import graph_fingerprint, make_batch_source
from gnnbench.training import RunConfig, Trainer
from tests.helpers import QUICK, check_batch_edges


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


# ------------------------------------------------------------ a cold start per run, keyed by code and content
RUN_SPEC = QUICK.spec
RUN_FLAGS = QUICK.flags.replace(batch_cache_epochs=3)  # QUICK's sampling, each window replayed for 3 epochs


def test_batch_cache_run_from_a_cold_start_samples_once_and_replays_k_minus_1_epochs(quick_graph):
    r = run(RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16, warmup_steps=1), graph=quick_graph)  # epochs: 2
    assert r.status == "ok"
    n = math.ceil(int(quick_graph.train_mask.sum()) / 96)  # batches of one epoch (7)
    # K = 3: the run is extended from 2 to K + 1 = 4 epochs: sampled in epoch 0, replayed in 1 and 2, and
    # epoch 3 opens the next window, which resamples.
    assert r.epochs_run == 4 == len(r.epoch_seconds) and r.steps.total == 4 * n
    assert r.batch_cache["per_epoch"] == [
        {"epoch": 0, "hits": 0, "misses": n},
        {"epoch": 1, "hits": n, "misses": 0},
        {"epoch": 2, "hits": n, "misses": 0},
        {"epoch": 3, "hits": 0, "misses": n},
    ]
    assert r.batch_cache["misses"] == 2 * n and r.batch_cache["hits"] == 2 * n and r.batch_cache["corrupt"] == 0
    assert "batch_cache K=3: run extended to 4 epochs so K-1 epochs replay" in r.warnings
    assert r.transfer.hot_hit_rate == 0.0 and r.transfer.rows_gathered > 0  # host placement
    json.dumps(r.to_dict())


def test_explicit_epochs_and_runs_without_the_cache_are_not_extended(quick_graph):
    trainer = Trainer(RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16, max_steps_per_epoch=1), quick_graph)
    try:
        assert trainer.pipeline.batches.min_epochs(trainer.config.warmup_steps) == 4
        assert [s.epoch for s in trainer.steps(epochs=2)] == [0, 1], "a caller's explicit epochs are kept"
    finally:
        trainer.close()
    r = run(
        RunConfig(
            spec=RUN_SPEC,
            flags=RUN_FLAGS.replace(batch_cache_epochs=0),
            hidden=16,
            max_steps_per_epoch=2,
            warmup_steps=1,
        ),
        graph=quick_graph,
    )
    assert r.epochs_run == 2 and r.batch_cache is None and not r.warnings
    capped = run(
        RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16, max_steps_per_epoch=2, warmup_steps=1), graph=quick_graph
    )
    assert capped.epochs_run == 4 and capped.batch_cache["hits"] == 0, "a cut-short epoch is never cached"
    assert any("replayed no batch" in w for w in capped.warnings)


def test_runs_without_cache_dir_share_no_batches_and_remove_their_cache_at_close(quick_graph):
    cfg = RunConfig(spec=RUN_SPEC, flags=RUN_FLAGS, hidden=16)
    a, b = Trainer(cfg, quick_graph), Trainer(cfg, quick_graph)
    roots = a.pipeline.batches.cache.root, b.pipeline.batches.cache.root
    try:
        assert roots[0] != roots[1] and all(r.is_dir() for r in roots)
        na = sum(1 for _ in a.pipeline.batches.epoch(0))
        nb = sum(1 for _ in b.pipeline.batches.epoch(0))
        assert na == nb > 0
        assert b.pipeline.batches.cache.stats.misses == nb and b.pipeline.batches.cache.stats.hits == 0, (
            "b sampled its own batches"
        )
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
        g = SimpleNamespace(
            edge_index=graph.edge_index,
            train_mask=graph.train_mask,
            num_nodes=graph.num_nodes,
            num_edges=graph.num_edges,
            meta=graph.meta,
        )  # one spec in meta for all of them
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
