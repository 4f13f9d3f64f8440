"""Feature placement (gnnbench/features/): every placement gathers the exact rows, what needs
CUDA says so, the hot set of hot_cold and its budget, and side-stream prefetch."""

import math

import pytest
import torch

from gnnbench import registry
from gnnbench.features.hot_set import choose_hot_rows, hit_rate, hot_budget_rows, hot_set_chooser
from gnnbench.features.placement import place_features
from gnnbench.features.stores import prefetch_features
from gnnbench.flags import Flags, UnavailableError
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.sampling.sources import make_batch_source


def test_pin_memory_flag_unavailable_without_cuda(graph):
    # Answered for the run's device (not the machine's): a CPU run cannot pin, with or without CUDA here.
    from gnnbench.flags import RunContext
    from gnnbench.training.availability import reasons

    assert "pinned" in reasons(Flags(pin_memory=True), RunContext(device="cpu"))["pin_memory"]
    with pytest.raises(UnavailableError, match="pinned"):
        place_features(graph.x, "cpu", "host", pin_memory=True)


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


# ---------------------------------------------------------------------------------------- hot set of hot_cold
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
    rates = {
        name: hit_rate(hot, batches, g.num_nodes, n_id_of=lambda ids: ids)
        for name, hot in (("train", train), ("access", access), ("degree", degree))
    }
    print("hot-hit rates with", train.numel(), "rows:", {k: round(v, 4) for k, v in rates.items()})
    assert rates["access"] >= rates["train"] and rates["degree"] >= rates["train"]
    default = hot_set_chooser(prepared_small, flags)(torch.device("cpu"), row_bytes)
    assert default.numel() == g.num_nodes // 4


def test_prefetch_unavailable_on_cpu(graph):
    store = place_features(graph.x, "cpu", "host")
    with pytest.raises(UnavailableError, match="CUDA streams"):
        next(prefetch_features([], store))


@pytest.mark.cuda
@pytest.mark.parametrize(
    "placement,pin", [("host", False), ("host", True), ("device", False), ("hot_cold", False), ("uva", False)]
)
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
def test_side_stream_prefetch_yields_exact_features(graph):
    store = place_features(graph.x, "cuda", "host", pin_memory=True)
    batches = [torch.randint(0, graph.num_nodes, (500,)) for _ in range(5)]
    got = list(prefetch_features(batches, store, n_id_of=lambda ids: ids))
    assert len(got) == 5
    for ids, feats in got:
        assert torch.equal(feats.cpu(), graph.x[ids])


@pytest.mark.cuda
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
    assert store.stats.hot_hit_rate >= hit_rate(
        graph.train_mask.nonzero().view(-1)[: hot.numel()], batches, graph.num_nodes
    )


@pytest.mark.cuda
def test_full_batch_on_a_gpu_copies_the_host_features_once():
    import dataclasses

    from gnnbench import registry
    from gnnbench.measure.run import run
    from tests.helpers import QUICK

    cfg = dataclasses.replace(QUICK, device="cuda", flags=registry.flags_for(["full_batch"], QUICK.flags))
    r = run(cfg)
    assert r.status == "ok"
    table = r.graph.num_nodes * cfg.spec.feature_dim * 4
    assert r.transfer.bytes_h2d_total == table, "the table crosses the bus once, not once per step"
    assert r.transfer.device_feature_bytes == table


def test_hit_rates_are_kept_per_epoch_in_every_result():
    from gnnbench.features.transfer_stats import TransferStats
    from gnnbench.measure.run import run
    from tests.helpers import QUICK

    s = TransferStats()
    s.new_epoch()
    s.record(0, 10, 2)
    s.record(0, 10, 8)
    s.new_epoch()
    s.record(0, 4, 4)
    assert s.hit_rate_per_epoch == [0.5, 1.0] and s.hot_hit_rate == pytest.approx(14 / 24)
    r = run(QUICK)
    assert r.transfer.hot_hit_rate_per_epoch == [0.0] * r.epochs_run, "host features: no row from the device"
