"""Two configurations in one process, steps interleaved: the order and its counterbalancing on a fake clock,
the record's arithmetic, and the refusals. One small real pair checks the wiring."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnnbench import registry
from gnnbench.graphs import GraphSpec
from gnnbench.measure.run import PairRefused, PairTiming, block_orders, interleave, pair_refusal, time_pair
from gnnbench.measure.run.interleaved import MAX_WINDOW_STEPS, _stepper, whole_epoch_blocks
from tests.helpers import QUICK


class FakeClock:
    """A clock that each step advances by its side's cost times the machine's speed at that moment."""

    def __init__(self, costs: dict[str, float], drift=lambda n: 1.0):
        self.now, self.n, self.costs, self.drift, self.calls = 0.0, 0, costs, drift, []

    def __call__(self) -> float:
        return self.now

    def step(self, side: str):
        def go():
            self.calls.append(side)
            self.now += self.costs[side] * self.drift(self.n)
            self.n += 1

        return go


def test_blocks_alternate_which_side_opens():
    assert block_orders(4, "A") == ["ABBA", "BAAB", "ABBA", "BAAB"]
    assert block_orders(3, "B") == ["BAAB", "ABBA", "BAAB"]


@given(blocks=st.integers(1, 12), first=st.sampled_from("AB"))
def test_every_block_gives_each_side_both_positions(blocks, first):
    sequence = "".join(block_orders(blocks, first))
    assert sequence.count("A") == sequence.count("B") == 2 * blocks
    for k in range(0, len(sequence), 4):  # each side once at an end and once inside a block
        block = sequence[k : k + 4]
        assert sorted(block) == ["A", "A", "B", "B"] and block[0] == block[3] and block[1] == block[2]
    if blocks % 2 == 0:  # over an even count of blocks, each side opens as often as the other
        assert sum(sequence[k] == "A" for k in range(0, len(sequence), 4)) == blocks // 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_block_counts_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="blocks must be an integer >= 1"):
        block_orders(bad)


def test_warmup_is_untimed_and_interleaved():
    clock = FakeClock({"A": 2.0, "B": 1.0})
    a, b, seq = interleave(clock.step("A"), clock.step("B"), warmup=3, blocks=2, clock=clock)
    assert clock.calls[:6] == list("ABABAB")  # burn-in, alternating
    assert clock.calls[6:] == list(seq) == list("ABBABAAB")
    assert a == [2.0] * 4 and b == [1.0] * 4


@pytest.mark.parametrize("rate", [0.01, -0.005, 0.03])
def test_a_linear_drift_cancels_in_every_block(rate):
    """A machine that slows (or speeds up) linearly, step after step: each block's ratio is exact."""
    clock = FakeClock({"A": 3.0, "B": 2.0}, drift=lambda n: 1.0 + rate * n)
    a, b, seq = interleave(clock.step("A"), clock.step("B"), warmup=2, blocks=6, clock=clock)
    pair = PairTiming(tuple(a), tuple(b), seq)
    for log_ratio in pair.block_log_ratios():
        assert log_ratio == pytest.approx(math.log(1.5), abs=1e-12)
    timed = pair.interval()
    assert timed.ratio == pytest.approx(1.5) and timed.significant


def test_sequential_timing_under_the_same_drift_would_be_biased():
    """The reason for the design: all of A, then all of B, under a drift reads the drift as an effect."""
    clock = FakeClock({"A": 1.0, "B": 1.0}, drift=lambda n: 1.0 + 0.01 * n)
    a, b = [], []
    for times, side in ((a, "A"), (b, "B")):
        for _ in range(8):
            t0 = clock()
            clock.step(side)()
            times.append(clock() - t0)
    assert sum(b) / sum(a) > 1.05  # A/A read as a 5% "gain" of A
    clock = FakeClock({"A": 1.0, "B": 1.0}, drift=lambda n: 1.0 + 0.01 * n)
    a, b, seq = interleave(clock.step("A"), clock.step("B"), warmup=0, blocks=4, clock=clock)
    assert PairTiming(tuple(a), tuple(b), seq).speedup == pytest.approx(1.0)


def test_after_step_runs_inside_the_timed_step():
    clock = FakeClock({"A": 1.0, "B": 1.0})

    def sync():
        clock.now += 0.5

    a, b, _ = interleave(clock.step("A"), clock.step("B"), warmup=1, blocks=2, clock=clock, after_step=sync)
    assert a == b == [1.5] * 4


