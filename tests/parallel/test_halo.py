"""Halo exchange on 2 gloo ranks (loopback): partition-parallel aggregation equals one-process aggregation.

Ranks are spawned processes: :func:`gnnbench.measure.run.launch.run_local` runs them (joined with a timeout,
what is left killed, every process group destroyed); the test of a dying rank starts its own, because it
needs the survivor's outcome after its peer is gone.
"""

import dataclasses
import datetime
import multiprocessing as mp
import os
import time
import traceback

import numpy as np
import pytest
import torch
import torch.distributed as dist

from gnnbench.graphs import GraphSpec, generate
from gnnbench.measure.run import free_port, run_local
from gnnbench.parallel.halo import (
    HaloExchange,
    HaloExchangeError,
    HaloPlan,
    HaloStep,
    aggregate_local,
    partition_aggregate,
)
from gnnbench.parallel.partition import Partition, partition

SPEC = GraphSpec(num_nodes=2000, avg_degree=8.0, feature_dim=6, seed=3)
WORLD = 2
METHODS = ("metis", "degree")


def _init(rank: int, port: int, timeout_s: float) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def _partition(graph, method: str, parts: np.ndarray) -> Partition:
    return Partition(
        parts=torch.from_numpy(parts), method=method, num_parts=WORLD, seconds=0.0, edge_index=graph.edge_index
    )


# ----------------------------------------------------------------------------- aggregation
def _aggregate_on_rank(rank, world, parts_by_method):
    """One rank's aggregations, gradients and exchange records, JSON-ready (``run_local`` returns them)."""
    torch.set_num_threads(1)
    graph = generate(SPEC)
    out = {}
    for method, parts in parts_by_method.items():
        plan = HaloPlan.build(graph, _partition(graph, method, parts), rank)
        ex = HaloExchange(plan)
        x_local = graph.x[plan.owned]
        agg_sum = partition_aggregate(ex, x_local, "sum")
        agg_mean = partition_aggregate(ex, x_local, "mean")
        # gradient: d/dx of sum_v w_v * agg(x)_v, the halo's share flowing back to its owner
        xl = x_local.clone().requires_grad_()
        weight = torch.arange(graph.num_nodes, dtype=torch.float32)[plan.owned].view(-1, 1) / graph.num_nodes
        (partition_aggregate(ex, xl, "sum") * weight).sum().backward()
        # stale cache: refresh, two cached calls, refresh; a second key has its own slot
        cached = HaloExchange(plan, cache_steps=2, verify=False)
        halos = []
        for s in (1.0, 2.0, 3.0, 4.0):
            halos.append(cached.exchange(x_local * s, key="a").clone())
            halos.append(cached.exchange(-x_local * s, key="b").clone())
        out[method] = {
            "owned": plan.owned.tolist(),
            "halo": plan.halo.tolist(),
            "sum": agg_sum.tolist(),
            "mean": agg_mean.detach().tolist(),
            "grad": xl.grad.tolist(),
            "steps": [dataclasses.asdict(s) for s in ex.steps],
            "totals": ex.totals(),
            "halo_x": halos[0].tolist(),
            "cached_halos": [h.tolist() for h in halos],
            "cached_steps": [dataclasses.asdict(s) for s in cached.steps],
            "send_counts": plan.send_counts,
            "recv_counts": plan.recv_counts,
        }
    # plans built from different partitions must be refused at setup, on both ranks
    wrong = "degree" if rank == 1 else "metis"
    try:
        HaloExchange(HaloPlan.build(graph, _partition(graph, wrong, parts_by_method[wrong]), rank))
        out["mismatch"] = "accepted"
    except HaloExchangeError as exc:
        out["mismatch"] = str(exc)
    return out


@pytest.fixture(scope="module")
def graph():
    return generate(SPEC)


def _reference(graph):
    src, dst = graph.edge_index
    x = graph.x
    agg = torch.zeros_like(x).index_add_(0, dst, x[src])
    deg = torch.bincount(dst, minlength=graph.num_nodes).clamp(min=1).view(-1, 1)
    weight = torch.arange(graph.num_nodes, dtype=torch.float32) / graph.num_nodes
    grad = torch.zeros(graph.num_nodes).index_add_(0, src, weight[dst]).view(-1, 1).expand_as(x)
    return agg.numpy(), (agg / deg).numpy(), grad.numpy()


