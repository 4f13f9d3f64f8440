"""Data-parallel training on torch.distributed: seed shards, availability, the torchrun launcher end to end,
and a rank that dies. Multi-rank runs use 2 gloo ranks on 127.0.0.1 with a 10 s process-group timeout.
(DDP against one process on the union batch, and the compression hooks: tests/parallel/test_compression.py.)
"""

import dataclasses
import json
import os
import signal
import threading
import time

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gnnbench import registry
from gnnbench.flags import Flags, RunContext
from gnnbench.graphs import GraphSpec
from gnnbench.measure.run import DistributedRunError, survivors
from gnnbench.measure.run.launch import launch
from gnnbench.sampling.sharded import SeedShards, ShardedNeighborBatches
from gnnbench.training import RunConfig, config_unavailable

TIMEOUT = 10.0
WORKER = "gnnbench.measure.run.rank"


@pytest.fixture(scope="module", autouse=True)
def no_rank_outlives_the_module(tmp_path_factory):
    """After the module: no torchrun agent or rank of these tests is left (every run's files are under basetemp)."""
    yield
    left = survivors(str(tmp_path_factory.getbasetemp()))
    assert not left, f"orphan processes {left}"


def _config(**changes) -> RunConfig:
    flags = Flags(parallel="data", batch_size=128, fanout=(10, 5))
    return RunConfig(
        spec=GraphSpec.preset("tiny"),
        flags=flags.replace(**changes.pop("flags", {})),
        epochs=1,
        max_steps_per_epoch=6,
        warmup_steps=2,
        nproc=2,
        hidden=32,
        **changes,
    )


# ------------------------------------------------------------------ seeds split across ranks
@given(
    n=st.integers(1, 400),
    batch=st.integers(1, 64),
    world=st.integers(1, 4),
    seed=st.integers(0, 99),
    epoch=st.integers(0, 5),
)
def test_seed_shards_are_disjoint_covering_and_the_global_batch(n, batch, world, seed, epoch):
    if n < world or batch < world:
        with pytest.raises(ValueError, match="need at least"):
            SeedShards(n, batch, 0, world, seed)
        return
    shards = [SeedShards(n, batch, r, world, seed) for r in range(world)]
    for s in shards:
        s.set_epoch(epoch)
    per_rank = [list(s) for s in shards]
    assert {len(p) for p in per_rank} == {len(shards[0])}, "every rank takes the same number of steps (__len__)"
    flat = [i for p in per_rank for b in p for i in b]
    assert sorted(flat) == list(range(n)), "disjoint and covering"
    assert all(b for p in per_rank for b in p), "no rank gets an empty batch"
    for step, global_batch in enumerate(shards[0].global_batches(epoch)):
        union = [i for p in per_rank for i in p[step]]
        assert union == global_batch.tolist()
        assert len(global_batch) == batch or step == len(per_rank[0]) - 1


def test_seed_shards_reshuffle_every_epoch_from_the_shared_seed():
    a, b = SeedShards(300, 32, 1, 2, seed=3), SeedShards(300, 32, 1, 2, seed=3)
    a.set_epoch(1)
    b.set_epoch(1)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(2)
    assert list(a) != first


def test_sharded_neighbour_batches_split_the_training_nodes(tiny_graph):
    from gnnbench.graphs.prepare import prepare

    flags = Flags(parallel="data", batch_size=256, fanout=(5,))
    prepared = prepare(tiny_graph, flags)
    train = set(tiny_graph.train_mask.nonzero().view(-1).tolist())
    seen = []
    counts = []
    for rank in range(2):
        source = ShardedNeighborBatches(prepared, flags, seed=0, rank=rank, world_size=2)
        targets = [b.n_id[b.target].tolist() for b in source.epoch(0)]
        counts.append(len(targets))
        assert all(0 < len(t) <= 128 for t in targets[:-1]) and 0 < len(targets[-1]) <= 129
        seen += [i for t in targets for i in t]
        source.close()
    assert counts[0] == counts[1]
    assert sorted(seen) == sorted(train)


