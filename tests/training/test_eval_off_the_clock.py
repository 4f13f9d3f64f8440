"""Evaluation is off the clock of background producers too: a producer that kept working
while the loop evaluates would hand the next steps batches for free, so an overlap entry would gain from
evaluation pauses that real training does not have."""

import dataclasses
import threading
import time

import pytest

from gnnbench.background import BackgroundWork
from gnnbench.flags import Flags
from gnnbench.training import Trainer
from tests.helpers import QUICK

PRODUCE_S = 0.06  # the fake producer's time per batch: far above the step's compute on QUICK
EVAL_S = 0.4  # the fake evaluation: long enough for the producer to fill its queue if it kept running


def _slow_trainer(flags: Flags, graph) -> tuple[Trainer, list[int]]:
    """A trainer whose batches take PRODUCE_S each and whose evaluations EVAL_S, with the number of batches
    the producer finished during each evaluation."""
    cfg = dataclasses.replace(QUICK, flags=flags, epochs=2, max_steps_per_epoch=6, eval_every=1, warmup_steps=0)
    t = Trainer(cfg, graph)
    source = t.pipeline.batches
    epoch = source.epoch
    produced = [0]
    during_evaluations: list[int] = []

    def slow_epoch(e):
        for batch in epoch(e):
            time.sleep(PRODUCE_S)  # sampling that takes PRODUCE_S, in whichever thread produces the batch
            produced[0] += 1
            yield batch

    source.epoch = slow_epoch

    def slow_evaluate():
        before = produced[0]
        time.sleep(EVAL_S)
        during_evaluations.append(produced[0] - before)
        return {"metric": "accuracy", "val": 0.5, "test": 0.5}, EVAL_S

    t.evaluation.evaluate = slow_evaluate
    return t, during_evaluations


def _seconds_per_step(t: Trainer) -> float:
    """The training clock per step of the last epoch (the first one carries first-touch costs)."""
    try:
        for _ in t.steps(evaluate=True):
            pass
    finally:
        t.close()
    return t.epoch_seconds[-1] / 6


@pytest.mark.slow
def test_the_pipelined_loader_gains_nothing_from_evaluation_pauses(quick_graph):
    pipelined, during_evaluations = _slow_trainer(QUICK.flags.replace(pipeline_depth=2), quick_graph)
    per_step = _seconds_per_step(pipelined)
    assert pipelined.pipeline.background.pauses == pipelined.steps_taken == len(during_evaluations)
    # Counted, not timed: unpaused, the producer would finish two batches (the queue's depth) in each 0.4 s
    # evaluation; paused, it starts none, and only a batch already in progress when evaluation began may
    # finish inside it (its part inside the pause is charged back to the clock).
    assert max(during_evaluations) <= 1, f"batches finished during each evaluation: {during_evaluations}"
    # The clock then carries the producer's time: a sleep only lengthens on a busy machine, so this bound holds
    # there too (the overlap can hide the step's compute, never the sampling the step waits for).
    assert per_step >= 0.8 * PRODUCE_S, f"{1e3 * per_step:.1f} ms per step: evaluation pauses sampled for free"


