"""The device's busy share: NVML readings at step ends, or the reason there are none."""

import pytest
import torch

from gnnbench.measure.run import BusySampler


def test_a_cpu_has_no_busy_share_and_says_why():
    s = BusySampler(torch.device("cpu"))
    s.sample()
    assert s.mean_fraction() is None and "needs a CUDA device" in s.reason


def test_readings_average_to_a_fraction_and_a_failing_driver_stops_sampling(monkeypatch):
    readings = iter([0, 40, 80])

    def utilization(device=None):
        value = next(readings, None)
        if value is None:
            raise RuntimeError("NVML driver gone")
        return value

    monkeypatch.setattr(torch.cuda, "utilization", utilization)
    s = BusySampler(torch.device("cuda"))  # the probe reads the first value (0)
    s.sample(), s.sample()
    assert s.mean_fraction() == pytest.approx(0.6)
    s.sample()  # the driver fails: the readings so far stay, sampling stops with the reason
    assert s.mean_fraction() == pytest.approx(0.6) and "stopped answering" in s.reason
    s.sample()
    assert s.values == [40.0, 80.0]