def test_the_record_reads_back_and_checks_its_shape():
    pair = PairTiming((1.0, 1.2, 1.1, 0.9), (0.5, 0.6, 0.55, 0.45), "ABBABAAB", "other", (0.1, 0.2), 3)
    assert PairTiming.from_dict(pair.to_dict()) == pair
    assert pair.speedup == pytest.approx(2.0)
    assert pair.block_sums() == ([2.2, 2.0], [1.1, 1.0])
    with pytest.raises(ValueError, match="does not match"):
        PairTiming((1.0,), (1.0, 1.0), "ABBA")
    with pytest.raises(ValueError, match="blocks of four"):
        PairTiming((1.0,), (1.0,), "AB")
    with pytest.raises(ValueError, match="built_first"):
        PairTiming((1.0, 1.0), (1.0, 1.0), "ABBA", "neither")


def test_one_block_has_no_interval():
    pair = PairTiming((1.0, 1.0), (1.0, 1.0), "ABBA")
    timed = pair.interval()
    assert timed.rounds == 1 and not timed.significant and math.isnan(timed.low)


def test_pairs_that_cannot_share_a_process_are_refused_with_the_reason():
    base = QUICK
    for opt in registry.REGISTRY.values():
        if opt.shares_process or opt.unavailable("cpu"):
            continue
        other = registry.config_for(base, [opt.name])
        reason = pair_refusal(base, other)
        assert reason is not None and "cannot share a process" in reason, opt.name
        with pytest.raises(PairRefused, match="cannot share a process"):
            time_pair(base, other)
    assert "different graphs" in pair_refusal(base, dataclasses.replace(QUICK, spec=GraphSpec.preset("tiny")))
    assert "task" in pair_refusal(base, dataclasses.replace(QUICK, task="link"))


def test_a_real_pair_times_both_trainers_in_this_process():
    base = dataclasses.replace(QUICK, warmup_steps=1, sync_phases=False)
    pair = time_pair(base, base, blocks=2, built_first="other")
    assert pair.built_first == "other" and pair.sequence == "ABBABAAB"  # the side built second opens
    assert len(pair.base_seconds) == len(pair.other_seconds) == 4
    assert all(t > 0 for t in pair.base_seconds + pair.other_seconds)
    assert all(s > 0 for s in pair.setup_seconds)
    with pytest.raises(ValueError, match="blocks must be an integer >= 2"):
        time_pair(base, base, blocks=1)


def test_a_pair_times_its_steps_whatever_time_budget_its_configurations_carry():
    """A pair times a number of steps: a run's time budget (here spent before the first step) or target must not
    end one side's loop mid-pair (it used to escape as StopIteration)."""
    spent = dataclasses.replace(QUICK, warmup_steps=1, sync_phases=False, max_seconds=1e-9, stop_at=0.01)
    pair = time_pair(spent, spent, blocks=2)
    assert len(pair.base_seconds) == len(pair.other_seconds) == 4


@pytest.mark.parametrize(
    "blocks, per_epoch, expected",
    [
        (8, (19, 19), (19, 38)),  # odd epochs: two of them a side
        (8, (4, 4), (8, 16)),  # already whole epochs
        (8, (20, 20), (10, 20)),  # raised to one epoch
        (2, (3, 5), (15, 30)),  # whole epochs of both sides
        (1, (1, 1), (1, 2)),
    ],
)
def test_paused_pairs_measure_whole_epochs_of_both_sides(blocks, per_epoch, expected):
    assert whole_epoch_blocks(blocks, per_epoch) == expected
    got_blocks, steps = expected
    assert steps == 2 * got_blocks and got_blocks >= blocks
    assert all(steps % n == 0 for n in per_epoch)


def test_an_interval_within_the_process_needs_two_windows_of_whole_epochs():
    assert whole_epoch_blocks(8, (20, 20), windows=2) == (20, 40)
    assert whole_epoch_blocks(8, (4, 4), windows=2) == (8, 16)  # already two windows
    with pytest.raises(ValueError, match="windows must be an integer >= 1"):
        whole_epoch_blocks(8, (4, 4), windows=0)