# ------------------------------------------------------------------ availability (f)
def test_availability_says_why_with_one_process():
    one = dataclasses.replace(_config(), nproc=1)
    assert config_unavailable(one) == {"parallel": "data_parallel needs --nproc >= 2 (got 1)"}
    assert "needs --nproc >= 2 (got 1)" in registry.get("data_parallel").unavailable("cpu", world_size=1)
    assert registry.get("data_parallel").unavailable("cpu") is None  # measured with its own nproc (2)
    comp = RunConfig(spec=GraphSpec.preset("tiny"), flags=Flags(grad_compression="topk"))
    assert (
        "grad compression needs parallel='data' (got parallel='none')" in config_unavailable(comp)["grad_compression"]
    )
    part = dataclasses.replace(one, flags=Flags(parallel="partition"))
    assert "partitioning needs --nproc >= 2 (got 1)" in config_unavailable(part)["parallel"]
    for name in ("partition_metis", "partition_degree"):  # measured with their own nproc (2)
        assert registry.get(name).unavailable("cpu") is None
        assert "needs --nproc >= 2 (got 1)" in registry.get(name).unavailable("cpu", world_size=1)
    single = dataclasses.replace(_config(), flags=Flags())
    assert "needs a parallel mode" in config_unavailable(single)["parallel"]
    link = dataclasses.replace(_config(), task="link")
    assert "no per-rank split" in config_unavailable(link)["parallel"]
    with pytest.raises(ValueError, match=r"RunConfig.nproc must be an integer >= 1 \(got 0\)"):
        dataclasses.replace(_config(), nproc=0)
    with pytest.raises(ValueError, match=r"world_size must be an integer >= 1 \(got 0\)"):
        RunContext(world_size=0)


def test_sweep_runs_the_baseline_in_one_process_and_parallel_entries_on_n_ranks():
    from gnnbench.measure.sweep import sweep_entries

    base = dataclasses.replace(_config(), flags=Flags(batch_size=128, fanout=(10, 5)))
    entries = sweep_entries(base, ["data_parallel", "topk_compression"], repeats=1)
    nproc = {e.label: e.config.nproc for e in entries}
    assert nproc == {"baseline": 1, "data_parallel": 2, "topk_compression": 2, "all_recommended": 1}


