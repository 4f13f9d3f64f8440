"""The training clock (``gnnbench.timing.StopClock``): counts only while on, whatever leaves an ``off`` block."""

from __future__ import annotations

import pytest

import gnnbench.timing as timing
from gnnbench.timing import StopClock


@pytest.fixture
def fake_time(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    return now


def test_only_the_time_on_counts_and_charges_add(fake_time):
    clock = StopClock()
    assert clock.seconds == 0.0 and not clock.running
    clock.start()
    fake_time[0] += 2.0
    with clock.off():
        assert not clock.running and clock.seconds == 2.0
        fake_time[0] += 50.0  # evaluation, the consumer: not counted
    assert clock.running
    fake_time[0] += 1.0
    clock.stop()
    clock.stop()  # stopping a stopped clock adds nothing
    fake_time[0] += 7.0
    clock.charge(0.5)
    assert clock.seconds == pytest.approx(3.5)


def test_an_off_block_left_by_an_exception_or_a_closed_generator_runs_the_clock_again(fake_time):
    clock = StopClock()
    clock.start()
    with pytest.raises(RuntimeError), clock.off():
        raise RuntimeError("the consumer failed")
    assert clock.running

    def steps():
        while True:
            with clock.off():
                yield 1
            fake_time[0] += 1.0

    gen = steps()
    next(gen)
    next(gen)  # one stretch of 1 s on the clock
    gen.close()
    clock.stop()
    assert clock.seconds == pytest.approx(1.0)