def test_a_paused_pairs_interval_is_over_windows_so_a_once_an_epoch_cost_is_not_skewed():
    # 4 steps an epoch a side: windows of 2 blocks; the other side's first step of each epoch costs 1.0 more
    base = (1.0,) * 8
    other = (2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0)
    pair = PairTiming(base, other, "ABBABAAB" * 2, paused=("other",), epoch_steps=(4, 4))
    assert pair.unit_blocks == 2 and pair.block_sums() == ([4.0, 4.0], [5.0, 5.0])
    assert pair.interval().ratio == pytest.approx(pair.speedup) == pytest.approx(0.8)
    plain = dataclasses.replace(pair, paused=(), epoch_steps=(0, 0))  # per block, the spike skews the mean log
    assert plain.unit_blocks == 1 and plain.interval().ratio != pytest.approx(0.8)
    assert PairTiming(base[:4], other[:4], "ABBABAAB", epoch_steps=(4, 4)).interval().rounds == 1  # one window


def test_a_pair_whose_whole_epochs_are_too_long_is_refused_before_anything_is_built():
    from gnnbench.measure.run.interleaved import estimated_steps_per_epoch

    big = dataclasses.replace(
        QUICK, spec=dataclasses.replace(QUICK.spec, num_nodes=2_000_000), max_steps_per_epoch=None
    )
    workers = dataclasses.replace(big, flags=big.flags.replace(num_workers=1))
    assert estimated_steps_per_epoch(workers) == -(-400_000 // 96)
    assert "more than 256" in pair_refusal(big, workers)
    assert pair_refusal(big, big) is None  # no paused workers: no whole epochs needed
    assert estimated_steps_per_epoch(dataclasses.replace(QUICK, task="link")) is None


def test_a_whole_epoch_window_is_refused_when_it_cannot_be_known_or_is_too_long():
    with pytest.raises(PairRefused, match="the other side's steps per epoch are not known"):
        whole_epoch_blocks(8, (19, None))
    with pytest.raises(PairRefused, match=f"more than {MAX_WINDOW_STEPS}"):
        whole_epoch_blocks(8, (MAX_WINDOW_STEPS + 1, 2))
    with pytest.raises(ValueError, match="blocks must be an integer >= 1"):
        whole_epoch_blocks(0, (2, 2))


class FakeWork:
    def __init__(self):
        self.calls = []

    def resume(self):
        self.calls.append("resume")
        return 0.0

    def pause(self):
        self.calls.append("pause")

    def drain(self, timeout=None):
        self.calls.append("drain")
        return self.drained


class StuckWork(FakeWork):
    drained = False


FakeWork.drained = True


def test_a_paused_side_runs_its_producers_only_inside_its_own_steps():
    trainer = type("T", (), {})()
    trainer.pipeline = type("P", (), {"background": FakeWork()})()

    def loop():
        trainer.pipeline.background.calls.append("step")
        yield 1
        trainer.pipeline.background.calls.append("step")
        raise RuntimeError("boom")
        yield 2

    step = _stepper(trainer, loop(), paused=True)
    assert step() == 1
    with pytest.raises(RuntimeError, match="boom"):
        step()
    calls = ["resume", "step", "pause", "drain"]
    assert trainer.pipeline.background.calls == calls * 2
    plain = _stepper(trainer, iter([7]), paused=False)
    assert plain() == 7 and len(trainer.pipeline.background.calls) == 8
    # a held thread that never finishes its item fails the pair rather than working on the other side's time
    trainer.pipeline = type("P", (), {"background": StuckWork()})()
    with pytest.raises(RuntimeError, match="did not finish its item"):
        _stepper(trainer, iter([1]), paused=True)()


def test_a_real_pair_with_loader_workers_suspends_them_and_leaves_none_behind(monkeypatch):
    import multiprocessing

    from gnnbench.background import BackgroundWork

    stopped = []
    pause = BackgroundWork.pause

    def spy(self):
        pause(self)
        stopped.append(len(self._stopped))

    monkeypatch.setattr(BackgroundWork, "pause", spy)
    base = dataclasses.replace(QUICK, warmup_steps=1, sync_phases=False)
    workers = dataclasses.replace(base, flags=base.flags.replace(num_workers=1))
    assert pair_refusal(base, workers) is None
    pair = time_pair(base, workers, blocks=2)
    assert pair.paused == ("other",) and pair.epoch_steps == (6, 6)  # QUICK: 6 steps an epoch
    assert len(pair.other_seconds) == len(pair.base_seconds) == 6  # one whole epoch a side (2 blocks asked)
    assert stopped and all(n == 1 for n in stopped)  # its worker, suspended after each of its own steps
    assert PairTiming.from_dict(pair.to_dict()) == pair
    assert not multiprocessing.active_children()


def test_a_sweep_run_carries_its_pair_or_says_why_it_has_none(tmp_path):
    from gnnbench.measure.run import RunResult, load_result, run_paired, with_pair
    from gnnbench.measure.run.paired import main

    failed = RunResult(status="failed", config=QUICK.to_dict(), error="boom")
    assert with_pair(failed, QUICK, QUICK, built_first="base") is failed
    ok = RunResult(status="ok", config=QUICK.to_dict())
    jemalloc = dataclasses.replace(QUICK, flags=QUICK.flags.replace(allocator="jemalloc"))
    refused = with_pair(ok, QUICK, jemalloc, built_first="base")
    assert refused.interleaved is None
    assert refused.warnings[0].startswith(
        "interleaved pair not measured: the base cannot share a process: allocator=jemalloc: "
    )
    out = tmp_path / "r.json"
    result = run_paired(dataclasses.replace(QUICK, warmup_steps=1), QUICK, built_first="other", out=out)
    assert result.ok and load_result(out).interleaved == result.interleaved
    assert PairTiming.from_dict(result.interleaved).built_first == "other"
    assert main(["a.json"]) == 2
    with pytest.raises(ValueError, match="built_first must be one of"):
        run_paired(QUICK, QUICK, built_first="first")


def test_a_pair_is_added_to_a_stored_run_in_a_process_of_its_own(tmp_path):
    """What an isolated sweep's pair process does (``python -m gnnbench.measure.run.paired``): the run stored
    by its own process gets its pair; no stored run is an error that says so, and a failed run stays as it is."""
    import json

    from gnnbench.atomic import write_json_atomic
    from gnnbench.measure.run import RunResult, add_pair, load_result
    from gnnbench.measure.run.paired import main

    out = tmp_path / "r.json"
    with pytest.raises(FileNotFoundError, match="no readable run result at .*r.json: the pair is timed after its run"):
        add_pair(out, QUICK, QUICK, built_first="base")
    failed = RunResult(status="failed", config=QUICK.to_dict(), error="boom")
    write_json_atomic(out, failed.to_dict())
    assert add_pair(out, QUICK, QUICK, built_first="base").interleaved is None
    quick = dataclasses.replace(QUICK, warmup_steps=1)
    with pytest.raises(ValueError, match="is not of this configuration"):
        add_pair(out, quick, QUICK, built_first="base")  # the failed run stored there is QUICK's
    write_json_atomic(out, RunResult(status="ok", config=quick.to_dict(), warnings=["kept"]).to_dict())
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(quick.to_dict()))
    base = tmp_path / "b.json"
    base.write_text(json.dumps(QUICK.to_dict()))
    assert main([str(cfg), str(out), str(base), "other"]) == 0
    stored = load_result(out)
    assert stored.warnings == ["kept"] and PairTiming.from_dict(stored.interleaved).built_first == "other"
    assert main([str(cfg), str(tmp_path / "none.json"), str(base), "base"]) == 1