@pytest.mark.slow
def test_partition_parallel_aggregation_matches_one_process(graph):
    parts = {m: partition(graph, WORLD, m).parts.numpy() for m in METHODS}
    results = run_local(_aggregate_on_rank, WORLD, parts, timeout=30.0, wall_timeout=60.0)
    for r in results:  # the exchange records come back from JSON as dicts
        for method in METHODS:
            for key in ("steps", "cached_steps"):
                r[method][key] = [HaloStep(**s) for s in r[method][key]]
    ref_sum, ref_mean, ref_grad = _reference(graph)
    x = graph.x.numpy()
    for method in METHODS:
        covered = np.zeros(graph.num_nodes, dtype=int)
        for rank in range(WORLD):
            r = results[rank][method]
            owned = r["owned"]
            covered[owned] += 1
            np.testing.assert_allclose(r["sum"], ref_sum[owned], atol=1e-5, rtol=1e-5)
            np.testing.assert_allclose(r["mean"], ref_mean[owned], atol=1e-5, rtol=1e-5)
            np.testing.assert_allclose(r["grad"], ref_grad[owned], atol=1e-5, rtol=1e-5)
            # the halo rows are the owners' rows, in plan order
            np.testing.assert_array_equal(r["halo_x"], x[r["halo"]])
            step = r["steps"][0]
            rows_sent = sum(r["send_counts"])
            assert (step.rows_received, step.rows_sent) == (len(r["halo"]), rows_sent)
            assert (step.bytes_received, step.bytes_sent) == (len(r["halo"]) * 6 * 4, rows_sent * 6 * 4)
            assert step.seconds > 0 and not step.cached
            assert r["totals"]["steps"] == 3 and r["totals"]["rows_received"] == 3 * len(r["halo"])
            # cache_steps=2, keys a and b interleaved: each fresh, stale, stale, fresh
            assert [s.cached for s in r["cached_steps"]] == [False, False, True, True, True, True, False, False]
            assert [s.rows_received for s in r["cached_steps"][::2]] == [len(r["halo"]), 0, 0, len(r["halo"])]
            halos = r["cached_halos"]
            for got, scale in zip(halos, (1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 4.0, -4.0)):
                np.testing.assert_allclose(got, scale * x[r["halo"]], rtol=1e-6)
            assert "halo plans disagree" in results[rank]["mismatch"]
        assert (covered == 1).all()
        # what one rank sends the other receives
        assert results[0][method]["send_counts"][1] == results[1][method]["recv_counts"][0] > 0
        assert results[1][method]["send_counts"][0] == results[0][method]["recv_counts"][1] > 0


def test_aggregate_local_with_exact_halo_matches_full_graph(graph):
    """No processes: the plan alone (halo rows fetched by global id) reproduces full-graph aggregation."""
    ref_sum, ref_mean, _ = _reference(graph)
    for method in METHODS:
        p = partition(graph, 3, method)
        covered = torch.zeros(graph.num_nodes, dtype=torch.int64)
        for rank in range(3):
            plan = HaloPlan.build(graph, p, rank)
            assert torch.equal(plan.halo.sort().values, p.halo_nodes(rank))
            covered[plan.owned] += 1
            local, halo = graph.x[plan.owned], graph.x[plan.halo]
            np.testing.assert_allclose(aggregate_local(plan, local, halo).numpy(), ref_sum[plan.owned], atol=1e-5)
            np.testing.assert_allclose(
                aggregate_local(plan, local, halo, "mean").numpy(), ref_mean[plan.owned], atol=1e-5
            )
        assert (covered == 1).all()
    with pytest.raises(ValueError, match=r"unknown reduce 'max'; accepted: sum, mean"):
        aggregate_local(plan, local, halo, "max")
    with pytest.raises(ValueError, match=r"rank must be an integer in \[0, 2\] \(got 3\)"):
        HaloPlan.build(graph, p, 3)


# ----------------------------------------------------------------------------- a rank that dies
DEAD_TIMEOUT_S = 5.0


def _dying_worker(rank, port, queue, parts, mode, release):
    try:
        _init(rank, port, DEAD_TIMEOUT_S)
        graph = generate(SPEC)
        plan = HaloPlan.build(graph, _partition(graph, "degree", parts), rank)
        ex = HaloExchange(plan)  # both ranks reach the setup collective
        if rank == 1:
            if mode == "hang":  # alive but never joins the exchange: the survivor's timeout must fire
                release.wait(30)
            os._exit(3)  # gone before the first exchange, without a goodbye
        t0 = time.monotonic()
        try:
            ex.exchange(graph.x[plan.owned])
            outcome = ("returned", "", False, time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome = (type(exc).__name__, str(exc), isinstance(exc, RuntimeError), time.monotonic() - t0)
        finally:
            dist.destroy_process_group()
        queue.put((rank, outcome))
    except BaseException:
        queue.put((rank, f"rank {rank} failed:\n{traceback.format_exc()}"))
        raise


@pytest.mark.parametrize("mode", ["exit", "hang"])
@pytest.mark.slow
def test_a_dead_rank_makes_the_survivor_fail_within_the_timeout(graph, mode):
    """``exit``: the peer's process is gone (gloo sees the closed connection at once);
    ``hang``: the peer lives on without joining, so the process-group timeout must end the wait."""
    parts = partition(graph, WORLD, "degree").parts.numpy()
    ctx = mp.get_context("spawn")
    queue, release = ctx.Queue(), ctx.Event()
    port = free_port()
    procs = [
        ctx.Process(target=_dying_worker, args=(rank, port, queue, parts, mode, release), daemon=True)
        for rank in range(WORLD)
    ]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    try:
        rank, outcome = queue.get(timeout=20)
        release.set()
        for p in procs:
            p.join(timeout=max(0.1, 20 - (time.monotonic() - t0)))
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
        queue.close()
    assert not any(p.is_alive() for p in procs)
    assert rank == 0, outcome
    name, message, is_runtime_error, seconds = outcome
    assert name == "HaloExchangeError" and is_runtime_error, outcome
    assert "rank 0 of 2" in message and "exchange step 0" in message
    assert seconds < DEAD_TIMEOUT_S + 5, outcome
    if mode == "hang":
        assert seconds > DEAD_TIMEOUT_S - 1, outcome  # it waited for the timeout, not for a closed socket
    assert [p.exitcode for p in procs] == [0, 3]
