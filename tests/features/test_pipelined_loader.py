"""The pipelined loader (Flags.pipeline_depth): order kept, the next batches prepared while one computes,
errors raised where they belong, the thread stopped on close, and training unchanged."""

import dataclasses
import threading
import time

import pytest
import torch

from gnnbench import registry
from gnnbench.features.pipelined import pipelined
from gnnbench.features.placement import unavailable
from gnnbench.flags import Flags, RunContext
from gnnbench.measure.run import run
from tests.helpers import QUICK


class _Batch:
    def __init__(self, i):
        self.n_id = torch.tensor([i])


class _Store:
    """Gathers ``x[n_id] = n_id * 10``; notes whether the consumer was computing while it gathered."""

    device = torch.device("cpu")

    def __init__(self, busy: threading.Event, delay: float = 0.0):
        self.busy, self.delay, self.during_compute = busy, delay, 0

    def gather(self, n_id, timer=None):
        if self.busy.is_set():
            self.during_compute += 1
        time.sleep(self.delay)
        return n_id * 10


def _source(n, closed, fail_at=None, delay=0.0):
    try:
        for i in range(n):
            time.sleep(delay)
            if i == fail_at:
                raise RuntimeError(f"sampler failed at batch {i}")
            yield _Batch(i)
    finally:
        closed.set()


def _no_pipeline_thread():
    return not any(t.name == "gnnbench-pipeline" and t.is_alive() for t in threading.enumerate())


def test_order_is_kept_and_the_next_batches_are_prepared_while_one_computes():
    busy, closed = threading.Event(), threading.Event()
    store = _Store(busy, delay=0.005)
    seen = []
    for batch, feats in pipelined(_source(12, closed, delay=0.005), store, depth=2):
        assert int(feats) == 10 * int(batch.n_id), "the features belong to their batch"
        seen.append(int(batch.n_id))
        busy.set()
        time.sleep(0.03)  # the step's compute: the producer runs meanwhile
        busy.clear()
    assert seen == list(range(12)) and closed.is_set() and _no_pipeline_thread()
    assert store.during_compute >= 8, f"only {store.during_compute} of 12 gathers overlapped a step"


def test_an_error_in_the_thread_is_raised_at_its_batch():
    closed = threading.Event()
    got = []
    with pytest.raises(RuntimeError, match="sampler failed at batch 3"):
        for batch, _ in pipelined(_source(8, closed, fail_at=3), _Store(threading.Event()), depth=2):
            got.append(int(batch.n_id))
    assert got == [0, 1, 2] and closed.is_set() and _no_pipeline_thread()


def test_closing_early_stops_the_thread_and_closes_the_source():
    closed = threading.Event()
    it = pipelined(_source(1000, closed), _Store(threading.Event()), depth=3)
    assert int(next(it)[0].n_id) == 0 and int(next(it)[0].n_id) == 1
    it.close()
    assert closed.wait(2.0) and _no_pipeline_thread()
    with pytest.raises(ValueError, match="pipeline depth must be an integer >= 1"):
        next(pipelined([], _Store(threading.Event()), depth=0))


def test_flags_and_availability():
    with pytest.raises(ValueError, match="pipeline_depth must be an integer >= 0"):
        Flags(pipeline_depth=-1)
    both = unavailable(Flags(pipeline_depth=2, feature_prefetch=True), RunContext(device=torch.device("cuda")))
    assert any(u.field == "pipeline_depth" and "choose one" in u.reason for u in both)
    assert not unavailable(Flags(pipeline_depth=2), RunContext(device=torch.device("cpu")))


def test_training_through_the_pipeline_is_the_same_training():
    base = run(QUICK)
    piped = run(dataclasses.replace(QUICK, flags=registry.flags_for(["pipelined_loader"], QUICK.flags)))
    assert piped.status == "ok" and piped.steps.total == base.steps.total
    assert piped.accuracy == pytest.approx(base.accuracy), "same batches, same order, same model"
    assert registry.get("pipelined_loader").overlap, "timed end to end: per-phase sync would serialize it"