def test_a_real_pair_with_the_pipelined_loader_holds_its_thread_off_the_other_sides_steps(monkeypatch):
    import threading

    from gnnbench.background import BackgroundWork
    from gnnbench.measure.run import interleaved

    works, idle_during_base = [], []
    pause = BackgroundWork.pause

    def spy(self):
        pause(self)
        if self not in works:
            works.append(self)

    stepper = interleaved._stepper

    def watched(trainer, loop, paused):
        step = stepper(trainer, loop, paused)
        if paused:
            return step

        def base_step():  # the held side has nothing in progress before or after any of the base's steps
            idle_during_base.append(all(not w._busy and not w._running.is_set() for w in works))
            out = step()
            idle_during_base.append(all(not w._busy and not w._running.is_set() for w in works))
            return out

        return base_step

    monkeypatch.setattr(BackgroundWork, "pause", spy)
    monkeypatch.setattr(interleaved, "_stepper", watched)
    base = dataclasses.replace(QUICK, warmup_steps=1, sync_phases=False)
    piped = dataclasses.replace(base, flags=base.flags.replace(pipeline_depth=2))
    assert pair_refusal(base, piped) is None
    pair = time_pair(base, piped, blocks=2, built_first="other")
    assert pair.paused == ("other",) and pair.epoch_steps == (6, 6)  # whole epochs: the thread starts per epoch
    assert len(pair.other_seconds) == len(pair.base_seconds) == 6
    assert works and len(idle_during_base) >= 2 * len(pair.base_seconds) and all(idle_during_base), idle_during_base
    assert not [t for t in threading.enumerate() if t.name == "gnnbench-pipeline"], "no producer thread left"
