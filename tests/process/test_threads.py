"""Thread placement (``Flags.thread_placement``): the cores split between the training process and its loader
workers, applied while the pipeline lives, read back from the process and the live workers, and refused where
the cores do not suffice."""

from __future__ import annotations

import os

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.measure.run import run
from gnnbench.process import threads
from tests.helpers import QUICK

needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no sched_setaffinity here")


def test_split_gives_each_worker_a_core_and_the_rest_to_training():
    plan = threads.plan_for("split", 2, cores=[0, 1, 2, 3, 4, 5])
    assert plan.main_cores == (0, 1, 2, 3) and plan.intra_op == 4 and plan.worker_cores == (4, 5)
    shared = threads.plan_for("shared", 2, cores=[0, 1])
    assert shared.intra_op is None and shared.main_cores is None and shared.worker_cores is None


def test_split_refuses_fewer_cores_than_workers_plus_one():
    why = threads.placement_unavailable("split", 2, cores=[0, 1])
    assert "needs 3 usable cores" in why and "may use 2" in why
    with pytest.raises(ValueError, match="needs 3 usable cores"):
        threads.plan_for("split", 2, cores=[0, 1])
    assert "torchrun" in threads.placement_unavailable("split", 1, world_size=2, cores=[0, 1, 2])
    assert threads.placement_unavailable("shared", 8, cores=[0]) is None


def test_split_needs_workers():
    with pytest.raises(ValueError, match="needs num_workers > 0"):
        Flags(thread_placement="split")


@needs_affinity
def test_apply_sets_threads_and_cores_and_restores_them():
    cores = threads.usable_cores()
    if len(cores) < 2:
        pytest.skip(f"needs 2 usable cores (this process may use {len(cores)})")
    before_threads, before = torch.get_num_threads(), threads.usable_cores()
    plan = threads.plan_for("split", 1, cores=cores)
    restore = threads.apply(plan)
    try:
        seen = threads.threads_in_effect(plan)
        assert seen["intra_op"] == len(cores) - 1 and seen["main_cores"] == cores[:-1]
    finally:
        restore()
    assert torch.get_num_threads() == before_threads and threads.usable_cores() == before


@needs_affinity
def test_workers_split_runs_with_its_placement_read_back_from_the_live_worker():
    config = registry.config_for(QUICK, ["workers_split"])
    why = registry.get("workers_split").unavailable("cpu")
    if why:
        pytest.skip(why)
    cores = threads.usable_cores()
    before = torch.get_num_threads()
    result = run(config)
    assert result.status == "ok", result.error
    seen = result.process["threads"]
    assert seen["placement"] == "split"
    assert seen["intra_op"] == len(cores) - 1 and seen["main_cores"] == cores[:-1]
    assert seen["worker_cores"] == [[cores[-1]]]  # the worker pinned itself to the last core
    assert torch.get_num_threads() == before and threads.usable_cores() == cores  # undone at close


def test_workers_split_is_refused_with_the_reason_where_cores_are_short(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda: [0])
    why = registry.get("workers_split").unavailable("cpu")
    assert why and "thread_placement" in why and "needs 2 usable cores" in why
