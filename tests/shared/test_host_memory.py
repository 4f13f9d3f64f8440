"""The process's memory: evaluation's peak apart from the rest without resetting the process's peak, the peak
resident set on any POSIX system, and how far one call raised the resident set."""

import gc
import mmap
import resource
import time

import pytest
import torch

import gnnbench.host_memory as host_memory
from gnnbench.host_memory import PeakMemory, hwm_bytes, measure_peak, peak_bytes, rss_bytes

MiB = 2**20


def _hold(nbytes: int, seconds: float = 0.05) -> None:
    """Hold ``nbytes`` of freshly mapped, written memory. An anonymous mapping of its own, not the allocator:
    a free, still-resident chunk that an earlier test left in malloc's heap would serve a tensor without
    raising the resident set (seen once in CI: a 64 MiB tensor read as a 4 KiB rise)."""
    region = mmap.mmap(-1, nbytes)
    view = torch.frombuffer(region, dtype=torch.uint8)
    view.fill_(1)  # written: resident
    time.sleep(seconds)
    del view
    region.close()


def test_host_peaks_split_without_resetting_the_process_peak():
    peaks = PeakMemory(torch.device("cpu"))
    if not peaks.available:
        pytest.skip("needs Linux's /proc/self/status and statm")
    # earlier tests' garbage, collected during a hold, would shrink the resident set while it is measured
    gc.collect()
    hwm0 = hwm_bytes()
    # 1. an evaluation that raises the process's high-water mark is measured exactly (VmHWM)
    start = rss_bytes()
    if hwm0 - start > 3 * 2**30:
        pytest.skip("this process already peaked 3 GiB above its current memory: raising the peak costs too much")
    with peaks.evaluation():
        _hold(hwm0 - start + 192 * MiB)
    s = peaks.summary()
    assert s["train_peak_bytes"] == hwm0, "the stretch before the first evaluation: VmHWM when it starts"
    assert s["eval_peak_bytes"] >= hwm0 + 176 * MiB and "VmHWM" in s["peak_method"]
    assert s["eval_rise_bytes"] >= hwm0 - start + 176 * MiB
    # 2. one that stays below it is sampled: a lower bound that still sees a 64 MiB tensor held for 50 ms
    peaks2 = PeakMemory(torch.device("cpu"))
    gc.collect()
    start2 = rss_bytes()
    assert hwm_bytes() > start2 + 128 * MiB  # the first evaluation's peak stays above
    with peaks2.evaluation():
        _hold(64 * MiB)
    s2 = peaks2.summary()
    assert s2["eval_peak_bytes"] < hwm_bytes() and "sampled" in s2["peak_method"]
    assert 56 * MiB <= s2["eval_rise_bytes"] <= 112 * MiB, s2
    # nothing was reset: the process peak that getrusage (and /usr/bin/time) reports is still the highest one
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 >= s["eval_peak_bytes"]
    assert hwm_bytes() >= s["eval_peak_bytes"]


def test_cpu_has_no_device_peak():
    peaks = PeakMemory(torch.device("cpu"))
    assert peaks.device_peak() is None
    summary = peaks.summary()
    assert set(summary) == {"train_peak_bytes", "eval_peak_bytes", "eval_rise_bytes", "peak_method"}
    assert summary["eval_peak_bytes"] is None  # no evaluation ran


@pytest.mark.cuda
def test_cuda_peaks_split_and_total_kept():
    dev = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats(dev)
    peaks = PeakMemory(dev)
    a = torch.ones(64 * MiB // 4, device=dev)  # "training": 64 MiB
    del a
    with peaks.evaluation():
        b = torch.ones(16 * MiB // 4, device=dev)
        del b
    s = peaks.summary()
    assert s["train_peak_bytes"] >= 64 * MiB and 16 * MiB <= s["eval_peak_bytes"] < 64 * MiB
    assert peaks.device_peak() >= 64 * MiB, "the run's device peak survives the reset around evaluation"


def test_peak_bytes_is_at_least_the_resident_set_now():
    assert peak_bytes() >= rss_bytes() > 0


@pytest.mark.parametrize("procfs", [True, False])
def test_measure_peak_sees_an_allocation_the_call_makes(monkeypatch, procfs):
    if not procfs:  # the getrusage path (no /proc): a delta of the process peak, so the call must raise it
        monkeypatch.setattr(host_memory, "_procfs", lambda: False)
    grow = max(0, peak_bytes() - rss_bytes()) + 96 * MiB
    result, seconds, peak = measure_peak(lambda: (_hold(grow), "done")[1])
    assert result == "done" and seconds > 0
    # /proc: the rise above the resident set before the call (grow); getrusage: the rise of the process's peak,
    # which the call passed by 96 MiB
    assert peak >= 0.8 * (grow if procfs else 96 * MiB)


def test_measure_peak_of_a_call_that_allocates_nothing_is_small():
    _, _, peak = measure_peak(lambda: None)
    assert peak < 16 * MiB