# ------------------------------------------------------------------ end to end through torchrun (e)
@pytest.mark.slow
def test_cli_run_with_two_ranks_end_to_end(tmp_path, capsys):
    """``gnnbench run --nproc 2 --flags data_parallel``: launched through torchrun, one result by rank 0."""
    from gnnbench.cli import main

    out = tmp_path / "dp.json"
    code = main(
        [
            "run",
            "--preset",
            "tiny",
            "--flags",
            "data_parallel",
            "--nproc",
            "2",
            "--dist-timeout",
            "10",
            "--batch-size",
            "128",
            "--fanout",
            "10,5",
            "--hidden",
            "32",
            "--epochs",
            "1",
            "--max-steps",
            "6",
            "--warmup",
            "2",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    d = data["distributed"]
    assert d["world_size"] == 2 and d["backend"] == "gloo" and d["timeout_seconds"] == TIMEOUT
    assert d["parallel"] == "data" and d["grad_compression"] == "none"
    assert [r["rank"] for r in d["per_rank"]] == [0, 1]
    for r in d["per_rank"]:
        assert r["steps_measured"] == 4
        assert 0 < r["allreduce_median"] < r["step_median"]
        assert 0 < r["comm_share"] < 1
        assert r["bytes_per_step"] == r["dense_bytes_per_step"] > 0
    assert d["compression_ratio"] == 1.0 and 0 < d["comm_share"] < 1
    assert data["status"] == "ok" and data["config"]["nproc"] == 2 and data["accuracy"]["test"] >= 0
    assert "communication share" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["dp.json"], "no partial files"
    assert not survivors(str(out))


def test_cli_refuses_nproc_without_a_parallel_mode(capsys):
    from gnnbench.cli import main

    assert main(["run", "--preset", "tiny", "--nproc", "2", "--epochs", "1", "--max-steps", "1"]) == 0
    assert "needs a parallel mode" in capsys.readouterr().out


@pytest.mark.slow
def test_sweep_launches_parallel_entries_through_torchrun(tmp_path):
    from gnnbench.measure.sweep import SweepOptions, run_sweep, sweep_entries

    base = dataclasses.replace(_config(), flags=Flags(batch_size=128, fanout=(10, 5)))
    entries = sweep_entries(base, ["data_parallel"], repeats=1, include_all_recommended=False)
    results = run_sweep(entries, tmp_path / "sweep", SweepOptions(isolate=True, dist_timeout=TIMEOUT))
    by_label = {r.label: r for r in results}
    assert by_label["baseline"].status == by_label["data_parallel"].status == "ok", results
    assert by_label["baseline"].config["nproc"] == 1 and by_label["data_parallel"].config["nproc"] == 2
    assert by_label["data_parallel"].environment["threads"] == 1  # torchrun's one thread per rank
    assert by_label["data_parallel"].steps.measured == 4
    assert by_label["data_parallel"].distributed["world_size"] == 2, "the ranks' figures survive the sweep"
    stored = json.loads(next((tmp_path / "sweep").glob("data_parallel-r0-*.json")).read_text())
    assert stored["distributed"]["per_rank"] and stored["label"] == "data_parallel"


# ------------------------------------------------------------------ a rank that dies (d)
def _workers(tag: str) -> list[int]:
    pids = []
    for pid in survivors(tag):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"-m" in cmd and WORKER.encode() in cmd and b"torch.distributed.run" not in cmd:
            pids.append(pid)
    return pids


def _long_run_in_background(out, wall_timeout: float):
    """Launch a long 2-rank run in a thread; ``(thread, outcome, rank pids)`` once both ranks are up
    (``outcome`` gets the launcher's one-line ``error`` and the ``done`` time)."""
    cfg = dataclasses.replace(_config(), epochs=200, max_steps_per_epoch=None)
    outcome: dict = {}

    def go():
        try:
            launch(cfg, out, timeout=TIMEOUT, wall_timeout=wall_timeout)
        except DistributedRunError as exc:
            outcome["error"] = str(exc)
        outcome["done"] = time.monotonic()

    thread = threading.Thread(target=go)
    thread.start()
    deadline = time.monotonic() + 60
    while len(_workers(str(out))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    return thread, outcome, _workers(str(out))


def test_a_rank_that_dies_ends_the_run_with_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "dies.json"
    thread, outcome, victims = _long_run_in_background(out, wall_timeout=120)
    assert len(victims) == 2, "the two ranks never started"
    time.sleep(3)  # inside the training loop (or still joining: the rendezvous times out just the same)
    killed = time.monotonic()
    os.kill(max(victims), signal.SIGKILL)
    thread.join(timeout=TIMEOUT + 40)
    assert not thread.is_alive(), "the launcher did not return"
    assert outcome["done"] - killed < TIMEOUT + 35
    error = outcome["error"]
    assert "\n" not in error and "2-rank run failed" in error and "rank" in error
    assert not out.exists()
    assert not survivors(str(out)), "orphan processes"


def test_a_run_past_its_wall_timeout_says_where_each_rank_was(tmp_path):
    """The wall timeout stops the ranks with SIGTERM: each dumps its stack first, and the one-line error names,
    per rank, the frame it was in and the gnnbench frame that called it (so a hang says where it hung)."""
    out = tmp_path / "slow.json"
    config = dataclasses.replace(_config(), epochs=500, max_steps_per_epoch=None)
    with pytest.raises(DistributedRunError) as info:
        launch(config, out, timeout=TIMEOUT, wall_timeout=20)
    error = str(info.value)
    assert "\n" not in error and "outlived its wall timeout of 20 s" in error, error
    where = error.split("where the ranks were: ", 1)[1]
    assert "rank 0 in " in where and "rank 1 in " in where and "gnnbench/" in where, error
    assert "passed the last collective" not in error
    assert not out.exists()
    assert not survivors(str(out)), "orphan processes"


@pytest.mark.slow
def test_a_stalled_rank_times_out_the_collective(tmp_path):
    """A rank that stops answering (SIGSTOP) makes the other's all-reduce time out after the process-group
    timeout; torchrun then stops the rest (SIGTERM, SIGKILL after its 30 s grace for a stopped process)."""
    out = tmp_path / "stall.json"
    thread, outcome, victims = _long_run_in_background(out, wall_timeout=150)
    time.sleep(12)  # well inside the training loop
    stopped = time.monotonic()
    os.kill(max(victims), signal.SIGSTOP)
    thread.join(timeout=TIMEOUT + 80)
    assert not thread.is_alive(), "the launcher did not return"
    assert outcome["done"] - stopped < TIMEOUT + 45
    assert "\n" not in outcome["error"] and "rank" in outcome["error"]
    assert not out.exists()
    assert not survivors(str(out)), "orphan processes"


def test_nccl_ranks_need_one_gpu_each(monkeypatch):
    """On CUDA every rank takes its own GPU (LOCAL_RANK): more ranks than GPUs is refused, not a crash."""
    from gnnbench.parallel.data_parallel import unavailable

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    ctx = RunContext(device=torch.device("cuda"), task="node", model="sage", num_nodes=100, num_edges=400, world_size=2)
    why = {u.field: u.reason for u in unavailable(Flags(parallel="data"), ctx)}
    assert why == {
        "parallel": "NCCL ranks need one GPU each: --nproc 2 but this machine has 1 CUDA device(s); "
        "use --nproc <= 1 or --device cpu (gloo ranks)"
    }
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert unavailable(Flags(parallel="data"), ctx) == []
    cpu = dataclasses.replace(ctx, device=torch.device("cpu"))
    assert unavailable(Flags(parallel="data"), cpu) == []


def _agree(rank: int, port: int, flags: list, out) -> None:
    import torch.distributed as dist

    from gnnbench.training.stopping import any_rank

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=__import__("datetime").timedelta(seconds=TIMEOUT),
    )
    try:
        out.put((rank, [any_rank(f) for f in flags[rank]]))
    finally:
        dist.destroy_process_group()


def test_ranks_take_the_decision_to_stop_together():
    """A time budget is read on each rank's own clock, so one rank can cross it a step before the other; the
    stop is agreed (any rank's stop stops all), or the rank still training waits in its all-reduce forever."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    flags = [[False, True, False], [False, False, True]]
    procs = [ctx.Process(target=_agree, args=(r, port, flags, out)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    assert got == {0: [False, True, True], 1: [False, True, True]}
    assert all(p.exitcode == 0 for p in procs)


@pytest.mark.slow
def test_a_two_rank_run_with_a_time_budget_stops_both_ranks_at_one_step(tmp_path):
    config = dataclasses.replace(_config(), epochs=50, max_steps_per_epoch=None, max_seconds=2.0)
    data = launch(config, tmp_path / "budget.json", timeout=TIMEOUT, wall_timeout=180)
    assert data["status"] == "ok" and data["stop_reason"] == "max_seconds"
    steps = {r["rank"]: r["steps_measured"] for r in data["distributed"]["per_rank"]}
    assert steps[0] == steps[1] > 0, steps


def test_the_hang_report_reads_faulthandler_dumps_and_names_a_teardown_hang(tmp_path):
    from gnnbench.measure.run.launch import _where_ranks_were

    (tmp_path / "rank0.stack").write_text(
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 324 in wait\n\n'
        "Current thread 0x00007f02 (most recent call first):\n"
        '  File "/x/site-packages/torch/distributed/distributed_c10d.py", line 2810 in all_reduce\n'
        '  File "/x/gnnbench/training/stopping.py", line 146 in any_rank\n'
        '  File "/x/gnnbench/training/trainer.py", line 300 in steps\n'
    )
    said = _where_ranks_were(tmp_path)
    assert said == (
        "; where the ranks were: rank 0 in torch/distributed/distributed_c10d.py:2810 in all_reduce "
        "(from gnnbench/training/stopping.py:146 in any_rank)"
    )
    (tmp_path / "rank0.stack").unlink()
    (tmp_path / "rank1.done").touch()
    assert _where_ranks_were(tmp_path) == (
        "; no rank dumped its stack (torchrun itself hung, or no rank was alive)"
        "; rank(s) 1 had passed the last collective (a hang in the teardown)"
    )