def test_loader_workers_gain_nothing_from_evaluation_pauses(quick_graph, monkeypatch):
    """A loader worker whose sampling takes 0.1 s per batch, against a step whose compute is a few tens of ms:
    the step waits for the worker, and must go on waiting after evaluations, not find batches the worker
    sampled while the loop evaluated."""
    from gnnbench.sampling.sampler import GnnbenchNeighborSampler

    produce = 0.1
    sample = GnnbenchNeighborSampler.sample_from_nodes

    def slow(self, index, **kwargs):
        # CPU work in the worker process (fork copies the patched class): a suspended process does none,
        # while a sleep's deadline would pass during the suspension
        end = time.thread_time() + produce
        while time.thread_time() < end:
            pass
        return sample(self, index, **kwargs)

    monkeypatch.setattr(GnnbenchNeighborSampler, "sample_from_nodes", slow)
    cfg = dataclasses.replace(
        QUICK,
        flags=QUICK.flags.replace(num_workers=1, persistent_workers=True),
        epochs=2,
        max_steps_per_epoch=6,
        eval_every=1,
        warmup_steps=0,
    )
    t = Trainer(cfg, quick_graph)
    assert t.pipeline.background.has_processes

    def slow_evaluate():
        time.sleep(EVAL_S)
        return {"metric": "accuracy", "val": 0.5, "test": 0.5}, EVAL_S

    t.evaluation.evaluate = slow_evaluate
    per_step = _seconds_per_step(t)
    # Suspended, the worker runs only while the training clock does, and its CPU time per batch bounds the
    # clock from below: 6 batches of the second epoch take at least 6 x 0.1 s (measured: about 130 ms per
    # step). Unsuspended, it samples ahead through every 0.4 s evaluation (measured: about 80 ms per step).
    assert per_step >= 0.98 * produce, f"{1e3 * per_step:.1f} ms per step: the worker sampled during evaluation"


def test_a_thread_paused_mid_item_is_charged_its_part_inside_the_pause():
    work = BackgroundWork()
    started, release = threading.Event(), threading.Event()

    def produce():
        with work.busy():
            started.set()
            release.wait(5)

    thread = threading.Thread(target=produce)
    thread.start()
    started.wait(5)
    work.pause()
    time.sleep(0.2)
    charged = work.resume()  # still in progress: charged for the whole pause
    assert 0.18 <= charged <= 0.5
    release.set()
    thread.join(5)
    assert work.resume() == 0.0, "nothing more once resumed"
    # a thread waiting between items starts nothing while paused
    work.pause()
    ran = threading.Event()
    waiter = threading.Thread(target=lambda: (work.wait_if_paused(), ran.set()))
    waiter.start()
    time.sleep(0.15)
    assert not ran.is_set()
    work.resume()
    waiter.join(5)
    assert ran.is_set()


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGSTOP"), reason="needs POSIX job-control signals")
def test_worker_processes_are_suspended_during_evaluation():
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    counter = ctx.Value("i", 0)

    def count(c):
        while True:
            with c.get_lock():
                c.value += 1
            time.sleep(0.002)

    proc = ctx.Process(target=count, args=(counter,), daemon=True)
    proc.start()
    try:
        work = BackgroundWork()
        unregister = work.suspend_processes(lambda: [proc.pid])
        time.sleep(0.1)
        work.pause()
        time.sleep(0.05)  # the signal is delivered
        before = counter.value
        time.sleep(0.3)
        assert counter.value == before, "a suspended worker did work during evaluation"
        work.resume()
        time.sleep(0.1)
        assert counter.value > before, "the worker runs again after evaluation"
        unregister()
        assert not work.has_processes
    finally:
        proc.kill()
        proc.join(5)


def test_a_held_thread_enters_no_item_and_drain_waits_for_the_one_in_progress():
    work = BackgroundWork()
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def produce():
        with work.item() as running:
            assert running
            entered.set()
            release.wait(5)
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    assert entered.wait(5)
    work.pause()
    assert work.drain(timeout=0.05) is False, "the item entered before the pause is still in progress"
    release.set()
    assert work.drain(timeout=5) is True and done.wait(5)
    thread.join(5)
    # after the pause, a new item waits for resume(): the wait and the registration are one step
    second = threading.Event()

    def produce_later():
        with work.item() as running:
            if running:
                second.set()

    late = threading.Thread(target=produce_later)
    late.start()
    late.join(0.15)
    assert late.is_alive() and not second.is_set() and work.drain(timeout=0.05), "held: nothing in progress"
    work.resume()
    late.join(5)
    assert second.is_set()


def test_a_thread_held_when_its_consumer_stops_leaves_without_entering():
    work, stop = BackgroundWork(), threading.Event()
    work.pause()
    out = []

    def produce():
        with work.item(stop) as running:
            out.append(running)

    thread = threading.Thread(target=produce)
    thread.start()
    stop.set()
    thread.join(5)
    assert out == [False] and not thread.is_alive() and work.drain(timeout=0.05)
